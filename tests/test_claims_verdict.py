"""Claims table: verdict rule, value collection from synthetic tables, packaged published claims."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

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
from traintime.core.errors import SchemaError
from traintime.core.verdict import (
    t_interval,
    value_verdict,
    verdict_counts,
    write_verdict_counts,
)


@pytest.mark.parametrize("kind,published,mean,sd,n,expected", [
    ("value", 22.13, 24.0, 0.0, 1, "reproduced"),        # |1.87| <= 10% of 22.13, deterministic
    ("value", 22.13, 25.0, 0.0, 1, "not reproduced"),    # 2.87 > 2.213
    ("value", 22.13, 25.0, 1.5, 5, "not reproduced"),    # half-width 1.86 <= 2.213; the old rule's 2 x sd passed it
    ("value", 22.13, 22.5, 3.0, 5, "inconclusive"),      # half-width 3.72 > 2.213: noise never yields reproduced
    ("value", 13.7, 7.44, 0.48, 5, "not reproduced"),    # better than published is still a different number
    ("max", 0.3, 0.2558, 0.0, 1, "reproduced"),
    ("max", 0.3, 0.31, 0.0, 1, "not reproduced"),
    ("max", 0.3, 0.29, 0.05, 5, "inconclusive"),         # the interval contains the bound
    ("count", 324, 324.0, 0.0, 1, "reproduced"),
    ("count", 324, 323.0, 0.0, 1, "not reproduced"),
    ("statement", None, 1.0, 0.0, 1, "reproduced"),
    ("statement", None, 0.0, 0.0, 1, "not reproduced"),
    ("share", None, 60.0, 0.0, 1, "reproduced"),
    ("share", None, 40.0, 0.0, 1, "not reproduced"),
    ("all", None, 99.0, 0.0, 1, "not reproduced"),
    ("all", None, 100.0, 0.0, 1, "reproduced"),
    ("none", 52.5, None, None, 1, "not reproducible from released data"),
    ("value", 22.13, float("nan"), 0.0, 1, "not evaluated"),
])
def test_verdict_rule(kind, published, mean, sd, n, expected):
    assert verdict(kind, published, mean, sd, n).verdict == expected


def test_vgg16_wide_spread_is_not_reproduced():
    """The issue's case: RMSE 28.68 +- 13.92 over 5 seeds vs published 10.45 was 'reproduced' by the
    old max(10%, 2 sd) rule; the seed spread must never widen the tolerance."""
    v = verdict("value", 10.45, 28.68, 13.92, 5)
    assert v.verdict != "reproduced"
    # t(0.975, 4) = 2.776 -> half-width 2.776 * 13.92 / sqrt(5) = 17.28 > 1.045: the interval is shown
    half = stats.t.ppf(0.975, 4) * 13.92 / math.sqrt(5)
    assert v.verdict == "inconclusive"
    assert (v.ci_low, v.ci_high) == pytest.approx((28.68 - half, 28.68 + half))
    assert v.tolerance == pytest.approx(1.045)
    assert v.difference == pytest.approx(18.23)
    assert "[" in v.reason and "wider than the tolerance" in v.reason


def test_exact_match_tiny_sd_is_reproduced():
    v = value_verdict(10.45, 10.45, 0.01, 5)
    assert v.verdict == "reproduced" and v.difference == pytest.approx(0.0)


def test_wide_interval_around_published_is_inconclusive():
    v = value_verdict(10.45, 10.45, 5.0, 3)  # centred on the published value, but noise 10x the tolerance
    assert v.verdict == "inconclusive" and v.ci_low < 10.45 < v.ci_high


def test_deterministic_value_off_by_11_percent_is_not_reproduced():
    v = value_verdict(20.0, 22.2, 0.0, 1)
    assert v.verdict == "not reproduced"
    assert v.difference == pytest.approx(2.2) and "+2.2" in v.reason and "higher" in v.reason
    assert value_verdict(20.0, 17.8, 0.0, 1).difference == pytest.approx(-2.2)
    assert value_verdict(20.0, 21.9, 0.0, 1).verdict == "reproduced"  # 9.5%: inside


@pytest.mark.parametrize("published", [0.990, 0.961, 3.0])  # a correlation, a mean rank Spearman, a ratio/rank
def test_rank_and_correlation_claims_use_the_same_relative_rule(published):
    assert value_verdict(published, published * 1.09, 0.0, 1).verdict == "reproduced"
    assert value_verdict(published, published * 0.89, 0.0, 1).verdict == "not reproduced"
    assert value_verdict(published, published * 0.89, 0.0, 1).tolerance == pytest.approx(0.1 * published)


def test_zero_shot_claims_use_the_shared_rule():
    from traintime.emulation.claims import Reproduced
    from traintime.emulation.claims import load_claims as load_zs
    from traintime.emulation.claims import verdict as zs_verdict

    assert "tolerance" not in load_zs().columns  # no hand-set tolerance per claim any more
    assert zs_verdict("value", "0.990", 0.990, Reproduced(0.90)).verdict == "reproduced"  # 9.1% off
    assert zs_verdict("value", "0.990", 0.990, Reproduced(0.88)).verdict == "not reproduced"
    assert zs_verdict("value", "14.21", 14.21, Reproduced(14.21, 4.0, "", 5)).verdict == "inconclusive"


def test_t_interval_one_seed_has_zero_width():
    assert t_interval(5.0, 2.0, 1) == (5.0, 5.0, 0.0)
    lo, hi, half = t_interval(5.0, 2.0, 10)
    assert half == pytest.approx(stats.t.ppf(0.975, 9) * 2.0 / math.sqrt(10)) and lo < 5.0 < hi


def test_verdict_reason_says_direction():
    assert "lower" in verdict("value", 13.7, 7.44, 0.0, 1).reason
    assert "higher" in verdict("value", 10.0, 20.0, 0.0, 1).reason


def test_verdict_counts_and_writer(tmp_path):
    a = pd.DataFrame({"verdict": ["reproduced", "inconclusive", "not reproduced", "not reproduced"]})
    b = pd.DataFrame({"verdict": ["not reproducible from released data", "reproduced"]})
    c = verdict_counts({"chronos": a, "zero_shot": b})
    assert list(c["paper"]) == ["chronos", "zero_shot", "total"]
    row = c.set_index("paper").loc["total"]
    assert (row["claims"], row["reproduced"], row["not_reproduced"], row["inconclusive"], row["not_reproducible"]) \
        == (6, 2, 2, 1, 1)
    pa, pb = tmp_path / "a.csv", tmp_path / "b.csv"
    a.to_csv(pa, index=False)
    b.to_csv(pb, index=False)
    out = tmp_path / "counts.csv"
    write_verdict_counts({"chronos": pa, "zero_shot": pb}, out)
    assert pd.read_csv(out).set_index("paper").loc["chronos", "not_reproduced"] == 2
    with pytest.raises(SchemaError, match="unknown verdict"):
        verdict_counts({"x": pd.DataFrame({"verdict": ["maybe"]})})


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
    assert t.difference.iloc[0] == "+0.87" and t.interval_95.iloc[0].startswith("[")
    assert t.ci95_low.iloc[0] < 23.0 < t.ci95_high.iloc[0] and t.tolerance.iloc[0] == pytest.approx(2.213)
    md = claims_markdown(t, "paper: cv.", "honest: lomo.")
    assert "Verdict rule" in md and "10%" in md and "| a | A |" in md and "interval_95" in md


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


def test_random_forest_trees_agree_with_claims_note():
    """The claims resource must name the tree count the estimator builds (issue 12: it said 300, code 100)."""
    from traintime.chronos.estimators import RF_TREES, make_estimator

    note = load_claims().set_index("claim_id").loc["iter_mape_rf", "note"]
    assert f"{RF_TREES} trees" in note
    assert make_estimator("random_forest", "CNN", 0).n_estimators == RF_TREES
