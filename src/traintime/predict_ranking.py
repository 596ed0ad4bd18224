"""Uncertainty and ranking of :class:`traintime.predict.TrainingTimePredictor`: intervals from the
workflow's out-of-fold residuals, the estimate on one GPU and the ranking of every GPU.

The intervals are built as ``traintime predict`` builds them (:mod:`traintime.predict_plan`): split conformal
(:class:`~traintime.chronos.conformal.SplitConformal`, empirical quantile without the finite-sample correction) on
the out-of-fold residuals that match the situation, symmetric in log; the epochs half-width floored at the seed
spread; hours and cost from the step and epochs half-widths in quadrature. Only the residuals differ: these are the
saved CHRONOS iteration model's (step time with loader wait), ``traintime predict``'s those of its compute-time
step model."""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from traintime.chronos.interval_math import combine_log_halfwidths

log = logging.getLogger(__name__)


@dataclass
class Estimate:
    """End-to-end estimate on one GPU. Times in ms / s / h, cost in USD; ``*_low``/``*_high`` bound
    the ``coverage`` interval (NaN when no out-of-fold predictions were found)."""

    gpu: str
    price_per_hour_usd: float
    step_ms: float
    epoch_s: float
    epochs: float
    hours: float
    cost_usd: float
    coverage: float = float("nan")
    step_ms_low: float = float("nan")
    step_ms_high: float = float("nan")
    epochs_low: float = float("nan")
    epochs_high: float = float("nan")
    hours_low: float = float("nan")
    hours_high: float = float("nan")
    cost_usd_low: float = float("nan")
    cost_usd_high: float = float("nan")
    step_protocol: str = ""
    step_cv_mape_pct: float = float("nan")
    epochs_protocol: str = ""
    epochs_cv_mape_pct: float = float("nan")
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["notes"] = "; ".join(self.notes)
        return d


class RankingMixin:
    """Intervals, estimate and ranking; mixed into :class:`~traintime.predict.TrainingTimePredictor`
    (which provides the models, rows and predictions these methods use)."""

    # ----- uncertainty --------------------------------------------------------------------------
    def _training_values(self) -> tuple[set[str], set[str]]:
        path = self.data_dir / "iteration.csv"
        if not path.exists():
            return set(), set()
        from traintime.core.io import read_csv

        t = read_csv(path, usecols=["family", "model", "gpu"])
        t = t[t["family"] == self.family]
        return set(t["model"].astype(str)), set(t["gpu"].astype(str))

    def _step_calibration(self, protocol: str) -> tuple[float, float]:
        """(log half-width, MAPE) of the step interval: split conformal (the routine and settings of ``traintime
        predict``, :mod:`traintime.chronos.conformal`) on the workflow's out-of-fold predictions of the saved
        iteration model under ``protocol``, grouped by held-out fold; NaN without them."""
        path = self.data_dir / "iteration_predictions" / f"{protocol}.csv"
        if not path.exists():
            return float("nan"), float("nan")
        from traintime.chronos.conformal import SplitConformal
        from traintime.core.io import read_csv
        from traintime.core.metrics import mape

        meta = self._iteration_model().metadata
        p = read_csv(path)
        p = p[(p["feature_set"] == meta.get("feature_set")) & (p["estimator"] == meta.get("estimator"))
              & (p["family"] == self.family)]
        p = p[(p["y_true_ms"] > 0) & (p["y_pred_ms"] > 0)]
        if p.empty:
            return float("nan"), float("nan")
        q = SplitConformal(self.coverage, finite_sample=False).fit(p["y_true_ms"], p["y_pred_ms"],
                                                                  p["fold"].astype(str)).log_halfwidth
        return q, mape(p["y_true_ms"], p["y_pred_ms"])

    def _epochs_calibration(self, protocol: str) -> tuple[float, float]:
        """(log half-width, MAPE) of the epochs interval of the convergence model, as ``traintime predict`` builds
        it: split conformal on its out-of-fold residuals under ``protocol``, floored at the seed spread
        (:func:`~traintime.predict_plan.epochs_conformal`,
        :func:`~traintime.chronos.interval_math.seed_floored_halfwidth`)."""
        self._convergence_model()
        from traintime.chronos.interval_math import seed_floored_halfwidth
        from traintime.predict_plan import epochs_conformal

        method = Path(str(self.convergence_model_path)).stem
        q, s, _, err_pct = epochs_conformal(self.data_dir, method, self.family, self.coverage, protocol)
        return seed_floored_halfwidth(q, s), err_pct

    def _curve_calibration(self, k: int, epochs: float) -> tuple[float, float]:
        """(log half-width, MAPE) of the k-epoch curve extrapolation
        (:func:`~traintime.predict_plan.curve_conformal` on the local seed-study runs; zero when the stopping rule
        fired within the curve)."""
        from traintime.predict_plan import curve_conformal

        q, _, err_pct = curve_conformal(self.data_dir, k, epochs, self.coverage)
        return q, err_pct

    def ranking(self, gpus: list[str] | None = None) -> pd.DataFrame:
        """One row per GPU (default: every GPU of the spec table): step, epoch, epochs, hours, cost,
        their intervals, ranks by cost (priced GPUs) and by time, and whether the GPU / model is in
        the released timing data."""
        gpus = list(self.specs["gpu"]) if gpus is None else gpus
        steps = self.predict_step_ms(gpus)
        epochs = self.predict_number_of_epochs()
        models_seen, gpus_seen = self._training_values()
        model_seen = self.chronos_model in models_seen
        if self.curve is not None:  # the estimate comes from the run's own curve: so does its interval
            e_proto = f"curve k={len(self.curve)}"
            e_q, e_mape = self._curve_calibration(len(self.curve), epochs)
        else:
            e_proto = "cv" if model_seen else "lomo"
            e_q, e_mape = self._epochs_calibration(e_proto)
        cache: dict[str, tuple[float, float]] = {}
        prices = self.specs.set_index("gpu")["price_per_hour_usd"]
        rows = []
        n_steps = self.info.train_size / self.batch_size
        for g in gpus:
            s_proto = "lomo" if not model_seen else ("logo" if g not in gpus_seen else "grouped_random")
            if s_proto not in cache:
                cache[s_proto] = self._step_calibration(s_proto)
            s_q, s_mape = cache[s_proto]
            step = float(steps[g])
            price = prices.get(g)
            price = float(price) if price is not None and not pd.isna(price) else float("nan")
            epoch_s = n_steps * step / 1000.0
            hours = epochs * epoch_s / 3600.0
            e = Estimate(gpu=g, price_per_hour_usd=price, step_ms=step, epoch_s=epoch_s, epochs=epochs, hours=hours,
                         cost_usd=hours * price, coverage=self.coverage, step_protocol=s_proto,
                         step_cv_mape_pct=s_mape, epochs_protocol=e_proto, epochs_cv_mape_pct=e_mape)
            e.step_ms_low, e.step_ms_high = step * math.exp(-s_q), step * math.exp(s_q)  # NaN stays NaN
            e.epochs_low, e.epochs_high = epochs * math.exp(-e_q), epochs * math.exp(e_q)
            h_q = math.nan if math.isnan(s_q) or math.isnan(e_q) else combine_log_halfwidths(s_q, e_q)
            e.hours_low, e.hours_high = hours * math.exp(-h_q), hours * math.exp(h_q)
            e.cost_usd_low, e.cost_usd_high = e.hours_low * price, e.hours_high * price
            row = e.as_dict()
            row["gpu_in_timing_data"] = g in gpus_seen
            rows.append(row)
        out = pd.DataFrame(rows).drop(columns=["notes"])
        out["rank_by_cost"] = out["cost_usd"].rank(method="min").astype("Int64")
        out["rank_by_time"] = out["hours"].rank(method="min").astype("Int64")
        out.insert(1, "model_in_timing_data", model_seen)
        return out.sort_values(["rank_by_cost", "rank_by_time", "gpu"], na_position="last").reset_index(drop=True)

    def estimate(self, gpu: str | None = None) -> Estimate:
        """The end-to-end estimate on ``gpu`` (default: the configured one)."""
        from traintime.core.specs import canonical_gpu

        g = canonical_gpu(gpu, self.specs) if gpu else self.gpu
        row = self.ranking([g]).iloc[0].to_dict()
        keep = {k: row[k] for k in Estimate.__dataclass_fields__ if k in row and k != "notes"}
        return Estimate(**keep, notes=list(self.notes))

