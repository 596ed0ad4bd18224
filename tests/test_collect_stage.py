"""Collect stage helpers: job ids, merging benchmark rows into the canonical table, probe tables."""

from __future__ import annotations

import pandas as pd
import pytest

from traintime.core.errors import ConfigError
from traintime.core.io import write_csv
from traintime.data.chronos import ITERATION
from traintime.measure.collect import (
    benchmark_jobs,
    convergence_run,
    convergence_run_id,
    parse_job_id,
)
from traintime.measure.local import (
    merge_local_iteration,
    probe_ablation_table,
    probe_cost_table,
)
from traintime.measure.timing import BenchmarkJob, run_benchmark


def test_job_ids_round_trip() -> None:
    c = {"benchmark": {"models": ["mixer", "resnet18"], "datasets": ["digits"], "optimizers": ["sgd", "adamw"],
                       "batch_sizes": [32], "precisions": [16, 32], "learning_rate": 0.01}}
    jobs = benchmark_jobs(c)
    assert len(jobs) == 8
    for j in jobs:
        back = parse_job_id(j.job_id, 0.01)
        assert back == j
    with pytest.raises(ConfigError):
        parse_job_id("mixer__digits__sgd__32__p32")
    run = {"model": "resmlp", "dataset": "digits", "optimizer": "sgd", "batch_size": 128, "learning_rate": 0.1}
    rid = convergence_run_id(run)
    assert rid == "resmlp__digits__sgd__b128__lr0.1__p32"
    assert convergence_run({"convergence": {"runs": [run]}}, rid)["precision"] == 32
    with pytest.raises(ConfigError):
        convergence_run({"convergence": {"runs": [run]}}, "nope")


def test_benchmark_rows_merge_into_canonical_table(tmp_path) -> None:
    parts = []
    for bs in (4, 8):
        row = run_benchmark(BenchmarkJob("mixer", "synthetic", "sgd", bs, 32, img_px=8,
                                         model_kwargs=(("embed_dim", 16), ("depth", 1))),
                            device="cpu", num_workers=0, warmup=1, measured=2, synthetic_size=32)
        path = tmp_path / f"b{bs}.csv"
        write_csv(pd.DataFrame([row]), path)
        parts.append(str(path))
    out = tmp_path / "local_iteration.csv"
    merged = merge_local_iteration(parts, str(out))
    assert len(merged) == 2 and set(merged["source"]) == {"local"}
    ITERATION.validate(merged)  # canonical schema: merges with the released table
    assert merged["row_id"].is_unique and merged["config_key"].str.contains("|cpu|", regex=False).all()
    text = out.read_bytes()
    again = merge_local_iteration(parts, str(out))  # idempotent
    assert len(again) == 2 and out.read_bytes() == text


def _probes() -> pd.DataFrame:
    rows = []
    for b, t in ((32, 0.1), (64, 0.2)):
        for rep, g in ((0, 1.0), (1, 3.0)):
            rows.append({"model": "m", "dataset": "d", "probe_batch_size": b, "repeat": rep,
                         "initial_loss_log10": 0.36, "gradient_norm_log10": g, "ntk_trace_proxy_log10": 2 * g,
                         "ntk_trace_log10": 1.0, "ntk_method": "exact", "probe_time_s": t, "ntk_time_s": 2 * t})
    return pd.DataFrame(rows)


def test_probe_tables() -> None:
    abl = probe_ablation_table(_probes())
    assert list(abl["probe_batch_size"]) == [32, 64]
    assert abl["gradient_norm_log10_mean"].tolist() == [2.0, 2.0]
    assert abl["gradient_norm_log10_sd"].iloc[0] == pytest.approx(2 ** 0.5)
    local = pd.DataFrame({"model": ["m"], "dataset": ["d"], "gpu": ["cpu"], "status": ["ok"], "batch_size": [100],
                          "dataset_size": [1000], "step_time_ms": [50.0]})
    cost = probe_cost_table(_probes(), local)
    r = cost[cost["probe_batch_size"] == 32].iloc[0]
    assert r["steps_per_epoch"] == 10 and r["epoch_s"] == pytest.approx(0.5)
    assert r["batch_fraction_pct"] == pytest.approx(10.0)
    assert r["wall_fraction_pct"] == pytest.approx(100 * 0.1 / 0.5)
    assert r["wall_fraction_ntk_pct"] == pytest.approx(100 * 0.3 / 0.5)
    assert r["paper_n_wall_fraction_pct"] == pytest.approx(100 * 0.1 / (500 * 0.05))


def test_oom_rows_are_kept_in_the_local_table(tmp_path, monkeypatch) -> None:
    import torch

    import traintime.measure.models as w
    from traintime.measure.local import load_local_iteration

    class _Oom(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(2, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (fake)")

    kw = dict(device="cpu", num_workers=0, warmup=1, measured=2, synthetic_size=16)
    small = (("embed_dim", 16), ("depth", 1))
    ok = run_benchmark(BenchmarkJob("mixer", "synthetic", "sgd", 4, 32, img_px=8, model_kwargs=small), **kw)
    monkeypatch.setattr(w, "create_model", lambda *a, **k: _Oom())
    oom = run_benchmark(BenchmarkJob("mixer", "synthetic", "sgd", 8, 32, img_px=8, model_kwargs=small), **kw)
    paths = []
    for name, row in (("ok", ok), ("oom", oom)):
        write_csv(pd.DataFrame([row]), tmp_path / f"{name}.csv")
        paths.append(str(tmp_path / f"{name}.csv"))
    merge_local_iteration(paths, str(tmp_path / "local.csv"))
    back = load_local_iteration(str(tmp_path / "local.csv"))
    assert sorted(back["status"]) == ["ok", "oom"]
    assert back.loc[back["status"] == "oom", "step_time_ms"].isna().all()
