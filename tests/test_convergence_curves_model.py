"""Cross-run curve model, inner-CV selection of the curve method (never sees the held-out configuration),
and the grouped curve table."""

from __future__ import annotations

import numpy as np
import pytest

from traintime.chronos.curves import replay_stop
from traintime.chronos.curves_model import (
    SELECTED,
    CrossRunCurveModel,
    CurveRun,
    SelectedCurveMethod,
    curves_table,
    grouped_curve_errors,
    make_curve_method,
)
from traintime.core.errors import SchemaError

T = np.arange(1, 61, dtype=float)


def synthetic_run(cfg: int, seed: int, c: float, noise: float = 0.0) -> CurveRun:
    """Exponential curve with rate ``c``; the stopping epoch is what the rule gives on the full curve."""
    rng = np.random.default_rng(1000 * cfg + seed)
    y = 0.3 + 2.0 * np.exp(-c * (T - 1)) * (1 + noise * rng.standard_normal(T.size))
    y = np.maximum(y, 1e-3)
    stop = replay_stop(y, 3, 1e-3, 60)
    return CurveRun(f"cfg{cfg}", seed, y[:stop], stop, 3, 1e-3, 60)


def test_cross_run_model_recovers_the_stopping_epoch_of_an_unseen_configuration():
    train = [synthetic_run(i, s, c) for i, c in enumerate(np.linspace(0.12, 0.5, 12)) for s in range(2)]
    held = synthetic_run(99, 0, 0.27)
    m = CrossRunCurveModel(k=3, alpha=1e-3).fit(train)
    p = float(m.predict([held])[0])
    assert abs(p - held.epochs) / held.epochs < 0.10, (p, held.epochs)
    # a broken model (constant prediction) would miss the slow and the fast configurations
    slow, fast = synthetic_run(98, 0, 0.13), synthetic_run(97, 0, 0.45)
    ps, pf = m.predict([slow, fast])
    assert ps > pf and abs(ps - slow.epochs) / slow.epochs < 0.15 and abs(pf - fast.epochs) / fast.epochs < 0.15


def test_cross_run_model_returns_the_observed_stop_and_needs_two_runs():
    run = synthetic_run(0, 0, 0.9)
    assert run.epochs <= 20
    m = CrossRunCurveModel(k=run.epochs).fit([synthetic_run(1, 0, 0.3), synthetic_run(2, 0, 0.2)])
    assert m.predict([run])[0] == run.epochs
    with pytest.raises(SchemaError, match="two training runs"):
        CrossRunCurveModel().fit([run])


class Spy:
    def __init__(self, name, k, events, factor):
        self.name, self.k, self.events, self.factor = name, k, events, factor

    def fit(self, runs):
        self.events.append(("fit", frozenset(r.run_id for r in runs)))
        self.value_ = float(np.median([r.epochs for r in runs]))
        return self

    def predict(self, runs):
        self.events.append(("predict", frozenset(r.run_id for r in runs)))
        return np.full(len(runs), self.value_ * self.factor)


def test_selection_never_sees_the_held_out_configuration():
    runs = [synthetic_run(i, s, c) for i, c in enumerate((0.15, 0.2, 0.3, 0.4)) for s in range(3)]
    events: list = []

    def factory(name, k):
        return Spy(name, k, events, {"exp": 1.0, "power": 1.5, "cross_run": 2.0}.get(name, 1.0))

    err = grouped_curve_errors(runs, ks=(3,), methods=("exp",), factory=factory)
    configs = sorted({r.run_id for r in runs})
    # walk the events: outer fold i fits/predicts; the selection's fits must exclude the held-out config
    pos = 0
    for held in configs:
        # one fixed method fit + predict on the held-out config
        assert events[pos] == ("fit", frozenset(configs) - {held})
        assert events[pos + 1] == ("predict", frozenset({held}))
        pos += 2
        while events[pos] != ("predict", frozenset({held})):
            kind, ids = events[pos]
            assert held not in ids, f"selection {kind} saw the outer configuration {held}"
            pos += 1
        pos += 1
    assert pos == len(events)
    sel = err[err["method"] == SELECTED]
    assert len(sel) == len(runs) and set(sel["chosen"]) <= {"exp", "power", "cross_run"}


def test_selected_prefers_the_candidate_with_lower_inner_error():
    runs = [synthetic_run(i, s, c, noise=0.01) for i, c in enumerate((0.15, 0.2, 0.3, 0.4)) for s in range(2)]
    sel = SelectedCurveMethod(k=5, candidates=("no_curve_median", "exp")).fit(runs)
    assert sel.scores_["exp"] < sel.scores_["no_curve_median"] and sel.best_ == "exp"


def test_curves_table_rows_and_single_configuration():
    runs = [synthetic_run(i, s, c) for i, c in enumerate((0.2, 0.3, 0.4)) for s in range(3)]
    err = grouped_curve_errors(runs, ks=(3,))
    tab = curves_table(err)
    assert set(tab["k"]) == {3}
    assert set(tab["method"]) == {"exp", "power", "cross_run", "no_curve_median", SELECTED}
    assert (tab["n_seeds"] == 3).all() and (tab["n_configurations"] == 3).all()
    exp3 = tab[(tab["k"] == 3) & (tab["method"] == "exp")]["mape_mean_pct"].iloc[0]
    med3 = tab[(tab["k"] == 3) & (tab["method"] == "no_curve_median")]["mape_mean_pct"].iloc[0]
    assert exp3 < med3  # noise-free exponential curves: the curve beats the no-curve bar
    assert grouped_curve_errors(runs[:3]).empty  # one configuration: no grouped fold
    with pytest.raises(Exception):
        make_curve_method("spline", 3)


def test_runs_from_tables_keeps_capped_runs_and_names_a_missing_curve():
    import pandas as pd

    from traintime.chronos.curves_model import runs_from_tables

    curves = pd.DataFrame({"run_id": ["a"] * 3 + ["b"] * 3, "seed": [0] * 6, "epoch": [1, 2, 3] * 2,
                           "val_loss": [1.0, 0.8, 0.7, 1.0, 0.9, 0.85]})
    runs = pd.DataFrame({"run_id": ["a", "b", "c"], "seed": [0, 0, 0], "epochs_to_converge": [3, 3, 2],
                         "status": ["converged", "max_epochs", "failed"], "patience": 2, "min_delta": 0.0,
                         "max_epochs": 3})
    got = runs_from_tables(curves, runs)
    assert [r.run_id for r in got] == ["a", "b"]
    with pytest.raises(SchemaError, match="no curve for run c"):
        runs_from_tables(curves, runs, statuses=("failed",))


def test_curve_table_names_the_capped_runs_and_the_seed_noise_floor(tmp_path):
    import pandas as pd

    from traintime.chronos.convergence_curve_tables import write_curve_tables
    from traintime.chronos.convergence_noise import seed_noise_floor

    runs = [synthetic_run(i, s, c + 0.02 * s) for i, c in enumerate((0.2, 0.3, 0.4)) for s in range(3)]
    capped = CurveRun("cfg9", 0, runs[0].losses[:5], 5, 3, 1e-3, 5)  # stopped by its 5-epoch cap
    rows = pd.DataFrame([{"run_id": r.run_id, "seed": r.seed, "epochs_to_converge": r.epochs,
                          "status": "max_epochs" if r is capped else "converged", "patience": r.patience,
                          "min_delta": r.min_delta, "max_epochs": r.max_epochs} for r in [*runs, capped]])
    curves = pd.concat([pd.DataFrame({"run_id": r.run_id, "seed": r.seed, "epoch": np.arange(1, len(r.losses) + 1),
                                      "val_loss": r.losses}) for r in [*runs, capped]])
    rows.to_csv(tmp_path / "runs.csv", index=False)
    curves.to_csv(tmp_path / "curves.csv", index=False)
    out = {k: str(tmp_path / f"{k}.{'md' if k == 'md' else 'csv'}") for k in ("csv", "md", "errors")}
    write_curve_tables(str(tmp_path / "runs.csv"), str(tmp_path / "curves.csv"), out, ks=(3,))
    md = (tmp_path / "md.md").read_text()
    assert "Runs that reached the epoch cap: 1 of 10" in md
    floor = seed_noise_floor(rows)
    assert floor > 0 and f"Seed-noise floor of these runs: {floor:.1f} % MAPE" in md
