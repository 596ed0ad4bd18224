"""Curve extrapolation of the stopping epoch, seed spread and cross-fold interval coverage."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from traintime.chronos.convergence_noise import (
    OWN_FAMILY,
    curve_extrapolation_errors,
    curve_summary,
    interval_coverage,
    pooled_log_sd,
    seed_spread,
)
from traintime.chronos.curves import (
    curve_prior,
    fit_curve,
    predict_stop_epoch,
    replay_stop,
)
from traintime.core.errors import SchemaError, UnknownNameError

T = np.arange(1, 201, dtype=float)


def exp_curve(a: float = 0.4, b: float = 2.0, c: float = 0.25) -> np.ndarray:
    return a + b * np.exp(-c * (T - 1))


def test_replay_matches_the_early_stopping_rule() -> None:
    # improvements of b c e^{-c(t-1)} fall below min_delta after a known epoch
    y = exp_curve()
    stop = replay_stop(y, patience=3, min_delta=1e-3, max_epochs=200)
    best, best_t = y[0], 1
    for t in range(2, 201):
        if y[t - 1] < best - 1e-3:
            best, best_t = y[t - 1], t
        elif t - best_t >= 3:
            break
    assert stop == best_t + 3 == t


def test_extrapolation_recovers_stop_of_a_synthetic_exponential_curve() -> None:
    y = exp_curve(0.4, 2.0, 0.25)
    truth = replay_stop(y, 3, 1e-3, 200)
    assert truth == 34
    # the right prior: three epochs are enough
    prior = (0.4 / y[0], math.log(0.25))
    assert predict_stop_epoch(y[:3], 3, 1e-3, 200, "exp", prior) == truth
    # generic prior: eight noise-free epochs pin the parameters down
    assert predict_stop_epoch(y[:8], 3, 1e-3, 200, "exp") == truth
    f = fit_curve(y[:8], "exp", prior_weight=1e-4)
    assert (f.a, f.b, f.c) == pytest.approx((0.4, 2.0, 0.25), rel=1e-3)


def test_extrapolation_recovers_power_law_parameters_and_rejects_bad_input() -> None:
    y = 0.3 + 1.5 * np.power(T, -0.8)
    f = fit_curve(y[:10], "power", prior_weight=1e-5)
    assert (f.a, f.b, f.c) == pytest.approx((0.3, 1.5, 0.8), rel=2e-2)
    with pytest.raises(SchemaError, match="positive finite"):
        predict_stop_epoch([1.0, float("nan")], 3, 1e-3, 50)
    with pytest.raises(UnknownNameError):
        fit_curve([1.0, 0.5], "cubic")
    # the rule already fired inside the observed epochs: that epoch is returned
    assert predict_stop_epoch([1.0, 0.5, 0.6, 0.7, 0.8], 3, 1e-3, 50) == 5


def test_curve_prior_is_the_median_of_complete_fits() -> None:
    curves = [exp_curve(0.4, 2.0, c) for c in (0.1, 0.2, 0.4)]
    a_rel, log_c = curve_prior([c[:60] for c in curves], "exp")
    assert math.exp(log_c) == pytest.approx(0.2, rel=1e-2)
    assert a_rel == pytest.approx(0.4 / curves[1][0], rel=2e-2)


def _runs_and_curves() -> tuple[pd.DataFrame, pd.DataFrame]:
    runs, curves = [], []
    for i, (rid, c) in enumerate((("r1", 0.2), ("r2", 0.25), ("r3", 0.3))):
        for seed in (0, 1):
            y = exp_curve(0.4, 2.0, c + 0.01 * seed)
            stop = replay_stop(y, 3, 1e-3, 200)
            runs.append(dict(run_id=rid, seed=seed, epochs_to_converge=stop, status="converged", patience=3,
                             min_delta=1e-3, max_epochs=200))
            curves.append(pd.DataFrame(dict(run_id=rid, seed=seed, epoch=np.arange(1, stop + 1), val_loss=y[:stop])))
    return pd.DataFrame(runs), pd.concat(curves, ignore_index=True)


def test_curve_errors_fall_with_more_observed_epochs_and_seed_spread() -> None:
    runs, curves = _runs_and_curves()
    err = curve_extrapolation_errors(curves, runs, ks=(1, 8), families=("exp",))
    s = curve_summary(err).set_index("k")
    assert s.loc[8, "mape_pct"] < 2.0
    assert s.loc[8, "mape_pct"] <= s.loc[1, "mape_pct"]
    spread = seed_spread(runs)
    assert list(spread["n_seeds"]) == [2, 2, 2]
    t = runs[runs.run_id == "r1"]["epochs_to_converge"].to_numpy(float)
    assert spread.loc[0, "sd_log10"] == pytest.approx(np.std(np.log10(t), ddof=1))
    assert pooled_log_sd(spread) == pytest.approx(np.sqrt(np.mean(spread["sd_log10"] ** 2)))


def test_interval_coverage_calibrates_on_the_family_or_on_every_family_when_it_has_too_few_folds() -> None:
    # CNN: folds F0-F8 with residual 0 and fold X with residual ln 2. X's interval comes from the 9 other CNN folds
    # (enough for 90 %: min_calibration_groups) -> half-width 0, X missed; every F fold is held (ln 2 >= 0). MLP: folds C and D
    # with residual ln 8 have 1 other MLP fold each, too few: calibrated on every family's other folds (10 CNN + 1
    # MLP, equal weights: the 90 % quantile is ln 2) -> both missed. Per family only, C and D would hold each other.
    n = 5
    cnn = [f"F{i}" for i in range(9)] + ["X"]
    preds = pd.DataFrame(dict(protocol="lomo", method="m", seed=42, family=["CNN"] * 10 * n + ["MLP"] * 2 * n,
                              held_out=[f for f in cnn for _ in range(n)] + ["C"] * n + ["D"] * n,
                              epochs_predicted=10.0,
                              epochs_measured=[10.0] * 9 * n + [20.0] * n + [80.0] * 2 * n))
    cov = interval_coverage(preds, seed_log_sd=float("nan"), coverage=0.9)
    assert list(cov["interval"]) == ["residual", OWN_FAMILY]
    assert cov["coverage_pct"].iloc[0] == pytest.approx(100 * 9 / 12)
    assert cov["coverage_pct"].iloc[1] == pytest.approx(100 * 11 / 12)  # the rule before: C and D hold each other
    # an F fold's 9 others hold X (ln 2) as 1 of 9 groups: its half-width is ln 2 (ratio 4); X's 1; C and D's 4
    assert cov["median_width_ratio"].iloc[0] == pytest.approx(4.0)
    wide = interval_coverage(preds, seed_log_sd=0.5, coverage=0.9).set_index("interval")
    assert wide.loc["seed_floored", "coverage_pct"] == pytest.approx(100 * 10 / 12)  # z s ln 10 = 1.9 > ln 2, < ln 8


def test_seed_noise_floor_and_versus_baseline() -> None:
    from traintime.chronos.convergence_noise import seed_noise_floor, versus_baseline

    runs = pd.DataFrame(dict(run_id=["a"] * 3, seed=[0, 1, 2], epochs_to_converge=[10, 20, 40]))
    # leave-one-out medians: 30, 25, 15 -> APE 200, 25, 62.5
    assert seed_noise_floor(runs) == pytest.approx((200 + 25 + 62.5) / 3)
    summ = pd.DataFrame(dict(protocol="cv", method=["partial_pooling", "m", "m"], seed=[0, 0, 1],
                             avg_model_mape_pct=[22.0, 18.0, 20.0]))
    vs = versus_baseline(summ).set_index("method")
    assert vs.loc["m", "better_than_baseline_by"] == pytest.approx(3.0)
    assert bool(vs.loc["m", "clears_margin"]) and not bool(vs.loc["m", "meets_target"])


def test_curve_interval_coverage_leaves_each_configuration_out() -> None:
    """Three configurations predicted exactly, one off by 2x (2 runs each): held out, an exact one is covered by
    the interval of the others (their 90 % quantile is log 2); the odd one is not (the others' is 0)."""
    from traintime.chronos.convergence_noise import curve_interval_coverage

    err = pd.DataFrame({"family": "exp", "k": 3, "run_id": [c for c in "abcd" for _ in range(2)], "seed": [0, 1] * 4,
                        "epochs_measured": [10, 10, 10, 10, 10, 10, 20, 20], "epochs_predicted": 10,
                        "stopped_within_k": False})
    cov = curve_interval_coverage(pd.concat([err, err.assign(k=5, stopped_within_k=[True] + [False] * 7)])).set_index("k")
    assert cov.loc[3, "interval_runs"] == 8 and cov.loc[3, "interval_coverage_pct"] == 75.0
    assert cov.loc[5, "interval_runs"] == 7  # a run that stopped within k is not scored
