"""``nested``: the convergence estimator chosen inside each outer-training fold, never on the outer test rows.

Issue 14's tables compare many estimators of T_conv on the same outer folds; quoting the lowest row of such a
table as "the" result is a choice made on the test folds. :class:`NestedConvergence` makes that choice where it
belongs: its ``fit`` scores each candidate estimator (names of :data:`traintime.chronos.convergence.ESTIMATORS`,
declared in config: ``chronos_convergence.nested_candidates``) by inner cross-validation on the rows it is given,
with inner folds of the same kind as the outer protocol (:data:`INNER_GROUP`: leave one model out inside LOMO,
one dataset out inside LODO, K-fold over runs inside 5-fold CV; at most ``inner_max_folds``, grouped K-fold beyond),
keeps the candidate with the lowest inner MAPE (ties: the earlier one) and refits it on all those rows
(:class:`traintime.chronos.selection.NestedSelector`, as the iteration stage's and the probe ablation's nested
rows). Like every convergence estimator it is fitted per family (:class:`~traintime.chronos.convergence.PerFamily`).
An outer-training fold with a single group of the inner kind (one dataset left inside LODO, say) allows no inner
fold: the first candidate is then fitted, as declared, with a warning in the job's log.

Under LOMO and LODO every held-out run is an unseen (model, dataset), so ``pooled_or_xgb`` answers exactly as
``xgb_monotone`` there; listing both only costs inner fits.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, RegressorMixin

from traintime.core.errors import ConfigError, unknown_name

log = logging.getLogger(__name__)

#: candidates when config names none (schema default of ``chronos_convergence.nested_candidates``)
DEFAULT_CANDIDATES: tuple[str, ...] = ("partial_pooling", "pooled_loglinear", "pooled_or_xgb")
#: inner group column per outer protocol (``run_key``: one group per run, i.e. K-fold over runs)
INNER_GROUP: dict[str, str] = {"cv": "run_key", "lomo": "model", "lodo": "dataset"}
NAME = "nested"


class NestedConvergence(BaseEstimator, RegressorMixin):
    """Convergence estimator chosen by inner CV among ``candidates`` (module doc), for one family's rows.

    Parameters
    ----------
    candidates : estimator names (:data:`~traintime.chronos.convergence.ESTIMATORS`; not ``nested``).
    inner_group : ``run_key`` (K-fold over runs), ``model`` or ``dataset``; :func:`configure_nested` sets it.
    inner_max_folds : at most this many inner folds.
    random_state, n_jobs : passed to every candidate.

    After ``fit``: ``choice_`` (the chosen name), ``model_`` (it, refitted on all rows), ``inner_mape_`` (name ->
    inner MAPE %), ``n_inner_folds_``.
    """

    def __init__(self, candidates: Sequence[str] = DEFAULT_CANDIDATES, inner_group: str = "run_key",
                 inner_max_folds: int = 3, random_state: int = 42, n_jobs: int = 1) -> None:
        self.candidates = candidates
        self.inner_group = inner_group
        self.inner_max_folds = inner_max_folds
        self.random_state = random_state
        self.n_jobs = n_jobs

    def _check(self) -> None:
        from traintime.chronos.convergence import ESTIMATORS

        if not len(self.candidates):
            raise ConfigError("chronos_convergence.nested_candidates: no candidates")
        for c in self.candidates:
            if c == NAME or c not in ESTIMATORS:
                raise unknown_name("nested convergence candidate", c, [e for e in ESTIMATORS if e != NAME])
        if self.inner_group not in INNER_GROUP.values():
            raise unknown_name("nested convergence inner group", self.inner_group, sorted(set(INNER_GROUP.values())))

    def _factory(self, cand: Any, family: str, seed: int, categories: Any) -> Any:
        from traintime.chronos.convergence import make_estimator

        return make_estimator(cand.estimator, random_state=seed, n_jobs=self.n_jobs, per_family=False)

    def fit(self, rows: pd.DataFrame, y: Sequence[float]) -> NestedConvergence:
        from traintime.chronos.selection import Candidate, NestedSelector
        from traintime.core.metrics import mape

        self._check()
        rows = rows.reset_index(drop=True)
        if self.inner_group == "run_key":
            rows = rows.assign(run_key=[f"run{i}" for i in range(len(rows))])
        family = str(rows["family"].iloc[0]) if "family" in rows.columns and len(rows) else ""
        if self.inner_group in rows.columns and rows[self.inner_group].nunique() < 2:
            log.warning("nested convergence %s: one %s in the training rows, no inner fold; the first candidate "
                        "(%s) is fitted", family, self.inner_group, self.candidates[0])
            first = self._factory(Candidate("convergence", "none", str(self.candidates[0])), family,
                                  int(self.random_state), {})
            self.model_ = first.fit(rows, np.asarray(y, dtype=float))
            self.choice_, self.inner_mape_, self.n_inner_folds_ = str(self.candidates[0]), {}, 0
            return self
        cands = [Candidate("convergence", "none", str(c)) for c in self.candidates]
        sel = NestedSelector(cands, family, self.inner_group, seed=int(self.random_state),
                             inner_max_folds=int(self.inner_max_folds), model_factory=self._factory,
                             scorer=lambda _rows, yt, yp: float(mape(yt, yp)))
        sel.fit(rows, np.asarray(y, dtype=float))
        self.model_ = sel.model_
        self.choice_ = sel.best_.estimator
        self.inner_mape_ = {c.estimator: float(s) for c, s in sel.scores_.items()}
        self.n_inner_folds_ = int(sel.n_inner_folds_)
        log.info("nested convergence %s (inner folds by %s): %s chosen; inner MAPE %s", family, self.inner_group,
                 self.choice_, ", ".join(f"{k} {v:.2f}" for k, v in self.inner_mape_.items()))
        return self

    def predict(self, rows: pd.DataFrame) -> np.ndarray:
        return np.asarray(self.model_.predict(rows), dtype=float)


def configure_nested(estimator: Any, protocol: str, candidates: Sequence[str] | None = None) -> Any:
    """``estimator`` with the inner folds of the outer ``protocol`` (and ``candidates``, when given) where it is
    (or wraps) a :class:`NestedConvergence`; any other estimator unchanged."""
    params = estimator.get_params()
    prefix = next((p for p in ("", "estimator__") if f"{p}inner_group" in params), None)
    if prefix is None:
        return estimator
    if protocol not in INNER_GROUP:
        raise unknown_name("convergence protocol", protocol, INNER_GROUP)
    estimator.set_params(**{f"{prefix}inner_group": INNER_GROUP[protocol],
                            **({f"{prefix}candidates": tuple(candidates)} if candidates is not None else {})})
    return estimator
