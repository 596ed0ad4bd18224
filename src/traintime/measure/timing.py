"""Iteration-time benchmark on the local device, following the CHRONOS protocol.

Protocol (released ``epoch_time_collection/*.py``): build the model and a shuffled DataLoader,
run ``warmup`` (5) training iterations, then time ``measured`` (20) iterations. Each iteration is

* **loader wait**: ``next(iterator)`` on the host, timed with ``time.perf_counter``;
* **compute**: host-to-device copy, ``zero_grad``, forward, loss, backward, optimizer step.
  On CUDA it is timed with CUDA events and the stream is synchronised after every step; on the
  CPU with ``time.perf_counter`` (the CPU executes synchronously).

The step time is loader wait + compute. The benchmark reports the mean and the 90th percentile of
step times, the mean loader wait and the mean compute time (ms).

Mixed precision: ``precision_bits=16`` uses ``torch.autocast`` with float16 and a ``GradScaler``
on CUDA (as CHRONOS), and bfloat16 autocast on the CPU (no float16 GEMMs there).

Failures are results, not crashes: an out-of-memory error (``torch.OutOfMemoryError`` or a
RuntimeError saying "out of memory") gives a row with ``status='oom'``; a non-finite loss raises
:class:`~traintime.core.errors.TrainingError` inside :func:`benchmark_step` and becomes a row with
``status='error'`` and the message in :func:`run_benchmark`.
"""

from __future__ import annotations

import contextlib
import logging
import platform
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import numpy as np
import torch
from torch import nn

from traintime.core.errors import (
    DeviceStateError,
    TrainingError,
    UnknownNameError,
    unknown_name,
)
from traintime.measure import datasets, models
from traintime.measure.analytic import analytic_features, iteration_columns

log = logging.getLogger(__name__)

from traintime.measure.optimizers import OPTIMIZER_SPELLING, OPTIMIZERS, optimizer_label  # noqa: E402,F401


def resolve_device(spec: str = "auto") -> torch.device:
    """``auto`` -> ``cuda`` when available, else ``cpu``; ``cuda[:i]`` must be available."""
    s = str(spec).strip().lower()
    if s == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(s)
    except RuntimeError:
        raise DeviceStateError(f"device {spec!r} is not a torch device (use auto, cpu or cuda[:i])") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise DeviceStateError(f"device {spec!r} requested but CUDA is not available on this machine")
    if dev.type not in ("cpu", "cuda"):
        raise DeviceStateError(f"device {spec!r}: only cpu and cuda are supported")
    return dev


def build_optimizer(name: str, params: Any, lr: float, weight_decay: float = 1e-4) -> torch.optim.Optimizer:
    """SGD (momentum 0.9), Adam, AdamW (betas 0.9/0.999, eps 1e-8), RMSprop or Adafactor."""
    n = str(name).lower()
    if n == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=0.9, weight_decay=weight_decay)
    if n == "adam":
        return torch.optim.Adam(params, lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=weight_decay)
    if n == "adamw":
        return torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=weight_decay)
    if n == "rmsprop":
        return torch.optim.RMSprop(params, lr=lr, weight_decay=weight_decay)
    if n == "adafactor":
        return torch.optim.Adafactor(params, lr=lr, weight_decay=weight_decay)
    raise unknown_name("optimizer", str(name), OPTIMIZERS)


def autocast_context(device: torch.device, precision_bits: int) -> contextlib.AbstractContextManager[Any]:
    """Autocast for 16-bit training (float16 on CUDA, bfloat16 on CPU); a no-op at 32 bits."""
    if int(precision_bits) == 16:
        dtype = torch.float16 if device.type == "cuda" else torch.bfloat16
        return torch.autocast(device_type=device.type, dtype=dtype)
    if int(precision_bits) != 32:
        raise UnknownNameError(f"precision {precision_bits!r} is not supported (use 16 or 32)")
    return contextlib.nullcontext()


def is_oom(exc: BaseException) -> bool:
    """True for CUDA/CPU out-of-memory errors."""
    if isinstance(exc, torch.OutOfMemoryError):
        return True
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()


def grad_scaler(device: torch.device, precision_bits: int) -> torch.amp.GradScaler:
    """Loss scaler for float16 autocast on CUDA; disabled (a pass-through) otherwise."""
    return torch.amp.GradScaler("cuda", enabled=(device.type == "cuda" and int(precision_bits) == 16))


def backward_and_step(loss: torch.Tensor, optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler) -> None:
    """Backward pass and optimizer step, through ``scaler`` when it is enabled."""
    if scaler.is_enabled():
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    else:
        loss.backward()
        optimizer.step()


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass
class BenchmarkResult:
    """Per-iteration times (ms) of the measured iterations and their summaries."""

    step_ms: np.ndarray
    loader_ms: np.ndarray
    compute_ms: np.ndarray
    final_loss: float = float("nan")
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def mean_step_ms(self) -> float:
        return float(np.mean(self.step_ms))

    @property
    def p90_step_ms(self) -> float:
        return float(np.percentile(self.step_ms, 90))

    @property
    def p50_step_ms(self) -> float:
        return float(np.percentile(self.step_ms, 50))

    @property
    def std_step_ms(self) -> float:
        return float(np.std(self.step_ms))

    @property
    def mean_loader_ms(self) -> float:
        return float(np.mean(self.loader_ms))

    @property
    def mean_compute_ms(self) -> float:
        return float(np.mean(self.compute_ms))

    def summary(self) -> dict[str, float]:
        return {"step_time_ms": self.mean_step_ms, "p90_step_time_ms": self.p90_step_ms,
                "p50_step_time_ms": self.p50_step_ms, "std_step_time_ms": self.std_step_ms,
                "loader_wait_ms": self.mean_loader_ms, "compute_time_ms": self.mean_compute_ms}


def _cycle(loader: Any) -> Iterator[Any]:
    while True:
        yielded = False
        for batch in loader:
            yielded = True
            yield batch
        if not yielded:
            raise TrainingError("the data loader yields no batch (dataset smaller than one batch?)")


def benchmark_step(model: nn.Module, loader: Any, optimizer: torch.optim.Optimizer, device: torch.device,
                   precision_bits: int = 32, warmup: int = 5, measured: int = 20) -> BenchmarkResult:
    """Time ``warmup + measured`` training iterations of ``model`` on batches from ``loader``.

    Raises :class:`TrainingError` on a non-finite loss and lets out-of-memory errors propagate
    (see :func:`is_oom`). Returns the ``measured`` iterations' times.
    """
    if measured < 1 or warmup < 0:
        raise ValueError("need measured >= 1 and warmup >= 0")
    criterion = nn.CrossEntropyLoss()
    scaler = grad_scaler(device, precision_bits)
    cuda = device.type == "cuda"
    model.train()
    it = _cycle(loader)
    step, load, comp = [], [], []
    loss_value = float("nan")
    for i in range(warmup + measured):
        t0 = time.perf_counter()
        xb, yb = next(it)
        t1 = time.perf_counter()
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
        else:
            c0 = time.perf_counter()
        xb = xb.to(device, non_blocking=True)
        yb = yb.to(device, non_blocking=True).long()
        optimizer.zero_grad(set_to_none=True)
        with autocast_context(device, precision_bits):
            loss = criterion(model(xb), yb)
        backward_and_step(loss, optimizer, scaler)
        if cuda:
            end.record()
            torch.cuda.synchronize(device)
            compute_ms = float(start.elapsed_time(end))
        else:
            compute_ms = (time.perf_counter() - c0) * 1000.0
        loss_value = float(loss.detach().float().item())
        if not np.isfinite(loss_value):
            raise TrainingError(f"non-finite loss ({loss_value}) at iteration {i + 1} of the benchmark")
        if i >= warmup:
            loader_ms = (t1 - t0) * 1000.0
            load.append(loader_ms)
            comp.append(compute_ms)
            step.append(loader_ms + compute_ms)
    return BenchmarkResult(np.asarray(step), np.asarray(load), np.asarray(comp), final_loss=loss_value)


def software_versions() -> dict[str, str | None]:
    """Versions that move timings: python, torch, torchvision, timm, CUDA runtime, cuDNN."""
    out: dict[str, str | None] = {"python_version": platform.python_version(), "torch_version": torch.__version__,
                                  "cuda_runtime": torch.version.cuda}
    for mod in ("torchvision", "timm"):
        try:
            out[f"{mod}_version"] = __import__(mod).__version__
        except Exception:  # noqa: BLE001
            out[f"{mod}_version"] = None
    try:
        out["cudnn_version"] = str(torch.backends.cudnn.version()) if torch.cuda.is_available() else None
    except Exception:  # noqa: BLE001
        out["cudnn_version"] = None
    return out


def utc_timestamp() -> str:
    """ISO-8601 UTC time of a measurement (raw rows only, never in summary tables)."""
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat()


def cpu_name() -> str:
    """A short description of the host CPU (model name from /proc/cpuinfo when readable)."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# ----------------------------------------------------------------------------------------------
# One benchmark job -> one row of the canonical ``iteration`` table
# ----------------------------------------------------------------------------------------------

#: GPU spec columns copied from the spec table into a measurement row (empty on the CPU).
SPEC_COLUMNS: tuple[str, ...] = ("base_clock_mhz", "boost_clock_mhz", "memory_clock_mhz", "memory_gb",
                                 "memory_type", "memory_bus_bits", "memory_bandwidth_gbps", "bus", "cuda_cores",
                                 "sms", "tensor_cores", "fp16_gflops", "fp32_gflops", "fp64_gflops",
                                 "price_per_hour_usd")


@dataclass(frozen=True)
class BenchmarkJob:
    """One configuration to time: model, dataset, optimizer, batch size, precision (16/32 bits)."""

    model: str
    dataset: str
    optimizer: str = "sgd"
    batch_size: int = 32
    precision_bits: int = 32
    learning_rate: float = 1e-3
    img_px: int | None = None
    model_kwargs: tuple[tuple[str, Any], ...] = ()

    @property
    def job_id(self) -> str:
        return job_id(self.model, self.dataset, self.optimizer, self.batch_size, self.precision_bits)


def job_id(model: str, dataset: str, optimizer: str, batch_size: int, precision_bits: int) -> str:
    """File-name-safe id of a benchmark job: ``<model>__<dataset>__<optimizer>__b<B>__p<bits>``."""
    return f"{model}__{dataset}__{str(optimizer).lower()}__b{int(batch_size)}__p{int(precision_bits)}"


def device_columns(device: torch.device, expected_gpu: str | None = None,
                   specs: Any = None) -> dict[str, Any]:
    """Device actually used: ``gpu`` (canonical spec-table name, ``cpu`` on the CPU, the reported
    name when a GPU is not in the table), ``gpu_reported``, ``device``, spec columns (empty when
    not in the table) and ``cpu_name``. With ``expected_gpu``, refuses (DeviceStateError) to run
    on another GPU (:func:`traintime.measure.device.check_expected_device`)."""
    from traintime.core.specs import canonical_gpu, load_specs
    from traintime.measure.device import check_expected_device, describe_device
    from traintime.measure.device_request import FAKE_GPU_ENV, fake_gpu

    specs = load_specs() if specs is None else specs
    out: dict[str, Any] = {c: None for c in SPEC_COLUMNS}
    out["cpu_name"] = cpu_name()
    fake = fake_gpu() if device.type == "cpu" else None  # test-only hook: the CPU under a GPU name
    if device.type == "cpu" and not fake:
        if expected_gpu:
            raise DeviceStateError(f"expected to measure on GPU {expected_gpu!r}, but the configured device is "
                                   "the CPU")
        out.update(gpu="cpu", gpu_reported=out["cpu_name"], device="cpu", driver_version=None)
        return out
    from traintime.measure.device import DeviceInfo

    info = DeviceInfo(name=str(fake), is_cuda=True) if fake else describe_device(device.index or 0)
    if expected_gpu:
        check_expected_device(expected_gpu, specs, info)
    try:
        gpu = canonical_gpu(info.name, specs)
        row = specs.loc[specs["gpu"] == gpu].iloc[0]
        for c in SPEC_COLUMNS:
            v = row[c]
            out[c] = None if v is None or (isinstance(v, float) and np.isnan(v)) else v
    except UnknownNameError:
        log.warning("GPU %r is not in the spec table: spec columns left empty", info.name)
        gpu = info.name
    reported = f"{info.name} [fake {FAKE_GPU_ENV}: measured on the CPU]" if fake else info.name
    out.update(gpu=gpu, gpu_reported=reported, device=str(device), driver_version=info.driver_version)
    return out


def _loader(dataset: Any, batch_size: int, num_workers: int, device: torch.device, seed: int) -> Any:
    from torch.utils.data import DataLoader

    g = torch.Generator().manual_seed(seed)
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers,
                      pin_memory=(device.type == "cuda"), drop_last=True, generator=g,
                      persistent_workers=False)


def run_benchmark(job: BenchmarkJob, device: torch.device | str = "auto", data_root: str | None = None,
                  num_workers: int = 2, warmup: int = 5, measured: int = 20, seed: int = 42,
                  weight_decay: float = 1e-4, expected_gpu: str | None = None, download: bool = False,
                  synthetic_size: int | None = None, gpu_specs: str | None = None) -> dict[str, Any]:
    """Time one job and return one row of the canonical ``iteration`` table (source ``local``).

    Never raises for an out-of-memory error or a non-finite loss: those give ``status`` ``oom`` /
    ``error`` with ``error_message``. Unknown names and unavailable data raise (user errors).
    """
    dev = resolve_device(device) if isinstance(device, str) else device
    resolved = models.resolve_model(job.model)
    info = datasets.dataset_info(job.dataset, img_px=job.img_px, size=synthetic_size)
    px = job.img_px or models.model_img_px(job.model, info.img_px)
    opt_label = optimizer_label(job.optimizer)
    kwargs = dict(job.model_kwargs)
    t_start = time.perf_counter()
    feats = analytic_features(job.model, job.dataset, job.batch_size, job.optimizer, job.precision_bits,
                              img_px=px, model_kwargs=kwargs)
    log.info("%s: analytic features in %.1f s", job.job_id, time.perf_counter() - t_start)
    amp = int(job.precision_bits) == 16
    model_name = resolved.spec.chronos_name if resolved.spec is not None else resolved.name
    row: dict[str, Any] = {
        "source": "local",
        "family": resolved.family,
        "status": "ok",
        "model": model_name,
        "architecture": resolved.family,
        "dataset": info.chronos_name,
        "dataset_size": int(info.train_size),
        "num_classes": int(info.num_classes),
        "input_shape": f"(3, {px}, {px})",
        "input_channels": 3,
        "input_px": int(px),
        "optimizer": opt_label,
        "learning_rate": float(job.learning_rate),
        "batch_size": int(job.batch_size),
        "precision_bits": int(job.precision_bits),
        "amp": amp,
        "synthetic": bool(info.synthetic),
    }
    row.update(iteration_columns(feats, job.batch_size))
    from traintime.core.specs import load_specs

    row.update(device_columns(dev, expected_gpu, load_specs(gpu_specs)))  # gpu_specs: the config's table
    row.update({"host": platform.node(), **software_versions(), "num_workers": int(num_workers),
                "warmup_iterations": int(warmup), "measured_iterations": int(measured), "seed": int(seed)})
    timing = dict.fromkeys(("step_time_ms", "p90_step_time_ms", "p50_step_time_ms", "std_step_time_ms",
                            "loader_wait_ms", "compute_time_ms", "loader_ratio", "examples_per_sec",
                            "final_loss"))
    error = None
    torch.manual_seed(seed)
    ds = datasets.load_dataset(job.dataset, root=data_root, img_px=px if info.offline or job.img_px else None,
                      download=download, size=synthetic_size, seed=seed)
    loader = _loader(ds, job.batch_size, num_workers, dev, seed)
    model = opt = None
    try:
        model = models.create_model(job.model, info.num_classes, px, **kwargs).to(dev)
        opt = build_optimizer(job.optimizer, model.parameters(), job.learning_rate, weight_decay)
        t0 = time.perf_counter()
        res = benchmark_step(model, loader, opt, dev, job.precision_bits, warmup, measured)
        log.info("%s on %s: %d + %d iterations in %.1f s; step %.2f ms (loader %.2f, compute %.2f)", job.job_id,
                 dev, warmup, measured, time.perf_counter() - t0, res.mean_step_ms, res.mean_loader_ms,
                 res.mean_compute_ms)
        timing.update(res.summary())
        timing["loader_ratio"] = res.mean_loader_ms / max(1e-9, res.mean_loader_ms + res.mean_compute_ms)
        timing["examples_per_sec"] = job.batch_size / (res.mean_step_ms / 1000.0)
        timing["final_loss"] = res.final_loss
    except TrainingError as exc:
        row["status"], error = "error", str(exc)
    except Exception as exc:  # noqa: BLE001 - OOM is a result; anything else is re-raised
        if not is_oom(exc):
            raise
        row["status"], error = "oom", str(exc).strip().splitlines()[0][:300]
    finally:
        del model, opt
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    row.update(timing)
    row["error_message"] = error
    row["measured_at"] = utc_timestamp()
    return row
