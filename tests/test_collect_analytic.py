"""Analytic features: FLOP counter vs hand-computed FLOPs, CHRONOS column semantics."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from traintime.measure.analytic import (
    analytic_features,
    count_flops,
    model_structure,
    optimizer_state_multiplier,
)


class _Tiny(nn.Module):
    """conv 3->8 3x3 (pad 1) on 6x6, depthwise 3x3 on 8 channels, 1x1 conv 8->4, linear 4*36->5."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.act = nn.ReLU()
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False)
        self.pw = nn.Conv2d(8, 4, 1, bias=False)
        self.fc = nn.Linear(4 * 36, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.act(self.bn(self.c1(x)))
        x = self.act(self.dw(x))
        return self.fc(self.pw(x).flatten(1))


HW = 36
C1 = 2 * 3 * 8 * 9 * HW      # dense 3x3: 2 * Cin * Cout * k^2 * H * W
DW = 2 * 1 * 8 * 9 * HW      # depthwise: Cin/groups = 1
PW = 2 * 8 * 4 * 1 * HW      # 1x1
FC = 2 * 144 * 5             # linear
FWD = C1 + DW + PW + FC


def test_forward_and_backward_flops_by_hand() -> None:
    fc = count_flops(_Tiny(), torch.randn(2, 3, 6, 6))
    assert fc.forward == 2 * FWD
    # backward: weight grads of every layer + input grads of every layer except the first
    # (the input does not require grad); the depthwise conv costs its grouped size, not a dense one
    assert fc.backward == 2 * (FWD + (DW + PW + FC))


def test_structure_matches_chronos_hook_definitions() -> None:
    s = model_structure(_Tiny(), 6, device="cpu")
    assert s["flops_fwd_per_sample"] == FWD
    assert s["flops_fwd_hook_per_sample"] == FWD
    assert s["flops_depthwise_frac"] == pytest.approx(DW / FWD)
    assert s["flops_grouped_frac"] == pytest.approx(DW / FWD)
    assert s["flops_1x1_frac"] == pytest.approx(PW / FWD)
    assert s["flops_3x3_frac"] == pytest.approx(C1 / FWD)
    assert s["depth"] == 4 and s["bn_layers"] == 1 and s["act_layers"] == 2
    assert s["sum_hwC"] == (8 + 8 + 4) * HW and s["max_hwC"] == 8 * HW
    # outputs of conv, linear, relu, bn modules per sample
    assert s["act_scalars"] == 8 * HW * 5 + 4 * HW + 5  # c1, bn, relu, dw, relu; pw; fc
    assert s["param_count"] == sum(p.numel() for p in _Tiny().parameters())


def test_resnet50_matches_released_chronos_row() -> None:
    # released CNN.csv: resnet50 / TinyImageNet (3, 64, 64), precision 16, AMP, SGD
    f = analytic_features("resnet50", "TinyImageNet", 32, "SGD", 16)
    assert f["flops_fwd_per_sample"] == 668106752
    assert f["param_count"] == 23917832 and f["depth"] == 54
    assert f["bn_layers"] == 53 and f["act_layers"] == 49
    assert f["sum_hwC"] == 907264 and f["max_hwC"] == 65536
    assert f["act_bytes_per_sample_proxy"] == 5230992
    assert f["total_state_bytes"] == 287013984
    assert f["arithmetic_intensity_train"] == pytest.approx(19.86396602, rel=1e-8)
    assert f["flops_train_per_batch"] == 3 * 668106752 * 32


def test_optimizer_and_precision_awareness() -> None:
    assert optimizer_state_multiplier("AdamW") == 2 and optimizer_state_multiplier("sgd") == 1
    a = analytic_features("mixer", "synthetic", 16, "adamw", 16, img_px=16)
    b = analytic_features("mixer", "synthetic", 16, "sgd", 32, img_px=16)
    assert a["optimizer_state_bytes"] == 2 * a["param_bytes"] and a["master_param_bytes"] == a["param_bytes"]
    assert b["optimizer_state_bytes"] == b["param_bytes"] and b["master_param_bytes"] == 0
    assert b["act_bytes_per_sample_proxy"] == 2 * a["act_bytes_per_sample_proxy"]  # 4 vs 2 bytes per value
