"""Convergence protocols (5-fold CV, leave one model / dataset out) and the out-of-fold evaluation of estimators over seeds."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from joblib import Parallel, delayed
from sklearn.model_selection import KFold, LeaveOneGroupOut

from traintime.chronos.convergence import (
    ESTIMATORS,
    PROTOCOLS,
    TARGET,
    _require,
    make_estimator,
)
from traintime.chronos.convergence_nested import configure_nested
from traintime.core.errors import SchemaError, unknown_name
from traintime.core.metrics import ape
from traintime.core.schema import Column, TableSchema
from traintime.data.chronos_convergence import FAMILIES

# --------------------------------------------------------------------------------------------
# Protocols


@dataclass(frozen=True)
class Split:
    """One train/test split: positional indices into the table, and what was held out."""

    family: str
    fold: str  # "fold<k>" for cv, the held-out model or dataset otherwise
    train: np.ndarray
    test: np.ndarray


def protocol_splits(rows: pd.DataFrame, protocol: str, seed: int = 42, n_splits: int = 5) -> list[Split]:
    """Splits of ``protocol`` (``cv``, ``lomo``, ``lodo``), within each family.

    Families in :data:`FAMILIES` order; every row is tested exactly once. For the group protocols
    the held-out model (dataset) never appears in the training rows.
    """
    if protocol not in PROTOCOLS:
        raise unknown_name("convergence protocol", protocol, PROTOCOLS)
    _require(rows, ["family", "model", "dataset"], f"protocol {protocol}")
    fam = rows["family"].astype(str).to_numpy()
    order = [f for f in FAMILIES if f in set(fam)] + sorted(set(fam) - set(FAMILIES))
    out: list[Split] = []
    for f in order:
        idx = np.flatnonzero(fam == f)
        sub = rows.iloc[idx]
        if protocol == "cv":
            if len(idx) < n_splits:
                raise SchemaError(f"protocol cv: family {f} has {len(idx)} rows, fewer than {n_splits} folds")
            kf = KFold(n_splits=n_splits, shuffle=True, random_state=seed)
            for k, (tr, te) in enumerate(kf.split(idx)):
                out.append(Split(f, f"fold{k}", idx[tr], idx[te]))
        else:
            groups = sub["model" if protocol == "lomo" else "dataset"].astype(str).to_numpy()
            if len(set(groups)) < 2:
                raise SchemaError(f"protocol {protocol}: family {f} has a single group, nothing to hold out")
            for tr, te in LeaveOneGroupOut().split(idx, groups=groups):
                out.append(Split(f, str(groups[te[0]]), idx[tr], idx[te]))
    return out


def _fit_predict(name: str, rows: pd.DataFrame, y: np.ndarray, split: Split, seed: int, protocol: str,
                 nested_candidates: Sequence[str] | None = None) -> tuple[np.ndarray, str]:
    """(test predictions, the candidate a ``nested`` estimator chose on this split's training rows, else "")."""
    est = configure_nested(make_estimator(name, random_state=seed, n_jobs=1), protocol, nested_candidates)
    est.fit(rows.iloc[split.train], y[split.train])
    fitted = getattr(est, "models_", {}).get(split.family, est)
    return est.predict(rows.iloc[split.test]), str(getattr(fitted, "choice_", ""))


def evaluate(rows: pd.DataFrame, methods: Sequence[str], protocols: Sequence[str], seeds: Sequence[int],
             group_protocol_seeds: str = "all", n_jobs: int = 1,
             nested_candidates: Sequence[str] | None = None) -> pd.DataFrame:
    """Out-of-fold predictions of every method under every protocol and seed.

    ``group_protocol_seeds``: ``all`` runs LOMO/LODO for every seed (the partition is fixed, the
    seed only seeds the estimator); ``first`` runs them for ``seeds[0]`` only. A method whose
    fit ignores the seed (:attr:`EstimatorSpec.seeded` false) runs LOMO/LODO for ``seeds[0]``
    only (one deterministic result). Returns one row per (protocol, method, seed, run):
    protocol, method, seed, family, model, dataset, optimizer, learning_rate, batch_size,
    raw_row, held_out (fold label), epochs_measured, epochs_predicted, ape_pct, chosen (method ``nested``: the
    candidate its inner folds chose for the row's outer fold; empty for the others). ``nested_candidates``: the
    candidates of method ``nested`` (:mod:`traintime.chronos.convergence_nested`; None: its default), whose inner
    folds follow each protocol.
    """
    for m in methods:
        if m not in ESTIMATORS:
            raise unknown_name("convergence estimator", m, ESTIMATORS)
    if group_protocol_seeds not in ("all", "first"):
        raise unknown_name("group_protocol_seeds value", group_protocol_seeds, ["all", "first"])
    _require(rows, [TARGET, "family", "model", "dataset", "optimizer", "learning_rate", "batch_size"], "evaluate")
    rows = rows.reset_index(drop=True)
    y = rows[TARGET].to_numpy(dtype=float)
    seeds = list(seeds)
    jobs: list[tuple[str, str, int, Split]] = []
    for protocol in protocols:
        p_seeds = seeds if (protocol == "cv" or group_protocol_seeds == "all") else seeds[:1]
        for seed in p_seeds:
            splits = protocol_splits(rows, protocol, seed)
            for m in methods:
                if protocol != "cv" and not ESTIMATORS[m].seeded and seed != p_seeds[0]:
                    continue  # fixed partition and a seed-free fit: one run is the result
                jobs.extend((protocol, m, seed, s) for s in splits)
    results = Parallel(n_jobs=n_jobs, prefer="threads")(
        delayed(_fit_predict)(m, rows, y, s, seed, protocol, nested_candidates) for (protocol, m, seed, s) in jobs)
    pred: dict[tuple[str, str, int], np.ndarray] = {}
    held: dict[tuple[str, str, int], np.ndarray] = {}
    chosen: dict[tuple[str, str, int], np.ndarray] = {}
    for (protocol, m, seed, s), (p, choice) in zip(jobs, results):
        key = (protocol, m, seed)
        if key not in pred:
            pred[key] = np.full(len(rows), np.nan)
            held[key] = np.empty(len(rows), dtype=object)
            chosen[key] = np.full(len(rows), None, dtype=object)
        pred[key][s.test] = p
        held[key][s.test] = s.fold
        chosen[key][s.test] = choice or None
    base = rows[["family", "model", "dataset", "optimizer", "learning_rate", "batch_size"]].copy()
    base["raw_row"] = rows["raw_row"] if "raw_row" in rows.columns else np.arange(1, len(rows) + 1)
    frames = []
    for (protocol, m, seed), p in pred.items():
        if np.isnan(p).any():  # pragma: no cover - a split bug
            raise RuntimeError(f"{protocol}/{m}/{seed}: rows without a prediction")
        f = base.copy()
        f.insert(0, "seed", seed)
        f.insert(0, "method", m)
        f.insert(0, "protocol", protocol)
        f["held_out"] = held[(protocol, m, seed)]
        f["epochs_measured"] = y
        f["epochs_predicted"] = p
        f["ape_pct"] = ape(y, p)
        f["chosen"] = chosen[(protocol, m, seed)]
        frames.append(f)
    out = pd.concat(frames, ignore_index=True)
    return sort_predictions(out, protocols, methods)


def sort_predictions(df: pd.DataFrame, protocols: Sequence[str] | None = None,
                     methods: Sequence[str] | None = None) -> pd.DataFrame:
    """Stable order: protocol, method (given order, else :data:`PROTOCOLS`/:data:`ESTIMATORS` order),
    seed, family, raw_row."""
    p_order = {p: i for i, p in enumerate(protocols or PROTOCOLS)}
    m_order = {m: i for i, m in enumerate(methods or ESTIMATORS)}
    f_order = {f: i for i, f in enumerate(FAMILIES)}
    keys = (df["raw_row"].to_numpy(), df["family"].map(f_order).fillna(99).to_numpy(), df["seed"].to_numpy(),
            df["method"].map(m_order).fillna(99).to_numpy(), df["protocol"].map(p_order).fillna(99).to_numpy())
    return df.iloc[np.lexsort(keys)].reset_index(drop=True)


PREDICTIONS = TableSchema(
    name="convergence_predictions",
    description="Out-of-fold T_conv predictions: one row per (protocol, method, seed, training run).",
    key=("protocol", "method", "seed", "family", "raw_row"),
    columns=(
        Column("protocol", "str", "evaluation protocol", allowed=tuple(PROTOCOLS)),
        Column("method", "str", "estimator name", allowed=tuple(ESTIMATORS)),
        Column("seed", "int", "seed of the split (cv) and of the estimator", min=0),
        Column("family", "str", "model family", allowed=FAMILIES),
        Column("model", "str", "model identifier"),
        Column("dataset", "str", "dataset"),
        Column("optimizer", "str", "optimizer"),
        Column("learning_rate", "float", "learning rate", min=0),
        Column("batch_size", "int", "batch size", min=1),
        Column("raw_row", "int", "row of the run in its raw file", min=1),
        Column("held_out", "str", "fold (`fold<k>`) or held-out model / dataset"),
        Column("epochs_measured", "float", "measured T_conv, epochs", min=0, target=True),
        Column("epochs_predicted", "float", "predicted T_conv, epochs"),
        Column("ape_pct", "float", "absolute percentage error, %", min=0),
        Column("chosen", "str", "method `nested`: the candidate its inner folds chose for the row's outer fold "
               "(empty for the other methods)", required=False, nullable=True, required_when=("method", "nested")),
    ),
)
