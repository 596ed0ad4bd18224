"""Compute-time estimate: grows with batch, shrinks with 16-bit where the hardware says so, H100 > A100;
workload options (input size, classes, ImageNet); labelled warnings outside the training range."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from traintime.chronos.roofline_step import RooflineStepTime, StepTimeModel
from traintime.core.errors import TraintimeError
from traintime.core.gpudb import gpu_rows
from traintime.predict_static import (
    make_workload,
    static_features,
    step_rows,
    training_range_warnings,
)

GPUS = ["A100-PCIe-80GB", "H100-PCIe", "H100-SXM", "T4", "RTX-4090"]


def _ms(model: str, batch: int, precision: str = "32", **kw) -> pd.Series:
    w = make_workload(model, batch, precision, **({"dataset": "cifar10"} | kw))
    rows = step_rows(w, gpu_rows(GPUS))
    return pd.Series(RooflineStepTime().predict(rows), index=GPUS)


def test_step_time_rises_with_batch_32_to_2048() -> None:
    batches = [32, 64, 128, 256, 512, 1024, 2048]
    ms = pd.DataFrame({b: _ms("resnet18", b) for b in batches})
    assert (ms.diff(axis=1).iloc[:, 1:] > 0).all().all()
    # and not a plateau: 2048 costs at least 10x batch 32
    assert (ms[2048] / ms[32] > 10).all()


def test_h100_faster_than_a100_and_16bit_shrinks_where_hardware_says() -> None:
    for precision in ("32", "16", "bf16"):
        ms = _ms("resnet50", 256, precision, dataset="imagenet")
        assert ms["H100-PCIe"] < ms["A100-PCIe-80GB"] and ms["H100-SXM"] < ms["A100-PCIe-80GB"]
    m32, m16 = _ms("resnet50", 256, "32", dataset="imagenet"), _ms("resnet50", 256, "16", dataset="imagenet")
    assert m16["A100-PCIe-80GB"] < 0.5 * m32["A100-PCIe-80GB"]  # FP16 peak 4x FP32 in the spec database
    assert m16["RTX-4090"] <= m32["RTX-4090"]  # never slower


def test_input_size_and_imagenet() -> None:
    w = make_workload("resnet50", 64, "32", dataset="imagenet")
    assert (w.input_px, w.num_classes, w.num_samples, w.dataset) == (224, 1000, 1281167, "ImageNet")
    small = _ms("resnet50", 64, dataset="cifar10")
    big = _ms("resnet50", 64, dataset="cifar10", input_size=224)
    assert (big > 10 * small).all()  # (224/32)^2 = 49x the FLOPs
    c = make_workload("resnet18", 8, input_size=96, num_classes=7)
    assert (c.input_px, c.num_classes, c.num_samples, c.dataset) == (96, 7, None, "custom")
    with pytest.raises(TraintimeError, match="--input-size"):
        make_workload("resnet18", 8)
    with pytest.raises(TraintimeError, match="precision"):
        make_workload("resnet18", 8, "8", dataset="cifar10")


def test_module_function_model() -> None:
    w = make_workload("torchvision.models:resnet18", 32, dataset="cifar10")
    rows = step_rows(w, gpu_rows(["T4"]))
    assert w.model_source == "module:function" and rows["flops_train_per_batch"].iloc[0] > 0


def test_roofline_is_a_step_time_model_and_fit_calibrates() -> None:
    m = RooflineStepTime()
    assert isinstance(m, StepTimeModel)
    w = make_workload("resnet18", 256, dataset="cifar10")
    rows = step_rows(w, gpu_rows(GPUS))
    truth = RooflineStepTime(compute_efficiency=0.2, memory_efficiency=0.3).predict(rows)
    fitted = RooflineStepTime().fit(rows, truth)
    assert np.allclose(fitted.predict(rows), truth, rtol=1e-4) and "fitted" in fitted.label


def test_batch_outside_training_range_and_unseen_family_warn(tmp_path) -> None:
    pd.DataFrame({"family": ["CNN"] * 3, "batch_size": [32, 64, 256], "input_px": [32, 32, 64]}).to_csv(
        tmp_path / "iteration.csv", index=False)
    w = make_workload("resnet18", 1024, dataset="stl10")
    warns = training_range_warnings(w, tmp_path, trained_families=["CNN"])
    assert any(x.startswith("WARNING batch: 1024") and "32-256" in x for x in warns)
    assert any(x.startswith("WARNING input: 96 px") for x in warns)
    vit = make_workload("vit_tiny_patch16_224", 64, dataset="cifar10")
    warns = training_range_warnings(vit, tmp_path, trained_families=["CNN"])
    assert any(x.startswith("WARNING family: Transformer") for x in warns)


def test_a_step_model_fitted_on_the_traces_too_widens_the_checked_input_range(tmp_path) -> None:
    pd.DataFrame({"family": ["CNN"] * 2, "batch_size": [32, 256], "input_px": [32, 64]}).to_csv(
        tmp_path / "iteration.csv", index=False)
    pd.DataFrame({"batch_size": [16, 64], "img_px": [64, 224]}).to_csv(tmp_path / "traces.csv", index=False)
    w = make_workload("resnet18", 64, input_size=224, num_classes=10)
    assert any(x.startswith("WARNING input: 224 px") for x in training_range_warnings(w, tmp_path))
    warns = training_range_warnings(w, tmp_path, with_traces=True)
    assert not any(x.startswith("WARNING input") for x in warns)
    big = make_workload("resnet18", 64, input_size=512, num_classes=10)
    warns = training_range_warnings(big, tmp_path, with_traces=True)
    assert any("32-224 px of CNN rows and the consumer-GPU traces" in x for x in warns)


def test_step_rows_carry_the_optional_specs_of_the_neighbour_hardware_term() -> None:
    from traintime.chronos.roofline_calibration import iteration_step_rows

    rows = step_rows(make_workload("resnet18", 32, dataset="cifar10"), gpu_rows(["T4", "RTX-4090"]))
    assert rows.set_index("gpu")[["sms", "l2_mb"]].to_dict("index") == {"T4": {"sms": 40, "l2_mb": 4.0},
                                                                      "RTX-4090": {"sms": 128, "l2_mb": 72.0}}
    it = pd.DataFrame({"gpu": ["T4"], "status": ["ok"], "compute_time_ms": [10.0], "precision_bits": [32],
                       "flops_train_per_batch": [1e9], "param_bytes": [1e6], "optimizer_state_bytes": [0.0],
                       "model": ["m"], "family": ["CNN"], "batch_size": [8], "input_px": [32],
                       "act_bytes_per_sample_proxy": [1e5]})
    assert iteration_step_rows(it, gpu_rows(["T4"]))["l2_mb"].tolist() == [4.0]


def test_step_rows_carry_the_kernel_mix_as_shares_of_the_forward_flops() -> None:
    from traintime.chronos.neighbour_frozen import KERNEL_SHARE_COLUMNS
    from traintime.chronos.roofline_calibration import iteration_step_rows

    gpus = gpu_rows(["T4"])
    dense = step_rows(make_workload("resnet18", 32, dataset="cifar10"), gpus).iloc[0]
    dw = step_rows(make_workload("mobilenet_v2", 32, dataset="cifar10"), gpus).iloc[0]
    assert dense["flops_share_depthwise"] == 0.0 and dense["flops_share_3x3"] > 0.5
    assert 0.0 < dw["flops_share_depthwise"] < 0.5 and dw["flops_share_1x1"] > 0.5
    assert all(0.0 <= dw[c] <= 1.0 for c in KERNEL_SHARE_COLUMNS)
    # the release's rows: its fractions are already shares of its forward FLOPs; none (MLP, Transformer) -> 0
    it = pd.DataFrame({"gpu": ["T4", "T4"], "status": ["ok", "ok"], "compute_time_ms": [10.0, 10.0],
                       "precision_bits": [32, 32], "flops_train_per_batch": [1e9, 1e9], "param_bytes": [1e6, 1e6],
                       "optimizer_state_bytes": [0.0, 0.0], "model": ["m", "t"], "family": ["CNN", "Transformer"],
                       "batch_size": [8, 8], "input_px": [32, 32], "act_bytes_per_sample_proxy": [1e5, 1e5],
                       "flops_depthwise_frac": [0.05, np.nan]})
    assert iteration_step_rows(it, gpus)["flops_share_depthwise"].tolist() == [0.05, 0.0]


@pytest.mark.parametrize("name,chronos_name", [("mixer", "mixer"), ("resmlp", "resmlp"), ("asmlp", "asmlp"),
                                               ("deit_tiny", "DeiT-Tiny"), ("vit", "ViT")])
def test_release_layers_of_block_models_equal_the_analytic_walk_of_the_same_network(name, chronos_name) -> None:
    # the release's depth of an MLP / Transformer counts blocks; its step rows must count layers as the walk of the
    # trace rows and of predict's own models does (Conv2d + Linear modules + BatchNorm2d and activation calls)
    import torch

    from traintime.chronos.roofline_calibration import analytic_layers
    from traintime.measure.analytic import model_structure
    from traintime.measure.models import create_model

    depths = [12] if name in ("deit_tiny", "vit") else [4, 12]  # timm's DeiT / ViT builders fix the depth
    px = 224 if name in ("deit_tiny", "vit") else 32
    for depth in depths:
        with torch.device("meta"):
            net = create_model(name, 10, px, **({} if name in ("deit_tiny", "vit") else {"depth": depth}))
        s = model_structure(net, px, backward=False)
        release = pd.DataFrame({"model": [chronos_name], "depth": [depth], "bn_layers": [np.nan],
                                "act_layers": [np.nan]})
        assert analytic_layers(release).tolist() == [s["depth"] + s["bn_layers"] + s["act_layers"]]
    # a CNN's release columns are already the walk's counts (resnet50: 54 + 53 + 49); an unknown model keeps its sum
    cnn = pd.DataFrame({"model": ["resnet50", "mine"], "depth": [54, 3], "bn_layers": [53, 1], "act_layers": [49, 2]})
    assert analytic_layers(cnn).tolist() == [156.0, 6.0]


@pytest.mark.parametrize("model", ["vit_tiny_patch16_224", "mixer", "resnet18"])
def test_a_locally_measured_row_counts_layers_as_predict_does(model) -> None:
    # collect's iteration rows put the block count in depth for MLPs / Transformers (as the release does) and keep
    # the walk's Conv2d + Linear count apart, so their step rows count layers as predict's own static rows do
    from traintime.chronos.roofline_calibration import analytic_layers
    from traintime.measure.analytic import analytic_features, iteration_columns

    feats = analytic_features(model, "cifar10", 8, backward=False)
    row = {"model": model, **iteration_columns(feats, 8)}
    assert row["conv_linear_modules"] >= row["depth"]
    expected = static_features(make_workload(model, 8, dataset="cifar10"))["layers"]
    assert analytic_layers(pd.DataFrame([row])).tolist() == [expected]


def test_tf32_rule_halves_the_16_bit_rates_for_convolutions_on_tf32_cards_only() -> None:
    from traintime.predict_plan import tf32_step_ms

    s32, s16 = np.array([100.0, 100.0, 100.0, 100.0, 100.0]), np.array([30.0, 30.0, 30.0, 30.0, 70.0])
    share = np.array([1.0, 0.0, 0.5, 1.0, 1.0])
    tf32 = np.array([True, True, True, False, True])
    out = tf32_step_ms(s32, s16, share, tf32)
    # all-conv on a TF32 card: 2 x 16-bit; no convolutions: 32-bit; half: the blend; no TF32: 32-bit;
    # a 16-bit answer over half the 32-bit one (GeForce: TF32 = FP32 rate): the faster 32-bit kernels
    np.testing.assert_allclose(out, [60.0, 100.0, 80.0, 100.0, 100.0])


def test_tf32_precision_speeds_convolutional_steps_on_ampere_and_newer_only() -> None:
    from traintime.core.gpudb import has_tf32_bf16
    from traintime.predict_plan import PlanContext, plan

    class ByPrecision:  # a fake step model: 100 ms at 32 bits, 30 ms at 16 bits, every GPU
        label = "fake"

        def predict(self, rows: pd.DataFrame) -> np.ndarray:
            return np.where(rows["precision"].astype(str).eq("32"), 100.0, 30.0)

    gpus = gpu_rows(["A100-PCIe-80GB", "RTX-4090", "V100-SXM2-16GB", "T4"])
    assert has_tf32_bf16(gpus).tolist() == [True, True, False, False]
    conv = plan(make_workload("resnet18", 64, "tf32", dataset="cifar10"), gpus, ByPrecision(), PlanContext())
    assert make_workload("resnet18", 64, "tf32", dataset="cifar10").bytes_per_scalar == 4
    ms = dict(zip(conv["gpu"], conv["step_ms"]))
    assert ms["V100-SXM2-16GB"] == ms["T4"] == 100.0  # no TF32 tensor cores
    assert 60.0 <= ms["A100-PCIe-80GB"] < 65.0  # ~all FLOPs in convolutions: close to 2 x 30
    vit = plan(make_workload("vit_tiny_patch16_224", 8, "tf32", dataset="imagenet"), gpus, ByPrecision(),
               PlanContext())
    assert (vit["step_ms"] == 100.0).all()  # matmuls stay FP32 by default
    bf16 = plan(make_workload("resnet18", 64, "bf16", dataset="cifar10"), gpus, ByPrecision(), PlanContext())
    assert bf16["step_ms"].tolist() == [30.0, 30.0, 100.0, 100.0]  # no BF16 tensor cores before Ampere: FP32 rate


def test_16_bit_takes_the_32_bit_answer_on_cards_without_a_fast_16_bit_rate() -> None:
    """The traces' 16-bit speed-ups were all measured on tensor cores; a card with neither tensor cores nor a 16-bit
    vector rate above FP32 (the P4, the GeForce GTX 10 series) gains nothing from autocast, so a fitted 16-bit
    speed-up must not reach it. The P100's 16-bit vector rate is twice its FP32 one: its 16-bit answer stands."""
    from traintime.core.gpudb import has_fast_fp16
    from traintime.predict_plan import PlanContext, plan, precision_notes

    class ByPrecision:  # a fake step model: 100 ms at 32 bits, 30 ms at 16 bits, every GPU
        label = "fake"

        def predict(self, rows: pd.DataFrame) -> np.ndarray:
            return np.where(rows["precision"].astype(str).eq("32"), 100.0, 30.0)

    gpus = gpu_rows(["A100-PCIe-80GB", "P100-PCIe-16GB", "P4", "T4", "GeForce GTX 1080 Ti"])
    assert has_fast_fp16(gpus).tolist() == [True, True, False, True, False]
    w = make_workload("resnet18", 64, "16", dataset="cifar10")
    assert plan(w, gpus, ByPrecision(), PlanContext())["step_ms"].tolist() == [30.0, 30.0, 100.0, 30.0, 100.0]
    assert "(2 of these GPUs: Pascal and older" in precision_notes(w, gpus)[0]
    fast = gpus.iloc[[0, 3]]
    assert plan(w, fast, ByPrecision(), PlanContext())["step_ms"].tolist() == [30.0, 30.0]
    assert precision_notes(w, fast) == []
    unknown = gpus.iloc[[2]].assign(matrix_fp16_gflops=np.nan)  # a rate unknown: the model's 16-bit answer stands
    assert has_fast_fp16(unknown).tolist() == [True]


def test_bf16_is_answered_by_the_16_bit_rows_the_step_models_know() -> None:
    """The step models were fitted on fp32 and fp16 measurements: asked for bf16 rows, the neighbour model found no
    measured bf16 network and extrapolated large batches by its global rule (bf16 at batch 1024 came out ~40 % faster
    than fp16 on an A100, while the traces measure bf16 a few per cent slower)."""
    from traintime.predict_plan import PlanContext, plan, precision_notes

    asked: list[set[str]] = []

    class Spy:  # 16-bit 30 ms, 32-bit 100 ms; a bf16 row would answer 10 ms
        label = "spy"

        def predict(self, rows: pd.DataFrame) -> np.ndarray:
            asked.append(set(rows["precision"].astype(str)))
            return rows["precision"].astype(str).map({"16": 30.0, "32": 100.0, "bf16": 10.0}).to_numpy(dtype=float)

    gpus = gpu_rows(["A100-PCIe-80GB", "RTX-4090", "V100-SXM2-16GB"])
    w = make_workload("resnet18", 1024, "bf16", dataset="cifar10")
    out = plan(w, gpus, Spy(), PlanContext())
    assert out["step_ms"].tolist() == [30.0, 30.0, 100.0]
    assert "bf16" not in set().union(*asked)
    notes = precision_notes(w, gpus)
    assert notes[0].startswith("bf16 step times are the 16-bit answers") and "before Ampere: 1 of these" in notes[1]
    with pytest.raises(TraintimeError, match="tf32"):
        make_workload("resnet18", 64, "tf64", dataset="cifar10")


def test_plan_floors_the_epoch_interval_at_the_seed_spread_and_adds_it_once() -> None:
    """Epoch half-width = max(model residual, seed spread); hours = step and epochs half-widths in quadrature."""
    from traintime.predict_plan import PlanContext, plan

    class Flat:  # a fake step model: 10 ms on every GPU
        label = "fake"

        def predict(self, rows: pd.DataFrame) -> np.ndarray:
            return np.full(len(rows), 10.0)

    w = make_workload("resnet18", 64, "32", dataset="cifar10")
    gpus = gpu_rows(["T4"])
    for epochs_q, seed_q, want in ((0.2, 0.3, 0.3), (0.3, 0.2, 0.3), (0.3, float("nan"), 0.3)):
        out = plan(w, gpus, Flat(), PlanContext(step_q=0.4, epochs_q=epochs_q, seed_q=seed_q), epochs=20.0).iloc[0]
        assert out["epochs_high"] / out["epochs"] == pytest.approx(np.exp(want))
        assert out["hours_high"] / out["hours"] == pytest.approx(np.exp(np.hypot(0.4, want)))
