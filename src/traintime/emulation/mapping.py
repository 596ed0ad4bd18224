"""Host-to-target configuration mapping: the zero-shot (p, f) choice and the oracle over a sweep.

Notation (paper, Section 3): a host GPU h is restricted to a share ``p`` of its SMs and a locked
core clock ``f``; the restricted host's step latency ``t_h(p, f)`` is the prediction for target d.

- Zero-shot mapping (:func:`spec_mapping`): ``p = S_d / S_h`` rounded to a setting the backend
  supports (MPS: integer percent; green contexts: an SM count on the compute capability's
  granularity) and ``f`` = the supported host clock nearest the target's boost clock. One (p, f)
  per host-target pair, reused for every workload.
- Oracle (:func:`oracle`): per workload, the measured (p, f) minimising |log(t_h / t_d)|; needs the
  target latency, so it is a lower bound, not a predictor.

A *sweep* is a table of host rows (schema ``host_latency``) of one host and one backend.
:func:`sweep_points` adds the grid coordinates ``p_pct`` (requested SM share, percent) and
``clock_mhz`` (requested locked clock; an unlocked row takes the host's boost clock, flagged by
``clock_locked=False``). The spec-mapped prediction takes the *measured* sweep point nearest to the
mapped (p, f): nearest ``p_pct`` first, then nearest ``clock_mhz`` among the rows at that ``p_pct``
(ties go to the lower value). A host run made directly at the mapped setting is such a point.

Feasibility (:func:`mapping_distance`, :func:`mapping_status`): the point used must be close to the
target. Its distance is measured on both axes, relative to the target:

- SM-share distance ``|p_used - p_ideal| / p_ideal`` with ``p_ideal = 100 x S_d / S_h`` (percent of
  the host's SMs the target has; so the backend's rounding counts too);
- clock distance ``|f_used - f_d| / f_d`` with ``f_d`` the target's boost clock (an unlocked host
  row runs at the host's boost clock).

A (host, backend, target) whose point is farther than ``max_sm_distance`` (config
``emulation.mapping_max_sm_distance``, default 0.10) or ``max_clock_distance``
(``emulation.mapping_max_clock_distance``, default 0.10; None = clock not checked), or whose target
has more SMs than the host, is *infeasible* (the SM-share limit applies to the SM-restricting backends
``mps`` and ``green_ctx``; a clock-only ablation keeps the whole host by design): it gets no spec-mapped prediction, and Table 1 counts it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from traintime.core.errors import ConfigError, SchemaError
from traintime.core.specs import canonical_gpu, gpu_row, load_specs
from traintime.emulation.schema import WORKLOAD_KEY


def mps_percent(target_sms: int, host_sms: int) -> int:
    """MPS active-thread percentage for ``target_sms`` on a host with ``host_sms``: nearest integer
    percent of ``100 * target_sms / host_sms``, clipped to [1, 100] (halves round up)."""
    if target_sms <= 0 or host_sms <= 0:
        raise ValueError("SM counts must be positive")
    return int(min(100, max(1, math.floor(100.0 * target_sms / host_sms + 0.5))))


def green_ctx_sms(target_sms: int, host_sms: int, compute_capability: float) -> int:
    """SM count of a green context emulating ``target_sms`` on a host with ``host_sms``: the
    partition rounding of the backend that will run it (:func:`~traintime.emulation.green_ctx.round_green_sms`)."""
    from traintime.emulation.green_ctx import round_green_sms

    return round_green_sms(target_sms, host_sms, f"{compute_capability}")


def nearest_clock(target_mhz: float, supported_mhz: Sequence[float]) -> float:
    """Supported clock nearest ``target_mhz`` (ties go to the lower clock)."""
    clocks = np.unique(np.asarray(supported_mhz, dtype=float))
    clocks = clocks[~np.isnan(clocks)]
    if clocks.size == 0:
        raise ValueError("no supported clocks")
    return float(clocks[np.argmin(np.abs(clocks - target_mhz))])  # unique() sorts: first = lower


def spec_mapping(host_gpu: str, targets: Sequence[str], specs: pd.DataFrame | None = None,
                 backend: str = "mps", supported_clocks_mhz: Sequence[float] | None = None) -> pd.DataFrame:
    """The zero-shot (p, f) of ``host_gpu`` for every target.

    Returns one row per target: ``gpu``, ``host_gpu``, ``backend``, ``target_sms``, ``host_sms``,
    ``p_pct`` (percent of host SMs), ``p_ideal_pct`` (100 x target SMs / host SMs, before the
    backend's rounding), ``mapped_sms`` (SMs the setting gives), ``target_boost_mhz``,
    ``clock_mhz`` (nearest supported clock; the target boost clock itself when
    ``supported_clocks_mhz`` is None) and ``emulable`` (target has no more SMs than the host).
    """
    specs = load_specs() if specs is None else specs
    h = gpu_row(host_gpu, specs)
    rows = []
    for t in targets:
        d = gpu_row(t, specs)
        if backend in ("mps", "analytic_clock", "none", "nvml_clock"):
            p = float(mps_percent(int(d["sms"]), int(h["sms"]))) if backend in ("mps", "analytic_clock") else 100.0
            mapped = int(round(p / 100.0 * int(h["sms"])))
        elif backend == "green_ctx":
            mapped = green_ctx_sms(int(d["sms"]), int(h["sms"]), float(h["compute_capability"]))
            p = 100.0 * mapped / int(h["sms"])
        else:
            raise ConfigError(f"unknown emulation backend {backend!r}")
        boost = float(d["boost_clock_mhz"])
        clock = boost if supported_clocks_mhz is None else nearest_clock(boost, supported_clocks_mhz)
        rows.append({"gpu": d["gpu"], "host_gpu": h["gpu"], "backend": backend,
                     "target_sms": int(d["sms"]), "host_sms": int(h["sms"]), "p_pct": p,
                     "p_ideal_pct": 100.0 * int(d["sms"]) / int(h["sms"]),
                     "mapped_sms": mapped, "target_boost_mhz": boost, "clock_mhz": clock,
                     "emulable": int(d["sms"]) <= int(h["sms"])})
    return pd.DataFrame(rows)


def sweep_points(host_rows: pd.DataFrame, specs: pd.DataFrame | None = None) -> pd.DataFrame:
    """Host rows with status ok plus grid coordinates ``p_pct``, ``clock_mhz``, ``clock_locked``."""
    specs = load_specs() if specs is None else specs
    df = host_rows[host_rows["status"] == "ok"].copy()
    df = df[df["latency_ms"].notna() & (df["latency_ms"] > 0)]
    boost = {g: float(gpu_row(g, specs)["boost_clock_mhz"]) for g in df["host_gpu"].unique()}
    df["p_pct"] = df["requested_sm_pct"].astype(float)
    locked = df["requested_clock_mhz"].notna()
    df["clock_locked"] = locked
    df["clock_mhz"] = df["requested_clock_mhz"].astype(float).where(locked, df["host_gpu"].map(boost))
    return df.reset_index(drop=True)


def _join_targets(points: pd.DataFrame, traces: pd.DataFrame) -> pd.DataFrame:
    t = traces[["gpu", *WORKLOAD_KEY, "family", "latency_ms"]].rename(columns={"latency_ms": "target_ms"})
    p = points[["host_gpu", "backend", *WORKLOAD_KEY, "p_pct", "clock_mhz", "clock_locked", "latency_ms"]]
    p = p.rename(columns={"latency_ms": "host_ms"})
    out = p.merge(t, on=list(WORKLOAD_KEY), how="inner")
    return out[out["gpu"] != out["host_gpu"]]


def landscape(points: pd.DataFrame, traces: pd.DataFrame, gpu: str, model: str, img_px: int,
              batch_size: int, precision: str) -> pd.DataFrame:
    """|log(t_host / t_target)| on the sweep grid for one target and workload.

    Returns a DataFrame indexed by ``p_pct`` (rows, ascending) with one column per ``clock_mhz``
    (ascending); cells without a measurement are NaN.
    """
    wk = (points["model"] == model) & (points["img_px"] == img_px) & (points["batch_size"] == batch_size) \
        & (points["precision"] == precision)
    tr = traces[(traces["gpu"] == gpu) & (traces["model"] == model) & (traces["img_px"] == img_px)
                & (traces["batch_size"] == batch_size) & (traces["precision"] == precision)]
    if tr.empty or tr["latency_ms"].isna().all():
        raise SchemaError(f"no target latency for {gpu} {model} {img_px}px b{batch_size} {precision}")
    target = float(tr["latency_ms"].iloc[0])
    sub = points[wk].copy()
    sub["err"] = np.abs(np.log(sub["latency_ms"] / target))
    return sub.pivot_table(index="p_pct", columns="clock_mhz", values="err", aggfunc="min").sort_index()


def oracle(points: pd.DataFrame, traces: pd.DataFrame) -> pd.DataFrame:
    """Per (host, backend, target, workload): the sweep point minimising |log(t_host / t_target)|.

    Ties go to the smaller ``p_pct``, then the lower ``clock_mhz``. Columns: host_gpu, backend,
    gpu, workload key, family, p_pct, clock_mhz, host_ms (= the oracle prediction), target_ms,
    abs_log_err.
    """
    j = _join_targets(points, traces)
    j = j[j["target_ms"].notna()].copy()
    j["abs_log_err"] = np.abs(np.log(j["host_ms"] / j["target_ms"]))
    keys = ["host_gpu", "backend", "gpu", *WORKLOAD_KEY]
    j = j.sort_values([*keys, "abs_log_err", "p_pct", "clock_mhz"], kind="mergesort")
    return j.drop_duplicates(keys, keep="first").reset_index(drop=True)


def nearest_point(points_pct: Sequence[float], points_clock: Sequence[float], p_pct: float,
                  clock_mhz: float) -> tuple[float, float]:
    """Measured (p, f) nearest to the requested one: nearest p first, then nearest f at that p
    (ties go to the lower value)."""
    pp = np.asarray(points_pct, dtype=float)
    ff = np.asarray(points_clock, dtype=float)
    ps = np.unique(pp)
    p = float(ps[np.argmin(np.abs(ps - p_pct))])
    fs = np.unique(ff[pp == p])
    f = float(fs[np.argmin(np.abs(fs - clock_mhz))])
    return p, f


#: Default largest relative distances of a usable mapping point (config keys
#: emulation.mapping_max_sm_distance / emulation.mapping_max_clock_distance).
MAX_SM_DISTANCE = 0.10
MAX_CLOCK_DISTANCE: float | None = 0.10
MAPPING_STATUSES = ("ok", "infeasible")
#: Backends that restrict SMs: only their points are held to the SM-share limit (a clock-only
#: ablation keeps the whole host by design; its SM distance is still reported).
SM_BACKENDS = ("mps", "green_ctx")


def mapping_distance(p_used: float, f_used: float, p_ideal: float, f_target: float) -> tuple[float, float]:
    """(SM-share distance, clock distance), both relative to the target (see the module doc)."""
    if p_ideal <= 0 or f_target <= 0:
        raise ValueError("the target's SM share and clock must be positive")
    return abs(p_used - p_ideal) / p_ideal, abs(f_used - f_target) / f_target


def mapping_status(points: pd.DataFrame, targets: Sequence[str], specs: pd.DataFrame | None = None,
                   max_sm_distance: float = MAX_SM_DISTANCE,
                   max_clock_distance: float | None = MAX_CLOCK_DISTANCE) -> pd.DataFrame:
    """Per (host, backend, target): the measured point the spec mapping uses and whether it is close
    enough.

    ``points``: :func:`sweep_points` rows. Columns: host_gpu, backend, gpu, p_ideal_pct,
    mapped_p_pct (the backend's setting for the target), target_boost_mhz, p_pct, clock_mhz (the point used; NaN when none), sm_distance, clock_distance,
    status (``ok`` | ``infeasible``) and reason.
    """
    if max_sm_distance is None or max_sm_distance < 0:
        raise ConfigError("emulation.mapping_max_sm_distance must be a number >= 0")
    if max_clock_distance is not None and max_clock_distance < 0:
        raise ConfigError("emulation.mapping_max_clock_distance must be >= 0 or null")
    specs = load_specs() if specs is None else specs
    rows = []
    cols = ["host_gpu", "backend", "gpu", "p_ideal_pct", "mapped_p_pct", "target_boost_mhz", "p_pct", "clock_mhz",
            "sm_distance", "clock_distance", "status", "reason"]
    if points.empty:
        return pd.DataFrame(columns=cols)
    for (host, backend), pts in points.groupby(["host_gpu", "backend"], sort=True):
        tg = sorted({canonical_gpu(t, specs) for t in targets} - {host})
        mp = spec_mapping(host, tg, specs, backend=backend, supported_clocks_mhz=pts["clock_mhz"].unique())
        for m in mp.itertuples(index=False):
            row = {"host_gpu": host, "backend": backend, "gpu": m.gpu, "p_ideal_pct": m.p_ideal_pct,
                   "mapped_p_pct": m.p_pct,
                   "target_boost_mhz": m.target_boost_mhz, "p_pct": np.nan, "clock_mhz": np.nan,
                   "sm_distance": np.nan, "clock_distance": np.nan}
            if not m.emulable:
                rows.append({**row, "status": "infeasible",
                             "reason": f"target has {m.target_sms} SMs, the host {m.host_sms}"})
                continue
            p, f = nearest_point(pts["p_pct"], pts["clock_mhz"], m.p_pct, m.clock_mhz)
            dp, df = mapping_distance(p, f, m.p_ideal_pct, m.target_boost_mhz)
            row.update(p_pct=p, clock_mhz=f, sm_distance=dp, clock_distance=df)
            why = []
            if backend in SM_BACKENDS and dp > max_sm_distance:
                why.append(f"SM share {p:.4g}% vs target {m.p_ideal_pct:.4g}% (distance {dp:.2f} > "
                           f"{max_sm_distance:g})")
            if max_clock_distance is not None and df > max_clock_distance:
                why.append(f"clock {f:g} MHz vs target {m.target_boost_mhz:g} MHz (distance {df:.2f} > "
                           f"{max_clock_distance:g})")
            rows.append({**row, "status": "infeasible" if why else "ok", "reason": "; ".join(why)})
    return pd.DataFrame(rows, columns=cols)


def spec_mapped_predictions(points: pd.DataFrame, traces: pd.DataFrame,
                            specs: pd.DataFrame | None = None, max_sm_distance: float = MAX_SM_DISTANCE,
                            max_clock_distance: float | None = MAX_CLOCK_DISTANCE) -> pd.DataFrame:
    """Zero-shot predictions: per host/backend/target, the sweep point nearest the spec mapping.

    For every workload measured on the host at that point and present in the target traces, one
    row: host_gpu, backend, gpu, workload key, family, p_pct, clock_mhz (the point used),
    mapped_p_pct, mapped_clock_mhz (the ideal setting), pred_ms (host latency), latency_ms
    (target). Infeasible targets (:func:`mapping_status`: more SMs than the host, or the nearest
    measured point farther than the distance limits) get no row.
    """
    specs = load_specs() if specs is None else specs
    out = []
    targets = sorted(traces["gpu"].unique())
    status = mapping_status(points, targets, specs, max_sm_distance, max_clock_distance)
    for (host, backend), pts in points.groupby(["host_gpu", "backend"], sort=True):
        ok = status[(status["host_gpu"] == host) & (status["backend"] == backend) & (status["status"] == "ok")]
        for m in ok.itertuples(index=False):
            p, f = m.p_pct, m.clock_mhz
            at = pts[(pts["p_pct"] == p) & (pts["clock_mhz"] == f)]
            at = at.sort_values(list(WORKLOAD_KEY)).drop_duplicates(list(WORKLOAD_KEY))
            tr = traces[traces["gpu"] == m.gpu]
            j = at[[*WORKLOAD_KEY, "latency_ms"]].rename(columns={"latency_ms": "pred_ms"}).merge(
                tr[[*WORKLOAD_KEY, "family", "latency_ms"]], on=list(WORKLOAD_KEY), how="inner")
            j = j[j["latency_ms"].notna()]
            j.insert(0, "gpu", m.gpu)
            j.insert(0, "backend", backend)
            j.insert(0, "host_gpu", host)
            j["p_pct"], j["clock_mhz"] = p, f
            j["mapped_p_pct"], j["mapped_clock_mhz"] = m.mapped_p_pct, m.target_boost_mhz
            out.append(j)
    cols = ["host_gpu", "backend", "gpu", *WORKLOAD_KEY, "family", "p_pct", "clock_mhz", "mapped_p_pct",
            "mapped_clock_mhz", "pred_ms", "latency_ms"]
    if not out:
        return pd.DataFrame(columns=cols)
    res = pd.concat(out, ignore_index=True)[cols]
    return res.sort_values(["host_gpu", "backend", "gpu", *WORKLOAD_KEY]).reset_index(drop=True)


def method_name(backend: str, main_backend: str) -> str:
    """Prediction method of a backend's spec-mapped rows: ``emulation`` for the main backend,
    ``emulation_<backend>`` for the others (ablations such as clock-only rows)."""
    return "emulation" if backend == main_backend else f"emulation_{backend}"


def host_predictions(host_rows: pd.DataFrame, targets: pd.DataFrame, main_backend: str = "mps",
                     specs: pd.DataFrame | None = None, max_sm_distance: float = MAX_SM_DISTANCE,
                     max_clock_distance: float | None = MAX_CLOCK_DISTANCE) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Spec-mapped and oracle predictions from host rows (schema host_latency).

    ``targets``: target rows already filtered for metrics. Returns (predictions with a ``method``
    column: :func:`method_name` for the spec-mapped rows, ``emulation_oracle`` for the oracle of
    the main backend; oracle table). Rows with backend ``none`` (unrestricted) are not a mapping.
    Both frames are empty when there are no usable rows.
    """
    specs = load_specs() if specs is None else specs
    pts = sweep_points(host_rows, specs) if not host_rows.empty else host_rows
    pts = pts[pts["backend"] != "none"] if not pts.empty else pts
    if pts.empty:
        return pd.DataFrame(), pd.DataFrame()
    tgt = targets[targets["latency_ms"].notna()]
    spec = spec_mapped_predictions(pts, tgt, specs, max_sm_distance, max_clock_distance)
    spec["method"] = [method_name(b, main_backend) for b in spec["backend"]]
    orc = oracle(pts[pts["backend"] == main_backend], tgt)
    orc_pred = orc.rename(columns={"host_ms": "pred_ms", "target_ms": "latency_ms"}).assign(method="emulation_oracle")
    # Empty frames are left out of the concat (pandas would stop ignoring their all-NA columns' dtypes).
    frames = [f for f in (spec, orc_pred) if not f.empty]
    cols = spec.columns.union(orc_pred.columns, sort=False)
    pred = spec if orc.empty else pd.concat(frames, ignore_index=True).reindex(columns=cols)
    return pred, orc
