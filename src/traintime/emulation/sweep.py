"""Host sweeps: measure workloads over a (p, f) grid of restrictions, one host-latency row each.

- :func:`settings_grid`: the (p, f) grid (p: SM share in percent, f: clock in MHz or none).
- :func:`run_sweep`: every workload at every grid point under one backend; MPS points run in a
  child process per point (the thread percentage must be set before CUDA starts).
- :func:`run_mapped`: every workload at the one (p, f) the zero-shot mapping picks for a target.
- :func:`write_rows`: validate against ``HOST_LATENCY``, sort by key, write atomically. Nothing
  is appended or written before a job has finished all its points.

Child entry point (used by the MPS path; not for users)::

    python -m traintime.emulation.sweep --child job.json rows.json
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from traintime.core.errors import ConfigError, DeviceStateError
from traintime.core.io import write_csv
from traintime.emulation.restriction import Applied, Backend, Setting
from traintime.emulation.schema import HOST_LATENCY
from traintime.emulation.timer import REPLAYS, measure_workload
from traintime.emulation.workload import WorkloadSpec, check_model_name

log = logging.getLogger(__name__)

MeasureFn = Callable[..., dict[str, Any]]
ChildRunner = Callable[[Sequence[WorkloadSpec], Applied, str, int], list[dict[str, Any]]]


def settings_grid(p_grid: Iterable[float], f_grid: Iterable[float | None] | None = None) -> list[Setting]:
    """All (p, f) pairs: ``p`` in percent of the host's SMs, ``f`` in MHz (None = clock untouched).
    An empty or missing ``f_grid`` means no clock restriction."""
    ps = sorted({float(p) for p in p_grid}, reverse=True)
    fs: list[float | None] = sorted({float(f) for f in (f_grid or []) if f is not None}, reverse=True) or [None]
    if not ps:
        raise ConfigError("emulation.host.p_grid: no SM percentages given")
    return [Setting(sm_pct=p, clock_mhz=f) for p in ps for f in fs]


def workload_grid(models: Sequence[str], img_sizes: Sequence[int], batch_sizes: Sequence[int],
                  precisions: Sequence[str]) -> list[WorkloadSpec]:
    """Every (model, img, batch, precision); unknown timm names fail before anything runs."""
    for m in models:
        check_model_name(m)
    return [WorkloadSpec(m, int(s), int(b), p) for m in models for s in img_sizes for b in batch_sizes
            for p in precisions]


# --- child processes (MPS) ------------------------------------------------------------------


def _applied_to_json(applied: Applied) -> dict[str, Any]:
    return {"backend": applied.backend, "requested_sm_pct": applied.requested_sm_pct,
            "requested_clock_mhz": applied.requested_clock_mhz, "effective_sms": applied.effective_sms,
            "effective_clock_mhz": applied.effective_clock_mhz, "latency_scale": applied.latency_scale,
            "notes": list(applied.notes)}


def run_child(workloads: Sequence[WorkloadSpec], applied: Applied, host_gpu: str, replays: int = REPLAYS,
              *, python: str = sys.executable, device: str | None = None, read_clock: bool = False,
              timeout_s: float | None = None, synthetic: bool = False) -> list[dict[str, Any]]:
    """Measure ``workloads`` in a fresh Python process whose environment adds ``applied.env``.

    Returns the child's rows. A child that dies (or times out) gives one ``error`` row per
    workload naming the exit status, so a sweep goes on.
    """
    with tempfile.TemporaryDirectory(prefix="traintime-child-") as tmp:
        job, out = Path(tmp) / "job.json", Path(tmp) / "rows.json"
        job.write_text(json.dumps({
            "host_gpu": host_gpu, "replays": int(replays), "device": device, "read_clock": read_clock,
            "synthetic": bool(synthetic), "applied": _applied_to_json(applied),
            "workloads": [w.key() for w in workloads]}))
        env = {**os.environ, **applied.env}
        src = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        try:
            proc = subprocess.run([python, "-m", "traintime.emulation.sweep", "--child", str(job), str(out)],
                                  env=env, capture_output=True, text=True, timeout=timeout_s)
            status = f"exit status {proc.returncode}"
            stderr = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ""
        except subprocess.TimeoutExpired:
            status, stderr = f"timed out after {timeout_s} s", ""
        if out.exists():
            return json.loads(out.read_text())
    from traintime.emulation.timer import empty_row

    rows = []
    for w in workloads:
        row = empty_row(w, host_gpu, applied)
        row["note"] = "; ".join(x for x in (row.get("note"), f"child process failed ({status}): {stderr}") if x)
        row["synthetic"] = bool(synthetic)
        rows.append(row)
    return rows


def _child_main(job_path: str, out_path: str) -> None:
    from traintime.measure.device import load_nvml, nvml_handle

    job = json.loads(Path(job_path).read_text())
    a = job["applied"]
    seen = os.environ.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE")
    notes = list(a["notes"]) + ([f"child saw CUDA_MPS_ACTIVE_THREAD_PERCENTAGE={seen}"] if seen else [])
    applied = Applied(backend=a["backend"], requested_sm_pct=a["requested_sm_pct"],
                      requested_clock_mhz=a["requested_clock_mhz"], effective_sms=a["effective_sms"],
                      effective_clock_mhz=a["effective_clock_mhz"], latency_scale=a["latency_scale"],
                      notes=notes)
    if job.get("read_clock"):
        nv = load_nvml()
        if nv is not None:
            handle = nvml_handle(nv, 0)
            applied.clock_reader = lambda: float(nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_SM))
    rows = [measure_workload(WorkloadSpec(**w), host_gpu=job["host_gpu"], device=job.get("device"),
                             applied=applied, replays=job["replays"], synthetic=job.get("synthetic", False))
            for w in job["workloads"]]
    Path(out_path).write_text(json.dumps(rows, default=str))


# --- sweeps ---------------------------------------------------------------------------------


def run_points(workloads: Sequence[WorkloadSpec], settings: Sequence[Setting], backend: Backend, *,
               host_gpu: str, device: Any = None, replays: int = REPLAYS, synthetic: bool = False,
               measure: MeasureFn = measure_workload, child_runner: ChildRunner | None = None,
               progress: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """Measure every workload at every setting under ``backend``; one row per (setting, workload).

    The backend's session spans the whole grid (one MPS daemon); each setting is applied once and
    restored before the next. Settings whose application fails with a
    :class:`~traintime.core.errors.DeviceStateError` stop the sweep (nothing is written).
    """
    rows: list[dict[str, Any]] = []
    runner = child_runner or (lambda ws, ap, host, rep: run_child(ws, ap, host, rep, synthetic=synthetic))
    with backend:
        for i, setting in enumerate(settings, 1):
            with backend.apply(setting) as applied:
                if progress:
                    progress(f"[{i}/{len(settings)}] {applied.backend} p={setting.sm_pct:g}% "
                             f"f={setting.clock_mhz or '-'} MHz: {len(workloads)} workload(s)")
                if applied.needs_subprocess:
                    rows.extend(runner(workloads, applied, host_gpu, replays))
                else:
                    for w in workloads:
                        rows.append(measure(w, host_gpu=host_gpu, device=device, applied=applied,
                                            replays=replays, synthetic=synthetic))
    return rows


def rows_to_frame(rows: Sequence[dict[str, Any]], source: str = "host sweep") -> pd.DataFrame:
    """Validate rows against ``HOST_LATENCY``, fill the restriction ``check`` of every row
    (:func:`traintime.emulation.trust.check_rows`; a recorded failed / skipped check is kept) and
    sort them by the key (stable output)."""
    if not rows:
        raise DeviceStateError(f"{source}: no rows were measured")
    df = pd.DataFrame(list(rows))
    missing = [c for c in HOST_LATENCY.names if c not in df.columns]
    for c in missing:
        df[c] = None
    df = HOST_LATENCY.validate(df[HOST_LATENCY.names], source=source)
    from traintime.emulation.trust import check_rows

    df["check"] = check_rows(df)["check"]  # the raw file keeps every row with its restriction check
    key = list(HOST_LATENCY.key)
    sort = df.assign(_clk=df["requested_clock_mhz"].fillna(-1.0))
    order = [k if k != "requested_clock_mhz" else "_clk" for k in key]
    return sort.sort_values(order, kind="mergesort").drop(columns="_clk").reset_index(drop=True)


def write_rows(rows: Sequence[dict[str, Any]], path: str | os.PathLike[str]) -> pd.DataFrame:
    """Validate, sort and write the rows of a finished job atomically (one CSV)."""
    df = rows_to_frame(rows, source=str(path))
    write_csv(df, path)
    return df


def run_sweep(workloads: Sequence[WorkloadSpec], p_grid: Iterable[float], f_grid: Iterable[float | None] | None,
              backend: Backend, *, host_gpu: str, out_path: str | os.PathLike[str] | None = None,
              **kwargs: Any) -> pd.DataFrame:
    """:func:`run_points` over :func:`settings_grid`; returns (and writes, if ``out_path``) the table."""
    rows = run_points(workloads, settings_grid(p_grid, f_grid), backend, host_gpu=host_gpu, **kwargs)
    return write_rows(rows, out_path) if out_path is not None else rows_to_frame(rows)


# --- zero-shot mapping ----------------------------------------------------------------------

#: mapper(host_gpu, target_gpu) -> Setting (p in percent, f in MHz)
Mapper = Callable[[str, str], Setting]


def spec_mapper(specs: pd.DataFrame | None = None, sm_backend: str = "mps",
                supported_clocks: Sequence[float] | None = None, restrict_clock: bool = True) -> Mapper:
    """The paper's zero-shot mapping (:func:`traintime.emulation.mapping.spec_mapping`) as a mapper.

    ``sm_backend``: mps (integer percent), green_ctx (an SM count on the partition granularity) or
    none; ``supported_clocks``: the host's supported graphics clocks (MHz) -- f is then the
    supported clock nearest the target's boost clock, else the boost clock itself;
    ``restrict_clock=False`` leaves the clock alone. Targets with more SMs than the host cannot be
    emulated by restriction and raise :class:`~traintime.core.errors.ConfigError`.
    """
    from traintime.emulation.mapping import spec_mapping

    def mapper(host_gpu: str, target: str) -> Setting:
        m = spec_mapping(host_gpu, [target], specs, backend=sm_backend,
                         supported_clocks_mhz=supported_clocks).iloc[0]
        if not bool(m["emulable"]):
            raise ConfigError(f"target {m['gpu']} has more SMs ({m['target_sms']}) than host {m['host_gpu']} "
                              f"({m['host_sms']}): it cannot be emulated by restricting the host")
        clock = float(m["clock_mhz"]) if restrict_clock else None
        if sm_backend == "green_ctx":
            return Setting(sms=int(m["mapped_sms"]), clock_mhz=clock)
        if sm_backend == "none":
            return Setting(clock_mhz=clock)
        return Setting(sm_pct=float(m["p_pct"]), clock_mhz=clock)

    return mapper


def emulable_targets(host_gpu: str, candidates: Iterable[str], specs: pd.DataFrame | None = None) -> list[str]:
    """Canonical names of the ``candidates`` a restricted ``host_gpu`` can emulate: every GPU other
    than the host with no more SMs than it (sorted, unique). Unknown names raise
    :class:`~traintime.core.errors.UnknownNameError`."""
    from traintime.core.specs import canonical_gpu, gpu_row, load_specs

    specs = load_specs() if specs is None else specs
    host = gpu_row(host_gpu, specs)
    out = set()
    for c in candidates:
        name = canonical_gpu(str(c), specs)
        if name != host["gpu"] and int(gpu_row(name, specs)["sms"]) <= int(host["sms"]):
            out.add(name)
    return sorted(out)


def run_mapped(target: str, workloads: Sequence[WorkloadSpec], backend: Backend, *, host_gpu: str,
               mapper: Mapper | None = None, out_path: str | os.PathLike[str] | None = None,
               **kwargs: Any) -> pd.DataFrame:
    """Measure ``workloads`` at the single (p, f) the zero-shot mapping picks for ``target``."""
    mapper = mapper or spec_mapper()
    setting = mapper(host_gpu, target)
    log.info("target %s -> p=%.4g%% f=%s MHz", target, setting.sm_pct, setting.clock_mhz)
    rows = run_points(workloads, [setting], backend, host_gpu=host_gpu, **kwargs)
    for r in rows:
        r["note"] = "; ".join(x for x in (f"mapped_target={target}", r.get("note")) if x)
    return write_rows(rows, out_path) if out_path is not None else rows_to_frame(rows)


# --- jobs driven by config (emulation.host) -------------------------------------------------


def _job_setup(cfg: dict[str, Any], specs: pd.DataFrame | None) -> tuple[str, list[WorkloadSpec], Backend, Any]:
    """Resolve the host, refuse a wrong device, build workloads and the backend of a config job
    (``cfg`` already resolved by :func:`traintime.emulation.host_setup.resolved_host_config`)."""
    from traintime.emulation.backends import make_backend
    from traintime.measure.device import check_expected_device, describe_device

    workloads = workload_grid(cfg["models"], cfg["img_sizes"], cfg["batch_sizes"], cfg["precisions"])
    # the parent of MPS clients must not create a CUDA context: identify the device through NVML
    info = describe_device(init_cuda=cfg["backend"] != "mps")
    host = check_expected_device(cfg["host_gpu"], specs, info=info)
    backend = make_backend(cfg["backend"], cfg["clock_backend"], host_clock_mhz=cfg.get("host_clock_mhz"))
    return host, workloads, backend, info


def host_sweep_job(cfg: dict[str, Any], out_path: str | os.PathLike[str], specs: pd.DataFrame | None = None,
                   progress: Callable[[str], None] | None = None) -> pd.DataFrame:
    """Config-driven sweep (``emulation.host``): every workload at every (p, f); one CSV at the end."""
    from traintime.emulation.host_setup import resolved_host_config

    cfg = resolved_host_config(cfg, specs)
    host, workloads, backend, _info = _job_setup(cfg, specs)
    settings = settings_grid(cfg["p_grid"], cfg["f_grid"])
    log.info("host sweep on %s: %d workload(s) x %d setting(s), backend %s + %s", host, len(workloads),
             len(settings), cfg["backend"], cfg["clock_backend"])
    rows = run_points(workloads, settings, backend, host_gpu=host, replays=int(cfg["replays"]),
                      child_runner=_config_child_runner(cfg), progress=progress or log.info)
    return write_rows(rows, out_path)


def host_mapped_job(cfg: dict[str, Any], target: str, out_path: str | os.PathLike[str],
                    specs: pd.DataFrame | None = None) -> pd.DataFrame:
    """Config-driven run of every workload at the spec-mapped (p, f) of ``target``."""
    from traintime.emulation.backends import CombinedBackend
    from traintime.emulation.host_setup import resolved_host_config
    from traintime.emulation.nvml_clock import NvmlClockBackend

    cfg = resolved_host_config(cfg, specs)
    host, workloads, backend, _info = _job_setup(cfg, specs)
    clocks = None
    if isinstance(backend, CombinedBackend) and isinstance(backend.clock, NvmlClockBackend):
        clocks = backend.clock.supported_clocks()[1]
    mapper = spec_mapper(specs, sm_backend=cfg["backend"], supported_clocks=clocks,
                         restrict_clock=cfg["clock_backend"] != "none")
    return run_mapped(target, workloads, backend, host_gpu=host, mapper=mapper, out_path=out_path,
                      replays=int(cfg["replays"]), child_runner=_config_child_runner(cfg))


def _config_child_runner(cfg: dict[str, Any]) -> ChildRunner:
    timeout = float(cfg.get("child_timeout_s") or 3600)
    read_clock = cfg.get("clock_backend") == "nvml_clock"
    return lambda ws, ap, host, rep: run_child(ws, ap, host, rep, timeout_s=timeout, read_clock=read_clock)


if __name__ == "__main__":  # child entry point of run_child
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        _child_main(sys.argv[2], sys.argv[3])
    else:
        sys.exit("usage: python -m traintime.emulation.sweep --child JOB.json ROWS.json")
