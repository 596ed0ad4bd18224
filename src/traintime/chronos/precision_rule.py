"""The 16-bit rule of ``traintime predict`` checked on the CHRONOS release's out-of-fold predictions.

``traintime predict`` answers a 16-bit run on a card with neither tensor cores nor a 16-bit rate above its FP32 one
(:func:`traintime.core.gpudb.has_fast_fp16`: the P4 in the release) with the card's 32-bit step time
(:func:`traintime.predict_plan._step_ms`). :func:`fp16_rule_check` scores both answers on the release's 16-bit rows
of such cards: the step model's out-of-fold prediction of the row itself (the 16-bit answer) and that of the same
configuration at 32 bits in the same outer fold (the rule's answer), against the measured 16-bit compute time; and,
for comparison, the same two answers on the cards with a fast 16-bit rate, where ``predict`` keeps the 16-bit answer.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from traintime.core.errors import SchemaError
from traintime.core.metrics import mape
from traintime.data.chronos import CONFIG_KEY_COLUMNS

#: a 16-bit row's 32-bit twin: the same configuration (:data:`~traintime.data.chronos.CONFIG_KEY_COLUMNS`) apart from
#: the precision, and the same learning rate (a replicate)
PAIR_COLUMNS: tuple[str, ...] = (*(c for c in CONFIG_KEY_COLUMNS if c not in ("precision_bits", "amp")),
                                 "learning_rate")
COLUMNS = ["protocol", "method", "cards", "predict_answers_with", "gpus", "rows", "measured_16_over_32", "predicted_16_over_32",
           "mape_16_bit_answer_pct", "mape_32_bit_answer_pct"]


def fp16_rule_check(iteration: pd.DataFrame, compute_oof: pd.DataFrame, fast: dict[str, bool],
                    method: str = "neighbour") -> pd.DataFrame:
    """Per protocol of ``compute_oof`` (``protocol, fold, method, row_id, pred_ms``: predict_step_grouped's CHRONOS
    out-of-fold compute predictions) and per kind of card (``fast``: GPU name -> has a fast 16-bit rate), on the 16-bit
    rows whose configuration was also measured at 32 bits (:data:`PAIR_COLUMNS`): median measured and predicted 16/32 ratios and the MAPE of the 16-bit and of the 32-bit answer
    (:data:`COLUMNS`). No such row: an empty table."""
    need = ["row_id", "precision_bits", "compute_time_ms", *PAIR_COLUMNS]
    missing = [c for c in need if c not in iteration.columns]
    if missing:
        raise SchemaError(f"iteration rows lack column(s) {', '.join(missing)}")
    it = iteration[iteration["status"] == "ok"] if "status" in iteration.columns else iteration
    it = it[need].assign(row_id=lambda t: t["row_id"].astype(str))
    it = it[it["gpu"].isin(list(fast)) & it["precision_bits"].isin([16, 32])]
    p = compute_oof[compute_oof["method"] == method].assign(row_id=lambda t: t["row_id"].astype(str))
    p = p.merge(it, on="row_id")
    key = ["protocol", "fold", *PAIR_COLUMNS]
    cols = ["pred_ms", "compute_time_ms"]
    m = p[p["precision_bits"] == 16].merge(p[p["precision_bits"] == 32][key + cols], on=key, suffixes=("", "_32"))
    m["fast"] = m["gpu"].map(fast).astype(bool)
    out = []
    for (proto, quick), g in m.groupby(["protocol", "fast"], sort=False):
        y = g["compute_time_ms"].to_numpy(dtype=float)
        p16, p32 = g["pred_ms"].to_numpy(dtype=float), g["pred_ms_32"].to_numpy(dtype=float)
        out.append({"protocol": proto, "method": method,
                    "cards": "with a fast 16-bit rate" if quick else "without a fast 16-bit rate",
                    "predict_answers_with": "16-bit answer" if quick else "32-bit answer (the rule)",
                    "gpus": ", ".join(sorted(g["gpu"].unique())), "rows": len(g),
                    "measured_16_over_32": float(np.median(y / g["compute_time_ms_32"].to_numpy(dtype=float))),
                    "predicted_16_over_32": float(np.median(p16 / p32)),
                    "mape_16_bit_answer_pct": mape(y, p16), "mape_32_bit_answer_pct": mape(y, p32)})
    order = {p: i for i, p in enumerate(dict.fromkeys(compute_oof["protocol"]))}  # the protocols' own order
    return (pd.DataFrame(out, columns=COLUMNS).sort_values(["protocol", "cards"], key=lambda c: c.map(order)
                                                           if c.name == "protocol" else c, kind="stable")
            .reset_index(drop=True))
