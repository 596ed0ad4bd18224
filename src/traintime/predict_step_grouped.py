"""Grouped evaluation of ``predict``'s step-time models on both data sources (rule ``predict_step_grouped``).

Data (compute time: forward + backward + optimizer, no DataLoader wait, on both sources)
    ``traces``: the public consumer-GPU traces in the subset of :mod:`traintime.predict_public_eval` (19 RTX GPUs,
    60 timm models, 64, 128 and 224 px, fp32 + fp16, batch 16 + 64: config ``predict_public_eval.step_img_px``),
    with the static features of ``predict --no-probe``;
    ``chronos``: the release's ``compute_time_ms`` rows (:func:`traintime.chronos.roofline_calibration.iteration_step_rows`).
Protocols (outer folds only; nothing is chosen on a held-out fold; every fit is deterministic, so no seeds)
    ``traces LOGO`` (leave one GPU out), ``traces LOMO`` (leave one model out: the model is also removed from
    CHRONOS when it is the same network, by name or :data:`CHRONOS_TWINS`; or, with config ``predict_public_eval.lomo_model_groups``, one of that many
    groups of models out: :func:`model_group`), ``traces LOGenO`` (leave one generation out: Ampere / Ada / Blackwell from
    the RTX series number), ``traces LOSO`` (leave one input size out, with more than one size: how a traced network
    fares at an input size never measured - CHRONOS rows of that size leave the training part too; added after the
    default-model rule was declared, reported beside it), ``chronos LOGO`` (leave one CHRONOS GPU out; the same name is removed from the traces
    too), ``chronos LOMO`` (leave one CHRONOS model out; the same traced network too: the same name or its
    :data:`CHRONOS_TWINS` twin), ``chronos LODO`` (leave
    one CHRONOS dataset out, all families; the traces name no dataset and stay in every training part; the inner
    choices of the learned models are by GPU and by model, as on the other protocols), ``traces external`` (fitted on CHRONOS only, scored on every trace row: the traces never seen), and
    ``traces largest batch`` / ``chronos largest batch`` (each network's largest measured batch held out, every
    other row fitted on: how a measured network's time extrapolates to a larger batch, :func:`largest_batch`; not
    part of the default-model rule, :func:`wins`), and ``traces smallest batch`` / ``chronos smallest batch`` (each
    network's smallest measured batch held out: below the measured range, where ``neighbour`` draws the line through
    the two smallest measured batches, scored beside ``neighbour_global_edge``, the same model without that line).
    On the largest-batch rows the neighbour model's rule beyond a network's largest
    measured batch is scored three ways (:data:`EDGE_VARIANTS`): ``neighbour`` (its default, ``affine``: the line
    through its times at the network's two largest measured batches), ``neighbour_network_edge`` (the efficiency
    measured at that edge) and ``neighbour_global_edge`` (the efficiency at the edge of all data; predict's rule
    before the affine one), :data:`traintime.chronos.neighbour_frozen.BATCH_EDGE_RULES`.
Methods
    ``efficiency`` (:class:`traintime.chronos.efficiency_step.NestedEfficiencyStepTime`, one model fitted on the
    training part of both sources, each source weighted equally; its feature set, ``base`` or ``kernel``, is
    chosen by inner GroupKFold-by-GPU on that training part only - by GPU generation on ``traces LOGenO``, whose
    outer folds hold out generations: :data:`INNER_GROUP`), ``efficiency_chronos_only`` (the same fitted on
    the CHRONOS part of the training fold only; run on CHRONOS LOGO and the external check, since on the other
    trace folds its training data, all of CHRONOS, is that of the external check), ``neighbour`` and
    ``neighbour_chronos_only`` (:class:`traintime.chronos.neighbour_step.NestedNeighbourStepTime`, the same way; its
    hardware feature set, with or without the SM count, the L2 cache size and the 16-bit matrix peak, chosen by the same inner CV, and its
    descriptor set for workloads never measured by inner GroupKFold by model), ``roofline_calibrated`` (per-family
    constants fitted on CHRONOS; on the CHRONOS grouped protocols refitted per family without the held-out GPU,
    model or dataset, :data:`CHRONOS_GROUPED`; on the trace protocols the
    saved calibration, which never saw a trace) and ``roofline_assumed`` (constants 0.40 / 0.60 / 5 us, nothing fitted).
Metrics
    MAPE and median APE over the out-of-fold rows; GPU pairs ordered right within each workload
    (:func:`traintime.predict_public_eval.pair_order`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from traintime.core.specs import rtx_generation as generation
from traintime.chronos.two_label import PROTOCOLS as CHRONOS_PROTOCOLS
from traintime.chronos.two_label import group_column
from traintime.core.metrics import step_errors
from traintime.predict_public_eval import pair_order
from traintime.core.step_rule import RULE_PROTOCOLS, RULE_TEXT, wins

KEY = ["model", "img_px", "batch_size", "precision"]
#: column the inner folds of a learned model's hardware choice are grouped by, per protocol (default ``gpu``): a
#: protocol that holds out a whole GPU generation chooses by holding out generations inside its training part too
INNER_GROUP: dict[str, str] = {"traces LOGenO": "generation", "traces LOSO": "img_px"}
#: CHRONOS grouped protocols and their group column (:data:`traintime.chronos.two_label.PROTOCOLS`); on each,
#: ``roofline_calibrated`` is refitted per family without the held-out group (the saved calibration saw every row)
CHRONOS_GROUPED: dict[str, str] = {p: group_column(p) for p in CHRONOS_PROTOCOLS}


#: CHRONOS models that are a traced network under another name (:mod:`traintime.measure.models` builds DeiT-Tiny and
#: ViT from these timm names; timm's ``mobilenetv2_100`` is MobileNetV2 at width 1.0, torchvision's ``mobilenet_v2``;
#: ``resnet50`` and ``densenet121`` share their names): the model protocols hold a CHRONOS model and its twin out
#: together. The release's mixer and resmlp are smaller variants (width 128 / 256, depth 8-12) than the traced
#: ``mixer_b16_224`` and ``resmlp_24_224``: other models, as ViT-S is not ViT-B.
CHRONOS_TWINS: dict[str, str] = {"DeiT-Tiny": "deit_tiny_patch16_224", "ViT": "vit_base_patch16_224",
                                 "mobilenetv2": "mobilenetv2_100"}


#: the neighbour model's rules beyond a network's largest measured batch scored beside its default (``affine``) on
#: the *largest batch* protocols: method name -> ``batch_edge``
EDGE_VARIANTS: dict[str, str] = {"neighbour_network_edge": "network", "neighbour_global_edge": "global"}


def trace_step_rows(subset: pd.DataFrame, gpus: pd.DataFrame) -> pd.DataFrame:
    """Step rows (predict's static features) of the measured trace rows, with ``measured_ms``; attrs['skipped']."""
    from traintime.predict_public_eval import trace_workloads

    out: list[pd.DataFrame] = []
    skipped: list[str] = []
    for g, _, rows in trace_workloads(subset, gpus, skipped):
        prec = g["precision"].iloc[0]
        rows["measured_ms"] = g["latency_ms"].to_numpy(dtype=float)
        rows["trace_precision"] = prec
        out.append(rows)
    res = pd.concat(out, ignore_index=True) if out else pd.DataFrame()
    res.attrs["skipped"] = sorted(set(skipped))
    return res


def model_ids(data: pd.DataFrame) -> np.ndarray:
    """The model of each step row across both sources: its model name, or on rows of source ``chronos`` its traced
    twin's name (:data:`CHRONOS_TWINS`). The unit the model protocols hold out, outer and inner (the by-model choice
    of :class:`~traintime.chronos.neighbour_step.NestedNeighbourStepTime` groups by the ``model_id`` column)."""
    model = data["model"].astype(str)
    ch = (data["source"] == "chronos").to_numpy()
    return np.where(ch, model.map(CHRONOS_TWINS).fillna(model).to_numpy(), model.to_numpy())


def both_sources(trace_rows: pd.DataFrame, chronos_rows: pd.DataFrame) -> pd.DataFrame:
    """One frame of step rows with ``source``, ``img_px`` and ``generation`` (the pooled training data)."""
    t = trace_rows.assign(source="traces")
    c = chronos_rows.assign(source="chronos")
    from traintime.chronos.neighbour_frozen import KERNEL_SHARE_COLUMNS, SPEC_COLUMNS
    from traintime.chronos.roofline_frozen import STEP_ROW_COLUMNS

    cols = ["source", *STEP_ROW_COLUMNS, *SPEC_COLUMNS.values(), *KERNEL_SHARE_COLUMNS, "dataset", "row_id", "measured_ms"]
    d = pd.concat([t.reindex(columns=cols), c.reindex(columns=cols)], ignore_index=True)
    d["img_px"] = d["input_px"]
    d["model_id"] = model_ids(d)
    d["generation"] = [generation(g) if s == "traces" else "cloud" for g, s in zip(d["gpu"], d["source"])]
    return d


def protocols(data: pd.DataFrame, max_folds: int | None = None, model_groups: int | None = None
              ) -> list[tuple[str, str, list[tuple[str, np.ndarray, np.ndarray]]]]:
    """(protocol, scored source, folds [(held-out group, train mask, test mask)]) of the module doc. ``max_folds``
    (tests only: config ``predict_public_eval.test_only.max_outer_folds``) keeps the first folds of each protocol
    (groups in sorted order): fewer rows scored, so the tables are no longer the protocols' results.
    ``model_groups`` (config ``predict_public_eval.lomo_model_groups``; None = one model per fold): ``traces LOMO``
    holds out that many groups of trace models instead (:func:`model_group`), each model still in exactly one test
    fold and never in its training part."""
    tr = (data["source"] == "traces").to_numpy()
    ch = ~tr
    gpu, model, gen = data["gpu"].astype(str).to_numpy(), data["model"].astype(str).to_numpy(), data["generation"].to_numpy()
    model_id = model_ids(data)
    trace_model = model_group(model_id, tr, model_groups)
    size = data["img_px"].astype(str).to_numpy()
    # the traces name no dataset (NaN, never held out: always in the training part); neither is a row without one
    dataset = data["dataset"].astype(str).to_numpy() if "dataset" in data else np.full(len(data), "nan")
    out = []
    sizes = [("traces LOSO", size, tr)] if len(np.unique(size[tr])) > 1 else []
    for name, col, src in [("traces LOGO", gpu, tr), ("traces LOMO", trace_model, tr), ("traces LOGenO", gen, tr), *sizes,
                           ("chronos LOGO", gpu, ch), ("chronos LOMO", model, ch), ("chronos LODO", dataset, ch)]:
        # a held-out CHRONOS model leaves the training part with its trace twin (same network, another name)
        key = model_id if name == "chronos LOMO" else col
        folds = [(str(g), key != key[src & (col == g)][0], src & (col == g))
                 for g in sorted(np.unique(col[src]), key=_natural) if g != "nan"]
        out.append((name, "traces" if src is tr else "chronos", folds[:max_folds] if max_folds else folds))
    out.append(("traces external (fit on CHRONOS only)", "traces", [("all traces", ch, tr)]))
    for edge, which in [("max", "largest"), ("min", "smallest")]:
        held = largest_batch(data, edge)
        for name, src in [(f"traces {which} batch", tr), (f"chronos {which} batch", ch)]:
            out.append((name, "traces" if src is tr else "chronos", [(f"{which} batch", ~(src & held), src & held)]))
    return out


def model_group(model: np.ndarray, scored: np.ndarray, groups: int | None) -> np.ndarray:
    """The held-out unit of ``traces LOMO`` per row: the model name, or with ``groups`` (fewer than the models of
    the ``scored`` rows) ``models i/groups`` - the scored source's models in name order dealt round-robin into
    ``groups`` folds (deterministic; a model's CHRONOS rows of the same name go with it). Rows whose model the scored
    source lacks keep their name, so they are never held out."""
    names = sorted(np.unique(model[scored]))
    if not groups or groups >= len(names):
        return model
    if groups < 2:
        from traintime.core.errors import ConfigError

        raise ConfigError(f"predict_public_eval.lomo_model_groups = {groups}: need at least 2 groups (or null)")
    fold = {m: f"models {i % groups + 1}/{groups}" for i, m in enumerate(names)}
    return np.array([fold.get(m, m) for m in model], dtype=object)


def _natural(g: str) -> tuple[int, float | str]:
    """Sort key: numbers (input sizes) by value, before any name."""
    try:
        return (0, float(g))
    except ValueError:
        return (1, g)


def largest_batch(data: pd.DataFrame, edge: str = "max") -> np.ndarray:
    """True per row at the largest batch measured of its network (source and
    :func:`traintime.chronos.neighbour_frozen.network_key`: model, input size, precision - the network the affine
    batch rule names) when that network was measured at more than one batch: the test rows of the *largest batch*
    protocols, which ask how the time of a measured network extrapolates to a batch larger than any measured of it.
    ``edge="min"``: the smallest batch instead (the *smallest batch* protocols: below any measured batch)."""
    from traintime.chronos.neighbour_frozen import network_key

    key = [data["source"].astype(str), pd.Series(network_key(data), index=data.index)]
    b = data["batch_size"].astype(float)
    g = b.groupby(key)
    return ((b == g.transform(edge)) & (g.transform("nunique") > 1)).to_numpy()


def _calibrated(calibration: dict[str, Any] | None, rows: pd.DataFrame) -> np.ndarray:
    from traintime.chronos.roofline_frozen import frozen_from_calibration

    p = np.full(len(rows), np.nan)
    for fam, idx in rows.groupby("family").indices.items():
        m = frozen_from_calibration(calibration or {}, fam)
        if m is not None:
            p[idx] = m.predict(rows.iloc[idx])
    return p


def grouped_predictions(data: pd.DataFrame, calibration: dict[str, Any] | None,
                        factory: Callable[[], Any] | None = None,
                        neighbour_factory: Callable[[], Any] | None = None, max_folds: int | None = None,
                        model_groups: int | None = None) -> pd.DataFrame:
    """Out-of-fold predictions of every method and protocol (module doc); ``factory`` builds the efficiency
    model (default ``NestedEfficiencyStepTime()``), ``neighbour_factory`` the neighbour model (default
    ``NestedNeighbourStepTime()``; tests pass spies); ``max_folds`` (tests only), ``model_groups``: :func:`protocols`.
    Columns: protocol, fold, method, row, pred_ms; ``attrs['fit_s']``: {(protocol, method): wall seconds of each fit
    on an outer training fold} (a learned model's fit includes its inner choice; the CHRONOS protocols' roofline
    refits: the time of all of a protocol's refits over its folds; nothing for a method fitted before this call)."""
    from traintime.chronos.efficiency_step import (
        NestedEfficiencyStepTime,
        source_weights,
    )
    from traintime.chronos.neighbour_step import NestedNeighbourStepTime
    from traintime.chronos.roofline_calibration import logo_step_predictions
    from traintime.chronos.roofline_frozen import FrozenRoofline

    learned = {"efficiency": factory or NestedEfficiencyStepTime,
               "neighbour": neighbour_factory or NestedNeighbourStepTime}
    y = data["measured_ms"].to_numpy(dtype=float)
    src = data["source"].to_numpy()
    assumed = FrozenRoofline(0.40, 0.60, 5.0, fitted=False).predict(data)
    refitted = {}  # CHRONOS grouped protocols: the roofline calibrated per family without the held-out group
    fit_s: dict[tuple[str, str], list[float]] = {}
    for proto, by in CHRONOS_GROUPED.items():
        refitted[proto] = np.full(len(data), np.nan)
        t0 = time.perf_counter()
        for fam, idx in data.index[src == "chronos"].groupby(data.loc[src == "chronos", "family"]).items():
            r = data.loc[idx].copy()
            if r[by].nunique() >= (3 if by == "gpu" else 2):
                refitted[proto][data.index.get_indexer(idx)] = logo_step_predictions(r, by=by)
        n_folds = data.loc[src == "chronos", by].nunique()
        fit_s[(proto, "roofline_calibrated")] = [(time.perf_counter() - t0) / max(n_folds, 1)] * n_folds
    calibrated = _calibrated(calibration, data)
    out, choices = [], {}  # choices: method -> protocol -> {feature set chosen by the inner CV: outer folds}
    for proto, _, folds in protocols(data, max_folds, model_groups):
        external = proto.startswith("traces external")
        for group, train, test in folds:
            idx = np.flatnonzero(test)
            methods: dict[str, np.ndarray] = {}
            only_ch = train & (src == "chronos")
            fitted = dict(learned)
            if proto.endswith("largest batch"):  # the batch question: also the other rules beyond a network's edge
                fitted.update({name: learned["neighbour"] for name in EDGE_VARIANTS})
            elif proto.endswith("smallest batch"):  # below a network's range: the global rule (before the line)
                fitted["neighbour_global_edge"] = learned["neighbour"]
            for name, make in fitted.items():
                if not external:
                    m = make()
                    if name in EDGE_VARIANTS:
                        m.set_params(batch_edge=EDGE_VARIANTS[name])
                    if "inner_group" in m.get_params():  # inner folds of the outer protocol's kind
                        m.set_params(inner_group=INNER_GROUP.get(proto, "gpu"))
                    t0 = time.perf_counter()
                    m.fit(data[train], y[train], sample_weight=source_weights(src[train]))
                    fit_s.setdefault((proto, name), []).append(time.perf_counter() - t0)
                    methods[name] = m.predict(data.iloc[idx])
                    if hasattr(m, "best_") and name in learned:
                        per = choices.setdefault(name, {}).setdefault(proto, {})
                        label = getattr(m, "choice_", m.best_)
                        per[label] = per.get(label, 0) + 1
                if (external or proto == "chronos LOGO") and name in learned:  # on the trace folds: the external fit
                    methods[f"{name}_chronos_only"] = make().fit(data[only_ch], y[only_ch]).predict(data.iloc[idx])
            methods["roofline_calibrated"] = refitted[proto][idx] if proto in refitted else calibrated[idx]
            methods["roofline_assumed"] = assumed[idx]
            for method, p in methods.items():
                out.append(pd.DataFrame({"protocol": proto, "fold": group, "method": method, "row": idx,
                                         "pred_ms": np.asarray(p, dtype=float)}))
    res = pd.concat(out, ignore_index=True)
    res.attrs["choices"] = choices
    res.attrs["fit_s"] = fit_s
    return res


def summarise_grouped(data: pd.DataFrame, pred: pd.DataFrame) -> pd.DataFrame:
    """Per protocol and method: rows, folds, MAPE, median APE, GPU pairs ordered right (module doc), and
    ``fit_s_mean``: the mean wall time of one fit on an outer training fold (``pred.attrs['fit_s']``; NaN for a
    method fitted before the folds: the saved calibration, the assumed roofline)."""
    fit_s = pred.attrs.get("fit_s", {})
    rows = []
    for (proto, method), g in pred.groupby(["protocol", "method"], sort=False):
        d = data.iloc[g["row"].to_numpy()][KEY + ["gpu"]].copy()
        d["latency_ms"] = data["measured_ms"].to_numpy()[g["row"].to_numpy()]
        d["pred_ms"] = g["pred_ms"].to_numpy()
        d = d[np.isfinite(d["pred_ms"])]
        err = step_errors(d["latency_ms"], d["pred_ms"])
        right, total = pair_order(d)
        rows.append({"protocol": proto, "method": method, "rows": len(d), "folds": g["fold"].nunique(),
                     "gpus": d["gpu"].nunique(), "models": d["model"].nunique(), "mape_pct": err["mape_pct"],
                     "median_ape_pct": err["median_ape_pct"],
                     "pairs_right_pct": 100.0 * right / total if total else float("nan"),
                     "geo_mean_pred_over_measured": err["geo_mean_pred_over_measured"],
                     "fit_s_mean": float(np.mean(fit_s[(proto, method)])) if fit_s.get((proto, method)) else np.nan})
    return pd.DataFrame(rows)


def summarise_folds(data: pd.DataFrame, pred: pd.DataFrame,
                    protocols: tuple[str, ...] = ("chronos LOGO", "traces LOGO"),
                    by: tuple[str, ...] = ("fold", "family"), sort: bool = True) -> pd.DataFrame:
    """Per protocol, method and the columns ``by`` (of ``pred``, else of ``data``; default: held-out fold and
    family): rows, MAPE, median APE and the geometric mean of predicted / measured (which GPUs a model gets wrong,
    and in which direction). ``sort=False``: groups in the order they first appear in ``pred``."""
    g = pred[pred["protocol"].isin(protocols)]
    rows = g["row"].to_numpy()
    d = pd.DataFrame({"protocol": g["protocol"].to_numpy(), "method": g["method"].to_numpy(),
                      **{c: g[c].to_numpy() if c in g.columns else data[c].to_numpy()[rows] for c in by},
                      "ratio": g["pred_ms"].to_numpy() / data["measured_ms"].to_numpy(dtype=float)[rows]})
    d = d[np.isfinite(d["ratio"]) & (d["ratio"] > 0)]
    d["ape"] = 100 * np.abs(d["ratio"] - 1)
    d["log_ratio"] = np.log(d["ratio"])
    out = (d.groupby(["protocol", "method", *by], sort=sort)
           .agg(rows=("ape", "size"), mape_pct=("ape", "mean"), median_ape_pct=("ape", "median"),
                log_ratio=("log_ratio", "mean")).reset_index())
    out["geo_mean_pred_over_measured"] = np.exp(out.pop("log_ratio"))
    return out


#: the trace protocols broken down by input size (:func:`errors_by_size`)
SIZE_PROTOCOLS: tuple[str, ...] = ("traces LOGO", "traces LOMO", "traces LOGenO", "traces LOSO", "traces largest batch",
                                    "traces smallest batch")


def errors_by_size(data: pd.DataFrame, pred: pd.DataFrame, protocols: tuple[str, ...] = SIZE_PROTOCOLS) -> pd.DataFrame:
    """:func:`summarise_folds` of the trace protocols per method and input size (``img_px``) of the scored rows, in
    the order of ``pred``: how each size fares when the step models are fitted on several."""
    out = summarise_folds(data, pred, protocols, by=("img_px",), sort=False)
    out["img_px"] = out["img_px"].astype(int)
    block = out.groupby(["protocol", "method"], sort=False).ngroup()  # first-appearance order of pred
    return (out.assign(_block=block).sort_values(["_block", "img_px"], kind="stable").drop(columns="_block")
            .reset_index(drop=True))


def errors_by_batch_scaling(data: pd.DataFrame, pred: pd.DataFrame,
                            protocols: tuple[str, ...] = ("chronos LOGO", "traces LOGO")) -> pd.DataFrame:
    """:func:`summarise_folds` per protocol, method and batch-scaling class of the row
    (:func:`traintime.chronos.batch_scaling.batch_scaling_class`, in the order of its ``CLASSES``), with each
    class's share of the protocol's scored rows (``share_pct``); protocols and methods in the order of ``pred``."""
    from traintime.chronos.batch_scaling import CLASSES, batch_scaling_class

    out = summarise_folds(data.assign(batch_scaling=batch_scaling_class(data)), pred, protocols,
                          by=("batch_scaling",), sort=False)
    block = out.groupby(["protocol", "method"], sort=False).ngroup()  # first-appearance order of pred
    out = (out.assign(_block=block, _cls=out["batch_scaling"].map(CLASSES.index))
           .sort_values(["_block", "_cls"]).drop(columns=["_block", "_cls"]).reset_index(drop=True))
    out.insert(4, "share_pct", 100.0 * out["rows"] / out.groupby(["protocol", "method"])["rows"].transform("sum"))
    return out


def chronos_predictions(data: pd.DataFrame, pred: pd.DataFrame) -> pd.DataFrame:
    """The out-of-fold predictions of the CHRONOS grouped protocols (:data:`CHRONOS_GROUPED`) keyed by the release's
    ``row_id``: the compute half of the two-label step time (:mod:`traintime.chronos.two_label`)."""
    p = pred[pred["protocol"].isin(list(CHRONOS_GROUPED))]
    return pd.DataFrame({"protocol": p["protocol"].to_numpy(), "fold": p["fold"].to_numpy(),
                         "method": p["method"].to_numpy(), "row_id": data["row_id"].to_numpy()[p["row"].to_numpy()],
                         "pred_ms": p["pred_ms"].to_numpy()})


def step_grouped_eval(trace_rows: pd.DataFrame, chronos_rows: pd.DataFrame, calibration: dict[str, Any] | None,
                      factory: Callable[[], Any] | None = None,
                      neighbour_factory: Callable[[], Any] | None = None, max_folds: int | None = None,
                      model_groups: int | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(summary, out-of-fold predictions) of the module doc (``max_folds``, tests only, and ``model_groups``:
    :func:`protocols`)."""
    data = both_sources(trace_rows, chronos_rows)
    pred = grouped_predictions(data, calibration, factory, neighbour_factory, max_folds, model_groups)
    return summarise_grouped(data, pred), pred


def conformal_rows(data: pd.DataFrame, pred: pd.DataFrame, coverage: float = 0.9,
                   method: str = "efficiency") -> tuple[dict[str, Any], pd.DataFrame]:
    """Split-conformal log half-width of a learned step model (``method``) from its pooled leave-one-GPU-out
    residuals (traces LOGO and CHRONOS LOGO, grouped by GPU; empirical quantile, as predict uses for the roofline)
    and the measured coverage of that interval (each GPU checked with the half-width of the other GPUs' residuals).
    For ``neighbour`` also one half-width per data source (``by_source``: predict uses that of the source of the
    workload's nearest measured workload, :meth:`~traintime.chronos.neighbour_frozen.FrozenNeighbour.step_log_halfwidth`)
    and its coverage, checked the same way within each source."""
    from traintime.chronos.conformal import SplitConformal, grouped_coverage

    def residuals(protocols: list[str], by: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        p = pred[(pred["method"] == method) & pred["protocol"].isin(protocols)]
        rows = p["row"].to_numpy()
        return (data["measured_ms"].to_numpy(dtype=float)[rows], p["pred_ms"].to_numpy(dtype=float),
                data[by].astype(str).to_numpy()[rows], data["source"].astype(str).to_numpy()[rows])

    def one(y: np.ndarray, yp: np.ndarray, groups: np.ndarray, label: str,
            variant: str) -> tuple[float, dict[str, Any]]:
        q = SplitConformal(coverage, finite_sample=False).fit(y, yp, groups).log_halfwidth
        cov = grouped_coverage(y, yp, groups, coverage, finite_sample=False)
        return float(q), {"quantity": f"step_ms ({method}, {label})", "family": "all",
                          "variant": variant, "nominal_coverage": coverage, "measured_coverage": cov["measured"],
                          "rows": cov["n"], "groups": cov["groups"], "interval_factor_all_groups": float(np.exp(q)),
                          "median_interval_factor_held_out": float(np.exp(cov["median_log_halfwidth"]))}

    y, yp, groups, src = residuals(["traces LOGO", "chronos LOGO"], "gpu")
    q, row = one(y, yp, groups, "leave-one-GPU-out, both sources", "empirical quantile")
    conf: dict[str, Any] = {"coverage": coverage, "step_log_halfwidth": q, "groups": row["groups"],
                            "residuals": "pooled leave-one-GPU-out (traces LOGO + CHRONOS LOGO)"}
    table = [row]
    if method == "neighbour":
        conf["by_source"] = {}
        hits = n = 0
        for s_name in sorted(set(src)):
            m = src == s_name
            qs, r = one(y[m], yp[m], groups[m], f"leave-one-GPU-out, {s_name}", "per source (Mondrian)")
            conf["by_source"][s_name] = {"step_log_halfwidth": qs, "groups": r["groups"]}
            table.append(r)
            hits, n = hits + r["measured_coverage"] * r["rows"], n + r["rows"]
        table.append({**row, "quantity": f"step_ms ({method}, leave-one-GPU-out, half-width of the row's source)",
                      "variant": "per source (Mondrian), what predict uses for a measured workload",
                      "measured_coverage": hits / n if n else float("nan"), "rows": n,
                      "interval_factor_all_groups": float("nan"), "median_interval_factor_held_out": float("nan")})
        yu, ypu, models, _ = residuals(["traces LOMO"], "model")
        if len(yu):
            qu, r = one(yu, ypu, models, "leave-one-model-out, traces",
                        "unseen workload (what predict uses for a workload never measured)")
            conf["unseen_workload"] = {"step_log_halfwidth": qu, "groups": r["groups"],
                                       "residuals": "traces LOMO, grouped by model"}
            table.append(r)
    return conf, pd.DataFrame(table)


def local_fit_rows(iteration: pd.DataFrame, local: pd.DataFrame | None, specs: pd.DataFrame,
                   train_on: str = "released_and_local") -> tuple[pd.DataFrame, dict[str, Any]]:
    """(step rows in :func:`both_sources`' columns, ``training_data`` summary) of the merged local rows
    (``results/data/local_iteration.csv``) on GPUs of ``specs``, per ``train_on``
    (:func:`traintime.measure.training_rows.combine_gpu_rows`: a CPU row is left out and counted). They are labelled
    source ``chronos`` - measured as the release measures, compute time apart from loader wait - and join only the
    fit of the frozen models: the grouped tables stay on the released rows."""
    from traintime.chronos.roofline_calibration import iteration_step_rows
    from traintime.measure.training_rows import combine_gpu_rows, local_summary

    mine, summary = combine_gpu_rows(iteration.iloc[:0], local, specs["gpu"], train_on)  # local rows only
    rows = iteration_step_rows(mine, specs) if len(mine) else pd.DataFrame()
    out = both_sources(pd.DataFrame(), rows) if len(rows) else pd.DataFrame()
    used = local_summary(rows, train_on, 0)  # the rows the fit gets (with a measured time and specs)
    summary.update({k: used[k] for k in ("local_rows", "local_gpus", "local_rows_per_gpu")})
    return out, summary


def run_step_grouped(traces: pd.DataFrame, iteration: pd.DataFrame, calibration: dict[str, Any] | None,
                     specs_path: str | None = None, img_px: Any = (64, 128, 224), precisions: Any = ("fp32", "fp16"),
                     batch_sizes: Any = (16, 64), coverage: float = 0.9, local: pd.DataFrame | None = None,
                     train_on: str = "released_and_local", max_folds: int | None = None,
                     model_groups: int | None = None) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, dict], str, pd.DataFrame, pd.DataFrame,
                                pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(summary, interval coverage, {"efficiency": frozen JSON, "neighbour": frozen JSON} each fitted on all rows
    of both sources (plus the merged ``local`` rows on GPUs with specs, per ``train_on``: :func:`local_fit_rows`)
    with its conformal half-width, markdown, per-fold breakdown of the LOGO protocols, their errors
    by how the measured time grows with batch: :func:`errors_by_batch_scaling`, the CHRONOS out-of-fold
    predictions: :func:`chronos_predictions`, the trace protocols per input size: :func:`errors_by_size`, the frozen models on the trace rows at batches between
    the fitted ones: :func:`interior_batch_errors`). ``max_folds`` (tests only) and ``model_groups``:
    :func:`protocols`, both said in the markdown."""
    from traintime.chronos.efficiency_step import (
        NestedEfficiencyStepTime,
        source_weights,
    )
    from traintime.chronos.neighbour_frozen import FrozenNeighbour
    from traintime.chronos.neighbour_step import NestedNeighbourStepTime
    from traintime.chronos.roofline_calibration import iteration_step_rows
    from traintime.chronos.roofline_frozen import FrozenRoofline
    from traintime.core.gpudb import gpu_database
    from traintime.predict_public_eval import input_sizes, trace_subset

    specs = gpu_database(specs_path)
    sizes = ", ".join(map(str, input_sizes(img_px)))
    tr = trace_step_rows(trace_subset(traces, img_px, precisions, batch_sizes), specs)
    ch = iteration_step_rows(iteration, specs)
    summary, pred = step_grouped_eval(tr, ch, calibration, max_folds=max_folds, model_groups=model_groups)
    data = both_sources(tr, ch)
    extra, training_data = local_fit_rows(iteration, local, specs, train_on)
    training_data["released_rows"] = len(data)
    trained_on = (f"CHRONOS {ch.attrs.get('measured', '')} ({len(ch)} rows) + consumer-GPU traces {sizes} px "
                  f"({len(tr)} rows)" + (f" + {len(extra)} local rows ({', '.join(training_data['local_gpus'])})"
                                         if len(extra) else ""))
    fit = pd.concat([data, extra.reindex(columns=data.columns)], ignore_index=True) if len(extra) else data
    frozen: dict[str, dict] = {}
    fitted: dict[str, Any] = {}
    covs = []
    for name, est in [("efficiency", NestedEfficiencyStepTime(trained_on=trained_on)),
                      ("neighbour", NestedNeighbourStepTime(trained_on=trained_on))]:
        conf, cov = conformal_rows(data, pred, coverage, name)
        est.fit(fit, fit["measured_ms"], sample_weight=source_weights(fit["source"]))
        frozen[name] = {**est.to_json(), "conformal": conf, "wins_grouped": wins(summary, new=name),
                        "rule_protocols": list(RULE_PROTOCOLS), "training_data": training_data}
        covs.append(cov)
        fitted[name] = est
    for name, per in pred.attrs.get("choices", {}).items():
        frozen[name]["outer_fold_feature_sets"] = per
    cov = pd.concat(covs, ignore_index=True)
    interior = trace_step_rows(trace_subset(traces, img_px, precisions, interior_batches(traces, batch_sizes)), specs)
    before = FrozenNeighbour({**frozen["neighbour"], "batch_edge": "global"})
    interior_table = interior_batch_errors(interior, {
        "neighbour": fitted["neighbour"].predict,
        "neighbour, no line between measured batches (before)": before.predict,
        "efficiency": fitted["efficiency"].predict,
        "roofline_assumed": FrozenRoofline(0.40, 0.60, 5.0, fitted=False).predict}) if len(interior) else pd.DataFrame()
    return (summary, cov, frozen, markdown_grouped(summary, cov, tr.attrs.get("skipped", []), frozen, max_folds,
                                                   sizes, model_groups),
            summarise_folds(data, pred), errors_by_batch_scaling(data, pred), chronos_predictions(data, pred),
            errors_by_size(data, pred), interior_table)


def interior_batches(traces: pd.DataFrame, batch_sizes: Any) -> list[int]:
    """Batch sizes of the traces strictly between the smallest and the largest of ``batch_sizes`` (those the step
    models are fitted on) and not among them: the batches of the *interior batch* check (default: 32)."""
    fitted = sorted({int(b) for b in batch_sizes})
    return sorted({int(b) for b in pd.to_numeric(traces["batch_size"], errors="coerce").dropna()
                   if fitted[0] < int(b) < fitted[-1] and int(b) not in fitted})


def interior_batch_errors(rows: pd.DataFrame, predictors: dict[str, Callable[[pd.DataFrame], np.ndarray]]
                          ) -> pd.DataFrame:
    """Per method and input size (and all sizes): the errors of ``predictors`` (method -> predict function) on trace
    ``rows`` at a batch between two measured batches of their network (:func:`interior_batches`): rows no step
    model was fitted on, of networks and GPUs it was (how a measured network's time is interpolated in batch)."""
    y = rows["measured_ms"].to_numpy(dtype=float)
    px = rows["input_px"].astype(int).astype(str).to_numpy()
    out = []
    for method, predict in predictors.items():
        p = np.asarray(predict(rows), dtype=float)
        for size in [*sorted(set(px), key=int), "all"]:
            m = np.ones(len(rows), dtype=bool) if size == "all" else px == size
            e = step_errors(y[m], p[m])
            out.append({"method": method, "img_px": size, "batch_sizes": ", ".join(
                map(str, sorted(set(rows.loc[m, "batch_size"].astype(int))))), "rows": int(m.sum()),
                "gpus": int(rows.loc[m, "gpu"].nunique()), "models": int(rows.loc[m, "model"].nunique()),
                "mape_pct": e["mape_pct"], "median_ape_pct": e["median_ape_pct"],
                "geo_mean_pred_over_measured": e["geo_mean_pred_over_measured"]})
    return pd.DataFrame(out)


def markdown_grouped(summary: pd.DataFrame, cov: pd.DataFrame, skipped: list[str], frozen: dict[str, dict],
                     max_folds: int | None = None, trace_sizes: str = "224", model_groups: int | None = None) -> str:
    lines = ["# Step-time models of `traintime predict` on grouped outer folds, both data sources", ""]
    if max_folds:  # tests only (protocols)
        lines += [(f"**TEST CONFIGURATION (predict_public_eval.test_only.max_outer_folds = {max_folds}): only the first "
                   f"{max_folds} outer folds of each protocol are scored - these are not the protocols' results.**"), ""]
    lines += [
             "Compute time (forward + backward + optimizer). Traces: public consumer-GPU traces, "
             f"{trace_sizes} px, fp32 + fp16, "
             "batch 16 + 64; CHRONOS: the release's compute_time_ms. `efficiency` and `neighbour` are fitted on the "
             "training part of both sources (equal weight per source), `*_chronos_only` on its CHRONOS part only. "
             "The feature set of `efficiency` (base / kernel) is chosen inside each outer fold by inner 3-fold "
             "GroupKFold by GPU (by GPU generation on traces LOGenO, by input size on traces LOSO) on the training "
             "part; `neighbour` (hardware "
             "log-linear; a workload never measured takes a ridge trend in its descriptors plus the residuals of its "
             "k = 5 nearest measured workloads) chooses its hardware features (with or without the SM count, the "
             "L2 size and the 16-bit matrix peak) and the ridge strength of per-workload slopes in log peak / bandwidth (off, 1, 3) the same "
             "way, and its descriptors (base, or also the kernel mix: shares "
             "of the forward FLOPs in 1x1, 3x3, depthwise and grouped convolutions) by inner 5-fold GroupKFold by "
             "model (3 folds until a look at the CHRONOS LOMO outer folds: traintime.chronos.neighbour_step). "
             "`roofline_calibrated` is predict's roofline (CHRONOS only; refitted per family without the held-out "
             "GPU, model or dataset on the CHRONOS protocols), "
             "`roofline_assumed` fits nothing. Every fit is deterministic (no seeds). `chronos LOMO` / `chronos LODO` "
             "(leave one CHRONOS model / dataset out) and `traces LOSO` (leave one trace input size out: a traced "
             "network at an input size never measured; CHRONOS rows of that size, 64 px, leave the training part "
             "too) were added after the default-model rule below was declared: "
             "reported beside it, not part of it. `traces external`: fitted on "
             "all of CHRONOS, scored on every trace row. `* largest batch`: each network's (model, input size, "
             "precision) largest measured batch held out, all other rows of both sources fitted on - how a measured "
             "network extrapolates to a larger batch (not part of the rule below; `roofline_calibrated` there is the "
             "saved calibration, which saw the CHRONOS test rows); `* smallest batch` the same with each network's "
             "smallest measured batch held out, where `neighbour` draws the line through the network's two smallest "
             "measured batches (never below the smallest's time per sample; traintime.chronos.neighbour_batch."
             "affine_below_batches) and `neighbour_global_edge` is that model without the line, as before it (the "
             "line was added after the one between measured batches, without a look at these rows). Beyond a network's largest measured batch "
             "`neighbour` follows the straight line through its own times at the network's two largest measured "
             "batches (a fixed cost per step plus a cost per sample; `batch_edge` affine, traintime.chronos."
             "neighbour_batch; a network never measured keeps the global rule); `neighbour_network_edge` holds the efficiency measured at that batch, "
             "`neighbour_global_edge` the efficiency at the edge of all data (the rule before the affine one, which "
             "was adopted when the traces held 224 px only, where it was the best of the three on both largest-batch "
             "rows: these rows were its evidence, not an independent test). A trace network measured at 16 and 64 has "
             "one measured batch left when its largest is held out: no line, so `neighbour` keeps the global rule "
             "there (before 2026-12-06 it grew in proportion from that batch, 58.6 % on `traces largest batch`; "
             "the change and its check on rows never used: traintime.chronos.neighbour_batch); predict's traced "
             "networks are measured at two batches. Wall time: results/tables/dag_cost.csv."
             + (f" `traces LOMO` holds out {model_groups} groups of trace models (names in order, dealt round-robin; "
                "predict_public_eval.lomo_model_groups, null = one model per fold): every model is scored once, by "
                "models fitted without it." if model_groups else ""), "",
             "| protocol | method | rows | folds | GPUs | models | MAPE % | median APE % | pairs right % | pred / measured |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for _, r in summary.iterrows():
        lines.append(f"| {r['protocol']} | {r['method']} | {r['rows']} | {r['folds']} | {r['gpus']} | {r['models']} | "
                     f"{r['mape_pct']:.1f} | {r['median_ape_pct']:.1f} | {r['pairs_right_pct']:.1f} | "
                     f"{r['geo_mean_pred_over_measured']:.2f} |")
    lines.append("")
    for name in frozen:
        lines += [f"`{name}` beats `roofline_calibrated` (MAPE) on {RULE_TEXT}: "
                  f"{'yes' if frozen[name]['wins_grouped'] else 'no'}.", ""]
    lines += ["Intervals (split conformal on leave-one-GPU-out residuals; each GPU checked with the half-width of the "
              "other GPUs' residuals):", "", "| interval | rows | groups (GPUs or models) | nominal | measured | factor x/ |", "|---|---:|---:|---:|---:|---:|"]
    for c in cov.itertuples():
        f = "-" if c.interval_factor_all_groups != c.interval_factor_all_groups else f"{c.interval_factor_all_groups:.2f}"
        lines.append(f"| {c.quantity}, {c.variant} | {c.rows} | {c.groups} | {c.nominal_coverage:.0%} | "
                     f"{c.measured_coverage:.1%} | {f} |")
    lines.append("")
    for name, keys in [("efficiency", ("feature_set",)), ("neighbour", ("hardware_set", "slopes", "trend",
                                                                               "descriptor_set"))]:
        choices = frozen[name].get("outer_fold_feature_sets")
        if choices:
            lines += [f"Feature set of `{name}` chosen by the inner CV (outer folds): " + "; ".join(
                f"{p}: " + ", ".join(f"{k} {v}" for k, v in c.items()) for p, c in choices.items())
                + f". Frozen model (all rows): {', '.join(str(frozen[name].get(k)) for k in keys)}.", ""]
    if skipped:
        lines += [f"Traced models predict could not build ({len(skipped)}): " + "; ".join(skipped), ""]
    return "\n".join(lines).rstrip("\n") + "\n"
