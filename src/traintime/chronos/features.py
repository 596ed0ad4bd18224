"""Feature sets for the iteration-time (step-time) regressors: rows of the canonical
:data:`~traintime.data.chronos.ITERATION` table -> a numeric matrix.

A feature builder is a small fit/transform object (scikit-learn style): ``fit(rows)`` learns only
what the set needs from the rows (which columns a family has, category vocabularies unless they
are given), ``transform(rows)`` returns a float DataFrame with a fixed column order
(``feature_names_``). Saved models keep their fitted builder, so they featurise new canonical rows.

Feature sets (:data:`FEATURE_SETS`, created by name with :func:`make_feature_builder`):

``paper``
    Exactly what the released CHRONOS scripts (``epoch_time_prediction/{CNN,MLP,Transformer}.py``)
    feed XGBoost, column for column and **in the same order** (column sampling depends on it): every
    numeric column of the family's release file in raw order, except the target and the family's
    leaky list (loader wait, compute time, p90; plus throughput for Transformer); then the release's
    derived ratios (FLOPs over bandwidth and over each peak, bandwidth per GB, intensity over FP32;
    bytes per parameter and activations over parameters for CNN and Transformer; head width, FFN
    multiplier and tokens per step for Transformer); then one-hot ``memory_type`` and ``bus`` with
    the first category dropped. Booleans are 0/1. Model, dataset, optimizer and GPU names are dropped
    (so the optimizer is not a feature). It **keeps** ``loader_ratio`` (= loader wait / target) for
    CNN and Transformer (target leakage), the learning rate, and ``price_per_hour_usd`` (MLP,
    Transformer). The released code builds the dummies on the whole file before splitting; pass the
    family's vocabulary (:func:`vocabulary`) as ``categories`` to do the same.
``paper_noleak``
    ``paper`` without target-derived columns (drops ``loader_ratio``): the leak's ablation.
``clean`` (the honest default)
    No target-derived column, no learning rate (it cannot change the step time), no price, no
    provider (unless ``use_provider=True``) and no GPU column as shipped: GPU specifications are
    joined from the GPU spec table by canonical name (:func:`traintime.core.specs.load_specs`), so a model
    predicts for any GPU of that table. Workload: batch size, precision bits, AMP (0/1: the binary
    one-hot), dataset size, classes, input pixels / sequence length, the family's architecture and
    analytic cost columns (FLOPs, parameter/optimizer/activation bytes, intensity, kernel mix);
    ``flops_train_per_batch`` is recomputed exactly as per-sample FLOPs x batch size. Roofline-style
    ratios: ideal compute time at FP32 and at the precision's peak, state and activation traffic
    time over bandwidth, their max, input values per step. Categoricals: one-hot ``optimizer``,
    ``model`` and ``dataset`` over fixed vocabularies (unseen names give all zeros). Magnitudes
    (counts, bytes, FLOPs, times) are log10-transformed (``log_features``; monotone, so trees are
    unaffected; it helps the MLP regressor). ``input_px`` and ``seq_len`` may be empty (text has no
    pixels); every other workload column the family had in training is required
    (``required_columns_``). With ``log_target`` (config default) the regressor fits log(step time).

``clean_roofline``
    ``clean`` with the target log(step time / ideal FP32 compute time) (:class:`CleanRooflineFeatures`).
    Mean per-group MAPE, XGBoost, seed 42: LOMO 58.3% (clean 75.4%), LODO 51.8% (80.6%), but LOGO 80.4%
    (46.1%: peak FP32 rates rank GPUs worse than the spec columns do) and grouped-random 10.3% (8.8%);
    with the precision's peak instead of FP32 LOGO fails on the P4 (its FP16 rate is 1/64 of FP32);
    with FLOPs alone as offset every protocol got worse.

Tried on leave-one-GPU-out and not kept (mean per-group MAPE, XGBoost, seed 42): without log target
51.7% (vs 45.9%); with one-hot provider 46.0%; separate models of compute time and loader wait (the
target-derived columns used as training labels only) summed: 44.4% at twice the cost.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, TransformerMixin

from traintime.core.errors import SchemaError, TraintimeError, unknown_name
from traintime.core.specs import _norm, alias_map, load_specs
from traintime.data.chronos import FAMILIES, ITERATION, ITERATION_TARGET, family_columns

# --- paper (released code) -------------------------------------------------------------------------
#: per-family columns the released scripts drop as leaky (canonical names), besides the target
PAPER_LEAKY: dict[str, frozenset[str]] = {
    "CNN": frozenset({"loader_wait_ms", "compute_time_ms", "p90_step_time_ms"}),
    "MLP": frozenset({"loader_wait_ms", "compute_time_ms", "p90_step_time_ms"}),
    "Transformer": frozenset({"loader_wait_ms", "compute_time_ms", "p90_step_time_ms", "examples_per_sec"}),
}
#: string columns the released code one-hot encodes (drop_first), in its order
PAPER_CATEGORICAL: tuple[str, ...] = ("memory_type", "bus")

# --- clean ----------------------------------------------------------------------------------------
#: workload columns the clean set may use (those present for every training row of the family)
CLEAN_WORKLOAD: tuple[str, ...] = (
    "batch_size", "precision_bits", "amp", "dataset_size", "num_classes", "input_px", "seq_len",
    "depth", "embed_dim", "patch_size", "token_mlp_dim", "channel_mlp_dim", "num_patches",
    "d_model", "n_heads", "d_head", "d_ff", "bn_layers", "act_layers", "sum_hwc", "max_hwc",
    "flops_1x1_frac", "flops_3x3_frac", "flops_depthwise_frac", "flops_grouped_frac",
    "param_count", "param_bytes", "optimizer_state_bytes", "master_param_bytes", "total_state_bytes",
    "flops_fwd_per_sample", "flops_fwd_per_token", "flops_train_per_sample",
    "act_bytes_per_sample_proxy", "arithmetic_intensity_flop_per_byte",
)
#: GPU spec-table columns joined by canonical GPU name
CLEAN_GPU_SPECS: tuple[str, ...] = (
    "compute_capability", "sms", "cuda_cores", "tensor_cores", "base_clock_mhz", "boost_clock_mhz",
    "memory_clock_mhz", "memory_gb", "memory_bus_bits", "memory_bandwidth_gbps", "l2_mb",
    "fp32_gflops", "fp16_gflops", "fp64_gflops",
)
CLEAN_CATEGORICAL: tuple[str, ...] = ("optimizer", "model", "dataset")
#: workload columns that are empty by design for some rows (no pixels for text, no sequence for CNNs):
#: used when any training row has them, and allowed to be empty (NaN) in any row
CLEAN_OPTIONAL = frozenset({"input_px", "seq_len"})
#: positive heavy-tailed columns that ``log_features`` turns into log10
_LOG_COLUMNS = frozenset({
    "batch_size", "dataset_size", "num_classes", "input_px", "seq_len", "sum_hwc", "max_hwc",
    "param_count", "param_bytes", "optimizer_state_bytes", "master_param_bytes", "total_state_bytes",
    "flops_fwd_per_sample", "flops_fwd_per_token", "flops_train_per_sample", "flops_train_per_batch",
    "act_bytes_per_sample_proxy", "arithmetic_intensity_flop_per_byte", "input_values_per_step",
    "ideal_compute_fp32_ms", "ideal_compute_peak_ms", "state_traffic_ms", "activation_traffic_ms",
    "roofline_ms",
})


def vocabulary(table: pd.DataFrame, family: str | None = None) -> dict[str, list[str]]:
    """Sorted category vocabularies (names only, no target information) of a table or one family."""
    rows = table if family is None else table[table["family"] == family]
    out: dict[str, list[str]] = {}
    for col in (*PAPER_CATEGORICAL, *CLEAN_CATEGORICAL, "provider"):
        if col in rows:
            out[col] = sorted(str(v) for v in rows[col].dropna().unique())
    return out


def _one_hot(values: pd.Series, col: str, categories: Sequence[str], drop_first: bool) -> pd.DataFrame:
    cats = list(categories)[1:] if drop_first else list(categories)
    vals = values.astype(object).where(values.notna(), None).astype(str).to_numpy()
    data = {f"{col}={c}": (vals == c).astype(float) for c in cats}
    return pd.DataFrame(data, index=values.index)


def _require(rows: pd.DataFrame, cols: Sequence[str], what: str) -> None:
    missing = [c for c in cols if c not in rows.columns]
    if missing:
        raise SchemaError(f"{what}: rows lack column(s) {', '.join(missing)}")
    for c in cols:
        bad = rows[c].isna().to_numpy()
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            rid = rows["row_id"].iloc[i] if "row_id" in rows else i
            raise SchemaError(f"{what}: column '{c}' is empty in row {rid}")


def _num(s: pd.Series) -> np.ndarray:
    return pd.to_numeric(s, errors="coerce").astype(float).to_numpy()


#: inside :func:`shared_rows`: the frame whose row subsets the clean features are computed from, its rows by
#: ``row_id`` (None without a unique one), and its features per fitted state (None: they cannot be built)
_SHARED: ContextVar[tuple[pd.DataFrame, pd.Index | None, dict[tuple, pd.DataFrame | None]] | None] = ContextVar(
    "_SHARED", default=None)


@contextmanager
def shared_rows(rows: pd.DataFrame) -> Iterator[None]:
    """Inside: the clean feature sets (:class:`CleanFeatures`, :class:`CleanRooflineFeatures`) compute the features
    of a subset of ``rows`` (the same columns, its rows found by ``row_id`` and the columns the features read checked
    equal: ``rows.iloc[...]``, with any index) from those of every row of ``rows``, built once per fitted state and
    kept for the scope. The features are row-wise, so the
    result is the same; cross-validation over many folds of one frame then builds them once per state instead of
    twice per fit (about a tenth of a grouped protocol's time). Any other frame, and a state whose features cannot
    be built for every row of ``rows`` (a GPU or value only outside the subset), take the direct path."""
    ids = pd.Index(rows["row_id"]) if "row_id" in rows.columns else None
    token = _SHARED.set((rows, ids if ids is not None and ids.is_unique else None, {}))
    try:
        yield
    finally:
        _SHARED.reset(token)


class FeatureBuilder(TransformerMixin, BaseEstimator):
    """Base class: ``fit(rows) -> self``, ``transform(rows) -> DataFrame`` (float, ``feature_names_``).

    scikit-learn compatible (``get_params``/``clone``): constructor arguments are stored unchanged.
    After :meth:`fit`, ``required_columns_`` lists the canonical columns a row must have.
    """

    name = "base"
    family: str

    feature_names_: list[str]
    required_columns_: list[str]

    def fit(self, rows: pd.DataFrame, y: Any = None) -> "FeatureBuilder":
        raise NotImplementedError

    def transform(self, rows: pd.DataFrame) -> pd.DataFrame:
        raise NotImplementedError

    def log_offset(self, X: pd.DataFrame) -> np.ndarray | None:
        """Natural-log offset of the target for the rows of ``X`` (this builder's output), or None.

        A builder with an offset makes :class:`~traintime.chronos.estimators.IterationTimeModel` regress
        ``log(step time) - offset`` and add the offset back when predicting.
        """
        return None


class PaperFeatures(FeatureBuilder):
    """The released scripts' feature matrix of one family (see the module docstring).

    Parameters
    ----------
    family : ``CNN``, ``MLP`` or ``Transformer``.
    categories : vocabularies of ``memory_type`` and ``bus`` (sorted lists); learned from the rows
        given to :meth:`fit` when None. The released code uses the whole file's vocabulary.
    drop_target_derived : drop columns flagged ``target_derived`` in the schema (``paper_noleak``).
    """

    name = "paper"

    def __init__(self, family: str, categories: Mapping[str, Sequence[str]] | None = None,
                 drop_target_derived: bool = False) -> None:
        if family not in FAMILIES:
            raise unknown_name("model family", family, FAMILIES)
        self.family = family
        self.categories = categories
        self.drop_target_derived = drop_target_derived


    def _base_columns(self) -> list[str]:
        leaky = PAPER_LEAKY[self.family] | {ITERATION_TARGET}
        if self.drop_target_derived:
            leaky = leaky | set(ITERATION.target_derived)
        return [c for c in family_columns(self.family)
                if c not in leaky and ITERATION[c].dtype != "str"]

    def fit(self, rows: pd.DataFrame, y: Any = None) -> "PaperFeatures":
        base = self._base_columns()
        _require(rows, [*base, *PAPER_CATEGORICAL], f"feature set {self.name} ({self.family})")
        cats = dict(self.categories) if self.categories is not None else {}
        self.categories_ = {c: sorted(map(str, cats[c])) if c in cats else sorted(map(str, rows[c].dropna().unique()))
                            for c in PAPER_CATEGORICAL}
        self.required_columns_ = [*base, *PAPER_CATEGORICAL]
        self.feature_names_ = list(self.transform(rows.head(1)).columns)
        return self

    def transform(self, rows: pd.DataFrame) -> pd.DataFrame:
        _require(rows, self.required_columns_, f"feature set {self.name} ({self.family})")
        base = self._base_columns()
        X = pd.DataFrame({c: _num(rows[c]) for c in base}, index=rows.index)

        def ratio(num: str, den: str, floor: float = 1e-9) -> np.ndarray:
            return _num(rows[num]) / np.maximum(floor, _num(rows[den]))

        X["flops_to_bw_ratio"] = ratio("flops_train_per_batch", "memory_bandwidth_gbps")
        X["flops_to_fp32_ratio"] = ratio("flops_train_per_batch", "fp32_gflops")
        X["flops_to_fp16_ratio"] = ratio("flops_train_per_batch", "fp16_gflops")
        X["flops_to_fp64_ratio"] = ratio("flops_train_per_batch", "fp64_gflops")
        X["bw_per_gb"] = ratio("memory_bandwidth_gbps", "memory_gb")
        X["ai_over_fp32"] = ratio("arithmetic_intensity_flop_per_byte", "fp32_gflops")
        if self.family in ("CNN", "Transformer"):
            X["bytes_per_param"] = ratio("param_bytes", "param_count", floor=1.0)
            X["acts_to_params"] = ratio("act_bytes_per_sample_proxy", "param_bytes")
        if self.family == "Transformer":
            X["d_head_check"] = _num(rows["d_model"]) / np.maximum(1e-9, np.maximum(1.0, _num(rows["n_heads"])))
            X["ff_multiplier"] = ratio("d_ff", "d_model")
            seq = np.nan_to_num(_num(rows["seq_len"]), nan=0.0)
            X["seq_token_load"] = seq * _num(rows["batch_size"])
        for col in PAPER_CATEGORICAL:
            X = pd.concat([X, _one_hot(rows[col], col, self.categories_[col], drop_first=True)], axis=1)
        return X


class CleanFeatures(FeatureBuilder):
    """Honest features of one family: no target-derived column; GPU specs from the spec table.

    Parameters
    ----------
    family : ``CNN``, ``MLP`` or ``Transformer``.
    categories : vocabularies of ``optimizer``, ``model``, ``dataset`` (and ``provider``); learned at
        :meth:`fit` when None. Unseen values become all-zero one-hot rows.
    specs : GPU spec table (:func:`traintime.core.specs.load_specs` format); the packaged table when None.
        A snapshot is kept at fit so a saved model is self-contained.
    use_provider : add one-hot ``provider`` (a host property, confounded with the GPU in CHRONOS and
        unknown for GPUs outside it); off by default.
    log_features : log10 of positive heavy-tailed columns.
    """

    name = "clean"

    def __init__(self, family: str, categories: Mapping[str, Sequence[str]] | None = None,
                 specs: pd.DataFrame | None = None, use_provider: bool = False,
                 log_features: bool = True) -> None:
        if family not in FAMILIES:
            raise unknown_name("model family", family, FAMILIES)
        self.family = family
        self.categories = categories
        self.specs = specs
        self.use_provider = use_provider
        self.log_features = log_features


    @property
    def _categorical(self) -> tuple[str, ...]:
        return (*CLEAN_CATEGORICAL, "provider") if self.use_provider else CLEAN_CATEGORICAL

    def fit(self, rows: pd.DataFrame, y: Any = None) -> "CleanFeatures":
        what = f"feature set {self.name} ({self.family})"
        _require(rows, ["gpu", *self._categorical, "batch_size", "amp", "flops_train_per_sample"], what)
        present = [c for c in CLEAN_WORKLOAD if c in rows.columns
                   and (rows[c].notna().all() or (c in CLEAN_OPTIONAL and rows[c].notna().any()))]
        self.workload_columns_ = present
        specs = load_specs() if self.specs is None else self.specs
        self.specs_ = specs[["gpu", "aliases", *CLEAN_GPU_SPECS]].copy().reset_index(drop=True)
        cats = dict(self.categories) if self.categories is not None else {}
        self.categories_ = {c: sorted(map(str, cats[c])) if c in cats else sorted(map(str, rows[c].dropna().unique()))
                            for c in self._categorical}
        self.required_columns_ = sorted({"gpu", *self._categorical, *(c for c in present if c not in CLEAN_OPTIONAL),
                                         "flops_train_per_sample"})
        self.feature_names_ = list(self.transform(rows.head(1)).columns)
        return self

    def _gpu_specs(self, rows: pd.DataFrame, specs: pd.DataFrame) -> pd.DataFrame:
        amap = alias_map(specs)
        idx = specs.reset_index(drop=True)
        pos = {g: i for i, g in enumerate(idx["gpu"])}
        names = rows["gpu"].astype(str)
        where: dict[str, int] = {}
        for name in pd.unique(names):  # first appearance order: the first unknown row's name is the one named
            key = _norm(name)
            if key not in amap:
                raise unknown_name("GPU", name, idx["gpu"])
            where[name] = pos[amap[key]]
        out = idx.iloc[names.map(where).to_numpy(dtype=int)][list(CLEAN_GPU_SPECS)].astype(float)
        out.index = rows.index
        return out

    def transform(self, rows: pd.DataFrame, specs: pd.DataFrame | None = None) -> pd.DataFrame:
        """Features of ``rows``; ``specs`` overrides the spec snapshot taken at fit (new GPUs)."""
        _require(rows, self.required_columns_, f"feature set {self.name} ({self.family})")
        if specs is None:
            shared = self._shared_transform(rows)
            if shared is not None:
                return shared
        return self._transform(rows, specs)

    def _state_key(self) -> tuple:
        """What the features of a row depend on besides the row (the same for ``clean`` and ``clean_roofline``)."""
        sp = self.specs_
        specs = (tuple(sp["gpu"].astype(str)), tuple(sp["aliases"].astype(str)),
                 sp[list(CLEAN_GPU_SPECS)].to_numpy(dtype=float).tobytes())
        return (self.family, self.use_provider, self.log_features, tuple(self.workload_columns_),
                tuple((c, tuple(v)) for c, v in self.categories_.items()), specs)

    def _shared_transform(self, rows: pd.DataFrame) -> pd.DataFrame | None:
        """The features of ``rows`` from those of the :func:`shared_rows` frame, or None (not a subset of it, or its
        features cannot be built for this state)."""
        shared = _SHARED.get()
        if shared is None:
            return None
        parent, ids, built = shared
        if rows is not parent:
            if ids is None or not rows.columns.equals(parent.columns):
                return None
            pos = ids.get_indexer(rows["row_id"])  # by id: a fold may have a new index
            if (pos < 0).any():
                return None
            read = self._read_columns()
            used = [c for c in rows.columns if c in read]
            if not rows[used].reset_index(drop=True).equals(parent[used].iloc[pos].reset_index(drop=True)):
                return None  # the same rows with other values
        else:
            pos = np.arange(len(rows))
        key = self._state_key()
        if key not in built:
            try:
                built[key] = self._transform(parent, None)
            except TraintimeError:  # e.g. a GPU outside the spec table in rows that are not asked for
                built[key] = None
        full = built[key]
        if full is None:
            return None
        out = full.iloc[pos]
        out.index = rows.index
        return out

    def _read_columns(self) -> set[str]:
        """Every column of a row that :meth:`_transform` reads."""
        return {"gpu", "batch_size", "amp", "flops_train_per_sample", "total_state_bytes", "act_bytes_per_sample_proxy",
                "input_px", "input_channels", "seq_len", *self.workload_columns_, *self._categorical}

    def _transform(self, rows: pd.DataFrame, specs: pd.DataFrame | None) -> pd.DataFrame:
        spec = self._gpu_specs(rows, self.specs_ if specs is None else specs)
        # columns are gathered in a dict (insertion order = column order) and framed once
        X: dict[str, np.ndarray] = {c: _num(rows[c]) if c in rows else np.full(len(rows), np.nan)
                                    for c in self.workload_columns_}
        batch = _num(rows["batch_size"])
        flops_batch = _num(rows["flops_train_per_sample"]) * batch
        X["flops_train_per_batch"] = flops_batch
        for c in CLEAN_GPU_SPECS:
            X[c] = spec[c].to_numpy()
        fp32 = spec["fp32_gflops"].to_numpy()
        fp16 = spec["fp16_gflops"].fillna(spec["fp32_gflops"]).to_numpy()
        amp = _num(rows["amp"]) > 0
        bw = spec["memory_bandwidth_gbps"].to_numpy()
        # FLOP / (GFLOP/s * 1e6) = ms ; bytes / (GB/s * 1e6) = ms
        X["ideal_compute_fp32_ms"] = flops_batch / (fp32 * 1e6)
        X["ideal_compute_peak_ms"] = flops_batch / (np.where(amp, fp16, fp32) * 1e6)
        traffic = []
        if "total_state_bytes" in rows:
            X["state_traffic_ms"] = _num(rows["total_state_bytes"]) / (bw * 1e6)
            traffic.append(X["state_traffic_ms"])
        if "act_bytes_per_sample_proxy" in rows:
            X["activation_traffic_ms"] = _num(rows["act_bytes_per_sample_proxy"]) * batch / (bw * 1e6)
            traffic.append(X["activation_traffic_ms"])
        mem = np.nansum(np.vstack(traffic), axis=0) if traffic else np.zeros(len(rows))
        X["roofline_ms"] = np.fmax(X["ideal_compute_peak_ms"], mem)
        px = _num(rows["input_px"]) if "input_px" in rows else np.full(len(rows), np.nan)
        ch = _num(rows["input_channels"]) if "input_channels" in rows else np.full(len(rows), np.nan)
        seq = _num(rows["seq_len"]) if "seq_len" in rows else np.full(len(rows), np.nan)
        image_vals = np.where(np.isnan(ch), 3.0, ch) * px * px
        X["input_values_per_step"] = batch * np.where(np.isnan(px), seq, image_vals)
        if self.log_features:
            for c in list(X):
                if c in _LOG_COLUMNS:
                    v = np.asarray(X[c], dtype=float)
                    with np.errstate(divide="ignore", invalid="ignore"):
                        X[c] = np.where(v > 0, np.log10(np.where(v > 0, v, 1.0)), np.where(v == 0, -12.0, np.nan))
        hot = [_one_hot(rows[col], col, self.categories_[col], drop_first=False) for col in self._categorical]
        return pd.concat([pd.DataFrame(X, index=rows.index), *hot], axis=1).astype(float)


class CleanRooflineFeatures(CleanFeatures):
    """The clean features with the ideal FP32 compute time as target offset.

    The regressor learns log(step time / ideal_compute_fp32_ms), i.e. how far a step is from the
    GPU's FP32 peak on this workload's training FLOPs, instead of log(step time). Trees cannot
    extrapolate their target, so a workload (model or dataset) outside the training range gets the
    efficiency of similar workloads times its own analytic compute time rather than a step time
    clipped to the range seen in training. Same parameters as :class:`CleanFeatures`.
    """

    name = "clean_roofline"
    offset_column = "ideal_compute_fp32_ms"

    def log_offset(self, X: pd.DataFrame) -> np.ndarray:
        """log(ideal FP32 compute time); NaN for a row without one (a device with no GPU specs, such as a
        local CPU row): such rows are left out of fitting and get no prediction (NaN)."""
        v = X[self.offset_column].to_numpy(dtype=float)
        if self.log_features and self.offset_column in _LOG_COLUMNS:
            v = np.power(10.0, v)
        ok = np.isfinite(v) & (v > 0)
        return np.where(ok, np.log(np.where(ok, v, 1.0)), np.nan)


_CLEAN_BUILDERS: dict[str, type[CleanFeatures]] = {"clean": CleanFeatures, "clean_roofline": CleanRooflineFeatures}
#: Feature sets built from the analytic workload and the GPU spec table (no released spec columns).
CLEAN_FEATURE_SETS = tuple(_CLEAN_BUILDERS)

FEATURE_SETS: dict[str, str] = {
    "paper": "released CHRONOS features, released column order (keeps loader_ratio: target leakage)",
    "paper_noleak": "released features without target-derived columns (drops loader_ratio)",
    "clean": "honest: analytic workload + GPU spec table + one-hot optimizer/model/dataset; no target-derived "
             "column, no learning rate",
    "clean_roofline": "clean features, target log(step time / ideal FP32 compute time): generalises better to "
                      "unseen models and datasets, worse to unseen GPUs",
}


def make_feature_builder(name: str, family: str, categories: Mapping[str, Sequence[str]] | None = None,
                         **kwargs: Any) -> FeatureBuilder:
    """Create the feature builder ``name`` (see :data:`FEATURE_SETS`) for ``family``."""
    if name == "paper":
        return PaperFeatures(family, categories=categories)
    if name == "paper_noleak":
        return PaperFeatures(family, categories=categories, drop_target_derived=True)
    if name in _CLEAN_BUILDERS:
        return _CLEAN_BUILDERS[name](family, categories=categories, **kwargs)
    raise unknown_name("feature set", name, FEATURE_SETS)
