"""Probe ablation under nested CV (no outer test run reaches selection), its table rows, and the NTK-gap variants."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from traintime.chronos.convergence_probe import (
    NESTED,
    NTK_VARIANTS,
    PROBE_SETS,
    ProbeXGB,
    ablation_table,
    ntk_gap,
    probe_ablation,
    seed_interval,
)
from traintime.chronos.convergence_protocols import protocol_splits
from traintime.core.errors import UnknownNameError

MODELS = {"resnet50": 2.5e7, "vgg16": 1.4e8, "densenet121": 8e6}


def synthetic_rows(signal_in_probe: bool = False) -> pd.DataFrame:
    """3 CNN models x 3 datasets x 2 optimizers x 3 learning rates; T depends on lr (and on the initial
    loss probe when ``signal_in_probe``)."""
    rng = np.random.default_rng(0)
    rows = []
    for i, (m, d, o, lr) in enumerate(itertools.product(MODELS, ("CIFAR10", "CIFAR100", "SVHN"), ("SGD", "AdamW"),
                                                        (1e-3, 1e-2, 1e-1))):
        g = rng.normal(0, 0.3)
        il = rng.normal(0.5, 0.2)
        t = 20 * (lr / 1e-2) ** -0.3 * (10 ** (0.8 * (il - 0.5)) if signal_in_probe else 1) * np.exp(rng.normal(0, .05))
        rows.append(dict(family="CNN", model=m, dataset=d, optimizer=o, learning_rate=lr, batch_size=64,
                         dataset_size=50000, num_classes=100 if d == "CIFAR100" else 10, param_count=MODELS[m],
                         precision_bits=32, patience=5, min_delta=1e-4, max_epochs=200,
                         gradient_norm_log10=g, ntk_trace_proxy_log10=2 * g, initial_loss_log10=il,
                         epochs_to_converge=max(2.0, round(t)), raw_row=i + 1))
    return pd.DataFrame(rows)


class Spy:
    def __init__(self, probe_set, events):
        self.probe_set, self.events = probe_set, events

    def fit(self, rows, y):
        self.events.append(("fit", frozenset(rows["raw_row"])))
        self.mean_ = float(np.mean(y)) * (1.0 if self.probe_set == "none" else 1.2)
        return self

    def predict(self, rows):
        self.events.append(("predict", frozenset(rows["raw_row"])))
        return np.full(len(rows), self.mean_)


@pytest.mark.parametrize("protocol", ["cv", "lomo", "lodo"])
def test_nested_choice_never_sees_the_outer_test_runs(protocol):
    rows = synthetic_rows()
    events: list = []

    def factory(cand, family, seed, categories):
        return Spy(cand.feature_set, events)

    def scorer(r, y_true, y_pred):
        events.append(("score", frozenset(r["raw_row"])))
        return float(np.mean(np.abs(y_pred - y_true) / y_true))

    preds, choices = probe_ablation(rows, (protocol,), (0,), model_factory=factory, scorer=scorer)
    splits = protocol_splits(rows, protocol, 0)
    pos = 0
    n_sets = len(PROBE_SETS)
    for s in splits:
        test = frozenset(rows["raw_row"].iloc[s.test])
        train = frozenset(rows["raw_row"].iloc[s.train])
        # the fixed variants: fit on outer-train, predict the outer test
        for _ in range(n_sets):
            assert events[pos] == ("fit", train) and events[pos + 1] == ("predict", test)
            pos += 2
        # the nested selector: nothing but the final prediction may touch the outer test runs
        last_fit = None
        while events[pos] != ("predict", test):
            kind, ids = events[pos]
            assert not (ids & test), f"{protocol}: a {kind} step of the selection saw outer test runs"
            if kind == "fit":
                last_fit = ids
            pos += 1
        assert last_fit == train  # the chosen set refitted on the whole outer-training fold
        pos += 1
    assert pos == len(events)
    assert any(k == "score" for k, _ in events)
    # the spy makes `none` best in every inner fold
    assert set(choices[choices["chosen"]]["probe_set"]) == {"none"}
    assert set(preds["method"]) == {*PROBE_SETS, NESTED}


class LogLinear:
    """A fast stand-in for ProbeXGB: OLS of log T on log lr and the probe set's columns."""

    def __init__(self, probe_set):
        self.cols = PROBE_SETS[probe_set]

    def _X(self, rows):
        return np.column_stack([np.log10(rows["learning_rate"]), *[rows[c] for c in self.cols]])

    def fit(self, rows, y):
        from sklearn.linear_model import LinearRegression

        self.m_ = LinearRegression().fit(self._X(rows), np.log10(y))
        return self

    def predict(self, rows):
        return 10 ** self.m_.predict(self._X(rows))


def test_probe_xgb_uses_the_probe_columns():
    rows = synthetic_rows(signal_in_probe=True)
    y = rows["epochs_to_converge"].to_numpy(float)
    assert "initial_loss_log10" not in ProbeXGB("none", n_estimators=5).fit(rows, y).features_
    m = ProbeXGB("all", n_estimators=5).fit(rows, y)
    assert {"initial_loss_log10", "gradient_norm_log10", "ntk_trace_proxy_log10"} <= set(m.features_)
    assert m.predict(rows).shape == (len(rows),)
    with pytest.raises(UnknownNameError):
        ProbeXGB("ntk_exact").fit(rows, y)


def test_ablation_table_has_every_row_and_finds_a_useful_probe():
    rows = synthetic_rows(signal_in_probe=True)
    preds, choices = probe_ablation(rows, ("cv",), (0, 1, 2), probe_sets=("none", "initial_loss"),
                                    model_factory=lambda cand, fam, seed, cats: LogLinear(cand.feature_set))
    tab = ablation_table(preds, choices)
    assert list(tab["variant"]) == ["none", "initial_loss", NESTED]
    assert (tab["n_seeds"] == 3).all()
    r = tab.set_index("variant")
    assert r.loc["none", "gain_vs_none_pts"] == 0
    assert r.loc["initial_loss", "gain_vs_none_pts"] > 2  # T depends on the initial loss: the probe helps
    assert r.loc[NESTED, "nested_chose_a_probe_pct"] > 50
    assert r.loc["initial_loss", "mape_ci95_lo"] <= r.loc["initial_loss", "mape_mean_pct"] <= r.loc[
        "initial_loss", "mape_ci95_hi"]
    with pytest.raises(UnknownNameError):
        probe_ablation(rows, ("cv",), (0,), probe_sets=("ntk_exact",))


def test_seed_interval_and_ntk_variants():
    m, sd, lo, hi = seed_interval([1.0, 2.0, 3.0])
    assert (m, sd) == (2.0, 1.0) and lo == pytest.approx(2 - 4.302653 / np.sqrt(3), rel=1e-5)
    assert np.isnan(seed_interval([1.0])[1])
    rows = synthetic_rows()
    tab = ntk_gap(rows, seeds=(0, 1), paper=pd.DataFrame({"model": ["resnet50", "average"], "mape_pct": [18.91, 27.35]}))
    assert set(tab["variant"]) == set(NTK_VARIANTS)
    avg = tab[tab["model"] == "average"].set_index("variant")
    assert avg["paper_ntk_mape_pct"].eq(27.35).all()
    # the in-sample per-model fit cannot be worse than its cross-validated twin
    assert avg.loc["ntk_per_model_in_sample", "mape_mean_pct"] <= avg.loc["ntk_per_model", "mape_mean_pct"]
    assert tab[(tab["variant"] == "ntk_guided") & (tab["model"] == "resnet50")]["paper_ntk_mape_pct"].iloc[0] == 18.91
