"""Zero-shot (p, f) mapping, oracle search and landscapes on small synthetic sweeps."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from traintime.core.errors import ConfigError, DeviceStateError
from traintime.emulation.mapping import (
    green_ctx_sms,
    host_predictions,
    landscape,
    mapping_distance,
    mapping_status,
    mps_percent,
    nearest_clock,
    nearest_point,
    oracle,
    spec_mapped_predictions,
    spec_mapping,
    sweep_points,
)
from traintime.emulation.schema import HOST_LATENCY

P_GRID = (20.0, 40.0, 60.0, 80.0, 100.0)
F_GRID = (1500.0, 2000.0, 2500.0)


def host_latency(p: float, f: float, base: float) -> float:
    """A smooth synthetic host response: fewer SMs and lower clocks are slower."""
    return base * (100.0 / p) ** 0.8 * (2500.0 / f)


def make_sweep(bases: dict[str, float], host: str = "RTX-5090", backend: str = "mps") -> pd.DataFrame:
    rows = []
    for model, base in bases.items():
        for p in P_GRID:
            for f in F_GRID:
                rows.append(dict(host_gpu=host, model=model, img_px=224, batch_size=16, precision="fp32",
                                 backend=backend, requested_sm_pct=p, requested_clock_mhz=f,
                                 effective_sms=int(round(170 * p / 100)), effective_clock_mhz=f,
                                 latency_ms=host_latency(p, f, base), oom=False, iters_per_replay=2, replays=10,
                                 torch_version="test", device_name="fake", status="ok", note=None, synthetic=True))
    return HOST_LATENCY.validate(pd.DataFrame(rows), source="synthetic sweep")


def make_targets(entries: list[tuple[str, str, float]]) -> pd.DataFrame:
    return pd.DataFrame([dict(gpu=g, model=m, family="CNN", img_px=224, batch_size=16, precision="fp32",
                              latency_ms=t, oom=False, cleanup=None) for g, m, t in entries])


def test_mps_percent_rounds_to_integer_percent():
    assert mps_percent(28, 170) == 16          # 16.47 %
    assert mps_percent(68, 170) == 40          # exactly 40 %
    assert mps_percent(17, 200) == 9           # 8.5 % rounds half up
    assert mps_percent(300, 170) == 100        # clipped
    assert mps_percent(1, 1000) == 1           # at least 1 %


def test_green_ctx_granularity_by_compute_capability():
    assert green_ctx_sms(27, 56, 8.9) == 28    # CC 8.x: multiples of 2, 13.5 -> 14 x 2
    assert green_ctx_sms(3, 56, 8.9) == 4      # CC 8.x minimum 4
    assert green_ctx_sms(28, 170, 12.0) == 32  # CC >= 9: multiples of 8, 3.5 -> 4 x 8
    assert green_ctx_sms(24, 170, 12.0) == 24
    assert green_ctx_sms(4, 170, 12.0) == 8    # minimum 8
    assert green_ctx_sms(165, 170, 12.0) == 168  # largest multiple of 8 on the host
    assert green_ctx_sms(171, 170, 12.0) == 170  # the whole device: the backend makes no partition
    with pytest.raises(DeviceStateError, match="compute capability 8.0 or newer"):
        green_ctx_sms(20, 40, 7.5)


def test_nearest_clock_ties_go_low():
    assert nearest_clock(1600, [1700, 1500]) == 1500
    assert nearest_clock(1777, [1500, 1800, 2100]) == 1800


def test_spec_mapping_of_rtx5090_host():
    m = spec_mapping("RTX 5090", ["RTX-3060", "RTX-4090"], supported_clocks_mhz=F_GRID).set_index("gpu")
    assert m.loc["RTX-3060", "p_pct"] == 16 and m.loc["RTX-3060", "clock_mhz"] == 2000  # boost 1777 -> 2000
    assert m.loc["RTX-4090", "p_pct"] == 75 and m.loc["RTX-4090", "clock_mhz"] == 2500  # 128/170; boost 2520
    assert m["emulable"].all()
    unq = spec_mapping("RTX-5090", ["RTX-3060"]).iloc[0]
    assert unq["clock_mhz"] == 1777  # no supported clocks given: the target boost clock itself
    g = spec_mapping("RTX-5090", ["RTX-3060"], backend="green_ctx").iloc[0]
    assert g["mapped_sms"] == 32 and math.isclose(g["p_pct"], 100 * 32 / 170)


def test_small_host_cannot_emulate_larger_target():
    m = spec_mapping("RTX-4070-SUPER", ["RTX-4080", "RTX-4060"]).set_index("gpu")
    assert not m.loc["RTX-4080", "emulable"] and m.loc["RTX-4060", "emulable"]


def test_oracle_finds_planted_minimum():
    sweep = sweep_points(make_sweep({"resnet50": 10.0, "vit_base_patch16_224": 20.0}))
    t1 = host_latency(40.0, 2000.0, 10.0) * 1.01          # planted at (40, 2000)
    t2 = host_latency(60.0, 1500.0, 20.0) / 1.02          # planted at (60, 1500)
    targets = make_targets([("RTX-3080", "resnet50", t1), ("RTX-3080", "vit_base_patch16_224", t2)])
    orc = oracle(sweep, targets).set_index("model")
    assert tuple(orc.loc["resnet50", ["p_pct", "clock_mhz"]]) == (40.0, 2000.0)
    assert tuple(orc.loc["vit_base_patch16_224", ["p_pct", "clock_mhz"]]) == (60.0, 1500.0)
    assert orc.loc["resnet50", "abs_log_err"] == pytest.approx(math.log(1.01))
    assert orc.loc["vit_base_patch16_224", "abs_log_err"] == pytest.approx(math.log(1.02))


def test_landscape_grid_has_the_minimum_at_the_planted_point():
    sweep = sweep_points(make_sweep({"resnet50": 10.0}))
    sweep = sweep[~((sweep["p_pct"] == 100.0) & (sweep["clock_mhz"] == 1500.0))]  # one missing cell
    t = host_latency(80.0, 2500.0, 10.0)
    grid = landscape(sweep, make_targets([("RTX-4090", "resnet50", t)]), "RTX-4090", "resnet50", 224, 16, "fp32")
    assert list(grid.index) == list(P_GRID) and list(grid.columns) == list(F_GRID)
    assert np.isnan(grid.loc[100.0, 1500.0])
    assert grid.loc[80.0, 2500.0] == pytest.approx(0.0)
    assert np.nanargmin(grid.to_numpy()) == 3 * 3 + 2
    # one hand-computed cell: |log(t(20, 1500) / t(80, 2500))| = 0.8 log 4 + log(2500/1500)
    assert grid.loc[20.0, 1500.0] == pytest.approx(0.8 * math.log(4.0) + math.log(2500 / 1500))


def test_nearest_point_prefers_p_then_f():
    p, f = nearest_point([20, 20, 40, 40], [1500, 2500, 2000, 2500], 35, 1600)
    assert (p, f) == (40.0, 2000.0)
    assert nearest_point([20, 40], [1500, 1500], 30, 1500) == (20.0, 1500.0)  # tie goes low


def test_spec_mapped_predictions_use_the_mapped_point():
    sweep = sweep_points(make_sweep({"resnet50": 10.0}))
    targets = make_targets([("RTX-3080", "resnet50", 12.0), ("RTX-5090", "resnet50", 3.0)])
    # RTX 3080 boost 1710 MHz, nearest swept clock 1500 MHz: 12% away -> infeasible by default (10%)
    assert spec_mapped_predictions(sweep, targets).empty
    pred = spec_mapped_predictions(sweep, targets, max_clock_distance=0.15)
    assert list(pred["gpu"]) == ["RTX-3080"]  # the host itself is no target
    r = pred.iloc[0]
    # RTX 3080: 68/170 SMs = 40 %, boost 1710 MHz -> nearest swept clock 1500 MHz
    assert (r["p_pct"], r["clock_mhz"]) == (40.0, 1500.0)
    assert r["pred_ms"] == pytest.approx(host_latency(40.0, 1500.0, 10.0))
    assert r["latency_ms"] == 12.0


def test_host_predictions_name_methods_and_skip_unrestricted_rows():
    sweep = make_sweep({"resnet50": 10.0})
    clock_only = make_sweep({"resnet50": 10.0}, backend="nvml_clock")
    clock_only = clock_only[clock_only["requested_sm_pct"] == 100.0]
    none = clock_only.assign(backend="none", requested_clock_mhz=np.nan).drop_duplicates("model")
    rows = pd.concat([sweep, clock_only, none], ignore_index=True)
    targets = make_targets([("RTX-3080", "resnet50", 12.0)])
    pred, orc = host_predictions(rows, targets, "mps", max_clock_distance=0.15)
    assert set(pred["method"]) == {"emulation", "emulation_nvml_clock", "emulation_oracle"}
    assert (pred.loc[pred["method"] == "emulation_nvml_clock", "p_pct"] == 100.0).all()
    assert len(orc) == 1
    empty_pred, empty_orc = host_predictions(rows.iloc[0:0], targets)
    assert empty_pred.empty and empty_orc.empty


def test_mapping_status_refuses_far_points_and_says_why():
    # sweep at p in {20..100} %, f in {1500, 2000, 2500} MHz on an RTX 5090 (170 SMs)
    pts = sweep_points(make_sweep({"resnet50": 10.0}))
    # RTX 3080: 68 SMs = 40% (a grid point), boost 1710 -> 1500 MHz is 12.3% away
    st = mapping_status(pts, ["RTX-3080"]).iloc[0]
    assert st["status"] == "infeasible" and "clock 1500 MHz" in st["reason"]
    assert st["sm_distance"] == pytest.approx(0.0) and st["clock_distance"] == pytest.approx(210 / 1710)
    assert mapping_status(pts, ["RTX-3080"], max_clock_distance=0.15).iloc[0]["status"] == "ok"
    assert mapping_status(pts, ["RTX-3080"], max_clock_distance=None).iloc[0]["status"] == "ok"
    # a coarse sweep (only 100 % and 20 % measured) cannot reach 40 %: infeasible on the SM axis
    coarse = pts[pts["p_pct"].isin([20.0, 100.0])]
    st = mapping_status(coarse, ["RTX-3080"], max_clock_distance=None).iloc[0]
    assert st["status"] == "infeasible" and "SM share 20%" in st["reason"] and st["sm_distance"] == pytest.approx(0.5)
    # a target with more SMs than the host is infeasible, not silently mapped to 100 %
    big = mapping_status(sweep_points(make_sweep({"resnet50": 10.0}, host="RTX-3080")), ["RTX-5090"])
    assert big.iloc[0]["status"] == "infeasible" and "SMs" in big.iloc[0]["reason"]
    assert mapping_distance(40.0, 1500.0, 40.0, 1710.0) == pytest.approx((0.0, 210 / 1710))
    with pytest.raises(ConfigError):
        mapping_status(pts, ["RTX-3080"], max_sm_distance=-1)


@pytest.mark.filterwarnings("error::FutureWarning")  # no spec-mapped row: the empty frame stays out of the concat
def test_infeasible_mapping_is_counted_in_table1():
    from traintime.emulation.tables import table1

    pts = sweep_points(make_sweep({"resnet50": 10.0}))
    targets = make_targets([("RTX-3080", "resnet50", 12.0), ("RTX-3060", "resnet50", 20.0)])
    pred, _ = host_predictions(pts, targets, "mps")
    status = mapping_status(pts[pts["backend"] == "mps"], ["RTX-3080", "RTX-3060"])
    t = table1(pred.assign(seed=-1), status)
    emu = t[t["method"] == "emulation"]
    assert int(emu["n_infeasible_targets"].iloc[0]) == int((status["status"] == "infeasible").sum()) >= 1
    assert "infeasible" in emu["note"].iloc[0]
