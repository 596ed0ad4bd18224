"""Every GPU for one workload: compute step time (pluggable model), optional loader wait, epochs, hours, cost,
conformal intervals, cost-time Pareto front. The engine behind ``traintime predict``.

Step time shown by default is **compute time** (forward + backward + optimizer with a data pipeline that
keeps up) from a :class:`~traintime.chronos.roofline_step.StepTimeModel` (default
:class:`~traintime.chronos.roofline_step.RooflineStepTime`). ``workers=N`` adds a *modelled* DataLoader
wait as its own column: ``loader_ms = max(0, batch x sample_ms x (px / 224)^2 / N - compute_ms)`` with an
assumed per-sample decode + augment cost ``sample_ms`` (1.0 ms at 224 px on one CPU core; not measured
here, labelled in the output). ``--precision tf32`` (32-bit with PyTorch's default TF32 convolutions) is
answered from the model's 32- and 16-bit answers by a physics rule (:func:`tf32_step_ms`).

Intervals (split conformal, :mod:`traintime.chronos.conformal`, group-weighted empirical quantile without the
finite-sample correction -- with 10 GPUs / 3-4 models per family the corrected quantile is the largest
residual or infinite; ``results/tables/predict_interval_coverage.*`` reports the measured coverage of both):

* step: leave-one-GPU-out residuals of the step model against the measured compute times of
  ``<data_dir>/iteration.csv`` (``compute_time_ms``: loader wait excluded; ``step_time_ms`` where a table
  lacks it), the efficiencies refitted without the held-out GPU, grouped by GPU;
* epochs: out-of-fold predictions of the convergence method (``convergence_predictions/<method>.csv``,
  protocol ``lomo``), grouped by model; every family's where the family has fewer than
  :func:`~traintime.chronos.conformal.min_calibration_groups` models (9 at 90 %); with a partial validation curve (``--curve``) the errors of that
  curve extrapolation on the local seed-study runs instead (:func:`curve_conformal`);
* seed spread: the coverage quantile of the across-seed standard deviation of log epochs
  (``convergence.csv``). The residuals of single-seed labels already hold one draw of it, so it is not
  added again: the epochs half-width is the larger of the two
  (:func:`~traintime.chronos.interval_math.seed_floored_halfwidth`);
* hours and cost: the step and epochs log half-widths in quadrature (its coverage on configurations never
  seen: ``hours_interval_coverage_pct`` of ``results/tables/end_to_end_out_of_sample.*``).
Missing files leave the corresponding interval empty (NaN / null) and say so in ``notes``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd

from traintime.chronos.interval_math import (
    combine_log_halfwidths,
    seed_floored_halfwidth,
)
from traintime.predict_static import Workload, static_features, step_rows


def _iteration_step_rows(table: pd.DataFrame, specs: pd.DataFrame) -> pd.DataFrame:
    """:func:`traintime.chronos.roofline_calibration.iteration_step_rows` (imported on use: scikit-learn)."""
    from traintime.chronos.roofline_calibration import iteration_step_rows

    return iteration_step_rows(table, specs)

#: assumed per-sample loader cost at 224 px on one worker (decode + augment), ms -- not measured
LOADER_SAMPLE_MS_224 = 1.0


@dataclass
class PlanContext:
    """Intervals and labels shared by every GPU row."""

    coverage: float = 0.9
    step_q: float = float("nan")
    epochs_q: float = float("nan")
    seed_q: float = float("nan")
    #: usable fraction of a card's memory (traintime.predict_memory; NaN: estimate only, no fit call)
    memory_usable: float = float("nan")
    notes: list[str] = field(default_factory=list)


def step_conformal(step_model: Any, rows: pd.DataFrame, family: str, coverage: float) -> tuple[float, str]:
    """Log half-width of the step interval from leave-one-GPU-out residuals of ``step_model`` (refitted
    without each GPU) on step-model ``rows`` with ``measured_ms`` (see module doc)."""
    if rows["gpu"].nunique() < 3 or not hasattr(step_model, "fit"):
        return float("nan"), f"step interval: none (fewer than 3 GPUs of {family} rows, or a model without fit)"
    from traintime.chronos.conformal import SplitConformal
    from traintime.chronos.roofline_calibration import logo_step_predictions

    preds = logo_step_predictions(rows, step_model)
    cp = SplitConformal(coverage, finite_sample=False).fit(rows["measured_ms"].to_numpy(dtype=float), preds,
                                                          rows["gpu"].to_numpy())
    return cp.log_halfwidth, (f"step interval: split conformal on leave-one-GPU-out residuals of {len(rows)} "
                              f"{family} rows ({cp.n_groups_} GPUs; against {rows.attrs.get('measured', 'measured')})")


def oof_epochs(data_dir: Path, method: str, protocol: str = "lomo") -> pd.DataFrame:
    """The out-of-fold epochs of convergence ``method`` under ``protocol``, every family
    (``<data_dir>/convergence_predictions/<method>.csv``; rows with positive measured and predicted epochs; empty
    when the file is absent)."""
    path = data_dir / "convergence_predictions" / f"{method}.csv"
    if not path.exists():
        return pd.DataFrame(columns=["family", "model", "epochs_measured", "epochs_predicted"])
    from traintime.core.io import read_csv

    p = read_csv(path)
    p = p[p["protocol"] == protocol]
    return p[(p["epochs_measured"] > 0) & (p["epochs_predicted"] > 0)]


def epochs_conformal(data_dir: Path, method: str, family: str, coverage: float,
                     protocol: str = "lomo") -> tuple[float, float, str, float]:
    """(epochs log half-width, seed-spread log half-width, note, MAPE % of the family's residuals): split conformal
    on :func:`oof_epochs`, grouped by model under ``lomo`` (one residual per run under ``cv``); on every family's
    residuals where ``family`` has fewer models (runs) than
    :func:`~traintime.chronos.conformal.min_calibration_groups` (9 at 90 %: the release has 3-4 models per family)."""
    from traintime.chronos.conformal import (
        SplitConformal,
        min_calibration_groups,
        stratum_groups,
        stratum_pool,
    )
    from traintime.core.metrics import mape

    notes = []
    q = s = float("nan")
    every = oof_epochs(data_dir, method, protocol)
    p = every[every["family"] == family]
    err_pct = mape(p["epochs_measured"], p["epochs_predicted"]) if len(p) else float("nan")
    grouped = protocol == "lomo"
    m = min_calibration_groups(coverage)
    pool = ""
    _, pooled = stratum_pool(every["model"], every["family"], family, coverage, group_weighted=grouped)
    if pooled and len(every) > len(p):
        p, pool = every, f", every family's: fewer than {m} {'models' if grouped else 'runs'} of {family}"
    if len(p) and (not grouped or p.groupby(["family", "model"]).ngroups >= 2):
        cp = SplitConformal(coverage, finite_sample=False).fit(
            p["epochs_measured"], p["epochs_predicted"],
            stratum_groups(p["family"], p["model"]) if grouped else None)
        q = cp.log_halfwidth
        notes.append(f"epochs interval: split conformal on leave-one-model-out residuals ({cp.n_groups_} models{pool})"
                     if grouped else f"epochs interval: split conformal on {protocol} residuals ({cp.n_} runs{pool})")
    if q != q:
        notes.append(f"epochs interval: none (no {protocol} predictions of {method} for {family} in "
                     f"{data_dir / 'convergence_predictions'})")
    conv = data_dir / "convergence.csv"
    if conv.exists():
        from traintime.core.io import read_csv

        c = read_csv(conv)
        c = c[(c["family"] == family) & c["epochs_to_converge"].gt(0)] if "epochs_to_converge" in c.columns else c[:0]
        keys = [k for k in ("model", "dataset", "optimizer", "learning_rate", "batch_size", "precision_bits")
                if k in c.columns]
        if len(c) and keys:
            sd = c.assign(le=np.log(c["epochs_to_converge"])).groupby(keys, dropna=False)["le"].std().dropna()
            if len(sd):
                s = float(np.median(sd)) * NormalDist().inv_cdf((1 + coverage) / 2)
                notes.append(f"seed spread: median across-seed sd of log epochs over {len(sd)} configurations")
            else:
                notes.append(f"seed spread: none (one seed per {family} configuration in {conv})")
    return q, s, "; ".join(notes), err_pct


def curve_errors(data_dir: Path, k: int) -> pd.DataFrame | None:
    """Measured against predicted stopping epochs of the extrapolation ``traintime predict --curve`` makes
    (exponential family, generic prior) replayed on the first ``k`` epochs of the local seed-study runs still
    training after ``k`` epochs (``local_convergence_seed_runs.csv`` / ``_curves.csv`` of ``data_dir``);
    None without such runs of at least two configurations."""
    runs_p, curves_p = data_dir / "local_convergence_seed_runs.csv", data_dir / "local_convergence_seed_curves.csv"
    if not (runs_p.exists() and curves_p.exists()):
        return None
    from traintime.chronos.convergence_noise import curve_extrapolation_errors
    from traintime.core.io import read_csv

    err = curve_extrapolation_errors(read_csv(curves_p), read_csv(runs_p), ks=(k,), families=("exp",), with_prior=False)
    err = err[~err["stopped_within_k"]]
    return err if err["run_id"].nunique() >= 2 else None


def curve_conformal(data_dir: Path, k: int, epochs: float, coverage: float) -> tuple[float, str, float]:
    """(epochs log half-width, note, MAPE % of the extrapolation errors) for an estimate extrapolated from the first
    ``k`` epochs of the run (``--curve``): split conformal on :func:`curve_errors`, grouped by configuration (the
    residuals of the static convergence model do not describe this estimate). Zero half-width and error when the
    stopping rule already fired within the given curve (``epochs <= k``); NaN without seed-study runs."""
    if epochs <= k:
        return 0.0, f"epochs interval: none needed (the stopping rule fired within the {k} epochs given)", 0.0
    err = curve_errors(data_dir, k)
    if err is None:
        return float("nan"), (f"epochs interval: none (fewer than 2 local seed-study configurations in {data_dir} "
                              f"still training after {k} epochs)"), float("nan")
    from traintime.chronos.conformal import SplitConformal
    from traintime.core.metrics import mape

    cp = SplitConformal(coverage, finite_sample=False).fit(err["epochs_measured"], err["epochs_predicted"],
                                                          err["run_id"])
    return cp.log_halfwidth, (f"epochs interval: split conformal on the {k}-epoch curve extrapolation of {len(err)} "
                              f"local seed-study runs ({cp.n_groups_} configurations; not the released regime)"), \
        mape(err["epochs_measured"], err["epochs_predicted"])


def loader_wait_ms(w: Workload, compute_ms: np.ndarray, workers: int,
                   sample_ms_224: float = LOADER_SAMPLE_MS_224) -> np.ndarray:
    """Modelled DataLoader wait per step (see module doc); 0 when the workers keep up."""
    per_batch = w.batch_size * sample_ms_224 * (w.input_px / 224.0) ** 2 / max(1, int(workers))
    return np.maximum(0.0, per_batch - np.asarray(compute_ms, dtype=float))


def pareto_front(time: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """True where no other point is at least as fast and as cheap and strictly better in one (NaN cost: False)."""
    t, c = np.asarray(time, float), np.asarray(cost, float)
    out = np.zeros(len(t), dtype=bool)
    ok = np.isfinite(t) & np.isfinite(c)
    for i in np.flatnonzero(ok):
        dom = ok & (t <= t[i]) & (c <= c[i]) & ((t < t[i]) | (c < c[i]))
        out[i] = not dom.any()
    return out


def tf32_step_ms(step32: np.ndarray, step16: np.ndarray, conv_share: np.ndarray, tf32: np.ndarray) -> np.ndarray:
    """Step time of a ``tf32`` run (32-bit, PyTorch's defaults): on a card with TF32 tensor cores (``tf32``) the
    share ``conv_share`` of the FLOPs in convolutions (``torch.backends.cudnn.allow_tf32`` is on by default; matmuls
    stay FP32) runs like a 16-bit step with both rates halved - dense TF32 is half the 16-bit matrix rate on every
    such card and FP32 tensors move twice the bytes - so ``2 x step16``, unless the 32-bit answer is faster (cuDNN
    picks the faster kernel); the rest at the 32-bit answer. Elsewhere the 32-bit answer. Physics, not fitted: no
    training row is labelled TF32 (the release's 32-bit CNN steps are too small to show it, see
    :mod:`traintime.chronos.neighbour_step`)."""
    s32, s16 = np.asarray(step32, dtype=float), np.asarray(step16, dtype=float)
    share = np.clip(np.nan_to_num(np.asarray(conv_share, dtype=float), nan=0.0), 0.0, 1.0)
    tensor = (1.0 - share) * s32 + share * np.fmin(s32, 2.0 * s16)
    return np.where(np.asarray(tf32, dtype=bool), tensor, s32)


def _step_ms(w: Workload, gpus: pd.DataFrame, step_model: Any,
             model_kwargs: dict[str, Any] | None) -> tuple[pd.DataFrame, np.ndarray]:
    """(step rows, step ms) of ``w`` on ``gpus``; a ``tf32`` run from its 32- and 16-bit answers
    (:func:`tf32_step_ms`); a ``bf16`` run takes its 16-bit answer on a card with BF16 tensor cores (the step models
    were fitted on fp32 and fp16 measurements only, and bf16 runs at fp16's tensor-core rate there; asking them for
    ``bf16`` rows left the batch extrapolation of the measured fp16 network unused, so a bf16 step beyond the largest
    measured batch grew too slowly) and its 32-bit answer on one without (before Ampere: autocast in bfloat16
    computes at about the FP32 rate there). A ``16`` run takes its 32-bit answer on a card with neither tensor cores
    nor a faster 16-bit vector rate (:func:`~traintime.core.gpudb.has_fast_fp16`: the traces' 16-bit speed-ups were
    all measured on tensor cores, and the release's P4 ran its 16-bit CNN and MLP steps a little slower than 32-bit)."""
    from dataclasses import replace

    from traintime.core.gpudb import has_tf32_bf16

    if w.precision in ("16", "bf16"):  # the 16-bit answer, and the 32-bit one on the cards without that fast rate
        rows = step_rows(replace(w, precision="16"), gpus, model_kwargs)
        step = np.array(step_model.predict(rows), dtype=float)  # a copy: changed below
        if len(slow := np.flatnonzero(~fast_16bit(w.precision, gpus))):  # their 32-bit answers only
            step[slow] = np.asarray(step_model.predict(step_rows(replace(w, precision="32"), gpus.iloc[slow],
                                                                 model_kwargs)), dtype=float)
        return rows, step
    if w.precision != "tf32":
        rows = step_rows(w, gpus, model_kwargs)
        return rows, np.asarray(step_model.predict(rows), dtype=float)
    from traintime.chronos.neighbour_frozen import KERNEL_KINDS, KERNEL_SHARE_COLUMNS

    rows = step_rows(replace(w, precision="32"), gpus, model_kwargs)
    rows16 = step_rows(replace(w, precision="16"), gpus, model_kwargs)
    share = sum((pd.to_numeric(rows[c], errors="coerce").fillna(0.0).to_numpy(dtype=float)
                 for k, c in zip(KERNEL_KINDS, KERNEL_SHARE_COLUMNS) if k != "depthwise" and c in rows.columns),
                np.zeros(len(rows)))
    step = tf32_step_ms(step_model.predict(rows), step_model.predict(rows16), share, has_tf32_bf16(gpus))
    return rows, step


def fast_16bit(precision: str, gpus: pd.DataFrame) -> np.ndarray:
    """True per card of ``gpus`` where a ``16`` or ``bf16`` run keeps the step model's 16-bit answer (:func:`_step_ms`;
    the others take their 32-bit answer): BF16 tensor cores for ``bf16`` (:func:`~traintime.core.gpudb.has_tf32_bf16`),
    a fast 16-bit rate for ``16`` (:func:`~traintime.core.gpudb.has_fast_fp16`)."""
    from traintime.core.gpudb import has_fast_fp16, has_tf32_bf16

    return has_tf32_bf16(gpus) if precision == "bf16" else has_fast_fp16(gpus)


def precision_notes(w: Workload, gpus: pd.DataFrame) -> list[str]:
    """Notes for ``predict``'s output where the asked precision runs differently from what its answer assumes on
    some of ``gpus`` (the cards :func:`_step_ms` treats apart: :func:`traintime.core.gpudb.has_tf32_bf16`,
    :func:`traintime.core.gpudb.has_fast_fp16`: :func:`fast_16bit`)."""
    from traintime.core.gpudb import has_tf32_bf16

    if w.precision == "16":
        slow = ~fast_16bit("16", gpus)
        return [(f"16-bit runs gain no arithmetic rate on cards without tensor cores or a faster 16-bit rate "
                 f"({int(slow.sum())} of these GPUs: Pascal and older, except GP100 cards such as the P100): their "
                 "32-bit step time is shown")] if slow.any() else []
    if w.precision not in ("32", "bf16", "tf32"):
        return []
    ampere = has_tf32_bf16(gpus)
    if w.precision == "tf32":
        return [("tf32 step times come from a rule on the 32- and 16-bit answers (predict_plan.tf32_step_ms, nothing "
                 "fitted); their interval is the 32-bit model's, which never saw the rule's error (coverage on public "
                 "measurements: results/tables/predict_external_eval.md)")] if ampere.any() else []
    if w.precision == "32" and w.family == "CNN" and ampere.any():
        return [(f"32-bit answers are strict FP32; PyTorch runs convolutions in TF32 by default on Ampere and newer "
                 f"cards ({int(ampere.sum())} of these GPUs): --precision tf32 estimates that")]
    if w.precision == "bf16":
        notes = [("bf16 step times are the 16-bit answers (the step models were fitted on fp32 and fp16 measurements; "
                  "bf16 runs at fp16's tensor-core rate, a few per cent slower on the consumer-GPU traces)")]
        if (slow := ~fast_16bit("bf16", gpus)).any():
            notes.append(f"bf16 on cards without BF16 tensor cores (before Ampere: {int(slow.sum())} of these "
                         "GPUs) runs at about the FP32 rate: their 32-bit step time is shown")
        return notes
    return []


def plan(w: Workload, gpus: pd.DataFrame, step_model: Any, ctx: PlanContext, epochs: float | None = None,
         workers: int | None = None, model_kwargs: dict[str, Any] | None = None) -> pd.DataFrame:
    """One row per GPU of ``gpus`` (spec rows with prices): the records of ``traintime predict --json``."""
    rows, step = _step_ms(w, gpus, step_model, model_kwargs)
    out = pd.DataFrame({"gpu": gpus["gpu"].to_numpy(), "source": gpus.get("source", "project")})
    out["step_ms"] = step
    step_q = ctx.step_q
    if hasattr(step_model, "step_log_halfwidth"):  # a model whose interval depends on the workload
        step_q = step_model.step_log_halfwidth(rows, ctx.coverage)
    e = math.exp(step_q) if step_q == step_q else float("nan")
    out["step_ms_low"], out["step_ms_high"] = step / e, step * e
    out["loader_ms"] = loader_wait_ms(w, step, workers) if workers else np.nan
    shown = step + (out["loader_ms"].fillna(0).to_numpy() if workers else 0)
    out["epoch_s"] = (w.num_samples / w.batch_size * shown / 1000.0) if w.num_samples else np.nan
    out["epochs"] = float(epochs) if epochs is not None else np.nan
    epochs_q = seed_floored_halfwidth(ctx.epochs_q, ctx.seed_q)
    eq = math.exp(epochs_q)  # NaN stays NaN
    out["epochs_low"], out["epochs_high"] = out["epochs"] / eq, out["epochs"] * eq
    out["hours"] = out["epochs"] * out["epoch_s"] / 3600.0
    hq = math.nan if math.isnan(step_q) or math.isnan(epochs_q) else combine_log_halfwidths(step_q, epochs_q)
    h = math.exp(hq) if hq == hq else float("nan")
    out["hours_low"], out["hours_high"] = out["hours"] / h, out["hours"] * h
    price = pd.to_numeric(gpus["price_per_hour_usd"], errors="coerce").to_numpy()
    out["price_per_hour_usd"] = price
    out["price_date"] = gpus.get("price_date")
    out["price_source"] = gpus.get("price_source")
    out["cost_usd"] = out["hours"] * price
    out["cost_usd_low"], out["cost_usd_high"] = out["hours_low"] * price, out["hours_high"] * price
    from traintime.measure.memory import called_too_big

    out["memory_gb"], out["card_memory_gb"], out["fits"], out["max_batch"] = memory_columns(
        w, gpus, ctx.memory_usable, model_kwargs)
    short = called_too_big(out["fits"])
    t = out["hours"].where(out["hours"].notna(), out["step_ms"]).mask(short)
    c = out["cost_usd"].where(out["hours"].notna(), out["step_ms"] * price).mask(short)
    out["pareto"] = pareto_front(t.to_numpy(), c.to_numpy())  # among the GPUs the run is not called too big for
    out["priced"] = np.isfinite(price)
    return out


def memory_columns(w: Workload, gpus: pd.DataFrame, usable: float,
                   model_kwargs: dict[str, Any] | None = None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(estimated training memory in GiB, the same for every GPU; each card's memory in GB; whether the run fits
    each GPU: True / False / None where the card's memory or the usable fraction is unknown; the largest batch
    that fits each GPU, NaN where unknown), by :mod:`traintime.measure.memory`."""
    from traintime.measure.memory import (
        fits,
        largest_batch,
        state_bytes,
        training_memory_gb,
    )

    f = static_features(w, model_kwargs)
    state = state_bytes(f)
    need = float(training_memory_gb(state, f["saved_bytes_per_sample"], w.batch_size, w.precision))
    card = pd.to_numeric(gpus["memory_gb"], errors="coerce").to_numpy(dtype=float) if "memory_gb" in gpus \
        else np.full(len(gpus), np.nan)
    top = largest_batch(state, f["saved_bytes_per_sample"], w.precision, card, usable)
    return np.full(len(gpus), need), card, fits(need, card, usable), top
