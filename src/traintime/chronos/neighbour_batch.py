"""The neighbour step model at a batch its network was not measured at (``batch_edge``; prediction side, numpy only).

A row that asks for a larger batch than any measured of its *network* is beyond its edge. The ``affine`` rule names
the network (model, input size, precision: :func:`named_network_edges`); the ``network`` rule takes the nearest
measured workload in the batch-free descriptors (:func:`network_edges`).
:func:`traintime.chronos.neighbour_frozen.neighbour_predict` then applies the
rule its frozen parameters name (:data:`~traintime.chronos.neighbour_frozen.BATCH_EDGE_RULES`): ``affine``
(:func:`affine_beyond_edge`, the default of models fitted now), ``network`` (:func:`batch_edge`) or ``global``
(nothing here: the descriptors are clipped to the edge of all data). Inside a measured network's batch range the
``affine`` rule also draws the line between the two measured batches around an unmeasured one
(:func:`affine_between_batches`), and below the smallest measured batch the line through the two smallest
(:func:`affine_below_batches`).

A network measured at one batch has no line beyond it and keeps the ``global`` answer. Until 2026-12-06 it grew in
proportion from that batch (``t(e) b / e``), which overstates a step that is mostly a fixed cost: seen on the ``traces
largest batch`` rows of ``predict_step_grouped`` (batch 64 from batch 16 alone: 58.6 % MAPE, 25.4 with ``global``),
which are therefore not its check. The check, declared before it was run (keep ``global`` where it beats the
proportional rule on both): trace rows at batch 32, never fitted on, from a model whose traces were fitted at batch 16
alone (every CHRONOS row beside them), 30.3 -> 17.3 % (``network`` rule 18.2); CHRONOS rows above each network's
smallest batch, from a model fitted on the smallest batches alone (every trace row beside them), 180.8 -> 54.1 %
(106.4). By hand, :class:`~traintime.chronos.neighbour_step.NestedNeighbourStepTime` on the make-run tree of 4c9c965.
Below a one-batch network's batch the proportional floor of :func:`affine_below_batches` stays: the same check
the other way round split (proportional / ``global``): trace rows at batch 32 from the traces at batch 64 alone 18.9 /
26.0 %, CHRONOS rows below each network's largest batch from those alone 45.7 / 38.2 %.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from traintime.chronos.neighbour_frozen import (
    BATCH_DESCRIPTORS,
    DESCRIPTORS,
    neighbour_predict,
    network_key,
    pairwise_distance,
    unique_rows,
    workload_features,
)
from traintime.core.memo import memoized_on_arrays

#: the frozen parameters the named-network lookups (:func:`candidate_pairs`, :func:`measured_around`) read
GEOMETRY_KEYS = ("train_network", "train_z", "wl_mean", "wl_scale", "descriptors")

#: :func:`measured_around` of query rows: (below, above, above2, below2) indices into ``params["train_z"]`` per row
Around = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def train_log_batch(params: dict[str, Any], descs: list[str]) -> np.ndarray:
    """log10 batch of each training workload of frozen ``params`` (its standardised ``log_batch`` descriptor undone)."""
    ib = descs.index("log_batch")
    return np.asarray(params["train_z"], float)[:, ib] * float(params["wl_scale"][ib]) + float(params["wl_mean"][ib])


def network_edges(wl: pd.DataFrame, descs: list[str], params: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """(edge, previous) per row: indices into ``params["train_z"]`` of the largest and the second-largest measured
    batch of the row's *network* where the row asks for a batch larger than the largest (-1 elsewhere; previous -1
    also when the network was measured at one batch only). The network of a workload is the nearest measured
    workload in the batch-free descriptors (the same model, input size and precision, or the closest one)."""
    n = len(wl)
    edge, prev = np.full(n, -1), np.full(n, -1)
    free = [i for i, d in enumerate(descs) if d not in BATCH_DESCRIPTORS]
    train_z = np.asarray(params["train_z"], float)
    if not free or "log_batch" not in descs or train_z.shape[1] != len(descs) or not n:
        return edge, prev
    wm, ws = np.asarray(params["wl_mean"], float), np.asarray(params["wl_scale"], float)
    ib = descs.index("log_batch")
    batch_raw = train_log_batch(params, descs)
    tf = train_z[:, free]
    # per training workload, its network's largest batch (first in file order among equals) and the largest below it
    same = pairwise_distance(tf, tf) < 1e-6
    edge_of = np.where(same, batch_raw[None, :], -np.inf).argmax(axis=1)
    lower = same & (batch_raw[None, :] < batch_raw[edge_of][:, None] - 1e-9)
    prev_of = np.where(lower.any(axis=1), np.where(lower, batch_raw[None, :], -np.inf).argmax(axis=1), -1)
    q = wl[descs].to_numpy(dtype=float)
    qf = pd.DataFrame(np.round((q[:, free] - wm[free]) / ws[free], 9))  # one distance row per network asked for
    ids = qf.groupby(list(qf.columns), sort=False).ngroup().to_numpy()
    first = np.unique(ids, return_index=True)[1]
    near = pairwise_distance(qf.to_numpy()[first], tf).argmin(axis=1)[ids]
    e = edge_of[near]
    far = q[:, ib] > batch_raw[e] + 1e-9
    edge[far] = e[far]
    prev[far] = prev_of[near[far]]
    return edge, prev


def batch_edge(wl: pd.DataFrame, descs: list[str], params: dict[str, Any]) -> pd.DataFrame:
    """Descriptors ``wl`` with the batch-dependent ones (:data:`BATCH_DESCRIPTORS`) of each workload set to those of
    its *network's* largest measured batch where it asks for a larger batch (``batch_edge = "network"``,
    :func:`network_edges`): beyond it the efficiency stays that measured there and the time grows with the
    roofline's work, instead of following the trend in batch (learned mostly on small models that fill a GPU only
    at large batches). Which rule extrapolates best is measured, not assumed: the *largest batch* protocols of
    :mod:`traintime.predict_step_grouped` score all three (``global``, ``network``, ``affine``)."""
    cols = [d for d in descs if d in BATCH_DESCRIPTORS]
    edge, _ = network_edges(wl, descs, params)
    far = edge >= 0
    if not cols or not far.any():
        return wl
    wm, ws = np.asarray(params["wl_mean"], float), np.asarray(params["wl_scale"], float)
    train_raw = np.asarray(params["train_z"], float) * ws + wm
    out = wl[descs].to_numpy(dtype=float)
    for c in cols:
        out[far, descs.index(c)] = train_raw[edge[far], descs.index(c)]
    res = wl.copy()  # memoized (core.memo): never changed in place
    res[descs] = out
    return res


def _named(rows: pd.DataFrame, params: dict[str, Any]
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """(training networks' names, their log10 batches, the rows' network names, their log10 batches) of the named
    rules; None when there are no rows or the frozen file names no training network."""
    keys = np.asarray(params.get("train_network") or [], dtype=object)
    if not len(rows) or not len(keys):
        return None
    q_b = np.log10(np.maximum(rows["batch_size"].to_numpy(dtype=float), 1.0))
    return keys, train_log_batch(params, list(params.get("descriptors") or DESCRIPTORS)), network_key(rows), q_b


def named_network_edges(rows: pd.DataFrame, params: dict[str, Any], around: Around | None = None
                        ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`network_edges` for the ``affine`` rule, the network named as the *largest batch* protocols name it
    (:func:`~traintime.chronos.neighbour_frozen.network_key`: model, input size, precision; the frozen file's
    ``train_network``): (edge, previous) per row asking for a larger batch than any measured of its network - indices
    into ``params["train_z"]`` of the network's largest and second-largest measured batch (previous -1 when the
    network was measured at one batch; both -1 elsewhere). A row's network is measured only when a training workload
    has its name, so a model never measured has no edge and keeps the ``global`` rule. Among equal batches, the first
    training workload in file order. ``around``: :func:`measured_around` of ``rows`` when the caller has it."""
    below, above, _, below2 = around if around is not None else measured_around(rows, params)
    far = (below >= 0) & (above < 0)
    return np.where(far, below, -1), np.where(far, below2, -1)


def measured_around(rows: pd.DataFrame, params: dict[str, Any], pairs: pd.DataFrame | None = None) -> Around:
    """(below, above, above2, below2) per row not at a measured batch of its named network: indices into
    ``params["train_z"]`` of the network's largest measured batch below the row's, its smallest above, its
    second-smallest above and its second-largest below (-1 where there is none, and everywhere for a row at a measured
    batch or of a network never measured). Among equal batches, the first training workload in file order.
    ``pairs``: :func:`candidate_pairs` of ``rows`` when the caller has them."""
    return _measured_around(rows, pairs, *_geometry(params))


def _geometry(params: dict[str, Any]) -> tuple[Any, ...]:
    """The :data:`GEOMETRY_KEYS` of ``params`` as memo keys (:func:`~traintime.core.memo.memoized_on_arrays`): arrays
    as float arrays, name lists as tuples. Nested selection refits candidates that differ in hardware features,
    slopes or trend on the same rows: their lookups are the same."""
    out: list[Any] = []
    for k in GEOMETRY_KEYS:
        v = params.get(k)
        out.append(None if v is None else tuple(v) if k in ("train_network", "descriptors")
                   else np.asarray(v, dtype=float))
    return tuple(out)


@memoized_on_arrays
def _measured_around(rows: pd.DataFrame, pairs: pd.DataFrame | None, *geometry: Any) -> Around:
    params = dict(zip(GEOMETRY_KEYS, geometry))
    out = tuple(np.full(len(rows), -1) for _ in range(4))
    if (got := _batched_pairs(rows, params, pairs)) is None:
        return out
    pairs, batch_raw, q_b = got
    tb = batch_raw[pairs["train"].to_numpy()]
    d = tb - q_b[pairs["row"].to_numpy()]
    at = pd.Series(np.abs(d) <= 1e-9).groupby(pairs["row"].to_numpy()).any()
    p = pairs.assign(tb=tb, d=d)[~np.isin(pairs["row"].to_numpy(), at.index[at.to_numpy()])]
    under = p[p["d"] < -1e-9].sort_values(["row", "tb", "train"], ascending=[True, False, True])
    over = p[p["d"] > 1e-9].sort_values(["row", "tb", "train"])
    first, top = over.drop_duplicates("row"), under.drop_duplicates("row")
    second = over[over["tb"] > first.set_index("row")["tb"].reindex(over["row"]).to_numpy() + 1e-9]
    lower = under[under["tb"] < top.set_index("row")["tb"].reindex(under["row"]).to_numpy() - 1e-9]
    for src, dst in ((top, out[0]), (first, out[1]), (second.drop_duplicates("row"), out[2]),
                     (lower.drop_duplicates("row"), out[3])):
        dst[src["row"].to_numpy()] = src["train"].to_numpy()
    return out


def named_network_brackets(rows: pd.DataFrame, params: dict[str, Any], around: Around | None = None
                           ) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) per row: indices into ``params["train_z"]`` of the two measured batches of the row's named
    network (:func:`named_network_edges`) that bracket the row's batch, where that batch lies strictly between
    two measured ones and is not itself measured (-1 elsewhere: a measured batch, beyond the edges, or a network
    never measured). Among equal batches, the first training workload in file order. ``around``:
    :func:`measured_around` of ``rows`` when the caller has it."""
    below, above, _, _ = around if around is not None else measured_around(rows, params)
    both = (below >= 0) & (above >= 0)
    return np.where(both, below, -1), np.where(both, above, -1)


def named_network_floor(rows: pd.DataFrame, params: dict[str, Any], around: Around | None = None
                        ) -> tuple[np.ndarray, np.ndarray]:
    """(smallest, next) per row: indices into ``params["train_z"]`` of the smallest and the second-smallest measured
    batch of the row's named network where the row asks for a smaller batch than any measured of it (next -1 when
    the network was measured at one batch; both -1 elsewhere). Among equal batches, the first training workload in
    file order. ``around``: :func:`measured_around` of ``rows`` when the caller has it."""
    below, above, above2, _ = around if around is not None else measured_around(rows, params)
    low = (below < 0) & (above >= 0)
    return np.where(low, above, -1), np.where(low, above2, -1)


def affine_below_batches(rows: pd.DataFrame, params: dict[str, Any], ms: np.ndarray,
                         around: Around | None = None) -> np.ndarray:
    """``ms`` with every row below its named network's smallest measured batch ``p`` (:func:`named_network_floor`)
    replaced by the straight line through the model's times at ``p`` and the next measured batch ``q`` on the row's
    GPU, the marginal cost not below 0, and never below ``t(p) b / p`` (a smaller batch never runs a sample faster;
    that share alone when the network was measured at one batch): the fixed cost per step plus cost per sample of
    :func:`affine_beyond_edge`, below the measured range. ``around``: :func:`named_network_floor`."""
    lo, nxt = named_network_floor(rows, params, around)
    low = np.flatnonzero(lo >= 0)
    if not len(low):
        return ms
    b = rows["batch_size"].to_numpy(dtype=float)[low]
    p, t_p = _times_at(rows, low, lo[low], params)
    line = t_p * b / p  # one measured batch: in proportion (as beyond the largest)
    two = np.flatnonzero(nxt[low] >= 0)
    if len(two):
        q, t_q = _times_at(rows, low[two], nxt[low][two], params)
        slope = np.maximum(t_q - t_p[two], 0.0) / (q - p[two])
        line[two] = np.maximum(t_p[two] + (b[two] - p[two]) * slope, line[two])
    out = np.array(ms, dtype=float, copy=True)
    out[low] = line
    return out


def affine_between_batches(rows: pd.DataFrame, params: dict[str, Any], ms: np.ndarray,
                           around: Around | None = None) -> np.ndarray:
    """``ms`` with every row whose batch lies between two measured batches ``p < b < e`` of its named network
    (:func:`named_network_brackets`) replaced by the straight line through the model's times at ``p`` and ``e`` on
    the row's GPU (``batch_edge = "affine"``, inside the measured range): the same fixed cost per step plus cost per
    sample as :func:`affine_beyond_edge` uses beyond it. Both anchors are workloads the model measured, so each keeps
    its own efficiency and per-workload slopes; the row itself, a workload never measured, would otherwise take
    the neighbours' residuals and no slopes of its own (a trace network at batch 32 between its measured 16 and 64
    came out up to a third slower than at either end's line). ``around``: :func:`named_network_brackets`."""
    lo, hi = named_network_brackets(rows, params, around)
    mid = np.flatnonzero(lo >= 0)
    if not len(mid):
        return ms
    b_lo, t_lo = _times_at(rows, mid, lo[mid], params)
    b_hi, t_hi = _times_at(rows, mid, hi[mid], params)
    out = np.array(ms, dtype=float, copy=True)
    out[mid] = t_lo + (rows["batch_size"].to_numpy(dtype=float)[mid] - b_lo) * (t_hi - t_lo) / (b_hi - b_lo)
    return out


#: a query's FLOPs per sample within this factor of a measured workload of the same named network and batch count as
#: that workload (a different classifier head: 1000 ImageNet classes against the traces' 16 change a ResNet-50's FLOPs
#: by 0.1 %, a ViT-B/16's by 0.01 %; a sequence four times as long does not)
SAME_WORK = 1.05


def measured_twin(rows: pd.DataFrame, q: np.ndarray, params: dict[str, Any],
                  pairs: pd.DataFrame | None = None) -> np.ndarray:
    """Per row, the index into ``params["train_z"]`` of the measured workload it stands for (-1: none): the same
    named network (:func:`named_network_edges`: model, input size, precision), the same batch and host
    (``chronos_host``), FLOPs per sample within :data:`SAME_WORK`, and among several such the nearest in the
    standardised descriptors (the row's own workload when it was measured). Such a row - typically a traced network
    asked with another number of classes - is that measured workload up to its head; answered as a workload never
    measured it would lose the workload's own residual and slopes for a difference the roofline already counts.
    ``q``: the rows' raw descriptors in the order of ``params["descriptors"]``; ``pairs``: :func:`candidate_pairs`."""
    twin = np.full(len(rows), -1)
    descs = list(params.get("descriptors") or DESCRIPTORS)
    if (named := _named(rows, params)) is None or not {"log_flops_per_sample", "chronos_host"} <= set(descs):
        return twin
    batch_raw, q_b = named[1], named[3]
    wm, ws = np.asarray(params["wl_mean"], float), np.asarray(params["wl_scale"], float)
    train_z = np.asarray(params["train_z"], float)
    if train_z.shape[1] != len(descs):
        return twin
    pairs = candidate_pairs(rows, q, params) if pairs is None else pairs
    if not len(pairs):
        return twin
    train_raw = train_z * ws + wm
    i_f, i_h = descs.index("log_flops_per_sample"), descs.index("chronos_host")
    t, r = pairs["train"].to_numpy(), pairs["row"].to_numpy()
    ok = ((np.abs(batch_raw[t] - q_b[r]) <= 1e-9) & (np.abs(train_raw[t, i_h] - q[r, i_h]) < 0.5)
          & (np.abs(train_raw[t, i_f] - q[r, i_f]) <= np.log10(SAME_WORK)))
    if ok.any():
        t, r = t[ok], r[ok]
        d = ((train_z[t] - (q[r] - wm) / ws) ** 2).sum(axis=1)
        best = pd.DataFrame({"row": r, "train": t, "d": d}).sort_values(["row", "d", "train"]).drop_duplicates("row")
        twin[best["row"].to_numpy()] = best["train"].to_numpy()
    return twin


def candidate_pairs(rows: pd.DataFrame, q: np.ndarray, params: dict[str, Any]) -> pd.DataFrame:
    """Every (query row, training workload) pair of the same named network, for the rows a twin
    (:func:`measured_twin`) or a bracket (:func:`named_network_brackets`) can change: a measured network (one set
    lookup per row) whose descriptors ``q`` (raw, in the order of ``params["descriptors"]``) are those of no training
    workload (to 1e-7 standardised; one lookup per distinct workload; every such row for a file whose ``train_z``
    lacks descriptors). Columns ``row``, ``train``; empty when no row qualifies."""
    return _candidate_pairs(rows, q, *_geometry(params))


@memoized_on_arrays
def _candidate_pairs(rows: pd.DataFrame, q: np.ndarray, *geometry: Any) -> pd.DataFrame:
    params = dict(zip(GEOMETRY_KEYS, geometry))
    empty = pd.DataFrame({"row": np.zeros(0, dtype=int), "train": np.zeros(0, dtype=int)})
    keys = np.asarray(params.get("train_network") or [], dtype=object)
    if not len(rows) or not len(keys):
        return empty
    q_keys = network_key(rows)
    idx = np.flatnonzero(pd.Series(q_keys).isin(set(keys)).to_numpy())
    train_z = np.asarray(params["train_z"], float)
    if len(idx) and train_z.ndim == 2 and train_z.shape[1] == q.shape[1]:
        z = (q[idx] - np.asarray(params["wl_mean"], float)) / np.asarray(params["wl_scale"], float)
        uz, inv = unique_rows(np.round(z, 7) + 0.0)
        known = {r.tobytes() for r in np.round(train_z, 7) + 0.0}
        idx = idx[~np.array([r.tobytes() in known for r in uz], dtype=bool)[inv]]
    if not len(idx):
        return empty
    train = pd.DataFrame({"key": keys, "train": np.arange(len(keys))})
    return pd.DataFrame({"key": q_keys[idx], "row": idx}).merge(train, on="key")[["row", "train"]]


def _batched_pairs(rows: pd.DataFrame, params: dict[str, Any], pairs: pd.DataFrame | None
                   ) -> tuple[pd.DataFrame, np.ndarray, np.ndarray] | None:
    """(:func:`candidate_pairs` of ``rows`` - ``pairs`` when given -, training workloads' log10 batches, the rows' log10
    batches), or None when no row has a candidate pair."""
    if (named := _named(rows, params)) is None:
        return None
    if pairs is None:
        descs = list(params.get("descriptors") or DESCRIPTORS)
        pairs = candidate_pairs(rows, workload_features(rows)[descs].to_numpy(dtype=float), params)
    return (pairs, named[1], named[3]) if len(pairs) else None


def _times_at(rows: pd.DataFrame, index: np.ndarray, train_index: np.ndarray,
              params: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """(batch, the model's step ms) of each of ``rows.iloc[index]`` at the batch of training workload ``train_index``
    (per row), by the ``global`` rule: the anchors of the affine lines."""
    b = np.rint(10 ** train_log_batch(params, list(params.get("descriptors") or DESCRIPTORS)))[train_index]
    return b, neighbour_predict(_subset_at_batch(rows, index, b), {**params, "batch_edge": "global"})[0]


@memoized_on_arrays  # one frame object per (rows, subset, batches): the frame memos downstream then hit across candidates
def _subset_at_batch(rows: pd.DataFrame, index: np.ndarray, batch: np.ndarray) -> pd.DataFrame:
    return rows_at_batch(rows.iloc[index], batch)


def rows_at_batch(rows: pd.DataFrame, batch: np.ndarray) -> pd.DataFrame:
    """Step rows ``rows`` at batch ``batch`` (per row): the batch and the per-batch FLOPs change, the per-sample
    columns and the GPU stay."""
    out = rows.copy()
    b = np.asarray(batch, dtype=float)
    out["flops_train_per_batch"] = rows["flops_train_per_batch"].to_numpy(dtype=float) * b / np.maximum(
        rows["batch_size"].to_numpy(dtype=float), 1.0)
    out["batch_size"] = b
    return out


def affine_beyond_edge(rows: pd.DataFrame, params: dict[str, Any], ms: np.ndarray,
                       around: Around | None = None) -> np.ndarray:
    """``ms`` (the ``global`` rule's step times of ``rows``) with every row beyond its network's largest measured batch
    ``e`` (:func:`named_network_edges`) replaced by the straight line through the model's times at ``e`` and at the
    network's next-smaller measured batch ``p`` (``batch_edge = "affine"``):
    ``t(b) = t(e) + (b - e) (t(e) - t(p)) / (e - p)``, a fixed cost per step plus a cost per sample, the marginal cost
    not below 0. A network measured at one batch has no line and keeps ``ms``, as a model never measured does
    (:func:`named_network_edges`). Both times are the model's own at measured batches of the network, on the row's
    GPU: beyond the data the time grows at the marginal cost the network showed last, instead of following the trend
    in batch (``global``) or growing in proportion from the edge (``network``), which misses the fixed per-step cost
    that the release's hosts add (see :mod:`traintime.chronos.batch_scaling`).
    ``around``: :func:`named_network_edges`."""
    edge, prev = named_network_edges(rows, params, around)
    far = np.flatnonzero((edge >= 0) & (prev >= 0))  # a network measured at one batch keeps ``ms`` (module doc)
    if not len(far):
        return ms
    e, t_e = _times_at(rows, far, edge[far], params)
    p, t_p = _times_at(rows, far, prev[far], params)
    slope = np.maximum(t_e - t_p, 0.0) / (e - p)
    out = np.array(ms, dtype=float, copy=True)
    out[far] = t_e + slope * (rows["batch_size"].to_numpy(dtype=float)[far] - e)
    return out
