"""Step time from the nearest measured workloads, smooth in the GPU specs: the prediction side (numpy only).

The model (fitted by :class:`traintime.chronos.neighbour_step.NeighbourStepTime`, frozen as JSON at
``<models-dir>/steptime/neighbour_model.json`` and read here) is, per row (one workload on one GPU),

``log step_ms = log roofline_assumed + (h - h_mean) . beta + u(workload)``

* ``roofline_assumed``: the roofline of :mod:`traintime.chronos.roofline_step` with its nominal constants
  (0.40 / 0.60 / 5 us): the physics that moves the time with FLOPs, bytes, peak and bandwidth. The peak is the
  FP32 one at every precision: the spec table's 16-bit column mixes tensor-core and plain rates between cards
  (T4 8x its FP32 rate, the RTX cards 1x), so a 16-bit workload's speed-up is learnt from its measured rows (its
  own efficiency ``u`` and the 16-bit x peak term), not read from that column;
* ``h``: hardware features (:data:`HARDWARE_SETS`): log10 FP32 peak GFLOP/s, log10
  memory GB/s, each also times the standardised work per kernel and intensity of the workload, the peak
  times the 16-bit flag, optionally log10 of the SM count, also times the work per kernel, and optionally log10
  of the L2 cache size, also times the intensity, and optionally (``*_matrix`` sets) log10 of the dense 16-bit
  matrix (tensor-core) peak times the 16-bit flag (:func:`traintime.core.gpudb.matrix_fp16_gflops`: derived from the
  compute capability, SMs and clock, unlike the spec table's mixed 16-bit column). ``beta`` is estimated *within* workloads (how one workload's time changes from GPU
  to GPU), so the model is log-linear - smooth - in the hardware axes: a new card moves the answer
  continuously instead of jumping a tier as tree splits on spec values do;
* optionally (``slopes``) a measured workload's own deviation ``gamma`` from the coefficients of log peak and log
  bandwidth, ridge-shrunk toward 0 and fitted on its rows only: ``+ (h - h_mean(workload))[:2] . gamma``;
* ``u``: the workload's own log efficiency relative to that physics, the mean residual of its measured rows.
  A workload that was measured on some GPU uses its own ``u``; any other workload takes ``trend(z)`` plus the
  distance-weighted mean residual ``u - trend`` of its ``k`` nearest measured workloads, ``z`` being its standardised
  hardware-free descriptors (:data:`DESCRIPTORS`: FLOPs, activations and work per layer per sample, batch, depth,
  parameters, input size, arithmetic intensity, 16-bit, transformer, and ``chronos_host``: whether the CHRONOS
  release's hosts measured it (:data:`HOST_SOURCE`). Their large fixed cost per step belongs to the host, not to the
  workload: a workload of the traces looks for neighbours among the traces and the trend carries the hosts'
  difference. A ``traintime predict`` query has no source and is answered as the traces' host measured, so a
  workload measured only by CHRONOS is, for predict, a workload not measured on that host. By hand on the grouped
  folds (three trace input sizes, fixed choices): leave one model out, traces 27.1 -> 23.0 %, CHRONOS 42.6 -> 41.2 %;
  leave one GPU out unchanged (a measured workload keeps its own ``u``). The same model at another batch is a near
  neighbour; descriptor set ``kernel_mix`` adds the kernel mix, the square roots of the shares of the forward FLOPs
  in 1x1, 3x3, depthwise and grouped convolutions, :data:`KERNEL_FEATURES`). ``trend`` is a ridge regression of the
  measured workloads' ``u`` on ``z`` (the global drift of efficiency with, say, intensity or depth, which neighbours
  alone miss for a model unlike any measured one), or zero (plain kNN; frozen files written before the trend
  existed). Both are looked up at the descriptors clipped to
  the measured range (outside it - a larger batch or model than any measured - the efficiency stays that of the
  range's edge, and the time grows with the roofline's work). A batch beyond the largest measured one of the
  workload's network (``batch_edge``, :data:`BATCH_EDGE_RULES`) takes, by default (``affine``), the straight line
  through the model's times at the network's two largest measured batches (a network measured at one batch keeps
  the edge of all data: :func:`traintime.chronos.neighbour_batch.affine_beyond_edge`); frozen
  files written before that rule keep theirs (``global``: the edge of all data, as above; ``network``: the
  efficiency at its own network's edge, :func:`traintime.chronos.neighbour_batch.batch_edge`). The distance to the nearest measured workload says
  how far the answer is from anything measured.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from traintime.chronos.roofline_frozen import roofline_terms
from traintime.core.memo import memoized_on_arrays, memoized_on_frame

#: hardware-free workload descriptors computed by :func:`workload_features`: per-sample work, activations and shape of
#: the model, input size and batch (the kNN space of frozen files that name no ``knn_features``)
WORKLOAD_FEATURES: tuple[str, ...] = ("log_flops_per_sample", "log_batch", "log_act_per_sample", "log_layers",
                                      "log_params", "log_input_px", "half", "transformer", "chronos_host")
#: data source whose hosts measured a row (column ``source``), flagged by the ``chronos_host`` descriptor: the CHRONOS
#: release's cloud hosts add a large fixed cost per step that the traces' host does not; a row without a source (a
#: ``traintime predict`` query) is answered as the traces' host measured
HOST_SOURCE = "chronos"
#: descriptors that change with the batch of the same network (see :mod:`traintime.chronos.neighbour_batch`)
BATCH_DESCRIPTORS: tuple[str, ...] = ("log_batch", "log_intensity", "log_flops_per_layer")
#: what a batch beyond its network's largest measured batch gets (``batch_edge``; :func:`neighbour_predict`)
BATCH_EDGE_RULES: tuple[str, ...] = ("affine", "global", "network")
#: further descriptors the hardware interactions use (work per kernel, arithmetic intensity of the step)
INTERACTION_FEATURES: tuple[str, ...] = ("log_flops_per_layer", "log_intensity")
#: the base descriptors, standardised together: the kNN and trend space (:data:`WORKLOAD_FEATURES` first)
DESCRIPTORS: tuple[str, ...] = WORKLOAD_FEATURES + INTERACTION_FEATURES
#: convolution kinds of the kernel mix (:mod:`traintime.measure.analytic`'s ``flops_<kind>_frac``)
KERNEL_KINDS: tuple[str, ...] = ("1x1", "3x3", "depthwise", "grouped")
#: optional step-row columns: share of the forward FLOPs in convolutions of each kind (a missing column or value counts
#: as 0: no convolution of that kind, as in the release's MLP and Transformer rows)
KERNEL_SHARE_COLUMNS: tuple[str, ...] = tuple(f"flops_share_{k}" for k in KERNEL_KINDS)
#: descriptors of the kernel mix: square roots of those shares (a few % of depthwise FLOPs already slows a step)
KERNEL_FEATURES: tuple[str, ...] = tuple(f"sqrt_share_{k}" for k in KERNEL_KINDS)
#: named descriptor sets (``descriptors=`` of the estimator; the nested one chooses by inner CV by model): the base
#: descriptors, or also the kernel mix (depthwise and grouped convolutions run far below the dense ones' efficiency)
DESCRIPTOR_SETS: dict[str, tuple[str, ...]] = {"base": DESCRIPTORS, "kernel_mix": DESCRIPTORS + KERNEL_FEATURES}
#: hardware features of the within-workload regression, computed by :func:`hardware_features`
HARDWARE_FEATURES: tuple[str, ...] = ("log_peak", "log_bandwidth", "log_peak_x_kernel", "log_bandwidth_x_kernel",
                                      "log_peak_x_intensity", "log_bandwidth_x_intensity", "log_peak_x_half",
                                      "log_sms", "log_sms_x_kernel", "log_l2", "log_l2_x_intensity",
                                      "log_matrix_x_half")
#: named hardware feature sets (``hardware=`` of the estimator; the nested one chooses between them by inner CV):
#: peak and bandwidth only, also the SM count (small kernels do not fill a GPU with many SMs), also the L2 cache
#: (Ampere RTX 3-6 MB, Ada / Blackwell 24-96 MB: a large L2 keeps more of a low-intensity step off DRAM), or both;
#: each also with the 16-bit matrix peak (``_matrix``: tensor cores set a 16-bit step's speed-up, 2x on GeForce cards,
#: 4-16x on data-center ones)
_BASE_SETS: dict[str, tuple[str, ...]] = {
    "peak_bandwidth": HARDWARE_FEATURES[:7],
    "peak_bandwidth_sms": HARDWARE_FEATURES[:9],
    "peak_bandwidth_l2": HARDWARE_FEATURES[:7] + HARDWARE_FEATURES[9:11],
    "peak_bandwidth_sms_l2": HARDWARE_FEATURES[:11],
}
HARDWARE_SETS: dict[str, tuple[str, ...]] = {**_BASE_SETS,
                                             **{f"{k}_matrix": v + ("log_matrix_x_half",) for k, v in _BASE_SETS.items()}}
#: spec column (of a step row) each optional hardware feature needs, by feature-name prefix; a GPU without it
#: (NaN, or no such column) gets NaN in those features
SPEC_COLUMNS: dict[str, str] = {"log_sms": "sms", "log_l2": "l2_mb", "log_matrix": "matrix_fp16_gflops"}
#: assumed roofline constants of the physics offset (those of ``roofline_assumed``)
ASSUMED = {"compute_efficiency": 0.40, "memory_efficiency": 0.60, "launch_us": 5.0}


@memoized_on_frame
def offset_ms(rows: pd.DataFrame) -> np.ndarray:
    """The roofline with assumed constants (the physics the model corrects), ms per step, at the FP32 peak whatever
    the precision (see the module doc)."""
    t = roofline_terms(rows, ASSUMED["launch_us"], "32")
    return (t["launch_ms"] + np.maximum(t["compute_ms"] / ASSUMED["compute_efficiency"],
                                        t["memory_ms"] / ASSUMED["memory_efficiency"])).to_numpy()


def kernel_shares(fractions: Any, scale: Any = 1.0) -> dict[str, np.ndarray]:
    """:data:`KERNEL_SHARE_COLUMNS` from ``fractions`` (a mapping or frame with analytic's ``flops_<kind>_frac``:
    shares of the conv + linear hook total) times ``scale`` = hook total / forward FLOPs (1 for the release's rows,
    whose forward FLOPs are that hook total); missing or NaN -> 0, clipped to [0, 1]."""
    out = {}
    for kind, col in zip(KERNEL_KINDS, KERNEL_SHARE_COLUMNS):
        frac = fractions[f"flops_{kind}_frac"] if f"flops_{kind}_frac" in fractions else 0.0
        v = np.asarray(pd.to_numeric(frac, errors="coerce"), dtype=float) * np.asarray(scale, dtype=float)
        out[col] = np.clip(np.nan_to_num(v, nan=0.0), 0.0, 1.0)
    return out


@memoized_on_frame
def workload_features(rows: pd.DataFrame) -> pd.DataFrame:
    """Hardware-free descriptors of each row's workload (every name of :data:`DESCRIPTOR_SETS`; read-only inside a
    :func:`~traintime.core.memo.frame_memo` scope)."""
    b = np.maximum(rows["batch_size"].to_numpy(dtype=float), 1.0)
    flops = np.maximum(rows["flops_train_per_batch"].to_numpy(dtype=float), 1.0)
    layers = np.maximum(rows["layers"].to_numpy(dtype=float), 1.0)
    act = rows["act_bytes_per_sample"].to_numpy(dtype=float)
    state = (2 * rows["param_bytes"] + rows["grad_bytes"] + 2 * rows["optimizer_state_bytes"]).to_numpy(float)
    nbytes = np.maximum(state + 2.0 * act * b, 1.0)
    return pd.DataFrame({
        "log_flops_per_sample": np.log10(flops / b),
        "log_batch": np.log10(b),
        "log_act_per_sample": np.log10(np.maximum(act, 1.0)),
        "log_layers": np.log10(layers),
        "log_params": np.log10(np.maximum(rows["param_bytes"].to_numpy(dtype=float), 1.0)),
        "log_input_px": np.log10(np.maximum(pd.to_numeric(rows["input_px"], errors="coerce").fillna(1).to_numpy(float),
                                            1.0)),
        "half": rows["precision"].astype(str).ne("32").to_numpy().astype(float),
        "transformer": rows["family"].astype(str).eq("Transformer").to_numpy().astype(float),
        "chronos_host": (rows["source"].astype(str).eq(HOST_SOURCE).to_numpy().astype(float) if "source" in rows.columns
                         else np.zeros(len(rows))),
        "log_flops_per_layer": np.log10(flops / layers),
        "log_intensity": np.log10(flops / nbytes),
        **{f: np.sqrt(np.clip(np.nan_to_num(pd.to_numeric(rows[c], errors="coerce").to_numpy(dtype=float), nan=0.0),
                              0.0, 1.0)) if c in rows.columns else np.zeros(len(rows))
           for f, c in zip(KERNEL_FEATURES, KERNEL_SHARE_COLUMNS)},
    }, index=rows.index)


@memoized_on_frame
def network_key(rows: pd.DataFrame) -> np.ndarray:
    """``model|input px|precision`` per row: the network of a workload, whatever its batch (as the *largest batch*
    protocols of :mod:`traintime.predict_step_grouped` name it)."""
    # built once per distinct (model, size, precision), not per row: nested selection asks for the keys of many
    # fold slices of thousands of rows
    px = np.round(pd.to_numeric(rows["input_px"], errors="coerce").to_numpy(dtype=float))
    parts = [pd.factorize(v, use_na_sentinel=False) for v in (rows["model"].astype(str), px,
                                                              rows["precision"].astype(str))]
    (cm, um), (cx, ux), (cp, up) = parts
    distinct, inv = np.unique((cm.astype(np.int64) * len(ux) + cx) * len(up) + cp, return_inverse=True)
    size = ["" if math.isnan(v) else str(int(v)) for v in ux]  # a missing size stays empty
    names = [f"{um[c // (len(ux) * len(up))]}|{size[(c // len(up)) % len(ux)]}|{up[c % len(up)]}" for c in distinct]
    return np.array(names, dtype=object)[np.asarray(inv).reshape(-1)]


def log_spec(rows: pd.DataFrame, column: str) -> np.ndarray:
    """log10 of an optional positive spec column per row; NaN where missing, not positive or no such column."""
    v = (pd.to_numeric(rows[column], errors="coerce").to_numpy(dtype=float) if column in rows.columns
         else np.full(len(rows), np.nan))
    with np.errstate(invalid="ignore"):
        return np.log10(np.where(v > 0, v, np.nan))


def spec_known(rows: pd.DataFrame, names: tuple[str, ...]) -> np.ndarray:
    """True per row where every optional spec column (:data:`SPEC_COLUMNS`) that hardware features ``names`` use is
    known (positive)."""
    need = {col for prefix, col in SPEC_COLUMNS.items() if any(n.startswith(prefix) for n in names)}
    ok = np.ones(len(rows), dtype=bool)
    for col in sorted(need):
        ok &= np.isfinite(log_spec(rows, col))
    return ok


#: the workload descriptors :func:`hardware_features` reads
HARDWARE_READS: tuple[str, ...] = ("log_flops_per_layer", "log_intensity", "half")


def hardware_features(rows: pd.DataFrame, wl: pd.DataFrame, wl_mean: np.ndarray, wl_scale: np.ndarray,
                      names: tuple[str, ...] = HARDWARE_SETS["peak_bandwidth"],
                      descriptors: tuple[str, ...] = DESCRIPTORS) -> np.ndarray:
    """Hardware features ``names`` (of :data:`HARDWARE_FEATURES`) of ``rows`` (``wl``: their workload features;
    standardised with the training workloads' ``wl_mean`` / ``wl_scale``, in the order of ``descriptors``, for the
    interactions). A GPU without an SM count (column ``sms``) or L2 size (``l2_mb``) gets NaN in the SM or L2 features
    (:data:`SPEC_COLUMNS`)."""
    t = roofline_terms(rows, 1.0, "32")  # FP32 peak (module doc)
    flops = rows["flops_train_per_batch"].to_numpy(dtype=float)
    lp = np.log10(np.maximum(flops / np.maximum(t["compute_ms"].to_numpy(), 1e-30) / 1e6, 1e-9))
    lb = np.log10(np.maximum(rows["memory_bandwidth_gbps"].to_numpy(dtype=float), 1e-9))
    ls, ll2 = log_spec(rows, SPEC_COLUMNS["log_sms"]), log_spec(rows, SPEC_COLUMNS["log_l2"])
    lm = log_spec(rows, SPEC_COLUMNS["log_matrix"]) if "log_matrix_x_half" in names else np.zeros(len(rows))
    i_k, i_i = descriptors.index("log_flops_per_layer"), descriptors.index("log_intensity")
    zk = (wl["log_flops_per_layer"].to_numpy() - wl_mean[i_k]) / wl_scale[i_k]
    zi = (wl["log_intensity"].to_numpy() - wl_mean[i_i]) / wl_scale[i_i]
    cols = {"log_peak": lp, "log_bandwidth": lb, "log_peak_x_kernel": lp * zk, "log_bandwidth_x_kernel": lb * zk,
            "log_peak_x_intensity": lp * zi, "log_bandwidth_x_intensity": lb * zi,
            "log_peak_x_half": lp * wl["half"].to_numpy(), "log_sms": ls, "log_sms_x_kernel": ls * zk,
            "log_l2": ll2, "log_l2_x_intensity": ll2 * zi, "log_matrix_x_half": lm * wl["half"].to_numpy()}
    return np.column_stack([cols[n] for n in names])


def pairwise_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Euclidean distances between the rows of ``a`` and of ``b`` (expanded form; round-off below 0 clipped)."""
    return np.sqrt(np.maximum((a ** 2).sum(1)[:, None] + (b ** 2).sum(1)[None, :] - 2 * a @ b.T, 0.0))


def unique_rows(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(z, axis=0, return_inverse=True)`` of a 2-D array: the distinct rows in lexicographic order and each
    row's index among them (finite arrays by one ``lexsort``, about twice as fast; others by ``np.unique`` itself)."""
    if z.ndim != 2 or not len(z) or not np.isfinite(z).all():
        uz, inv = np.unique(z, axis=0, return_inverse=True)
        return uz, np.asarray(inv).reshape(-1)
    order = np.lexsort(z.T[::-1])  # first column is the primary key, as np.unique's field-wise sort
    zs = z[order]
    new = np.ones(len(z), dtype=bool)
    new[1:] = (zs[1:] != zs[:-1]).any(axis=1)
    inv = np.empty(len(z), dtype=np.intp)
    inv[order] = np.cumsum(new) - 1
    return zs[new], inv


def neighbour_u(z: np.ndarray, train_z: np.ndarray, train_u: np.ndarray,
                k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(u, distance to the nearest measured workload, its index) for standardised descriptors ``z``: a workload at
    distance 0 takes its own ``u``, any other the inverse-squared-distance-weighted mean of its ``k`` nearest."""
    if not len(z):
        return np.zeros(0), np.zeros(0), np.zeros(0, dtype=int)
    inv, near, dn = nearest_workloads(z, train_z, int(k))
    w = 1.0 / (dn ** 2 + 1e-12)
    u = (w * train_u[near]).sum(axis=1) / w.sum(axis=1)
    return u[inv], dn[inv, 0], near[inv, 0]


@memoized_on_arrays  # nested selection: candidates that differ in hardware features, slopes or trend share the geometry
def nearest_workloads(z: np.ndarray, train_z: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(each row's index among the distinct rows of ``z``, the indices of their ``k`` nearest rows of ``train_z``
    nearest first, those distances) for :func:`neighbour_u`; round-off below 1e-6 is a distance of 0."""
    uz, inv = unique_rows(z)  # one distance row per distinct workload, not per GPU row
    d = pairwise_distance(uz, train_z)
    kk = min(k, train_z.shape[0])
    near = np.argpartition(d, kk - 1, axis=1)[:, :kk] if kk < d.shape[1] else np.tile(np.arange(kk), (len(d), 1))
    near = np.take_along_axis(near, np.argsort(np.take_along_axis(d, near, axis=1), axis=1, kind="stable"), axis=1)
    dn = np.take_along_axis(d, near, axis=1)
    dn[dn < 1e-6] = 0.0  # the expanded form leaves round-off where the workload itself was measured
    return inv, near, dn


def workload_trend(z: np.ndarray, coef: Any) -> np.ndarray:
    """The ridge trend ``c0 + z . c`` of the log efficiency at standardised descriptors ``z`` (zero for ``coef`` None)."""
    if coef is None:
        return np.zeros(len(z))
    c = np.asarray(coef, dtype=float)
    return c[0] + z @ c[1:]


def neighbour_predict(rows: pd.DataFrame, params: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(step ms, distance to the nearest measured workload, its index) of ``rows`` for frozen ``params``."""
    wl = workload_features(rows)
    wm, ws = np.asarray(params["wl_mean"], float), np.asarray(params["wl_scale"], float)
    descs = list(params.get("descriptors") or DESCRIPTORS)  # files written before descriptor sets: the base ones
    # the rows' raw descriptors, changed below as an array (the memoized frame wl never is: core.memo)
    d = wl[descs].to_numpy(dtype=float)
    pairs = None
    if params.get("train_network"):  # a measured network at a measured batch, up to its head: that workload
        from traintime.chronos.neighbour_batch import candidate_pairs, measured_twin

        pairs = candidate_pairs(rows, d, params)  # the rows a twin or (affine) a bracket can change
        twin = measured_twin(rows, d, params, pairs)
        swap = np.flatnonzero(twin >= 0)
        if len(swap):
            d = d.copy(order="K")  # the frame's memory order: BLAS products and row sums round alike
            d[swap] = np.asarray(params["train_z"], float)[twin[swap]] * ws + wm
    nd = len(params.get("knn_features") or WORKLOAD_FEATURES)  # kNN / trend space: the first nd descriptors
    z_raw = ((d - wm) / ws)[:, :nd]
    if params.get("batch_edge") == "network":
        from traintime.chronos.neighbour_batch import batch_edge

        edged = wl.copy()
        edged[descs] = d
        d = batch_edge(edged, descs, params)[descs].to_numpy(dtype=float)
    if "desc_min" in params:  # beyond the measured range (a larger batch or model) the efficiency - neighbours, trend
        # and hardware interactions alike - is that of the range's edge, so the time keeps growing with the roofline's work
        d = np.clip(d, np.asarray(params["desc_min"]), np.asarray(params["desc_max"]))
    z = ((d - wm) / ws)[:, :nd]
    names = tuple(params.get("hardware_features") or HARDWARE_SETS["peak_bandwidth"])
    wl_h = pd.DataFrame({c: d[:, descs.index(c)] if c in descs else wl[c].to_numpy() for c in HARDWARE_READS},
                        index=wl.index)  # what hardware_features reads of the descriptors, as changed above
    h = hardware_features(rows, wl_h, wm, ws, names, tuple(descs)) - np.asarray(params["hw_mean"], float)
    train_z = np.asarray(params["train_z"], float)
    coef = params.get("trend_coef")
    residual = np.asarray(params["train_u"], float) - workload_trend(train_z, coef)
    r, _, nearest = neighbour_u(z, train_z, residual, int(params["k"]))
    dist = np.sqrt(((z_raw - train_z[nearest]) ** 2).sum(axis=1))  # unclipped: outside the range = not measured
    log_t = h @ np.asarray(params["beta"], float) + workload_trend(z, coef) + r
    if params.get("train_gamma") is not None:  # a measured workload's own deviation from beta in log peak / bandwidth
        seen = dist < 1e-6
        gam, hm = np.asarray(params["train_gamma"], float), np.asarray(params["train_hmean"], float)
        sc = list(params.get("slope_columns") or [0, 1])  # files written before SM slopes: peak and bandwidth
        log_t[seen] += ((h[seen][:, sc] - hm[nearest[seen]]) * gam[nearest[seen]]).sum(axis=1)
    ms = offset_ms(rows) * np.exp(log_t)
    if params.get("batch_edge") == "affine":
        from traintime.chronos.neighbour_batch import (
            affine_below_batches,
            affine_between_batches,
            affine_beyond_edge,
            measured_around,
        )

        around = measured_around(rows, params, pairs)  # the measured batches around each row, once for the 3 lines
        ms = affine_below_batches(rows, params, affine_between_batches(
            rows, params, affine_beyond_edge(rows, params, ms, around), around), around)
    return ms, dist, nearest


class FrozenNeighbour:
    """The neighbour step model with given parameters (prediction only; ``label`` names it in the output)."""

    #: short name of the step model (``--step-model``)
    name = "neighbour"

    def __init__(self, params: dict[str, Any]) -> None:
        self.params = params

    @property
    def label(self) -> str:
        trend = " (ridge trend + neighbours' residuals)" if self.params.get("trend_coef") is not None else ""
        if self.params.get("descriptor_set") == "kernel_mix":
            trend += " in descriptors with the kernel mix"
        return (f"roofline x efficiency of the {self.params['k']} nearest measured workloads{trend}, log-linear in GPU "
                f"peak / bandwidth ({self.params.get('trained_on', 'fitted')})")

    def predict(self, rows: pd.DataFrame) -> np.ndarray:
        return neighbour_predict(rows, self.params)[0]

    def distance(self, rows: pd.DataFrame) -> np.ndarray:
        """Distance (standardised descriptor units) from each row's workload to the nearest measured one."""
        return neighbour_predict(rows, self.params)[1]

    def nearest_source(self, rows: pd.DataFrame) -> np.ndarray:
        """Data source (``traces`` / ``chronos``; ``""`` when not recorded) of each row's nearest measured workload."""
        return self._sources(neighbour_predict(rows, self.params)[2])

    def _sources(self, nearest: np.ndarray) -> np.ndarray:
        src = np.asarray(self.params.get("train_source") or [""] * len(self.params["train_u"]), dtype=object)
        return src[nearest]

    def step_log_halfwidth(self, rows: pd.DataFrame, coverage: float) -> float:
        """Split-conformal log half-width for ``rows`` (one workload). A workload never measured (distance > 0) takes
        the half-width of the leave-one-model-out residuals; a measured one that of the data source of its nearest
        measured workload (Mondrian by source: the residuals of the CHRONOS and the trace rows differ in size), the
        pooled one when the source has none; NaN when calibrated at another coverage."""
        conf = self.params.get("conformal", {})
        if abs(float(conf.get("coverage", -1)) - coverage) > 1e-9 or not len(rows):
            return float("nan")
        _, dist, nearest = neighbour_predict(rows.iloc[:1], self.params)
        if dist[0] > 1e-6 and "unseen_workload" in conf:  # never measured: the leave-one-model-out residuals
            return float(conf["unseen_workload"]["step_log_halfwidth"])
        by = conf.get("by_source", {})
        src = str(self._sources(nearest)[0])
        return float(by[src]["step_log_halfwidth"] if src in by else conf["step_log_halfwidth"])


def load_frozen_neighbour(path: Any) -> FrozenNeighbour | None:
    """The frozen model of ``path`` (JSON written by the rule), or None when the file does not exist."""
    import json
    from pathlib import Path

    p = Path(path)
    return FrozenNeighbour(json.loads(p.read_text())) if p.exists() else None
