"""Operator walk, roofline step-time estimator, label combination (issue 13)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")

from traintime.chronos.steptime import OperatorRooflineRegressor, tensor_peak_gflops  # noqa: E402
from traintime.measure import opgraph  # noqa: E402


def _resnet_step(batch: int) -> tuple[pd.DataFrame, float]:
    import torchvision
    from torch.utils.flop_counter import FlopCounterMode

    torch.manual_seed(0)
    with torch.device("meta"):
        m = torchvision.models.resnet18(num_classes=10)
        x = torch.randn(batch, 3, 32, 32)
        y = torch.randint(0, 10, (batch,))
    ops = opgraph.walk_step(m, x, y)
    # reference: torch's own counter around a plain fwd+bwd of an identical fresh model
    with torch.device("meta"):
        m2 = torchvision.models.resnet18(num_classes=10)
    counter = FlopCounterMode(display=False)
    with counter:
        torch.nn.functional.cross_entropy(m2(x), y).backward()
    return ops, float(counter.get_total_flops())


def test_walk_matches_flop_counter() -> None:
    ops, total = _resnet_step(2)
    assert total > 0
    assert ops["flops"].sum() == pytest.approx(total, rel=1e-12)
    s = opgraph.summarise(ops)
    conv = s[s["op_class"] == "conv"]
    assert set(conv["phase"]) == {"fwd", "bwd"}
    assert conv["flops"].sum() > 0.9 * total  # resnet18 is convolution-dominated
    opt = s[s["phase"] == "opt"]
    assert set(opt["op_class"]) == {"optimizer"} and (opt["flops"] == 0).all() and opt["bytes"].sum() > 0
    # every byte count is positive for a class that exists, and the phases are all present
    assert set(s["phase"]) == set(opgraph.PHASES) and (s["bytes"] > 0).all()


def test_batch_extrapolation_is_exact() -> None:
    step = lambda b: opgraph.summarise(_resnet_step(b)[0])  # noqa: E731
    ext = opgraph.extrapolate(step(2), step(3), [5])
    direct = step(5)
    m = ext.merge(direct, on=["phase", "op_class"], suffixes=("_e", "_d"))
    assert len(m) == len(direct)
    np.testing.assert_allclose(m["flops_e"], m["flops_d"], rtol=1e-9)
    np.testing.assert_allclose(m["bytes_e"], m["bytes_d"], rtol=1e-9)


def test_op_class() -> None:
    assert opgraph.op_class("aten::convolution_backward.default", "bwd") == "conv"
    assert opgraph.op_class("aten::addmm.default", "fwd") == "matmul"
    assert opgraph.op_class("aten::native_layer_norm.default", "fwd") == "norm"
    assert opgraph.op_class("aten::_scaled_dot_product_efficient_attention.default", "fwd") == "attention"
    assert opgraph.op_class("aten::relu_.default", "fwd") == "other"
    assert opgraph.op_class("aten::mm.default", "opt") == "optimizer"


def _toy(n: int = 300, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    logr = rng.normal(-6, 1, size=(n, 2))
    z = rng.normal(0, 1, size=(n, 2))
    t = np.exp(logr[:, 0] + 0.3 * z[:, 0]) + np.exp(logr[:, 1] - 0.5 * z[:, 1] + 1.0)
    return np.column_stack([logr, z]), 1e3 * t


def test_estimator_recovers_efficiencies() -> None:
    X, y = _toy()
    est = OperatorRooflineRegressor(n_terms=2, alpha=0.0).fit(X, y)
    np.testing.assert_allclose(est.predict(X), y, rtol=1e-5)
    assert est.get_params()["n_terms"] == 2


def test_estimator_smooth_extrapolation() -> None:
    """Outside the training range of a hardware axis the prediction moves smoothly (log-linear)."""
    X, y = _toy()
    est = OperatorRooflineRegressor(n_terms=2, alpha=1e-6).fit(X, y)
    grid = np.tile(X[:1], (41, 1))
    grid[:, 2] = np.linspace(-8, 8, 41)  # training range is about +-3
    p = np.log(est.predict(grid))
    second = np.diff(p, 2)
    assert np.all(np.isfinite(p)) and np.all(np.abs(second) < 0.05)


def test_estimator_host_mode_ratio() -> None:
    X, y = _toy(400, 1)
    Xh, yh = _toy(400, 2)
    Xm = np.column_stack([X, Xh, np.log(yh)])
    est = OperatorRooflineRegressor(n_terms=2, alpha=0.0, host_mode=True).fit(Xm, y)
    assert np.median(np.abs(est.predict(Xm) / y - 1)) < 1e-3


def test_estimator_bad_target() -> None:
    X, y = _toy(20)
    with pytest.raises(ValueError, match="positive"):
        OperatorRooflineRegressor(n_terms=2).fit(X, -y)


#: check_estimator checks skipped, and why. The estimator declares positive targets (a time fitted in
#: log space; scikit-learn then shifts the checks' targets positive). check_regressors_train asks for
#: R^2 > 0.5 on make_regression data, whose targets are linear, not log-linear, in arbitrary columns
#: that the model reads as log roofline times: a structural mismatch, not a bug.
SKIPPED_CHECKS = frozenset({"check_regressors_train"})


def test_check_estimator_subset() -> None:
    from sklearn.utils.estimator_checks import check_estimator

    est = OperatorRooflineRegressor()
    ran = []
    for estimator, check in check_estimator(est, generate_only=True):
        name = getattr(check, "func", check).__name__
        if name in SKIPPED_CHECKS:
            continue
        check(estimator)
        ran.append(name)
    assert {"check_get_params_invariance", "check_fit_idempotent", "check_n_features_in",
            "check_estimators_pickle", "check_regressors_int"} <= set(ran)


def test_combination_of_labels_three_rows() -> None:
    """The release's step time is the mean per-iteration (loader wait + compute): the means add."""
    from traintime.chronos.loader_wait import combine_labels
    from traintime.core.errors import SchemaError

    loader = np.array([[0.5, 1.5], [10.0, 30.0], [0.0, 0.0]])  # two iterations per configuration
    compute = np.array([[20.0, 22.0], [5.0, 5.0], [100.0, 104.0]])
    step_as_measured = (loader + compute).mean(axis=1)
    got = combine_labels(compute.mean(axis=1), loader.mean(axis=1))
    np.testing.assert_allclose(got, step_as_measured)
    np.testing.assert_allclose(got, [22.0, 25.0, 102.0])
    with pytest.raises(SchemaError):
        combine_labels([1.0, 2.0], [1.0])
    with pytest.raises(SchemaError):
        combine_labels([1.0], [-1.0])


def test_tensor_peak() -> None:
    rtx = {"gpu": "RTX-4090", "architecture": "Ada Lovelace", "tensor_cores": 512, "boost_clock_mhz": 2520,
           "fp32_gflops": 82580, "fp16_gflops": 82580}
    assert tensor_peak_gflops(rtx) == pytest.approx(512 * 2520 * 256 / 1000 / 2)
    a100 = {"gpu": "A100-PCIe-80GB", "architecture": "Ampere", "tensor_cores": 432, "boost_clock_mhz": 1410,
            "fp32_gflops": 19490, "fp16_gflops": 77970}
    assert tensor_peak_gflops(a100) == pytest.approx(311_869, rel=1e-3)  # 312 TFLOP/s datasheet
    p4 = {"gpu": "P4", "architecture": "Pascal", "tensor_cores": 0, "boost_clock_mhz": 1114,
          "fp32_gflops": 5704, "fp16_gflops": 89}
    assert tensor_peak_gflops(p4) == 5704


def test_clip_z_bounds_efficiency_extrapolation() -> None:
    X, y = _toy()
    est = OperatorRooflineRegressor(n_terms=2, alpha=1e-6, clip_z=True).fit(X, y)
    hi = X[:, 2].max()
    a, b = X[:1].copy(), X[:1].copy()
    a[0, 2], b[0, 2] = hi, hi + 50.0
    assert est.predict(b)[0] == pytest.approx(est.predict(a)[0], rel=1e-12)
    free = OperatorRooflineRegressor(n_terms=2, alpha=1e-6).fit(X, y)
    assert free.predict(b)[0] != pytest.approx(free.predict(a)[0], rel=1e-3)
