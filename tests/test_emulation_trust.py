"""Host rows whose restriction check failed or was skipped keep their status in the raw files and
reach no table (issue 12)."""

from __future__ import annotations

import pandas as pd
import pytest

from traintime.emulation.analysis import load_host_rows, read_host_table
from traintime.emulation.mapping import host_predictions, sweep_points
from traintime.emulation.schema import HOST_LATENCY
from traintime.emulation.sweep import rows_to_frame
from traintime.emulation.tables import per_target, table1, table2, table3, table5
from traintime.emulation.trust import check_rows, row_check

HOST = "RTX-5090"  # 170 SMs in the spec table
P_GRID = (20.0, 40.0, 60.0, 80.0, 100.0)


def _row(model: str, p: float, f: float, base: float, **kw) -> dict:
    r = dict(host_gpu=HOST, model=model, img_px=224, batch_size=16, precision="fp32", backend="mps",
             requested_sm_pct=p, requested_clock_mhz=f, effective_sms=int(round(170 * p / 100)),
             effective_clock_mhz=f, latency_ms=base * (100.0 / p) ** 0.8 * (2500.0 / f), oom=False,
             iters_per_replay=2, replays=10, torch_version="test", device_name="fake", status="ok", note=None,
             synthetic=True)
    r.update(kw)
    return r


def _sweep(model: str, base: float, grid: tuple[float, ...] = P_GRID, **kw) -> list[dict]:
    return [_row(model, p, f, base, **kw) for p in grid for f in (1700.0, 2500.0)]


def _targets() -> pd.DataFrame:
    rows = [dict(gpu=g, model=m, family="CNN", img_px=224, batch_size=16, precision="fp32", latency_ms=t, oom=False,
                 cleanup=None) for g, m, t in [("RTX-3080", "resnet50", 12.0), ("RTX-3080", "densenet121", 15.0),
                                               ("RTX-3060", "resnet50", 20.0), ("RTX-3060", "densenet121", 25.0)]]
    return pd.DataFrame(rows)


@pytest.mark.parametrize("bad, expected", [
    (dict(effective_sms=170), "failed"),                  # read back the whole device for a 40 % request
    (dict(effective_sms=None), "skipped"),                # SMs not read back
    (dict(effective_clock_mhz=2100.0), "failed"),         # clock read back 24 % above the lock
    (dict(effective_clock_mhz=None), "skipped"),          # clock not read back
    (dict(check="failed"), "failed"),                     # the measuring script's binding check failed
    (dict(check="skipped"), "skipped"),                   # ... or was skipped (--skip-check)
    (dict(note="WARNING: green-context check found the partition not binding for graph replays"), "failed"),
])
def test_failed_or_skipped_check_reaches_no_table(tmp_path, bad, expected):
    good = _sweep("resnet50", 10.0)
    # every densenet121 row is SM-restricted and clock-locked and carries the failed/skipped check
    dense = _sweep("densenet121", 14.0, grid=P_GRID[:-1], **bad)
    raw = rows_to_frame(good + dense, source="test sweep")
    # the raw file keeps every row, with its status
    assert set(raw.loc[raw["model"] == "densenet121", "check"]) == {expected}
    assert set(raw.loc[raw["model"] == "resnet50", "check"]) == {"passed"}
    f = tmp_path / "host.csv"
    raw.to_csv(f, index=False)
    excluded: list[pd.DataFrame] = []
    host = load_host_rows([str(f)], allow_synthetic=True, excluded=excluded)
    assert "densenet121" not in set(host["model"]) and len(host) == len(good)
    assert len(excluded) == 1 and len(excluded[0]) == len(dense) and set(excluded[0]["check"]) == {expected}
    # a merged table given with the bad rows still drops them on read
    merged = tmp_path / "merged.csv"
    raw.to_csv(merged, index=False)
    assert "densenet121" not in set(read_host_table(merged)["model"])
    pred, orc = host_predictions(host, _targets(), "mps", max_clock_distance=None)
    pred = pred.assign(seed=-1)
    assert not pred.empty and set(pred["model"]) == {"resnet50"}
    tables = [table1(pred), table2(pred), table3(pred), table5(pred), per_target(pred), orc]
    text = "\n".join(t.to_csv() for t in tables)
    assert "densenet121" not in text
    # the same rows with a passing check do land (the test could fail)
    ok_host = load_host_rows([str(_write(tmp_path, good + _sweep("densenet121", 14.0, grid=P_GRID[:-1])))],
                             allow_synthetic=True)
    assert "densenet121" in set(host_predictions(ok_host, _targets(), "mps", max_clock_distance=None)[0]["model"])


def _write(tmp_path, rows) -> str:
    f = tmp_path / "ok.csv"
    rows_to_frame(rows).to_csv(f, index=False)
    return str(f)


def test_unrestricted_and_analytic_rows_need_no_check():
    r = _row("resnet50", 100.0, 2500.0, 10.0, backend="none", requested_clock_mhz=None, effective_sms=None,
             effective_clock_mhz=None)
    assert row_check(r, 170) == ("not_needed", "no restriction")
    a = _row("resnet50", 100.0, 1700.0, 10.0, backend="analytic_clock", effective_clock_mhz=2407.0)
    assert row_check(a, 170)[0] == "not_needed"
    # host not in the spec table: the read-back must exist, its size cannot be compared
    assert row_check(_row("resnet50", 40.0, 2500.0, 10.0, effective_sms=170), None)[0] == "passed"


def test_check_column_is_in_the_schema_and_sweep_points_only_see_trusted_rows():
    assert "check" in HOST_LATENCY and not HOST_LATENCY["check"].required
    df = HOST_LATENCY.validate(pd.DataFrame(_sweep("resnet50", 10.0)), source="t")
    assert (check_rows(df)["check"] == "passed").all()
    assert len(sweep_points(df)) == len(df)
