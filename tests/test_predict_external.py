"""traintime.predict_external (Lambda's public ResNet-50 throughput as an external check) and the optional retrieval."""

import hashlib
import json

import numpy as np
import pandas as pd
import pytest

from traintime.core.errors import ChecksumError, SchemaError
from traintime.data.retrieve import Source, retrieve_optional
from traintime.predict_external import (
    absent_summary,
    load_benchmark,
    pairs_right,
    predict_args,
    predict_rows,
    summarise,
)

HEADER = "name_gpu,num_gpu,watt,price,resnet50,bert_base_squad\n"


def _bench(tmp_path, prec, throughput: str, batch: str):
    tp, bs = tmp_path / f"tp-{prec}.csv", tmp_path / f"bs-{prec}.csv"
    tp.write_text(HEADER + throughput)
    bs.write_text(HEADER + batch)
    return tp, bs


def test_load_benchmark_keeps_single_gpu_rows_with_a_batch_and_a_name(tmp_path):
    files = {"fp32": _bench(tmp_path, "fp32",
                            "A,1,300,1,1000.0,5\nB,1,300,1,500.0,5\n2x A,2,600,1,1900.0,9\nC,1,300,1,800.0,5\n",
                            "A,1,300,1,640,8\nC,1,300,1,100,8\n2x A,2,600,1,1280,8\n")}
    rows, skipped = load_benchmark(files, {"A": "GPU-A", "B": "GPU-B"})
    assert rows.to_dict("records") == [dict(precision="fp32", bench_gpu="A", gpu="GPU-A", batch_size=640,
                                            images_per_s=1000.0, step_ms=640.0)]
    assert skipped == ["fp32 B: no batch size in the bs file",
                       "fp32 C: no name mapping (predict_external.gpu_names)"]


def test_load_benchmark_names_a_file_without_the_resnet50_column(tmp_path):
    tp, bs = _bench(tmp_path, "fp16", "A,1,300,1,1000.0,5\n", "A,1,300,1,640,8\n")
    tp.write_text("name_gpu,num_gpu,bert\nA,1,3\n")
    with pytest.raises(SchemaError, match="tp-fp16.csv.*resnet50"):
        load_benchmark({"fp16": (tp, bs)}, {"A": "GPU-A"})


def _measured():
    return pd.DataFrame([
        dict(precision="fp16", bench_gpu="a", gpu="GPU-A", batch_size=100, images_per_s=1000.0, step_ms=100.0),
        dict(precision="fp16", bench_gpu="b", gpu="GPU-B", batch_size=100, images_per_s=500.0, step_ms=200.0),
        dict(precision="fp16", bench_gpu="c", gpu="GPU-C", batch_size=50, images_per_s=250.0, step_ms=200.0),
    ])


def test_predict_rows_runs_predict_once_per_precision_and_batch_and_reads_its_json():
    calls = []

    def fake_cli(args):
        calls.append(args)
        gpus = args[args.index("--gpus") + 1].split(",")
        pred = {"GPU-A": 150.0, "GPU-B": 100.0, "GPU-C": 100.0}
        return json.dumps([{"gpu": g, "step_ms": pred[g], "step_ms_low": pred[g] / 2, "step_ms_high": pred[g] * 2}
                           for g in gpus] + [{"gpu": "other", "step_ms": 1.0, "step_ms_low": 1, "step_ms_high": 1}])

    rows, commands = predict_rows(_measured(), fake_cli)
    assert [c[c.index("--batch-size") + 1] for c in calls] == ["50", "100"]
    assert calls[1] == predict_args("fp16", 100, ["GPU-A", "GPU-B"])
    assert calls[1][calls[1].index("--precision") + 1] == "16" and "--no-probe" in calls[1] and "--json" in calls[1]
    assert commands[0].startswith("traintime predict --model resnet50 --dataset imagenet --batch-size 50")
    by_gpu = rows.set_index("gpu")
    assert by_gpu.loc["GPU-A", "pred_ms"] == 150.0 and by_gpu.loc["GPU-B", "pred_high_ms"] == 200.0


def test_pairs_and_summary_by_hand():
    rows = _measured().assign(pred_ms=[150.0, 100.0, 100.0], pred_low_ms=[50.0, 150.0, 50.0],
                              pred_high_ms=[200.0, 300.0, 150.0])
    # measured throughput A 1000 > B 500 > C 250; predicted A 667, B 1000, C 500:
    # A-B wrong, A-C right, B-C right
    assert pairs_right(rows) == (2, 3)
    s = summarise(rows)
    assert list(s["precision"]) == ["fp16", "all"]
    row = s.iloc[0]
    assert row["mape_pct"] == pytest.approx((50 + 50 + 50) / 3)
    assert row["geo_mean_pred_over_measured"] == pytest.approx((1.5 * 0.5 * 0.5) ** (1 / 3))
    assert row["interval_coverage_pct"] == pytest.approx(100 * 2 / 3)  # C: 200 outside 50-150
    assert row["pairs_right_pct"] == pytest.approx(100 * 2 / 3) and row["pairs"] == 3
    assert np.isnan(row["called_fit_pct"])  # no fit call in these rows
    called = summarise(rows.assign(fits=[True, False, None])).iloc[0]
    assert called["called_fit_pct"] == pytest.approx(50.0)  # of the two runs with a call, one called to fit


def test_absent_summary_carries_no_number():
    s = absent_summary("offline")
    assert s["precision"].tolist() == ["data absent"]
    assert s[["mape_pct", "median_ape_pct", "pairs_right_pct", "interval_coverage_pct"]].isna().all(axis=None)


def test_retrieve_optional_records_absent_files_and_refuses_a_corrupt_copy(tmp_path):
    mirror = tmp_path / "mirror"
    (mirror / "src" / "d").mkdir(parents=True)
    (mirror / "src" / "d" / "here.csv").write_text("x\n1\n")
    good = hashlib.sha256(b"x\n1\n").hexdigest()
    source = Source("src", "https://example.invalid/{path}", {"d/here.csv": good, "d/gone.csv": "0" * 64})
    recs = retrieve_optional(source, tmp_path / "out", mirror, allow_download=False)
    assert [(r["path"], r["present"]) for r in recs] == [("d/gone.csv", False), ("d/here.csv", True)]
    assert "gone.csv" in str(recs[0]["reason"]) and (tmp_path / "out" / "d" / "here.csv").read_text() == "x\n1\n"
    bad = Source("src", "https://example.invalid/{path}", {"d/here.csv": "1" * 64})
    with pytest.raises(ChecksumError):
        retrieve_optional(bad, tmp_path / "out2", mirror, allow_download=False)
