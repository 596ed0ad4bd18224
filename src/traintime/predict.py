"""Predict the training time and cost of a new job on any GPU of the spec table (CHRONOS end to end).

Usage, in the spirit of the paper's example::

    from traintime.predict import TrainingTimePredictor

    p = TrainingTimePredictor(model="vgg16", dataset="CIFAR100", optimizer="SGD", batch_size=32,
                              learning_rate=0.001, precision=16, gpu="T4")
    epoch_s = p.predict_epoch_time()           # seconds per epoch on the T4
    epochs = p.predict_number_of_epochs()      # epochs to converge
    est = p.estimate()                          # hours, cost, intervals
    table = p.ranking()                         # every GPU of the spec table, by cost and by time

What it uses (nothing is downloaded):

* the step-time model the workflow saved (``results/models/iteration/iteration_model.joblib``,
  :class:`traintime.chronos.estimators.IterationTimePredictor`) on canonical ``iteration`` rows built from
  the analytic features of the configuration (:mod:`traintime.measure.analytic`, meta device) and the GPU
  name (its specifications are joined from the spec table);
* the convergence model (``results/models/convergence/<method>.joblib``; default ``nested``, the candidate
  chosen per family by inner leave-one-model-out CV) on a canonical ``convergence`` row of static descriptors;
  when that model reads probe features (``chronos_rf``, say), they come from one forward + backward pass of the
  freshly initialised model on one mini-batch, run **on this machine** (CPU or GPU; the target GPU need not be
  present), and otherwise no probe runs;
* epochs x N / B x step time = hours; x the spec table's price per GPU-hour = cost.

Uncertainty: the cross-validated MAPE of each model (from the workflow's out-of-fold predictions)
and intervals built as ``traintime predict`` builds them (:mod:`traintime.predict_ranking`): split conformal
on |log(measured / predicted)| of the out-of-fold predictions of the same family, grouped by held-out
fold, symmetric in log around the prediction. The protocol matches the situation: step time
``grouped_random`` (configuration seen), ``logo`` (GPU not in the timing data) or ``lomo`` (model not in
it); epochs ``cv`` or ``lomo``, floored at the seed spread. The interval of the total: the two log
half-widths in quadrature.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from traintime.core.errors import (
    DataUnavailableError,
    SchemaError,
    TraintimeError,
    UnknownNameError,
)
from traintime.data.chronos_convergence import PROBE_COLUMNS
from traintime.predict_ranking import RankingMixin

log = logging.getLogger(__name__)

#: early-stopping settings of the released families (convergence rows need them)
FAMILY_STOPPING: dict[str, dict[str, float | int]] = {
    "CNN": {"patience": 7, "min_delta": 5e-4, "max_epochs": 200},
    "MLP": {"patience": 5, "min_delta": 1e-4, "max_epochs": 250},
    "Transformer": {"patience": 5, "min_delta": 1e-4, "max_epochs": 120},
}


def convergence_frame(family: str, model: str, dataset: str, optimizer: str, learning_rate: float, batch_size: int,
                      precision: int, num_classes: int, dataset_size: int | None, param_count: int,
                      arch: dict[str, Any], probe_cols: dict[str, float], stop: dict[str, Any],
                      seed: int = 42) -> pd.DataFrame:
    """The canonical ``convergence`` row (one-row frame) of a configuration: released spellings of ``model`` /
    ``dataset`` / ``optimizer``, ``arch`` (MLP descriptors; empty otherwise), ``probe_cols``
    (:data:`~traintime.data.chronos_convergence.PROBE_COLUMNS`, NaN where no probe ran) and the early-stopping rule ``stop`` (:func:`stopping_settings`)."""
    row = {"family": family, "model": model, "dataset": dataset,
           "task": "vision_cls" if family == "Transformer" else None, "optimizer": optimizer,
           "learning_rate": float(learning_rate), "batch_size": int(batch_size),
           "precision_bits": int(precision) if family != "Transformer" else None,
           "num_classes": int(num_classes) if family != "Transformer" else None,
           "dataset_size": int(dataset_size) if dataset_size else None, "param_count": int(param_count),
           **{k: arch.get(k) for k in ("embed_dim", "depth", "patch_size", "token_mlp_dim", "channel_mlp_dim")},
           **{c: probe_cols.get(c, float("nan")) for c in PROBE_COLUMNS}, **stop, "seed": int(seed),
           "source": "predict", "raw_row": 1}
    return pd.DataFrame([row])


def curve_stop_epoch(curve: list[float], stop: Mapping[str, Any], model_epochs: float) -> tuple[float, str]:
    """(stopping epoch of the run's early-stopping rule ``stop`` replayed on the extrapolated validation ``curve``,
    note naming it beside the convergence model's own ``model_epochs``): how a partial curve replaces the estimate."""
    from traintime.chronos.curves import predict_stop_epoch

    epoch = predict_stop_epoch(curve, int(stop["patience"]), float(stop["min_delta"]), int(stop["max_epochs"]))
    return float(epoch), (f"epochs from the {len(curve)}-epoch validation curve given: {epoch} (extrapolated, patience "
                          f"{int(stop['patience'])}, min_delta {float(stop['min_delta']):g}); the convergence model "
                          f"alone predicts {model_epochs:.1f}")


def stopping_settings(family: str, data_dir: Path, chronos_model: str | None = None,
                      overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """Early-stopping rule of a run (``patience``, ``min_delta``, ``max_epochs``): the most common among the
    released runs of the same model in ``<data_dir>/convergence.csv``, else of its family, else
    :data:`FAMILY_STOPPING`; the run's own settings (``overrides``, entries that are not None) win."""
    stop: dict[str, Any] = dict(FAMILY_STOPPING[family])
    conv_path = Path(data_dir) / "convergence.csv"
    if conv_path.exists():
        from traintime.data.chronos_convergence import load_convergence

        table = load_convergence(conv_path)
        same = table[table["model"] == chronos_model]
        fam = same if not same.empty else table[table["family"] == family]
        for k in stop:
            if not fam.empty:
                stop[k] = fam[k].mode().iloc[0]
    stop.update({k: v for k, v in (overrides or {}).items() if v is not None})
    return stop


class TrainingTimePredictor(RankingMixin):
    """Training time and cost of one configuration on the GPUs of the spec table (see module doc).

    Parameters
    ----------
    model, dataset, optimizer : names (``traintime.measure.models``; optimizer sgd/adam/adamw/...).
    batch_size, learning_rate, precision : the run (precision 16 = mixed precision, or 32).
    gpu : GPU of :meth:`estimate` (canonical name or alias of the spec table).
    models_dir, data_dir : where the workflow saved its models and canonical tables.
    probe_batch_size : samples of the probe mini-batch.
    probe_dataset : ``None`` probes on the dataset itself (must be available locally); ``synthetic`` /
        ``digits`` probe on stand-in data of the same shape and class count (reported in ``notes``).
    device : where the probe runs (``auto``: CUDA if available, else CPU).
    coverage : coverage of the intervals (0-1).
    curve : optional validation losses of the first epochs of this very run (a partial learning
        curve, epoch 1 first). The epochs estimate is then the stopping epoch of the run's
        early-stopping rule replayed on the curve extrapolated by :mod:`traintime.chronos.curves`
        (``exp`` family, generic prior), instead of the convergence model's; a note records both.
        The epochs interval then comes from the errors of that extrapolation on the local seed-study
        runs (:func:`traintime.predict_plan.curve_errors`), not from the convergence model's residuals.
    stopping : the run's own early-stopping rule (``patience``, ``min_delta``, ``max_epochs``; None
        entries keep :func:`stopping_settings`' released default).
    """

    def __init__(self, model: str, dataset: str, optimizer: str = "sgd", batch_size: int = 64,
                 learning_rate: float = 0.01, precision: int = 32, gpu: str = "T4",
                 models_dir: str | Path = "results/models", data_dir: str | Path = "results/data",
                 iteration_model: str | Path | None = None, convergence_model: str | Path | None = None,
                 probe_batch_size: int | None = None, probe_dataset: str | None = None, device: str = "auto",
                 data_root: str | Path = "data", download: bool = False, coverage: float = 0.8,
                 seed: int = 42, specs: pd.DataFrame | None = None,
                 model_kwargs: dict[str, Any] | None = None, img_px: int | None = None,
                 num_classes: int | None = None, num_samples: int | None = None,
                 convergence_method: str = "nested",
                 curve: list[float] | None = None, stopping: dict[str, Any] | None = None) -> None:
        from traintime.core.specs import canonical_gpu, load_specs
        from traintime.measure.datasets import dataset_info
        from traintime.measure.models import model_img_px, resolve_model
        from traintime.measure.timing import optimizer_label

        self.specs = load_specs() if specs is None else specs
        self.resolved = resolve_model(model)
        self.info = dataset_info(dataset)
        overrides = {k: v for k, v in (("num_classes", num_classes), ("train_size", num_samples)) if v is not None}
        if overrides:
            from dataclasses import replace

            self.info = replace(self.info, **overrides)
        self.optimizer = optimizer_label(optimizer)
        self.gpu = canonical_gpu(gpu, self.specs)
        from traintime import predict_checks as chk

        bf16 = str(precision).lower() == "bf16"
        if bf16:
            precision = 16  # a 16-bit run for the convergence row (the release knows 16 / 32 only)
        if chk.check_int("--precision", precision, 0, 64) not in (16, 32):
            raise UnknownNameError(f"precision {precision!r} is not supported (use 16, bf16 or 32)")
        #: precision of the run as asked (32 | 16 | bf16); the probe autocasts to it on CUDA
        self.precision_label = "bf16" if bf16 else str(int(precision))
        batch_size = chk.check_batch_size(batch_size, int(self.info.train_size), self.info.chronos_name)
        learning_rate = chk.check_float("--learning-rate", learning_rate, 0.0, 100.0, lo_open=True)
        coverage = chk.check_float("--coverage", coverage, 0.0, 1.0, lo_open=True, hi_open=True)
        if probe_batch_size is not None:
            probe_batch_size = chk.check_int("--probe-batch-size", probe_batch_size, 1, chk.MAX_PROBE_BATCH_SIZE)
        seed = chk.check_int("seed", seed, 0, chk.MAX_SEED)
        model_kwargs = chk.check_model_kwargs(model, dict(model_kwargs or {}))
        chk.check_dir("--data-dir", data_dir)
        self.model_name = model
        self.batch_size = int(batch_size)
        self.learning_rate = float(learning_rate)
        self.precision = int(precision)
        self.img_px = int(img_px) if img_px else model_img_px(model, self.info.img_px)
        self.models_dir = Path(models_dir)
        self.data_dir = Path(data_dir)
        self.iteration_model_path = Path(iteration_model) if iteration_model else \
            self.models_dir / "iteration" / "iteration_model.joblib"
        self.convergence_model_path = Path(convergence_model) if convergence_model else None
        #: the probe runs with the run's own batch unless told otherwise
        self.probe_batch_size = int(probe_batch_size) if probe_batch_size else self.batch_size
        self.convergence_method = str(convergence_method)
        self.probe_dataset = probe_dataset
        self.device = device
        self.data_root = Path(data_root)
        self.download = download
        self.coverage = float(coverage)
        self.seed = int(seed)
        self.model_kwargs = dict(model_kwargs or {})
        self.curve = None if curve is None else [float(v) for v in curve]
        self.stopping = dict(stopping or {})
        if self.curve is not None and (not self.curve or not all(math.isfinite(v) and v > 0 for v in self.curve)):
            raise TraintimeError(f"curve: validation losses must be positive numbers, got {curve!r}")
        self.notes: list[str] = chk.training_range_notes(self.data_dir, self.family, self.batch_size,
                                                         self.learning_rate)
        self._iter_model: Any = None
        self._conv_model: Any = None
        self._feats: dict[str, Any] | None = None
        self._probe: Any = None
        self._epochs: float | None = None
        self._steps: pd.Series | None = None
        # The saved convergence model is loaded (and a missing, corrupt or foreign file refused) up
        # front, before any probe; the step-time model only when a step time is asked for.
        self._convergence_model()

    # ----- names ------------------------------------------------------------------------------
    @property
    def chronos_model(self) -> str:
        return self.resolved.spec.chronos_name if self.resolved.spec is not None else self.resolved.name

    @property
    def family(self) -> str:
        return self.resolved.family

    def describe(self) -> str:
        return (f"{self.chronos_model} on {self.info.chronos_name}, {self.optimizer}, batch {self.batch_size}, "
                f"lr {self.learning_rate:g}, {self.precision}-bit")

    # ----- models -----------------------------------------------------------------------------
    def _iteration_model(self) -> Any:
        if self._iter_model is None:
            from traintime.chronos.estimators import load_iteration_model

            self._iter_model = load_iteration_model(self.iteration_model_path)
        return self._iter_model

    def _convergence_model(self) -> Any:
        if self._conv_model is None:
            from traintime.chronos.convergence import ConvergencePredictor

            path = self.convergence_model_path
            if path is None:  # the configured method (config: chronos_convergence.final_method), by name
                path = self.models_dir / "convergence" / f"{self.convergence_method}.joblib"
                self.convergence_model_path = path
            self._conv_model = ConvergencePredictor.load(str(path))
        return self._conv_model

    # ----- iteration rows ---------------------------------------------------------------------
    def _features(self) -> dict[str, Any]:
        if self._feats is None:
            from traintime.measure.analytic import analytic_features

            self._feats = analytic_features(self.model_name, self.info.name, self.batch_size, self.optimizer,
                                            self.precision, img_px=self.img_px, model_kwargs=self.model_kwargs)
        return self._feats

    def iteration_rows(self, gpus: list[str]) -> pd.DataFrame:
        """Canonical ``iteration`` rows of this configuration on ``gpus`` (no measured columns)."""
        from traintime.data.chronos import config_keys
        from traintime.measure.analytic import iteration_columns

        f = self._features()
        base = {"source": "predict", "family": self.family, "status": "ok", "model": self.chronos_model,
                "architecture": self.family, "dataset": self.info.chronos_name,
                "dataset_size": int(self.info.train_size), "num_classes": int(self.info.num_classes),
                "input_shape": f"(3, {self.img_px}, {self.img_px})", "input_channels": 3,
                "input_px": int(self.img_px), "optimizer": self.optimizer, "learning_rate": self.learning_rate,
                "batch_size": self.batch_size, "precision_bits": self.precision, "amp": self.precision == 16,
                **iteration_columns(f, self.batch_size)}
        spec = self.specs.set_index("gpu")
        rows = []
        for g in gpus:
            r = dict(base, gpu=g, gpu_reported=g)
            for c in ("base_clock_mhz", "boost_clock_mhz", "memory_clock_mhz", "memory_gb", "memory_type",
                      "memory_bus_bits", "memory_bandwidth_gbps", "bus", "cuda_cores", "sms", "tensor_cores",
                      "fp16_gflops", "fp32_gflops", "fp64_gflops", "price_per_hour_usd"):
                r[c] = spec.loc[g, c] if c in spec.columns else None
            rows.append(r)
        df = pd.DataFrame(rows)
        df["config_key"] = config_keys(df)
        df["row_id"] = ["predict:" + k for k in df["config_key"]]
        return df

    def predict_step_ms(self, gpus: list[str] | None = None) -> pd.Series:
        """Predicted ms per training step on each GPU (index: canonical GPU names)."""
        gpus = list(self.specs["gpu"]) if gpus is None else gpus
        model = self._iteration_model()
        rows = self.iteration_rows(gpus)
        family = self.family
        if family not in model.models:
            raise TraintimeError(f"the saved step-time model has no {family} family (it has "
                                 f"{', '.join(model.families)})")
        try:
            pred = model.predict(rows, specs=self.specs)
        except SchemaError as exc:
            if family == "CNN" or "CNN" not in model.models:
                raise
            # an unregistered timm/torchvision model whose family descriptors are unknown
            note = (f"WARNING family: {self.chronos_model}: {family} descriptors unavailable ({exc}); step time "
                    "from the CNN model on generic layer statistics")
            if note not in self.notes:
                self.notes.append(note)
            rows["family"] = "CNN"
            pred = model.predict(rows, specs=self.specs)
        return pd.Series(np.asarray(pred, dtype=float), index=gpus, name="step_ms")

    # ----- convergence row ---------------------------------------------------------------------
    def _probe_data(self) -> Any:
        from traintime.measure.datasets import dataset_info, load_dataset

        if self.probe_dataset:
            stand_in = dataset_info(self.probe_dataset)
            if stand_in.synthetic:
                note = (f"probe on synthetic Gaussian images ({self.img_px} px, {self.info.num_classes} classes) "
                        f"instead of {self.info.chronos_name}")
            else:
                note = (f"probe on {stand_in.name} images (upsampled to {self.img_px} px, labels 0-"
                        f"{stand_in.num_classes - 1} of a {self.info.num_classes}-way head) instead of "
                        f"{self.info.chronos_name}")
            if note not in self.notes:
                self.notes.append(note)
            return load_dataset(stand_in.name, img_px=self.img_px, seed=self.seed,
                                num_classes=self.info.num_classes if stand_in.synthetic else None,
                                size=max(2 * self.probe_batch_size, 256))
        try:
            return load_dataset(self.info.name, root=self.data_root,
                                img_px=self.img_px if self.img_px != self.info.img_px else None,
                                download=self.download, seed=self.seed)
        except DataUnavailableError as exc:
            raise DataUnavailableError(f"{exc} (or probe on stand-in data: --probe-dataset synthetic)") from None

    def run_probe(self) -> Any:
        """The one-batch probe of the freshly initialised model on this machine (cached)."""
        if self._probe is None:
            import torch

            from traintime.measure.models import create_model
            from traintime.measure.probe import probe, probe_batch
            from traintime.measure.timing import resolve_device

            dev = resolve_device(self.device)
            ds = self._probe_data()
            torch.manual_seed(self.seed)
            net = create_model(self.model_name, self.info.num_classes, self.img_px, **self.model_kwargs).to(dev)
            x, y = probe_batch(ds, self.probe_batch_size, seed=self.seed)
            import contextlib

            cast: Any = contextlib.nullcontext()
            self._probe_precision = "32"
            if self.precision_label != "32" and dev.type == "cuda":
                dtype = torch.bfloat16 if self.precision_label == "bf16" else torch.float16
                cast = torch.autocast("cuda", dtype=dtype)
                self._probe_precision = self.precision_label
            with cast:
                self._probe = probe(net, x.to(dev), (y % self.info.num_classes).to(dev), ntk="none")
            self._probe_device = str(dev)
        return self._probe

    @property
    def needs_probe(self) -> bool:
        """Whether the convergence model reads a probe feature (:func:`traintime.chronos.convergence.reads_probe`):
        only then does an epochs estimate run the probe."""
        return bool(self._convergence_model().reads_probe)

    @property
    def probe_ran(self) -> bool:
        return self._probe is not None

    @property
    def convergence_choice(self) -> str:
        """``family: estimator`` per family of a ``nested`` convergence model (empty for any other)."""
        return self._convergence_model().chosen_text()

    def convergence_row(self) -> pd.DataFrame:
        """The canonical ``convergence`` row of this configuration: probe features from this machine when the
        convergence model reads them, else empty (no probe run; the parameter count from the model's structure)."""
        if not self.needs_probe:
            return self._convergence_frame(int(self._features()["param_count"]), {})
        pr = self.run_probe()
        return self._convergence_frame(int(pr.param_count), {
            "gradient_norm_log10": pr.gradient_norm_log10, "ntk_trace_proxy_log10": pr.ntk_trace_proxy_log10,
            "initial_loss_log10": pr.initial_loss_log10})

    def _convergence_frame(self, param_count: int, probe_cols: dict[str, float]) -> pd.DataFrame:
        from traintime.measure.models import model_arch

        arch = model_arch(self.model_name, self.img_px, **self.model_kwargs) if self.family == "MLP" else {}
        return convergence_frame(self.family, self.chronos_model, self.info.chronos_name, self.optimizer,
                                 self.learning_rate, self.batch_size, self.precision, self.info.num_classes,
                                 self.info.train_size, param_count, arch, probe_cols,
                                 stopping_settings(self.family, self.data_dir, self.chronos_model, self.stopping),
                                 self.seed)

    def predict_number_of_epochs(self) -> float:
        """Predicted epochs to converge (T_conv)."""
        if self._epochs is None:
            row = self.convergence_row()
            self._epochs = float(self._convergence_model().predict(row)[0])
            if self.curve is not None:
                self._epochs, note = curve_stop_epoch(self.curve, row.iloc[0], self._epochs)
                self.notes.append(note)
        return self._epochs

    def predict_epoch_time(self, gpu: str | None = None) -> float:
        """Predicted seconds per epoch (N / B x step time) on ``gpu`` (default: the configured GPU)."""
        from traintime.core.specs import canonical_gpu

        g = canonical_gpu(gpu, self.specs) if gpu else self.gpu
        step = float(self.predict_step_ms([g]).iloc[0])
        return self.info.train_size / self.batch_size * step / 1000.0

    def probe_summary(self) -> dict[str, Any]:
        """What the probe measured; all empty (``device`` says why) when the convergence model reads no probe
        feature, so none was run."""
        if not self.needs_probe:
            return {"probe_batch_size": None, "device": "none (no probe: the convergence model reads no probe feature)",
                    "probe_precision": None, "initial_loss": None, "grad_norm": None, "probe_time_s": None}
        pr = self.run_probe()
        return {"probe_batch_size": pr.probe_batch_size, "device": getattr(self, "_probe_device", ""),
                "probe_precision": getattr(self, "_probe_precision", "32"),
                "initial_loss": pr.initial_loss, "grad_norm": pr.grad_norm, "probe_time_s": pr.probe_time_s}

    def trained_families(self) -> list[str] | None:
        """Families the saved convergence model was trained on (None when it does not say)."""
        m = self._convergence_model()
        fams = m.metadata.get("training_runs_per_family")
        if fams:
            return sorted(map(str, fams))
        models = getattr(getattr(m, "estimator", None), "models_", None)
        return sorted(map(str, models)) if isinstance(models, dict) else None
