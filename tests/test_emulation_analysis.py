"""Paper metrics and tables on hand-computed examples; host measurement loading."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from traintime.core.errors import SchemaError
from traintime.emulation import analysis as A
from traintime.emulation import tables as T
from traintime.emulation.schema import HOST_LATENCY


def pred_rows(entries, method="flops", seed=-1, host="RTX-5090"):
    """entries: (gpu, model, img_px, latency_ms, pred_ms[, family])."""
    rows = []
    for e in entries:
        g, m, px, t, p = e[:5]
        rows.append(dict(method=method, host_gpu=host, gpu=g, model=m, family=e[5] if len(e) > 5 else "CNN",
                         img_px=px, batch_size=16, precision="fp32", latency_ms=t, pred_ms=p, seed=seed))
    return pd.DataFrame(rows)


def test_metric_row_hand_computed():
    r = A.metric_row([10.0, 20.0, 40.0], [11.0, 18.0, 40.0])  # APE 10, 10, 0
    assert r["n"] == 3
    assert r["mape"] == pytest.approx(20.0 / 3)
    assert r["median_ape"] == pytest.approx(10.0)
    assert r["sd_ape"] == pytest.approx(math.sqrt(((10 - 20 / 3) ** 2 * 2 + (20 / 3) ** 2) / 2))
    assert r["share_le_5"] == pytest.approx(1 / 3) and r["share_le_10"] == 1.0
    assert r["spearman"] == pytest.approx(1.0)
    lt, lp = np.log([10, 20, 40]), np.log([11, 18, 40])
    assert r["pearson_log"] == pytest.approx(np.corrcoef(lt, lp)[0, 1])


def test_paper_metrics_mean_and_sd_over_seeds():
    a = pred_rows([("RTX-3060", "m", 64, 100.0, 110.0)], "learned", seed=0)   # APE 10
    b = pred_rows([("RTX-3060", "m", 64, 100.0, 120.0)], "learned", seed=1)   # APE 20
    t = A.paper_metrics(pd.concat([a, b]))
    assert t["n_seeds"].iloc[0] == 2 and t["n"].iloc[0] == 1
    assert t["mape"].iloc[0] == pytest.approx(15.0)
    assert t["mape_sd"].iloc[0] == pytest.approx(math.sqrt(50.0))


def test_ranking_spearman_per_workload():
    good = [(g, "m1", 64, t, 2 * t) for g, t in (("RTX-3060", 30.0), ("RTX-3080", 20.0), ("RTX-4090", 10.0))]
    bad = [(g, "m2", 64, t, 1.0 / t) for g, t in (("RTX-3060", 30.0), ("RTX-3080", 20.0), ("RTX-4090", 10.0))]
    short = [("RTX-3060", "m3", 64, 1.0, 1.0), ("RTX-3080", "m3", 64, 2.0, 2.0)]  # < 3 GPUs: left out
    per = A.ranking_spearman(pred_rows(good + bad + short))
    assert list(per.sort_values("model")["spearman"]) == pytest.approx([1.0, -1.0])
    s = A.ranking_summary(per).iloc[0]
    assert s["mean"] == pytest.approx(0.0) and s["median"] == pytest.approx(0.0)
    assert s["p10"] == pytest.approx(-0.8) and s["p90"] == pytest.approx(0.8)
    assert s["sd"] == pytest.approx(math.sqrt(2.0))


def test_bias_shares_and_grid():
    p = pred_rows([("RTX-3060", "a", 64, 100.0, 110.0), ("RTX-3060", "b", 64, 100.0, 90.0),
                   ("RTX-4090", "a", 224, 100.0, 130.0)])
    b = T.bias_table(p).set_index(["generation", "img_px"])["bias_pct"]
    assert b[("RTX 30", 64)] == pytest.approx(0.0) and b[("RTX 40", 224)] == pytest.approx(30.0)
    sh = A.threshold_shares(p).set_index("threshold_pct")["share"]
    assert sh[5.0] == 0.0 and sh[10.0] == pytest.approx(2 / 3) and sh[50.0] == 1.0
    g = A.grid_mape(p).set_index("img_px")["mape"]
    assert g[64] == pytest.approx(10.0) and g[224] == pytest.approx(30.0)


def test_best_worst_and_family_tables():
    p = pred_rows([("RTX-3060", "a", 64, 100.0, 150.0, "CNN"), ("RTX-3080", "a", 64, 100.0, 110.0, "CNN"),
                   ("RTX-4090", "b", 64, 100.0, 101.0, "Transformer")])
    t2 = T.table2(p)
    best = t2[(t2["scope"] == "gpu") & (t2["kind"] == "best")].sort_values("rank")
    assert list(best["name"]) == ["RTX-4090", "RTX-3080", "RTX-3060"]
    worst = t2[(t2["scope"] == "model") & (t2["kind"] == "worst") & (t2["rank"] == 1)]
    assert worst["name"].iloc[0] == "a" and worst["mape"].iloc[0] == pytest.approx(30.0)
    t5 = T.table5(p).set_index("family")
    assert t5.loc["CNN", "n_models"] == 1 and t5.loc["CNN", "mape"] == pytest.approx(30.0)
    assert t5.loc["Transformer", "mape"] == pytest.approx(1.0)


def test_host_agreement_hand_computed():
    a = pred_rows([("RTX-3060", "m", 64, 100.0, 110.0), ("RTX-3060", "m", 224, 100.0, 100.0)], "emulation",
                  host="RTX-5090")
    b = pred_rows([("RTX-3060", "m", 64, 100.0, 100.0), ("RTX-3060", "m", 224, 100.0, 125.0)], "emulation",
                  host="RTX-4070-SUPER")
    t, note = T.table4(pd.concat([a, b]))
    # hosts sorted by name: A = RTX-4070-SUPER, B = RTX-5090; Delta = (A - B) / B
    allrow = t[t["scope"] == "all"].iloc[0]
    assert (allrow["host_a"], allrow["host_b"]) == ("RTX-4070-SUPER", "RTX-5090")
    d = [(100 - 110) / 110 * 100, (125 - 100) / 100 * 100]
    assert allrow["mean_abs_diff_pct"] == pytest.approx(np.mean(np.abs(d)))
    assert allrow["bias_pct"] == pytest.approx(np.mean(d))
    assert allrow["share_le_20"] == pytest.approx(0.5)
    assert allrow["mape_a"] == pytest.approx(12.5) and allrow["mape_b"] == pytest.approx(5.0)
    assert set(t["scope"]) == {"all", "64px", "224px"}
    one, why = T.table4(a)
    assert "one host only" in why and "mean_abs_diff_pct" not in one
    none, why = T.table4(a.iloc[0:0])
    assert why == A.NO_HOST


def test_table1_states_missing_methods():
    t = T.table1(pred_rows([("RTX-3060", "m", 64, 100.0, 110.0)]))
    assert list(t["method"]) == ["emulation", "habitat", "neusight", "flops", "emulation_oracle"]
    em = t[t["method"] == "emulation"].iloc[0]
    assert em["note"] == A.NO_HOST and em["n"] == 0 and np.isnan(em["mape"])
    assert t[t["method"] == "flops"]["mape"].iloc[0] == pytest.approx(10.0)
    assert t["n"].dtype.kind == "i"


def test_generation():
    assert A.generation("RTX-3060-Ti") == "RTX 30" and A.generation("RTX-5090") == "RTX 50"
    assert A.generation("H200-SXM") == "Hopper"


def host_csv(path, rows):
    df = pd.DataFrame([dict(host_gpu="RTX 5090", model="resnet50", img_px=224, batch_size=16, precision="fp32",
                            backend="mps", requested_sm_pct=p, requested_clock_mhz=None,
                            effective_sms=int(round(170 * p / 100)),  # read back: the restriction check passes
                            effective_clock_mhz=None, latency_ms=t, oom=False, iters_per_replay=2, replays=10,
                            torch_version="x", device_name="x", status="ok", note=None, synthetic=syn)
                       for p, t, syn in rows])
    df.to_csv(path, index=False)
    return str(path)


def test_load_host_rows_dedupes_refuses_synthetic_and_fingerprints(tmp_path):
    d1, d2 = tmp_path / "host", tmp_path / "reference"
    d1.mkdir(), d2.mkdir()
    f1 = host_csv(d1 / "a.csv", [(50.0, 10.0, False), (100.0, 5.0, False)])
    (d2 / "run1").mkdir()
    f2 = host_csv(d2 / "run1" / "b.csv", [(50.0, 99.0, False), (25.0, 20.0, False)])
    (d1 / "manifest.csv").write_text("gpu,present\nx,True\n")  # not a host table: ignored
    files = A.measurement_files([d1, d2, tmp_path / "missing"])
    assert files == [f1, f2]
    rows = A.load_host_rows(files)
    assert len(rows) == 3 and set(rows["host_gpu"]) == {"RTX-5090"}
    assert rows.loc[rows["requested_sm_pct"] == 50.0, "latency_ms"].iloc[0] == 10.0  # first folder wins
    digests = A.file_digests(files)
    host_csv(f2, [(50.0, 99.0, False), (25.0, 21.0, False)])
    changed = A.file_digests(files)
    assert changed[f1] == digests[f1] and changed[f2] != digests[f2]
    host_csv(f2, [(25.0, 20.0, True)])
    with pytest.raises(SchemaError, match="synthetic"):
        A.load_host_rows(files)
    assert len(A.load_host_rows(files, allow_synthetic=True)) == 3
    assert A.load_host_rows([]).empty


def test_host_latency_schema_rejects_bad_rows():
    good = dict(host_gpu="RTX-5090", model="m", img_px=64, batch_size=16, precision="fp32", backend="mps",
                requested_sm_pct=50, requested_clock_mhz=None, effective_sms=85, effective_clock_mhz=None,
                latency_ms=1.0, oom=False, iters_per_replay=2, replays=10, torch_version="x", device_name="x",
                status="ok", note=None, synthetic=False)
    HOST_LATENCY.validate(pd.DataFrame([good]))
    with pytest.raises(SchemaError, match="backend"):
        HOST_LATENCY.validate(pd.DataFrame([good | {"backend": "mig"}]))
    with pytest.raises(SchemaError, match="requested_sm_pct"):
        HOST_LATENCY.validate(pd.DataFrame([good | {"requested_sm_pct": 150}]))
