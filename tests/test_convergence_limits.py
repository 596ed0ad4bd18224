"""traintime.chronos.convergence_limits: per-group oracle bounds and the LOMO model-level oracle, by hand."""

import numpy as np
import pandas as pd
import pytest

from traintime.chronos.convergence_limits import ALL, convergence_limits, group_oracle, model_offset_oracle
from traintime.core.errors import SchemaError


def _runs(groups: dict[tuple[str, str, str, str], list[float]]) -> pd.DataFrame:
    rows = [dict(family=f, model=m, dataset=d, optimizer=o, epochs_to_converge=v)
            for (f, m, d, o), vals in groups.items() for v in vals]
    return pd.DataFrame(rows)


def _value(table: pd.DataFrame, quantity: str, family: str, method: str = "") -> float:
    row = table[(table["quantity"] == quantity) & (table["family"] == family) & (table["method"] == method)]
    assert len(row) == 1, (quantity, family, method)
    return float(row["avg_model_mape_pct"].iloc[0])


def test_group_oracle_by_hand():
    runs = _runs({("CNN", "a", "d1", "SGD"): [10, 20, 40],   # best constant 10: APE 0, 50, 75 -> 41.67
                  ("CNN", "b", "d1", "SGD"): [5, 5],         # 0
                  ("MLP", "c", "d2", "Adam"): [8, 8, 8, 16],  # best 8: 0,0,0,50 -> 12.5
                  ("MLP", "c", "d3", "Adam"): [7]})          # one run: left out
    t = group_oracle(runs, paper_models=("a", "b", "c"))
    assert _value(t, "group_oracle_constant", "CNN") == pytest.approx((125 / 3 + 0) / 2)
    assert _value(t, "group_oracle_constant", "MLP") == pytest.approx(12.5)
    assert _value(t, "group_oracle_constant", ALL) == pytest.approx((125 / 3 + 0 + 12.5) / 3)
    # group median 20 of (10, 20, 40): APE 100, 0, 50 -> 50
    assert _value(t, "group_median_all_runs", "CNN") == pytest.approx(25.0)
    # median of the others: (30 vs 10) 200, (25 vs 20) 25, (15 vs 40) 62.5
    assert _value(t, "group_median_other_runs", "CNN") == pytest.approx((287.5 / 3) / 2)
    assert set(t["runs"]) == {9} and set(t["groups"]) == {3}


def test_group_oracle_is_a_lower_bound_for_every_group_constant():
    rng = np.random.default_rng(0)
    runs = _runs({("CNN", f"m{i}", "d", "SGD"): list(rng.integers(5, 60, size=9).astype(float)) for i in range(6)})
    oracle = _value(group_oracle(runs, paper_models=[f"m{i}" for i in range(6)]), "group_oracle_constant", ALL)
    y = runs["epochs_to_converge"].to_numpy()
    for c in np.linspace(3, 80, 155):
        per_model = pd.Series(np.abs(c / y - 1) * 100).groupby(runs["model"]).mean().mean()
        assert oracle <= per_model + 1e-9


def test_only_paper_models_count_in_the_average():
    runs = _runs({("CNN", "a", "d", "SGD"): [10, 10], ("CNN", "extra", "d", "SGD"): [10, 40]})
    t = group_oracle(runs, paper_models=("a",))
    assert _value(t, "group_oracle_constant", ALL) == 0.0


def test_group_oracle_names_bad_input():
    with pytest.raises(SchemaError, match="epochs_to_converge"):
        group_oracle(_runs({("CNN", "a", "d", "SGD"): [10, 0]}))
    with pytest.raises(SchemaError, match="optimizer"):
        group_oracle(_runs({("CNN", "a", "d", "SGD"): [10, 20]}).drop(columns="optimizer"))


def _preds(seed: int, ratios_a: list[float], ratios_b: list[float], protocol: str = "lomo") -> pd.DataFrame:
    rows = []
    for model, ratios in (("a", ratios_a), ("b", ratios_b)):
        for i, r in enumerate(ratios):
            meas = 10.0 + i
            rows.append(dict(protocol=protocol, method="m", seed=seed, family="CNN", model=model,
                             epochs_measured=meas, epochs_predicted=meas * r))
    return pd.DataFrame(rows)


def test_model_offset_oracle_removes_a_constant_ratio_only():
    preds = pd.concat([_preds(0, [2.0, 2.0], [2.0, 0.5]), _preds(1, [2.0, 2.0], [1.0, 1.0])], ignore_index=True)
    t = model_offset_oracle(preds, paper_models=("a", "b"))
    # seed 0: a 100 % -> 0 after the oracle; b (100 + 50) / 2 = 75, geometric-mean ratio 1 -> unchanged
    # seed 1: a 100 -> 0; b 0 -> 0
    measured = _value(t, "lomo_as_measured", ALL, "m")
    oracle = _value(t, "lomo_model_offset_oracle", ALL, "m")
    assert measured == pytest.approx(((100 + 75) / 2 + (100 + 0) / 2) / 2)
    assert oracle == pytest.approx(((0 + 75) / 2 + 0) / 2)
    row = t[(t["quantity"] == "lomo_model_offset_oracle") & (t["family"] == ALL)]
    assert int(row["n_seeds"].iloc[0]) == 2
    assert float(row["sd_pct"].iloc[0]) == pytest.approx(np.std([37.5, 0.0], ddof=1))


def test_convergence_limits_without_lomo_rows_has_the_cv_part_only():
    runs = _runs({("CNN", "a", "d", "SGD"): [10, 20]})
    t = convergence_limits(runs, _preds(0, [1.0], [1.0], protocol="cv"), methods=("m",), paper_models=("a", "b"))
    assert set(t["protocol"]) == {"cv"} and set(t["target_pct"]) == {18.0}
    t = convergence_limits(runs, _preds(0, [1.0], [1.0]), methods=("m",), paper_models=("a", "b"))
    assert list(dict.fromkeys(t["quantity"])) == ["group_oracle_constant", "group_median_all_runs",
                                                  "group_median_other_runs", "lomo_as_measured",
                                                  "lomo_model_offset_oracle"]
    assert set(t.loc[t["protocol"] == "lomo", "target_pct"]) == {25.0}
    assert t.groupby("quantity")["family"].last().eq(ALL).all()
