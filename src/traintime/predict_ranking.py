"""Uncertainty and ranking of :class:`traintime.predict.TrainingTimePredictor`: intervals from the
workflow's out-of-fold residuals, the estimate on one GPU and the ranking of every GPU."""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

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


def _quantiles(log_ratios: np.ndarray, coverage: float) -> tuple[float, float]:
    lo, hi = (1 - coverage) / 2, (1 + coverage) / 2
    return float(np.quantile(log_ratios, lo)), float(np.quantile(log_ratios, hi))


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

    def _step_residuals(self, protocol: str) -> tuple[np.ndarray, float]:
        path = self.data_dir / "iteration_predictions" / f"{protocol}.csv"
        if not path.exists():
            return np.array([]), float("nan")
        from traintime.core.io import read_csv
        from traintime.core.metrics import mape

        meta = self._iteration_model().metadata
        p = read_csv(path)
        p = p[(p["feature_set"] == meta.get("feature_set")) & (p["estimator"] == meta.get("estimator"))
              & (p["family"] == self.family)]
        p = p[(p["y_true_ms"] > 0) & (p["y_pred_ms"] > 0)]
        if p.empty:
            return np.array([]), float("nan")
        return np.log(p["y_true_ms"].to_numpy() / p["y_pred_ms"].to_numpy()), mape(p["y_true_ms"], p["y_pred_ms"])

    def _epoch_residuals(self, protocol: str) -> tuple[np.ndarray, float]:
        self._convergence_model()
        method = Path(str(self.convergence_model_path)).stem
        path = self.data_dir / "convergence_predictions" / f"{method}.csv"
        if not path.exists():
            return np.array([]), float("nan")
        from traintime.core.io import read_csv
        from traintime.core.metrics import mape

        p = read_csv(path)
        p = p[(p["protocol"] == protocol) & (p["family"] == self.family)]
        p = p[(p["epochs_measured"] > 0) & (p["epochs_predicted"] > 0)]
        if p.empty:
            return np.array([]), float("nan")
        return (np.log(p["epochs_measured"].to_numpy() / p["epochs_predicted"].to_numpy()),
                mape(p["epochs_measured"], p["epochs_predicted"]))

    def _curve_residuals(self, k: int, epochs: float) -> tuple[np.ndarray, float]:
        """Log residuals and MAPE of the k-epoch curve extrapolation on the local seed-study runs
        (:func:`traintime.predict_plan.curve_errors`); exact (one zero residual) when the stopping rule
        fired within the curve."""
        if epochs <= k:
            return np.zeros(1), 0.0
        from traintime.core.metrics import mape
        from traintime.predict_plan import curve_errors

        err = curve_errors(self.data_dir, k)
        if err is None:
            return np.array([]), float("nan")
        m, p = err["epochs_measured"].to_numpy(float), err["epochs_predicted"].to_numpy(float)
        return np.log(m / p), mape(m, p)

    def ranking(self, gpus: list[str] | None = None) -> pd.DataFrame:
        """One row per GPU (default: every GPU of the spec table): step, epoch, epochs, hours, cost,
        their intervals, ranks by cost (priced GPUs) and by time, and whether the GPU / model is in
        the released timing data."""
        gpus = list(self.specs["gpu"]) if gpus is None else gpus
        steps = self.predict_step_ms(gpus)
        epochs = self.predict_number_of_epochs()
        models_seen, gpus_seen = self._training_values()
        model_seen = self.chronos_model in models_seen
        if self.curve is not None:  # the estimate comes from the run's own curve: so do its residuals
            e_proto = f"curve k={len(self.curve)}"
            e_res, e_mape = self._curve_residuals(len(self.curve), epochs)
        else:
            e_proto = "cv" if model_seen else "lomo"
            e_res, e_mape = self._epoch_residuals(e_proto)
        rng = np.random.default_rng(self.seed)
        cache: dict[str, tuple[np.ndarray, float]] = {}
        prices = self.specs.set_index("gpu")["price_per_hour_usd"]
        rows = []
        n_steps = self.info.train_size / self.batch_size
        for g in gpus:
            s_proto = "lomo" if not model_seen else ("logo" if g not in gpus_seen else "grouped_random")
            if s_proto not in cache:
                cache[s_proto] = self._step_residuals(s_proto)
            s_res, s_mape = cache[s_proto]
            step = float(steps[g])
            price = prices.get(g)
            price = float(price) if price is not None and not pd.isna(price) else float("nan")
            epoch_s = n_steps * step / 1000.0
            hours = epochs * epoch_s / 3600.0
            e = Estimate(gpu=g, price_per_hour_usd=price, step_ms=step, epoch_s=epoch_s, epochs=epochs, hours=hours,
                         cost_usd=hours * price, coverage=self.coverage, step_protocol=s_proto,
                         step_cv_mape_pct=s_mape, epochs_protocol=e_proto, epochs_cv_mape_pct=e_mape)
            if s_res.size:
                lo, hi = _quantiles(s_res, self.coverage)
                e.step_ms_low, e.step_ms_high = step * math.exp(lo), step * math.exp(hi)
            if e_res.size:
                lo, hi = _quantiles(e_res, self.coverage)
                e.epochs_low, e.epochs_high = epochs * math.exp(lo), epochs * math.exp(hi)
            if s_res.size and e_res.size:
                draws = rng.choice(s_res, 20000) + rng.choice(e_res, 20000)
                lo, hi = _quantiles(draws, self.coverage)
                e.hours_low, e.hours_high = hours * math.exp(lo), hours * math.exp(hi)
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

