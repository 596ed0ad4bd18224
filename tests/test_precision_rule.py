"""The 16-bit rule's check (traintime.chronos.precision_rule): 16-bit rows paired with the same configuration at 32
bits in the same outer fold, scored per kind of card."""

from __future__ import annotations

import pandas as pd
import pytest

from traintime.chronos.precision_rule import fp16_rule_check
from traintime.core.errors import SchemaError


def _iteration() -> pd.DataFrame:
    rows = []
    for gpu, t16, t32 in [("P4", 110.0, 100.0), ("T4", 50.0, 100.0)]:
        for lr in (0.1, 0.01):
            for bits, t in [(16, t16), (32, t32)]:
                rows.append({"row_id": f"{gpu}{lr}{bits}", "family": "CNN", "model": "m", "dataset": "d",
                             "optimizer": "SGD", "batch_size": 8, "amp": bits == 16, "param_count": 1,
                             "precision_bits": bits, "learning_rate": lr, "gpu": gpu, "compute_time_ms": t,
                             "status": "ok"})
    return pd.DataFrame(rows)


def test_each_16_bit_row_meets_its_32_bit_twin_of_the_same_fold_and_learning_rate() -> None:
    it = _iteration()
    pred = {"P4": (50.0, 100.0), "T4": (50.0, 100.0)}  # the model says 16-bit is 2x faster everywhere
    oof = pd.DataFrame([{"protocol": "chronos LOGO", "fold": r.gpu, "method": "neighbour", "row_id": r.row_id,
                         "pred_ms": pred[r.gpu][0 if r.precision_bits == 16 else 1]} for r in it.itertuples()])
    oof = pd.concat([oof, oof.assign(method="efficiency", pred_ms=1.0)], ignore_index=True)  # another method: unused
    t = fp16_rule_check(it, oof, {"P4": False, "T4": True})
    assert t["cards"].tolist() == ["with a fast 16-bit rate", "without a fast 16-bit rate"]
    fast, slow = t.iloc[0], t.iloc[1]
    assert (fast["gpus"], fast["rows"], slow["gpus"], slow["rows"]) == ("T4", 2, "P4", 2)  # one row per learning rate
    assert slow["measured_16_over_32"] == pytest.approx(1.1) and slow["predicted_16_over_32"] == pytest.approx(0.5)
    assert slow["mape_16_bit_answer_pct"] == pytest.approx(100 * 60 / 110)  # 50 for 110 measured
    assert slow["mape_32_bit_answer_pct"] == pytest.approx(100 * 10 / 110)  # the rule: 100 for 110
    assert fast["mape_16_bit_answer_pct"] == pytest.approx(0.0) and fast["mape_32_bit_answer_pct"] == pytest.approx(100)
    assert fp16_rule_check(it, oof.iloc[:0], {"P4": False}).empty
    with pytest.raises(SchemaError, match="optimizer"):
        fp16_rule_check(it.drop(columns="optimizer"), oof, {"P4": False})
