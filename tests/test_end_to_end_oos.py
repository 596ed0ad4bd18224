"""End-to-end out of sample (traintime.chronos.end_to_end_oos): no configuration's own rows reach a model
that predicts it - neither the step-time models (the nested procedure's fits, spied) nor the convergence
refits (spied) - and the scores are computed from those predictions."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from traintime.chronos.end_to_end_oos import (
    METRICS,
    SUMMARY_COLUMNS,
    end_to_end_pairs,
    end_to_end_summary,
    epochs_out_of_fold,
)
from traintime.chronos.selection import nested_evaluate
from traintime.core.errors import ConfigError, SchemaError

SELECTION = {"feature_sets": ["clean", "clean_roofline"], "target_transforms": ["log"], "estimators": ["xgboost"],
             "grid": {"xgboost": [{}]}, "inner_max_folds": 2}
GPUS = {"g0": 1.0, "g1": 2.0, "g2": 4.0}  # GPU -> price per hour


def cfg_of(model, dataset, opt, lr):
    return f"{model}|{dataset}|{opt}|{lr}"


def tables():
    """One family: 3 models x 3 datasets x 2 optimizers x 2 learning rates, on 3 GPUs (step-time rows) and
    one convergence run per configuration."""
    rows, runs = [], []
    for i, (m, d, o, lr, g) in enumerate(itertools.product(range(3), range(3), ("SGD", "AdamW"), (1e-3, 2e-3), GPUS)):
        rows.append(dict(family="CNN", status="ok", raw_row=i, row_id=f"CNN:{i:05d}", model=f"m{m}", dataset=f"d{d}",
                         optimizer=o, batch_size=64, learning_rate=lr, precision_bits=16, gpu=g,
                         config_key=f"CNN|m{m}|d{d}|{o}|{g}",
                         step_time_ms=10.0 * (1 + m) * (1 + d) / GPUS[g] ** 0.5))
    for m, d, o, lr in itertools.product(range(3), range(3), ("SGD", "AdamW"), (1e-3, 2e-3)):
        runs.append(dict(family="CNN", model=f"m{m}", dataset=f"d{d}", optimizer=o, batch_size=64, learning_rate=lr,
                         precision_bits=np.nan, dataset_size=6400, epochs_to_converge=5.0 + m + 2 * d))
    specs = pd.DataFrame({"gpu": list(GPUS), "price_per_hour_usd": list(GPUS.values())})
    return pd.DataFrame(rows), pd.DataFrame(runs), specs


class SpyStep:
    """Step-time model: remembers the configurations it was fitted on; every prediction is logged with them."""

    def __init__(self, log):
        self.log = log

    def fit(self, rows, y):
        self.seen = {cfg_of(*r) for r in rows[["model", "dataset", "optimizer", "learning_rate"]].itertuples(index=False)}
        self.mean_ = float(np.mean(y))
        return self

    def predict(self, rows):
        asked = {cfg_of(*r) for r in rows[["model", "dataset", "optimizer", "learning_rate"]].itertuples(index=False)}
        self.log.append((frozenset(self.seen), frozenset(asked)))
        return np.full(len(rows), self.mean_)


class SpyConvergence(SpyStep):
    def predict(self, rows):
        out = super().predict(rows)
        return out * 0 + 7.0


@pytest.mark.parametrize("protocol", ["lomo", "lodo"])
def test_no_configuration_reaches_a_model_that_predicts_it(protocol):
    it, conv, specs = tables()
    step_log, conv_log = [], []
    preds = pd.concat([nested_evaluate(it, "CNN", protocol, seed, SELECTION,
                                       model_factory=lambda c, f, s, cats: SpyStep(step_log)).predictions
                       for seed in (0, 1, 2)], ignore_index=True)
    pairs = end_to_end_pairs(it, conv, preds, specs, seeds=[0, 1, 2], protocol=protocol,
                             convergence_factory=lambda method, seed: SpyConvergence(conv_log))
    assert step_log and conv_log
    for seen, asked in step_log + conv_log:  # every fitted model, inner and outer, step time and epochs
        assert not seen & asked, f"a model predicted configuration(s) it was fitted on: {sorted(seen & asked)[:3]}"
    # every configuration on every GPU, once per seed, with the spies' outputs and the measured values
    assert len(pairs) == 3 * len(conv) * len(GPUS)
    assert (pairs["epochs_predicted"] == 7.0).all()
    m = pairs.merge(conv, on=["model", "dataset", "optimizer", "learning_rate"], suffixes=("", "_run"))
    assert np.allclose(m["epochs_measured"], m["epochs_to_converge"])
    row = pairs.iloc[0]
    assert row["hours_predicted"] == pytest.approx(7.0 * 100 * row["step_ms_predicted"] / 1000 / 3600)
    assert row["cost_usd_measured"] == pytest.approx(row["hours_measured"] * GPUS[row["gpu"]])
    s = end_to_end_summary(pairs, protocol, ("nested", "nested"), "spy")
    assert list(s.columns) == SUMMARY_COLUMNS and set(s["metric"]) == set(METRICS)
    allr = s[s["family"] == "ALL"].set_index("metric")
    assert (allr["n_seeds"] == 3).all() and allr.loc["step_mape_pct", "n_configurations"] == len(conv)


def test_cost_ranking_scores():
    it, conv, specs = tables()
    preds = nested_evaluate(it, "CNN", "lomo", 0, SELECTION,
                            model_factory=lambda c, f, s, cats: SpyStep([])).predictions
    # perfect step predictions: the GPU ranking by cost is then the measured one (epochs shared by all GPUs)
    preds["y_pred_ms"] = preds["y_true_ms"]
    pairs = end_to_end_pairs(it, conv, preds, specs, seeds=[0], protocol="lomo",
                             convergence_factory=lambda method, seed: SpyConvergence([]))
    s = end_to_end_summary(pairs, "lomo", ("nested", "nested"), "spy").set_index(["family", "metric"])["mean"]
    assert s[("ALL", "step_mape_pct")] == pytest.approx(0.0)
    assert s[("ALL", "cost_rank_spearman")] == pytest.approx(1.0)
    assert s[("ALL", "cost_top1_hit_pct")] == pytest.approx(100.0)
    assert s[("ALL", "cost_top1_regret_pct")] == pytest.approx(0.0)
    # reversed ranking: the most expensive GPU is predicted cheapest
    preds["y_pred_ms"] = 1.0 / preds["y_true_ms"] / preds["gpu"].map(GPUS) ** 2
    pairs = end_to_end_pairs(it, conv, preds, specs, seeds=[0], protocol="lomo",
                             convergence_factory=lambda method, seed: SpyConvergence([]))
    s = end_to_end_summary(pairs, "lomo", ("nested", "nested"), "spy").set_index(["family", "metric"])["mean"]
    assert s[("ALL", "cost_rank_spearman")] == pytest.approx(-1.0)
    assert s[("ALL", "cost_top1_hit_pct")] == 0.0 and s[("ALL", "cost_top1_regret_pct")] > 0


def test_predictions_that_saw_the_configuration_are_refused():
    it, conv, specs = tables()
    preds = nested_evaluate(it, "CNN", "lomo", 0, SELECTION,
                            model_factory=lambda c, f, s, cats: SpyStep([])).predictions
    bad = preds.copy()
    bad.loc[bad.index[0], "fold"] = "m2" if bad.loc[bad.index[0], "model"] != "m2" else "m0"
    with pytest.raises(SchemaError, match="was not held out"):
        end_to_end_pairs(it, conv, bad, specs, seeds=[0], protocol="lomo",
                         convergence_factory=lambda method, seed: SpyConvergence([]))
    with pytest.raises(ConfigError, match="logo"):
        end_to_end_pairs(it, conv, preds.assign(protocol="logo"), specs, seeds=[0], protocol="logo")
    with pytest.raises(SchemaError, match="seed"):
        end_to_end_pairs(it, conv, preds, specs, seeds=[0, 5], protocol="lomo",
                         convergence_factory=lambda method, seed: SpyConvergence([]))


def _stored(conv: pd.DataFrame, protocol: str, seeds: list[int], epochs) -> pd.DataFrame:
    """Rule convergence_evaluate's table for ``conv``: out-of-fold predictions ``epochs`` (per seed: a Series)."""
    col = {"lomo": "model", "lodo": "dataset"}[protocol]
    return pd.concat([conv.assign(protocol=protocol, method="spy", seed=s, held_out=conv[col],
                                  epochs_predicted=epochs[s].to_numpy(), batch_size=conv["batch_size"].astype(float))
                      for s in seeds], ignore_index=True)


def test_stored_out_of_fold_epochs_are_read_not_refitted_and_checked():
    """Rule convergence_evaluate's out-of-fold predictions of the same estimator, protocol and seed are the numbers a
    refit gives: they are read (no refit), a seed they lack is refitted, and a prediction from a fold that saw the run
    (or a run without one) is refused by name."""
    it, conv, specs = tables()
    preds = pd.concat([nested_evaluate(it, "CNN", "lomo", seed, SELECTION,
                                       model_factory=lambda c, f, s, cats: SpyStep([])).predictions
                       for seed in (0, 1)], ignore_index=True)

    class Est:  # a deterministic estimator: the mean epochs of its training runs plus the seed
        def __init__(self, seed):
            self.seed = seed

        def fit(self, rows, y):
            self.m = float(np.mean(y)) + self.seed
            return self

        def predict(self, rows):
            return np.full(len(rows), self.m)

    fits: list[int] = []

    def factory(method: str, seed: int) -> Est:
        fits.append(seed)
        return Est(seed)

    refit = end_to_end_pairs(it, conv, preds, specs, seeds=[0, 1], protocol="lomo", convergence_method="spy",
                             convergence_factory=factory)
    n_groups = conv["model"].nunique()
    assert fits == [0] * n_groups + [1] * n_groups
    stored = _stored(conv, "lomo", [0], {0: epochs_out_of_fold(conv, "lomo", "spy", 0, factory)})
    fits.clear()
    read = end_to_end_pairs(it, conv, preds, specs, seeds=[0, 1], protocol="lomo", convergence_method="spy",
                            convergence_factory=factory, epochs_predictions=stored.sample(frac=1.0, random_state=0))
    assert fits == [1] * n_groups  # seed 0 read (rows in any order), seed 1 refitted
    pd.testing.assert_frame_equal(read, refit)
    seen = stored.copy()
    seen.loc[seen.index[0], "held_out"] = "m2" if seen.loc[seen.index[0], "model"] != "m2" else "m0"
    with pytest.raises(SchemaError, match="its own model was not held out"):
        end_to_end_pairs(it, conv, preds, specs, seeds=[0], protocol="lomo", convergence_method="spy",
                         convergence_factory=factory, epochs_predictions=seen)
    with pytest.raises(SchemaError, match="has no stored spy lomo prediction in seed 0"):
        end_to_end_pairs(it, conv, preds, specs, seeds=[0], protocol="lomo", convergence_method="spy",
                         convergence_factory=factory, epochs_predictions=stored.iloc[1:])


def test_hours_interval_reaches_nominal_coverage_with_independent_step_and_epoch_errors() -> None:
    """Step errors per pair and epoch errors per configuration drawn independently (log-normal): the hours
    interval built as predict builds it (two conformal half-widths in quadrature, calibrated on the other
    models) holds ~90 % of held-out pairs; a family with two models cannot be scored."""
    from traintime.chronos.end_to_end_oos import hours_interval_held

    rng = np.random.default_rng(1)
    rows = []
    for m, c in itertools.product(range(12), range(25)):
        e_meas = 20.0 * np.exp(rng.normal(0, 0.3))
        for g in GPUS:
            s_meas = 10.0 * np.exp(rng.normal(0, 0.2))
            rows.append({"family": "CNN", "model": f"m{m}", "dataset": "d", "optimizer": "SGD", "batch_size": 64,
                         "learning_rate": 1e-3 * (1 + c), "precision_bits": 32, "gpu": g, "step_ms_predicted": 10.0,
                         "step_ms_measured": s_meas, "epochs_predicted": 20.0, "epochs_measured": e_meas,
                         "hours_predicted": 200.0, "hours_measured": s_meas * e_meas})
    pairs = pd.DataFrame(rows)
    held = hours_interval_held(pairs, "model", 0.9)
    assert len(held) == len(pairs) and np.isfinite(held).all() and abs(100 * held.mean() - 90.0) < 3.0
    two = pairs[pairs["model"].isin(["m0", "m1"])]
    assert len(two) and np.isnan(hours_interval_held(two, "model", 0.9)).all()


def test_family_rows_of_the_hours_interval_are_calibrated_as_predict_calibrates() -> None:
    """A family with 3 models (fewer than 9) is calibrated on every family's models: its summary row is that
    family's share of the pairs held under the pooled rule, computed over all pairs, not over its own alone (which
    is the own-family metric beside it)."""
    from traintime.chronos.end_to_end_oos import hours_interval_held

    rng = np.random.default_rng(5)
    rows = []
    for fam, n_models, sigma in (("CNN", 12, 0.2), ("MLP", 3, 0.6)):
        for m, c in itertools.product(range(n_models), range(8)):
            e_meas = 20.0 * np.exp(rng.normal(0, sigma))
            for g, price in GPUS.items():
                s_meas = 10.0 * np.exp(rng.normal(0, 0.1))
                rows.append({"seed": 0, "family": fam, "model": f"{fam}{m}", "dataset": "d", "optimizer": "SGD",
                             "batch_size": 64, "learning_rate": 1e-3 * (1 + c), "precision_bits": 32, "gpu": g,
                             "step_ms_predicted": 10.0, "step_ms_measured": s_meas, "epochs_predicted": 20.0,
                             "epochs_measured": e_meas, "hours_predicted": 200.0, "hours_measured": s_meas * e_meas,
                             "price_per_hour_usd": price, "cost_usd_predicted": 200.0 * price,
                             "cost_usd_measured": s_meas * e_meas * price})
    pairs = pd.DataFrame(rows)
    s = end_to_end_summary(pairs, "lomo", ("nested", "nested"), "spy").set_index(["family", "metric"])["mean"]
    held = hours_interval_held(pairs, "model", 0.9)
    mlp = (pairs["family"] == "MLP").to_numpy()
    assert s[("MLP", "hours_interval_coverage_pct")] == pytest.approx(100 * np.nanmean(held[mlp]))
    own = hours_interval_held(pairs[mlp], "model", 0.9)  # the family alone: its own 2 other models
    assert s[("MLP", "hours_interval_coverage_own_family_pct")] == pytest.approx(100 * np.nanmean(own))
    pooled, alone = (s[(f, m)] for f, m in (("MLP", "hours_interval_coverage_pct"),
                                            ("MLP", "hours_interval_coverage_own_family_pct")))
    assert pooled != pytest.approx(alone)
    # CNN has 11 other models to calibrate on: both rules give it the same interval
    assert s[("CNN", "hours_interval_coverage_pct")] == pytest.approx(
        s[("CNN", "hours_interval_coverage_own_family_pct")])
