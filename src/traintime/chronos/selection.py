"""Nested grouped cross-validation for the step-time regressors: selection never sees the outer test fold.

The grouped protocols (:mod:`traintime.chronos.evaluation`) report errors on held-out groups. Choosing
the feature set, target transform, estimator or hyper-parameters by those same errors would let the test
fold steer the choice. Here the choice is made *inside* each outer training fold:

1. :func:`nested_evaluate` splits a family's rows with the protocol's outer splitter
   (:func:`~traintime.chronos.evaluation.protocol_splits`: leave one GPU / model / dataset out, or the
   80/10/10 splits);
2. a :class:`NestedSelector` receives **only the outer-training rows**. It splits them again by the same
   kind of group (:func:`inner_splits`: leave-one-GPU-out inside LOGO, leave-one-model-out inside LOMO,
   leave-one-dataset-out inside LODO, grouped K-fold on ``config_key`` inside the random protocols; at
   most ``inner_max_folds`` folds: with more groups than that, grouped K-fold over the same column),
   fits every :class:`Candidate` on each inner-training part and scores it on the inner held-out part
   (mean over inner folds of the fold's MAPE, the protocol's mean per-group MAPE); optionally with the
   tree counts of the inner fits scaled by ``inner_n_estimators_scale`` (a cheaper proxy for ranking the
   candidates; the refit below always uses the registered tree counts);
3. the best candidate (lowest inner score; ties: the first declared) is refitted on the whole outer-training
   fold and predicts the outer test fold. Category vocabularies come from the outer-training rows too.

Candidates (:func:`candidates_from_config`, config ``chronos_iteration.selection``) are the product feature
set x target transform (``log`` | ``identity``; ``clean_roofline`` regresses a log-time offset and takes
``log`` only) x estimator x that estimator's hyper-parameter grid (``set_params`` overrides of the registry's
settings, :func:`~traintime.chronos.estimators.make_estimator`). Models are built by
:func:`~traintime.chronos.evaluation.build_model` (no duplicated feature or estimator logic).

:func:`nested_evaluate` returns out-of-fold predictions in the format of
:func:`~traintime.chronos.evaluation.evaluate_family` (:data:`~traintime.chronos.evaluation.PREDICTION_COLUMNS`,
``feature_set`` = ``estimator`` = ``nested``) and the choice per outer fold (:data:`CHOICE_COLUMNS`: every
candidate's inner score, the chosen one flagged). :func:`fit_nested_predictor` runs the same inner procedure
on all rows of each family and refits its choice: the saved predictor.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from sklearn.model_selection import GroupKFold, LeaveOneGroupOut
from threadpoolctl import threadpool_limits

from traintime.chronos.estimators import IterationTimeModel, IterationTimePredictor
from traintime.chronos.evaluation import (
    PREDICTION_COLUMNS,
    build_model,
    family_rows,
    get_protocol,
    protocol_splits,
)
from traintime.chronos.features import CLEAN_FEATURE_SETS, shared_rows, vocabulary
from traintime.core.errors import ConfigError, SchemaError
from traintime.core.metrics import mape
from traintime.data.chronos import ITERATION_TARGET

log = logging.getLogger(__name__)

NESTED = "nested"
TARGET_TRANSFORMS = ("log", "identity")
#: Group column of the inner split per outer protocol (same kind as the outer split).
INNER_GROUP = {"logo": "gpu", "lomo": "model", "lodo": "dataset", "random": "config_key",
               "grouped_random": "config_key"}
CHOICE_COLUMNS = ["family", "protocol", "seed", "fold", "candidate", "feature_set", "target_transform",
                  "estimator", "params", "inner_score_mape_pct", "n_inner_folds", "chosen"]
#: Default selection settings (mirrors the schema defaults of ``chronos_iteration.selection``).
DEFAULT_SELECTION: dict[str, Any] = {
    "feature_sets": ["clean", "clean_roofline"],
    "target_transforms": ["log"],
    "estimators": ["xgboost"],
    "grid": {"xgboost": [{"n_estimators": 200, "learning_rate": 0.2}]},
    "inner_max_folds": 2,
    "inner_n_estimators_scale": 0.5,
}


@dataclass(frozen=True)
class Candidate:
    """One choice: feature set, target transform, estimator and its ``set_params`` overrides."""

    feature_set: str
    target_transform: str
    estimator: str
    params: tuple[tuple[str, Any], ...] = ()

    @property
    def name(self) -> str:
        p = ",".join(f"{k}={v}" for k, v in self.params)
        return f"{self.feature_set}/{self.target_transform}/{self.estimator}" + (f"[{p}]" if p else "")


def candidates_from_config(selection: Mapping[str, Any] | None = None) -> list[Candidate]:
    """The candidate list of a ``chronos_iteration.selection`` section (defaults: :data:`DEFAULT_SELECTION`)."""
    from traintime.chronos.estimators import ESTIMATORS
    from traintime.chronos.features import FEATURE_SETS

    cfg = {**DEFAULT_SELECTION, **dict(selection or {})}
    grid = dict(cfg.get("grid") or {})
    out: list[Candidate] = []
    for fs, tt, est in itertools.product(cfg["feature_sets"], cfg["target_transforms"], cfg["estimators"]):
        if fs not in FEATURE_SETS:
            raise ConfigError(f"chronos_iteration.selection: unknown feature set {fs!r}")
        if est not in ESTIMATORS:
            raise ConfigError(f"chronos_iteration.selection: unknown estimator {est!r}")
        if tt not in TARGET_TRANSFORMS:
            raise ConfigError(f"chronos_iteration.selection: unknown target transform {tt!r} "
                              f"(one of {', '.join(TARGET_TRANSFORMS)})")
        if tt == "log" and fs not in CLEAN_FEATURE_SETS:
            continue  # the paper sets fit the raw step time, as released
        if tt == "identity" and fs == "clean_roofline":
            continue  # regresses a log-time offset: log only
        for params in grid.get(est) or [{}]:
            out.append(Candidate(fs, tt, est, tuple(sorted(dict(params).items()))))
    if not out:
        raise ConfigError("chronos_iteration.selection: no valid candidate (check feature sets x target transforms)")
    return out


ModelFactory = Callable[[Candidate, str, int, Mapping[str, Sequence[str]]], Any]
Scorer = Callable[[pd.DataFrame, np.ndarray, np.ndarray], float]


def inner_splits(rows: pd.DataFrame, group_column: str, max_folds: int = 5) -> list[tuple[np.ndarray, np.ndarray]]:
    """Grouped inner folds of ``rows`` (positions): leave one group out, or grouped K-fold with
    ``max_folds`` folds when there are more groups. Needs at least two groups."""
    if group_column not in rows:
        raise SchemaError(f"nested selection: rows lack the group column '{group_column}'")
    groups = rows[group_column].astype(str).to_numpy()
    n = len(np.unique(groups))
    if n < 2:
        raise SchemaError(f"nested selection: the outer-training fold has {n} value(s) of '{group_column}'; "
                          "inner grouped folds need at least 2")
    splitter = LeaveOneGroupOut() if n <= max_folds else GroupKFold(n_splits=max_folds)
    return [(np.asarray(tr), np.asarray(te)) for tr, te in splitter.split(rows, groups=groups)]


def mape_scorer(rows: pd.DataFrame, y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Inner score of one held-out part: MAPE in percent (lower is better)."""
    return float(mape(y_true, y_pred))


class NestedSelector:
    """Selects a candidate by grouped inner CV on the rows it is fitted on, then refits it on them all.

    ``fit(rows, y)``: ``rows`` are the outer-training rows only. After fitting, ``best_`` is the chosen
    :class:`Candidate`, ``scores_`` the inner score of every candidate (NaN when a candidate failed on an
    inner fold), ``model_`` the chosen model refitted on all ``rows``. ``predict(rows)`` uses ``model_``.

    ``model_factory(candidate, family, seed, categories)`` builds an unfitted model (default: built by
    :func:`~traintime.chronos.evaluation.build_model`); ``scorer(rows, y_true, y_pred)`` scores an inner
    held-out part (default: :func:`mape_scorer`). Both are parameters so tests can spy on them.
    """

    def __init__(self, candidates: Sequence[Candidate], family: str, group_column: str, seed: int = 42,
                 inner_max_folds: int = 5, model_factory: ModelFactory | None = None,
                 scorer: Scorer | None = None, clean_options: Mapping[str, Any] | None = None,
                 n_jobs: int = 1, n_estimators_scale: float = 1.0, inner_n_estimators_scale: float = 1.0) -> None:
        self.candidates = list(candidates)
        self.family = family
        self.group_column = group_column
        self.seed = seed
        self.inner_max_folds = inner_max_folds
        self.model_factory = model_factory
        self.scorer = scorer
        self.clean_options = clean_options
        self.n_jobs = n_jobs
        self.n_estimators_scale = n_estimators_scale
        self.inner_n_estimators_scale = inner_n_estimators_scale

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("candidates", "family", "group_column", "seed", "inner_max_folds",
                                              "model_factory", "scorer", "clean_options", "n_jobs",
                                              "n_estimators_scale", "inner_n_estimators_scale")}

    def _make(self, cand: Candidate, categories: Mapping[str, Sequence[str]], inner: bool = False) -> Any:
        """Unfitted model of ``cand``; ``inner``: for an inner fold (tree counts scaled by
        ``inner_n_estimators_scale`` on top of ``n_estimators_scale``; the refit is never scaled by it)."""
        if self.model_factory is not None:
            return self.model_factory(cand, self.family, self.seed, categories)
        opts = {**dict(self.clean_options or {}), "log_target": cand.target_transform == "log"}
        scale = self.n_estimators_scale * (self.inner_n_estimators_scale if inner else 1.0)
        model = build_model(cand.feature_set, cand.estimator, self.family, self.seed, categories=categories,
                            n_jobs=self.n_jobs, n_estimators_scale=scale, clean_options=opts)
        if cand.params:
            params = dict(cand.params)
            if "n_estimators" in params:  # a tree count of the grid is scaled like the registered ones
                params["n_estimators"] = max(1, int(round(int(params["n_estimators"]) * scale)))
            model.estimator.set_params(**params)
        return model

    def fit(self, rows: pd.DataFrame, y: Any = None) -> "NestedSelector":
        if not self.candidates:
            raise ConfigError("nested selection: no candidates")
        rows = rows.reset_index(drop=True)
        yv = np.asarray(rows[ITERATION_TARGET] if y is None else y, dtype=float)
        cats = vocabulary(rows)  # names seen in these rows only
        folds = inner_splits(rows, self.group_column, self.inner_max_folds)
        scorer = self.scorer or mape_scorer
        scores: dict[Candidate, float] = {}
        for cand in self.candidates:
            per_fold = []
            for tr, va in folds:
                model = self._make(cand, cats, inner=True)
                model.fit(rows.iloc[tr], yv[tr])
                pred = np.asarray(model.predict(rows.iloc[va]), dtype=float)
                per_fold.append(scorer(rows.iloc[va], yv[va], pred) if np.isfinite(pred).all() else np.nan)
            scores[cand] = float(np.mean(per_fold))
            log.info("%s inner %s: %.3f (%d folds by %s)", self.family, cand.name, scores[cand], len(folds),
                     self.group_column)
        finite = [c for c in self.candidates if np.isfinite(scores[c])]
        if not finite:
            raise SchemaError(f"nested selection ({self.family}): every candidate failed on the inner folds")
        self.best_ = min(finite, key=lambda c: (scores[c], self.candidates.index(c)))
        self.scores_ = scores
        self.n_inner_folds_ = len(folds)
        self.model_ = self._make(self.best_, cats)
        self.model_.fit(rows, yv)
        return self

    def predict(self, rows: pd.DataFrame) -> np.ndarray:
        return np.asarray(self.model_.predict(rows), dtype=float)

    def choice_rows(self) -> list[dict[str, Any]]:
        """One record per candidate: its inner score and whether it was chosen."""
        return [{"candidate": c.name, "feature_set": c.feature_set, "target_transform": c.target_transform,
                 "estimator": c.estimator, "params": dict(c.params) and str(dict(c.params)) or "",
                 "inner_score_mape_pct": self.scores_[c], "n_inner_folds": self.n_inner_folds_,
                 "chosen": c == self.best_} for c in self.candidates]


@dataclass
class NestedResult:
    """Out-of-fold predictions (:data:`PREDICTION_COLUMNS`) and the choice per outer fold (:data:`CHOICE_COLUMNS`)."""

    predictions: pd.DataFrame
    choices: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=CHOICE_COLUMNS))


def nested_evaluate(table: pd.DataFrame, family: str, protocol: str, seed: int,
                    selection: Mapping[str, Any] | None = None, *, clean_options: Mapping[str, Any] | None = None,
                    n_jobs: int = 1, n_estimators_scale: float = 1.0, max_rows: int | None = None,
                    model_factory: ModelFactory | None = None, scorer: Scorer | None = None) -> NestedResult:
    """Nested grouped CV of one (protocol, family, seed): see the module doc.

    ``table``: the canonical iteration table; ``selection``: the ``chronos_iteration.selection`` section
    (candidates and ``inner_max_folds``). Predictions carry ``feature_set`` = ``estimator`` = ``nested``.
    """
    cfg = {**DEFAULT_SELECTION, **dict(selection or {})}
    cands = candidates_from_config(cfg)
    p = get_protocol(protocol)
    rows = family_rows(table, family, max_rows)
    y_all = rows[ITERATION_TARGET].to_numpy(dtype=float)
    splits = protocol_splits(protocol, rows, seed) if p.seeded_split else protocol_splits(protocol, rows)
    preds, choices = [], []
    with threadpool_limits(limits=max(1, n_jobs)), shared_rows(rows):  # every fold's features from one build
        for fold, tr, te in splits:
            sel = NestedSelector(cands, family, INNER_GROUP[p.name], seed=int(seed),
                                 inner_max_folds=int(cfg["inner_max_folds"]), model_factory=model_factory,
                                 scorer=scorer, clean_options=clean_options, n_jobs=n_jobs,
                                 n_estimators_scale=n_estimators_scale,
                                 inner_n_estimators_scale=float(cfg["inner_n_estimators_scale"]))
            sel.fit(rows.iloc[tr], y_all[tr])  # the outer test rows are not passed: they cannot be seen
            test = rows.iloc[te]
            pred = sel.predict(test)
            log.info("%s %s seed=%d fold=%s: chose %s", family, protocol, seed, fold, sel.best_.name)
            preds.append(pd.DataFrame({
                "family": family, "protocol": protocol, "feature_set": NESTED, "estimator": NESTED,
                "seed": int(seed), "fold": fold, "row_id": test["row_id"].to_numpy(),
                "model": test["model"].to_numpy(), "dataset": test["dataset"].to_numpy(),
                "gpu": test["gpu"].to_numpy(), "y_true_ms": y_all[te], "y_pred_ms": pred}))
            choices.extend({"family": family, "protocol": protocol, "seed": int(seed), "fold": fold, **r}
                           for r in sel.choice_rows())
    out = pd.concat(preds, ignore_index=True).sort_values(["fold", "row_id"], kind="mergesort")
    return NestedResult(out.reset_index(drop=True)[PREDICTION_COLUMNS],
                        pd.DataFrame(choices, columns=CHOICE_COLUMNS))


def fit_nested_predictor(table: pd.DataFrame, families: Sequence[str], protocol: str = "logo", seed: int = 42,
                         selection: Mapping[str, Any] | None = None, *,
                         clean_options: Mapping[str, Any] | None = None, n_jobs: int = 1,
                         n_estimators_scale: float = 1.0) -> IterationTimePredictor:
    """The saved predictor of the nested procedure: per family, the inner selection (groups of
    ``protocol``'s kind) on every ``ok`` row, then the choice refitted on them all.

    Metadata records the chosen candidate and every candidate's inner score per family.
    """
    cfg = {**DEFAULT_SELECTION, **dict(selection or {})}
    cands = candidates_from_config(cfg)
    group = INNER_GROUP[get_protocol(protocol).name]
    models: dict[str, IterationTimeModel] = {}
    meta_fam: dict[str, Any] = {}
    with threadpool_limits(limits=max(1, n_jobs)):
        for family in families:
            rows = family_rows(table, family)
            sel = NestedSelector(cands, family, group, seed=seed, inner_max_folds=int(cfg["inner_max_folds"]),
                                 clean_options=clean_options, n_jobs=n_jobs,
                                 n_estimators_scale=n_estimators_scale,
                                 inner_n_estimators_scale=float(cfg["inner_n_estimators_scale"])).fit(rows)
            models[family] = sel.model_
            meta_fam[family] = {"training_rows": int(len(rows)), "chosen": sel.best_.name,
                                "inner_group": group, "n_inner_folds": sel.n_inner_folds_,
                                "inner_scores_mape_pct": {c.name: round(s, 4) for c, s in sel.scores_.items()}}
    meta = {"kind": "iteration_time_model", "target": ITERATION_TARGET, "unit": "ms per training step",
            "feature_set": NESTED, "estimator": NESTED, "seed": int(seed), "selection": {
                "protocol": protocol, "candidates": [c.name for c in cands],
                "inner_max_folds": int(cfg["inner_max_folds"]),
                "inner_n_estimators_scale": float(cfg["inner_n_estimators_scale"])},
            "n_estimators_scale": n_estimators_scale, "families": meta_fam,
            "usage": "joblib.load(path).predict(canonical_rows) -> step_time_ms"}
    return IterationTimePredictor(models, meta)


def fit_nested_predictor_with_cv(table: pd.DataFrame, families: Sequence[str], protocol: str = "logo",
                                 seed: int = 42, selection: Mapping[str, Any] | None = None, *,
                                 clean_options: Mapping[str, Any] | None = None, n_jobs: int = 1,
                                 n_estimators_scale: float = 1.0,
                                 predictions: pd.DataFrame | None = None) -> IterationTimePredictor:
    """:func:`fit_nested_predictor` with the saved-model card of
    :func:`~traintime.chronos.evaluation.train_iteration_predictor`: per family the features and required
    columns of the chosen model, and (from ``predictions``) the outer-fold MAPE of the ``nested`` rows: the
    cross-validated error of the procedure that produced this model."""
    import sklearn
    import xgboost

    import traintime
    from traintime.chronos.evaluation import cv_summary

    pred = fit_nested_predictor(table, families, protocol, seed, selection, clean_options=clean_options,
                                n_jobs=n_jobs, n_estimators_scale=n_estimators_scale)
    meta = pred.metadata
    for family, model in pred.models.items():
        feats = model.features
        meta["families"][family].update({
            "feature_names": list(getattr(feats, "feature_names_", [])),
            "required_columns": list(getattr(feats, "required_columns_", [])),
            "categories": {k: list(v) for k, v in getattr(feats, "categories_", {}).items()},
            "cv": cv_summary(predictions, NESTED, NESTED, family) if predictions is not None else {}})
    meta["cv"] = cv_summary(predictions, NESTED, NESTED) if predictions is not None else {}
    spec_table = dict(clean_options or {}).get("specs")
    meta["gpus"] = sorted(spec_table["gpu"]) if spec_table is not None else []
    meta["versions"] = {"traintime": traintime.__version__, "xgboost": xgboost.__version__,
                        "scikit-learn": sklearn.__version__, "pandas": pd.__version__, "numpy": np.__version__}
    meta["usage"] = ("joblib.load(path).predict(canonical_rows) -> step_time_ms; rows need a `family` column and the "
                     "family's required_columns (traintime.chronos.estimators.load_iteration_model)")
    return pred


def nested_choices_table(choices: pd.DataFrame) -> pd.DataFrame:
    """How often the nested procedure chose each candidate (``iteration_nested_choices``): per protocol,
    family and candidate, the number of (outer fold, seed) choices it won, their share, and its mean inner
    score (MAPE % on the inner held-out groups; computed on outer-training rows only)."""
    cols = ["protocol", "family", "candidate", "n_chosen", "n_choices", "chosen_share_pct",
            "inner_score_mape_pct_mean", "n_seeds"]
    if choices.empty:
        return pd.DataFrame(columns=cols)
    ch = choices.copy()
    ch["chosen"] = ch["chosen"].astype(str).str.lower().isin(("true", "1"))
    rows = []
    for (prot, fam, cand), g in ch.groupby(["protocol", "family", "candidate"], sort=True):
        n = int(g[["seed", "fold"]].drop_duplicates().shape[0])
        rows.append({"protocol": prot, "family": fam, "candidate": cand, "n_chosen": int(g["chosen"].sum()),
                     "n_choices": n, "chosen_share_pct": 100.0 * float(g["chosen"].sum()) / max(1, n),
                     "inner_score_mape_pct_mean": float(pd.to_numeric(g["inner_score_mape_pct"]).mean()),
                     "n_seeds": int(g["seed"].nunique())})
    out = pd.DataFrame(rows, columns=cols)
    order = {p: i for i, p in enumerate(INNER_GROUP)}
    out["_o"] = out["protocol"].map(order).fillna(99)
    return out.sort_values(["_o", "family", "candidate"]).drop(columns="_o").reset_index(drop=True)
