"""Baselines of the zero-shot paper, re-implemented in light form (no code taken from the originals).

- **FLOPS scaling** (:func:`flops_scaling`, :func:`flops_predictions`): the unrestricted host's
  latency times host FP32 peak / target FP32 peak, with FP32 peak = CUDA cores x boost clock x 2.
- **Habitat-style wave scaling** (:func:`habitat_gamma`, :func:`habitat_scale`,
  :func:`habitat_predict`) over a per-op host profile (Geoffrey et al., ATC'21): each op's host time
  is scaled by bandwidth, clock and SM ratios with an exponent set by the op's arithmetic intensity
  relative to the target's ridge point.
- **NeuSight-style roofline/wave model** (:func:`neusight_util`, :func:`neusight_op_time`,
  :func:`neusight_predict`; Lee et al., ASPLOS'25): per op, waves = ceil(blocks / SMs),
  roofline = min(peak, AI x BW), time = FLOPs / (roofline x util(waves)); the utilisation curve is
  learned in the paper and a fixed sigmoid pair here.
- **Learned cross-GPU baseline** (:class:`CrossGPURegressor`, :func:`leave_one_gpu_out`): gradient
  boosting (xgboost) on target specifications + workload descriptors, evaluated leaving one target
  GPU out.

Per-op profiles follow :data:`OP_PROFILE` (one row per op of one training step on the host).
Units: times in ms, FLOPs and bytes as counts, throughputs as GFLOP/s and GB/s (spec table).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, RegressorMixin

from traintime.core.errors import SchemaError
from traintime.core.schema import Column, TableSchema
from traintime.core.specs import gpu_row, load_specs
from traintime.emulation.schema import FAMILIES, PRECISIONS, WORKLOAD_KEY

OP_PROFILE = TableSchema(
    name="op_profile",
    description="One operation (kernel or aten op) of one training step, profiled on the host.",
    key=("host_gpu", "model", "img_px", "batch_size", "precision", "op_index"),
    columns=(
        Column("host_gpu", "str", "canonical host GPU name"),
        Column("model", "str", "timm model name"),
        Column("img_px", "int", "input size, pixels", min=1),
        Column("batch_size", "int", "samples per step", min=1),
        Column("precision", "str", "autocast precision", allowed=PRECISIONS),
        Column("op_index", "int", "position of the op in the step", min=0),
        Column("op_name", "str", "operator or kernel name"),
        Column("flops", "float", "floating-point operations of the op", min=0),
        Column("bytes", "float", "DRAM bytes read + written by the op", min=0),
        Column("time_ms", "float", "host time of the op, ms", min=0),
        Column("blocks", "float", "thread blocks launched (empty = unknown)", min=0, nullable=True),
        Column("synthetic", "bool", "True only for rows made by fakes or tests"),
    ),
)


# --------------------------------------------------------------------------------------------
# FLOPS scaling
# --------------------------------------------------------------------------------------------

def fp32_peak_gflops(spec: pd.Series) -> float:
    """FP32 peak in GFLOP/s from a spec row: CUDA cores x boost clock (MHz) x 2 / 1000."""
    return float(spec["cuda_cores"]) * float(spec["boost_clock_mhz"]) * 2.0 / 1000.0


def flops_scaling(host_ms: np.ndarray | float, host_peak: float, target_peak: np.ndarray | float) -> np.ndarray:
    """Predicted target latency (ms): host latency x host peak / target peak (elementwise)."""
    return np.asarray(host_ms, dtype=float) * host_peak / np.asarray(target_peak, dtype=float)


def _host_latency(traces: pd.DataFrame, host_gpu: str) -> pd.DataFrame:
    h = traces[(traces["gpu"] == host_gpu) & traces["latency_ms"].notna()]
    return h[[*WORKLOAD_KEY, "latency_ms"]].rename(columns={"latency_ms": "host_ms"})


def flops_predictions(targets: pd.DataFrame, host: pd.DataFrame, host_gpu: str,
                      specs: pd.DataFrame | None = None) -> pd.DataFrame:
    """FLOPS-scaling predictions for every target row whose workload the host measured.

    ``targets``: target rows (schema target_trace, already filtered for metrics); ``host``: rows
    with the unrestricted host latency (``gpu == host_gpu``, same schema). Returns the target rows
    (host GPU excluded) with ``host_gpu``, ``host_ms`` and ``pred_ms``.
    """
    specs = load_specs() if specs is None else specs
    hpeak = fp32_peak_gflops(gpu_row(host_gpu, specs))
    t = targets[targets["gpu"] != host_gpu].merge(_host_latency(host, host_gpu), on=list(WORKLOAD_KEY))
    peaks = {g: fp32_peak_gflops(gpu_row(g, specs)) for g in t["gpu"].unique()}
    t["host_gpu"] = host_gpu
    t["pred_ms"] = flops_scaling(t["host_ms"].to_numpy(), hpeak, t["gpu"].map(peaks).to_numpy())
    return t.reset_index(drop=True)


# --------------------------------------------------------------------------------------------
# Habitat-style wave scaling
# --------------------------------------------------------------------------------------------

def habitat_gamma(intensity: np.ndarray | float, ridge: float) -> np.ndarray:
    """Wave-scaling exponent: 1 - 0.5 I/R for I <= R (memory side), 0.5 R/I above the ridge.

    ``intensity`` I = FLOPs / DRAM bytes (inf when no bytes -> 0; 0 when no FLOPs -> 1);
    ``ridge`` R = peak FLOP/s / bandwidth (FLOP per byte) of the destination GPU.
    """
    i = np.asarray(intensity, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        g = np.where(i <= ridge, 1.0 - 0.5 * i / ridge, 0.5 * ridge / i)
    return np.where(np.isinf(i), 0.0, g)


def _intensity(flops: np.ndarray, nbytes: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        i = np.where(nbytes > 0, flops / np.where(nbytes > 0, nbytes, 1.0), np.inf)
    return np.where((flops == 0) & (nbytes == 0), 0.0, i)


def habitat_scale(time_ms: Sequence[float], flops: Sequence[float], nbytes: Sequence[float],
                  blocks: Sequence[float] | None, origin: pd.Series, dest: pd.Series) -> np.ndarray:
    """Per-op destination times (ms) from origin times by wave scaling.

    t_d = t_o (BW_o/BW_d)^gamma (clk_o/clk_d)^(1-gamma) (SM_o/SM_d)^(1-gamma), base clocks,
    gamma from :func:`habitat_gamma` with the destination's ridge point (fp32 GFLOP/s / GB/s).
    An op whose ``blocks`` fit in one wave on both GPUs (blocks <= SMs on each) scales by the
    clock ratio only. ``blocks`` NaN or None = unknown (general formula).
    """
    t = np.asarray(time_ms, dtype=float)
    f = np.asarray(flops, dtype=float)
    b = np.asarray(nbytes, dtype=float)
    ridge = float(dest["fp32_gflops"]) / float(dest["memory_bandwidth_gbps"])
    gamma = habitat_gamma(_intensity(f, b), ridge)
    bw = float(origin["memory_bandwidth_gbps"]) / float(dest["memory_bandwidth_gbps"])
    clk = float(origin["base_clock_mhz"]) / float(dest["base_clock_mhz"])
    sm = float(origin["sms"]) / float(dest["sms"])
    scaled = t * bw ** gamma * (clk * sm) ** (1.0 - gamma)
    if blocks is not None:
        bl = np.asarray(blocks, dtype=float)
        small = ~np.isnan(bl) & (bl <= float(origin["sms"])) & (bl <= float(dest["sms"]))
        scaled = np.where(small, t * clk, scaled)
    return scaled


def habitat_predict(ops: pd.DataFrame, origin: pd.Series, dest: pd.Series,
                    step_ms: float | None = None) -> float:
    """Predicted step latency (ms) on ``dest``: sum of scaled op times of one step's profile.

    With ``step_ms`` (the host's measured CUDA-graph step latency), the sum is rescaled by
    step_ms / sum(host op times): the paper's normalisation of per-op timing to graph timing.
    """
    if ops.empty:
        raise SchemaError("empty op profile")
    t = habitat_scale(ops["time_ms"], ops["flops"], ops["bytes"], ops.get("blocks"), origin, dest)
    total = float(np.sum(t))
    if step_ms is not None:
        total *= step_ms / float(ops["time_ms"].sum())
    return total


# --------------------------------------------------------------------------------------------
# NeuSight-style roofline / wave model
# --------------------------------------------------------------------------------------------

def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + np.exp(-x))


def neusight_util(waves: np.ndarray | float, g: float = 2.0, a: float = 0.0) -> np.ndarray:
    """Achieved share of the roofline: sigmoid(g) - sigmoid(a) / waves (waves >= 1; inf -> sigmoid(g))."""
    w = np.asarray(waves, dtype=float)
    return _sigmoid(g) - _sigmoid(a) / w


def neusight_op_time(flops: Sequence[float], nbytes: Sequence[float], blocks: Sequence[float] | None,
                     spec: pd.Series, g: float = 2.0, a: float = 0.0) -> np.ndarray:
    """Per-op time (ms) on ``spec``'s GPU from FLOPs, DRAM bytes and thread blocks.

    waves = ceil(blocks / SMs) (unknown blocks: many waves, util -> sigmoid(g));
    roofline = min(peak, AI x BW) FLOP/s with AI = FLOPs / bytes; time = FLOPs / (roofline x util).
    Ops without FLOPs take bytes / (BW x util).
    """
    f = np.asarray(flops, dtype=float)
    b = np.asarray(nbytes, dtype=float)
    sms = float(spec["sms"])
    if blocks is None:
        waves = np.full_like(f, np.inf)
    else:
        bl = np.asarray(blocks, dtype=float)
        waves = np.where(np.isnan(bl), np.inf, np.maximum(1.0, np.ceil(bl / sms)))
    util = neusight_util(waves, g, a)
    peak = float(spec["fp32_gflops"]) * 1e9
    bw = float(spec["memory_bandwidth_gbps"]) * 1e9
    with np.errstate(divide="ignore", invalid="ignore"):
        ai = np.where(b > 0, f / np.where(b > 0, b, 1.0), np.inf)
        roof = np.minimum(peak, ai * bw)
        t_compute = f / (roof * util)
        t_memory = b / (bw * util)
    return np.where(f > 0, t_compute, t_memory) * 1e3


def neusight_predict(ops: pd.DataFrame, spec: pd.Series, g: float = 2.0, a: float = 0.0) -> float:
    """Predicted step latency (ms): sum of :func:`neusight_op_time` over one step's ops."""
    if ops.empty:
        raise SchemaError("empty op profile")
    return float(np.sum(neusight_op_time(ops["flops"], ops["bytes"], ops.get("blocks"), spec, g, a)))


def analytic_predictions(ops: pd.DataFrame, targets: pd.DataFrame, host_step: pd.DataFrame | None,
                         specs: pd.DataFrame | None = None) -> pd.DataFrame:
    """Habitat- and NeuSight-style predictions for every (op profile, target) pair.

    ``ops``: validated op profiles (any hosts); ``targets``: target rows (schema target_trace);
    ``host_step``: optional host rows (host_gpu, workload key, latency_ms) of the unrestricted host
    used for Habitat's normalisation. Returns long rows with ``method`` in {habitat, neusight}.
    """
    specs = load_specs() if specs is None else specs
    rows = []
    keys = ["host_gpu", *WORKLOAD_KEY]
    steps = {}
    if host_step is not None and not host_step.empty:
        steps = {tuple(r[k] for k in keys): float(r["latency_ms"]) for _, r in host_step.iterrows()}
    for key, prof in ops.groupby(keys, sort=True):
        host = gpu_row(key[0], specs)
        wk = dict(zip(WORKLOAD_KEY, key[1:]))
        tr = targets
        for k, v in wk.items():
            tr = tr[tr[k] == v]
        for t in tr.itertuples(index=False):
            if t.gpu == host["gpu"]:
                continue
            dest = gpu_row(t.gpu, specs)
            base = {"host_gpu": host["gpu"], "gpu": t.gpu, **wk, "family": t.family, "latency_ms": t.latency_ms}
            rows.append({**base, "method": "habitat",
                         "pred_ms": habitat_predict(prof, host, dest, steps.get(tuple(key)))})
            rows.append({**base, "method": "neusight", "pred_ms": neusight_predict(prof, dest)})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------
# Learned cross-GPU baseline
# --------------------------------------------------------------------------------------------

#: Spec columns used as features (log-transformed, except compute capability).
SPEC_FEATURES: tuple[str, ...] = ("sms", "cuda_cores", "base_clock_mhz", "boost_clock_mhz", "memory_gb",
                                  "memory_bandwidth_gbps", "l2_mb", "fp32_gflops", "compute_capability")


def learned_features(rows: pd.DataFrame, specs: pd.DataFrame) -> pd.DataFrame:
    """Feature matrix for :class:`CrossGPURegressor`.

    ``rows`` needs ``gpu`` (target), ``host_ms`` (the workload's latency on the reference host),
    ``img_px``, ``batch_size``, ``precision`` and ``family``. Features: log target specs
    (:data:`SPEC_FEATURES`; compute capability as is), log host latency, log input size, log batch,
    one-hot precision and family. No target-GPU latency enters the features.
    """
    spec = specs.set_index("gpu")
    x = pd.DataFrame(index=rows.index)
    for c in SPEC_FEATURES:
        v = rows["gpu"].map(spec[c]).astype(float)
        x[c] = v if c == "compute_capability" else np.log(v)
    x["log_host_ms"] = np.log(rows["host_ms"].astype(float))
    x["log_img_px"] = np.log(rows["img_px"].astype(float))
    x["log_batch"] = np.log(rows["batch_size"].astype(float))
    for p in PRECISIONS:
        x[f"prec_{p}"] = (rows["precision"] == p).astype(float)
    for f in FAMILIES:
        x[f"fam_{f}"] = (rows["family"] == f).astype(float)
    return x


class CrossGPURegressor(BaseEstimator, RegressorMixin):
    """Gradient-boosted trees (xgboost, hist) predicting log(t_target / t_host).

    ``fit(X, y)``: X (n, d) from :func:`learned_features`, y (n,) target latency in ms.
    ``predict(X)`` returns latencies in ms. Row and column subsampling (0.8) make
    ``random_state`` matter; one thread per fit.
    """

    def __init__(self, n_estimators: int = 200, learning_rate: float = 0.08, max_depth: int = 4,
                 subsample: float = 0.8, colsample_bytree: float = 0.8, random_state: int = 0) -> None:
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.max_depth = max_depth
        self.subsample = subsample
        self.colsample_bytree = colsample_bytree
        self.random_state = random_state

    def fit(self, X: pd.DataFrame, y: Sequence[float]) -> "CrossGPURegressor":
        from xgboost import XGBRegressor

        y = np.asarray(y, dtype=float)
        self.model_ = XGBRegressor(
            n_estimators=self.n_estimators, learning_rate=self.learning_rate, max_depth=self.max_depth,
            subsample=self.subsample, colsample_bytree=self.colsample_bytree, tree_method="hist",
            n_jobs=1, random_state=self.random_state)
        self.model_.fit(X.to_numpy(dtype=float), np.log(y) - X["log_host_ms"].to_numpy(dtype=float))
        self.feature_names_in_ = np.asarray(X.columns)
        return self

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        ratio = self.model_.predict(X[list(self.feature_names_in_)].to_numpy(dtype=float))
        return np.exp(X["log_host_ms"].to_numpy(dtype=float) + ratio)


def leave_one_gpu_out(targets: pd.DataFrame, host: pd.DataFrame, host_gpu: str, seeds: Sequence[int],
                      specs: pd.DataFrame | None = None, **params: float) -> pd.DataFrame:
    """Leave-one-target-GPU-out predictions of :class:`CrossGPURegressor`, one set per seed.

    Every target GPU except the host is held out in turn; the model is fitted on the other
    targets' rows and predicts the held-out GPU's rows. Returns the target rows with ``host_gpu``,
    ``host_ms``, ``pred_ms`` and ``seed``.
    """
    specs = load_specs() if specs is None else specs
    data = targets[targets["gpu"] != host_gpu].merge(_host_latency(host, host_gpu), on=list(WORKLOAD_KEY))
    data = data.sort_values(["gpu", *WORKLOAD_KEY]).reset_index(drop=True)
    if data["gpu"].nunique() < 2:
        raise SchemaError("the learned baseline needs at least two target GPUs")
    X = learned_features(data, specs)
    out = []
    for seed in seeds:
        for gpu in sorted(data["gpu"].unique()):
            test = (data["gpu"] == gpu).to_numpy()
            est = CrossGPURegressor(random_state=int(seed), **params)
            est.fit(X[~test], data.loc[~test, "latency_ms"])
            part = data[test].copy()
            part["pred_ms"] = est.predict(X[test])
            part["seed"] = int(seed)
            part["host_gpu"] = host_gpu
            out.append(part)
    return pd.concat(out, ignore_index=True)
