"""Claims table: verdict rule, value collection from synthetic tables, packaged published claims."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from traintime.chronos.claims import (
    ClaimValue,
    arithmetic_values,
    build_claims_table,
    claims_markdown,
    convergence_values,
    cost_statement_values,
    data_values,
    end_to_end_values,
    iteration_values,
    load_claims,
    verdict,
)


@pytest.mark.parametrize("kind,published,mean,sd,expected", [
    ("value", 22.13, 24.0, 0.1, "reproduced"),        # |1.87| <= 10% of 22.13
    ("value", 22.13, 25.0, 0.1, "not reproduced"),    # 2.87 > 2.213
    ("value", 22.13, 25.0, 1.5, "reproduced"),        # 2.87 <= 2 x 1.5
    ("value", 13.7, 7.44, 0.48, "not reproduced"),    # better than published is still a different number
    ("max", 0.3, 0.2558, 0.0, "reproduced"),
    ("max", 0.3, 0.31, 0.0, "not reproduced"),
    ("count", 324, 324.0, 0.0, "reproduced"),
    ("count", 324, 323.0, 0.0, "not reproduced"),
    ("statement", None, 1.0, 0.0, "reproduced"),
    ("statement", None, 0.0, 0.0, "not reproduced"),
    ("share", None, 60.0, 0.0, "reproduced"),
    ("share", None, 40.0, 0.0, "not reproduced"),
    ("all", None, 99.0, 0.0, "not reproduced"),
    ("all", None, 100.0, 0.0, "reproduced"),
    ("none", 52.5, None, None, "not reproducible from released data"),
    ("value", 22.13, float("nan"), 0.0, "not evaluated"),
])
def test_verdict_rule(kind, published, mean, sd, expected):
    assert verdict(kind, published, mean, sd)[0] == expected


def test_verdict_reason_says_direction():
    assert "lower (better)" in verdict("value", 13.7, 7.44, 0.48)[1]
    assert "higher (worse)" in verdict("value", 10.0, 20.0, 0.0)[1]
    assert "sd over seeds" in verdict("value", 22.95, 39.44, 13.96)[1]  # published within the seed spread
    assert "10% of the published" in verdict("value", 22.13, 24.0, 0.1)[1]


def test_packaged_claims_are_complete():
    claims = load_claims()
    ids = set(claims["claim_id"])
    assert {"iter_mape_xgb", "iter_prenet_lomo", "conv_chronos_rf_average", "conv_no_probe", "probe_fraction",
            "e2e_resnet50_tinyimagenet", "text_models", "probe_batch_size"} <= ids
    assert len([i for i in ids if i.startswith("iter_rmse_")]) == 9
    assert claims.loc[claims.claim_id == "conv_chronos_rf_average", "published_value"].iloc[0] == 22.13
    assert (claims.loc[claims.kind == "none", "note"].str.len() > 10).all()  # every unreproducible claim says why
    assert claims.loc[claims.kind != "none", "metric"].notna().all()


def test_build_table_uses_paper_column_for_verdict():
    claims = pd.DataFrame([
        dict(claim_id="a", claim="A", published="22.13", published_value=22.13, unit="%", source="s",
             metric="m/a", kind="value", note=None),
        dict(claim_id="b", claim="B", published="52.5", published_value=52.5, unit="%", source="s",
             metric=None, kind="none", note="PreNeT not released"),
        dict(claim_id="c", claim="C", published="1", published_value=1.0, unit="", source="s",
             metric="m/missing", kind="value", note=None),
    ])
    values = {"m/a": ClaimValue((23.0, 1.0, 5), (35.0, 0.0, 1))}
    t = build_claims_table(claims, values)
    assert t.verdict.tolist() == ["reproduced", "not reproducible from released data", "not evaluated"]
    assert t.reproduced_paper_protocol.iloc[0] == "23.00 +- 1.00 (5 seeds)"
    assert t.reproduced_honest_protocol.iloc[0] == "35.00"
    assert "PreNeT not released" in t.why.iloc[1]
    md = claims_markdown(t, "paper: cv.", "honest: lomo.")
    assert "Verdict rule" in md and "10%" in md and "| a | A |" in md


def test_arithmetic_probe_fraction():
    v = arithmetic_values()
    assert v["arithmetic/steps_per_epoch"].paper[0] == 391
    assert v["arithmetic/probe_fraction_pct"].paper[0] == pytest.approx(100 / 391)


def test_iteration_values_hand_computed():
    preds = pd.DataFrame({
        "protocol": ["random"] * 4 + ["grouped_random"] * 2, "feature_set": ["paper"] * 4 + ["clean"] * 2,
        "estimator": "xgboost", "seed": [0, 0, 1, 1, 0, 0], "model": ["a", "a", "a", "a", "a", "a"],
        "y_true_ms": [10.0, 20.0, 10.0, 20.0, 10.0, 20.0], "y_pred_ms": [13.0, 16.0, 10.0, 20.0, 20.0, 20.0],
    })
    v = iteration_values(preds)
    rmse0 = math.sqrt((9 + 16) / 2)
    assert v["iteration/rmse_ms/a"].paper[:2] == pytest.approx((rmse0 / 2, np.std([rmse0, 0.0], ddof=1)))
    assert v["iteration/rmse_ms/a"].honest[0] == pytest.approx(math.sqrt(100 / 2))
    assert v["iteration/mape_pct/xgboost"].paper[0] == pytest.approx((30 + 20) / 2 / 2)


def test_convergence_values_pick_protocols():
    per_model = pd.DataFrame({"protocol": ["cv", "lomo"], "method": "chronos_rf", "model": "resnet50",
                              "mape_mean_pct": [13.0, 30.0], "mape_sd_pct": [1.0, 0.0], "n_seeds": [5, 1]})
    summary = pd.DataFrame({"protocol": ["cv", "lomo"], "method": "chronos_rf",
                            "avg_model_mape_mean_pct": [24.9, 36.0], "avg_model_mape_sd_pct": [1.2, 0.0],
                            "n_seeds": [5, 1]})
    v = convergence_values(per_model, summary, "cv", "lomo")
    assert v["convergence/mape_pct/chronos_rf/resnet50"].paper == (13.0, 1.0, 5)
    assert v["convergence/mape_pct/chronos_rf/average"].honest == (36.0, 0.0, 1)


def test_cost_statements_on_synthetic_measurements():
    rows = []
    for bs, t4, a40, v100 in [(32, 100.0, 50.0, 90.0), (64, 100.0, 90.0, 90.0)]:
        for gpu, t in (("T4", t4), ("A40", a40), ("V100-SXM2-16GB", v100)):
            rows.append(dict(model="resnet50", dataset="TinyImageNet", optimizer="SGD", batch_size=bs,
                             precision_bits=16, learning_rate=1e-3, gpu=gpu, step_time_ms=t))
    it = pd.DataFrame(rows)
    prices = {"T4": 0.28, "A40": 0.40, "V100-SXM2-16GB": 1.77}
    v = cost_statement_values(it, prices)
    # A40 cost 50*0.40=20 < T4 28 (bs 32); 90*0.40=36 > 28 (bs 64) -> 50%
    assert v["statement/a40_cheaper_than_t4"].paper[0] == pytest.approx(50.0)
    assert v["statement/v100_most_expensive"].paper[0] == pytest.approx(100.0)
    assert v["statement/t4_lowest_price"].paper[0] == 1.0


def test_data_values_and_end_to_end():
    conv = pd.DataFrame({"family": ["CNN", "MLP", "MLP"], "model": ["resnet50", "asmlp", "DistilBERT"],
                         "min_delta": [5e-4, 1e-4, 1e-4], "patience": [7, 5, 5]})
    v = data_values(None, conv)
    assert v["data/convergence_runs"].paper[0] == 3
    assert v["data/paper_models"].paper[0] == 2
    assert v["data/early_stopping_share"].paper[0] == pytest.approx(100 / 3)
    e2e = pd.DataFrame({"hours_measured": [1.0, 2.0, np.nan], "hours_ape_pct": [10.0, 20.0, np.nan],
                        "hours_in_sample_ape_pct": [1.0, 3.0, np.nan], "hours_predicted_sd": [0.0, 0.0, 0.0],
                        "n_seeds": [1, 1, 1]})
    ev = end_to_end_values(e2e)["end_to_end/hours_ape_pct"]
    assert ev.paper[0] == pytest.approx(2.0) and ev.honest[0] == pytest.approx(15.0)
