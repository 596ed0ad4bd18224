"""Trace retrieval / normalisation, model families, cleanup policy and the GPU spec table."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd
import pytest
import yaml

from traintime.core.errors import ChecksumError, SchemaError, UnknownNameError
from traintime.core.specs import canonical_gpu, gpu_row, load_specs
from traintime.data.retrieve import Source
from traintime.emulation.traces import (
    evaluation_slice,
    model_family,
    normalise_traces,
    retrieve_traces,
)

REPO = Path(__file__).resolve().parents[1]

#: The collector's device screening records (shared/notes/host-emulation.md): SMs, CUDA cores, CC.
SCREENING = {
    "3060_Ti": (38, 4864, 8.6), "3060": (28, 3584, 8.6), "3070_Ti": (48, 6144, 8.6), "3070": (46, 5888, 8.6),
    "3080_Ti": (80, 10240, 8.6), "3080": (68, 8704, 8.6), "3090_Ti": (84, 10752, 8.6), "3090": (82, 10496, 8.6),
    "4060_Ti": (34, 4352, 8.9), "4060": (24, 3072, 8.9), "4070_SUPER": (56, 7168, 8.9),
    "4070_Ti_SUPER": (66, 8448, 8.9), "4070_Ti": (60, 7680, 8.9), "4070": (46, 5888, 8.9),
    "4080_SUPER": (80, 10240, 8.9), "4080": (76, 9728, 8.9), "4090": (128, 16384, 8.9),
    "5060_Ti": (36, 4608, 12.0), "5060": (30, 3840, 12.0), "5070_Ti": (70, 8960, 12.0), "5070": (48, 6144, 12.0),
    "5080": (84, 10752, 12.0), "5090": (170, 21760, 12.0),
}

RAW_HEADER = "model,img_size,batch_size,precision,avg_time_ms,oom,gpu,vram_gb,cleanup\n"


def pinned_trace_stems() -> list[str]:
    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    return sorted(Path(p).stem for p in cfg["data"]["sources"]["gpu_profiler"]["files"])


def test_every_pinned_trace_gpu_resolves_and_matches_the_screening_table():
    stems = pinned_trace_stems()
    assert len(stems) == 23
    specs = load_specs()
    for stem in stems:
        row = gpu_row(stem, specs)
        sms, cores, cc = SCREENING[stem.replace("NVIDIA_GeForce_RTX_", "")]
        assert (row["sms"], row["cuda_cores"], row["compute_capability"]) == (sms, cores, cc), stem
        # nvidia-smi name and short name resolve to the same row
        short = stem.replace("NVIDIA_GeForce_", "").replace("_", " ")
        assert canonical_gpu("NVIDIA GeForce " + short, specs) == row["gpu"] == canonical_gpu(short, specs)
    assert gpu_row("RTX 4060 Ti", specs)["memory_gb"] == 16


def test_hopper_rows_and_aliases():
    assert canonical_gpu("NVIDIA H200") == "H200-SXM"
    assert gpu_row("H200-SXM")["memory_gb"] == 141
    assert canonical_gpu("NVIDIA H100 80GB HBM3") == "H100-SXM"
    assert canonical_gpu("NVIDIA H100 PCIe") == "H100-PCIe"  # the CHRONOS row is kept


def test_chronos_rows_agree_with_the_chronos_release(mirror):
    specs = load_specs().set_index("gpu")
    ref = pd.read_csv(mirror / "chronos" / "epoch_time_prediction" / "data" / "CNN.csv")
    ref = ref.drop_duplicates("gpu_name")
    assert len(ref) == 10
    for r in ref.itertuples(index=False):
        gpu = canonical_gpu(r.gpu_name)
        row = specs.loc[gpu]
        assert row["sms"] == getattr(r, "SM"), gpu
        assert row["boost_clock_mhz"] == r[ref.columns.get_loc("Boost Clock (MHz)")], gpu
        assert row["memory_bandwidth_gbps"] == r[ref.columns.get_loc("GPU Memory Bandwidth (GB/s)")], gpu


def test_model_families_of_the_traced_models(mirror):
    df = pd.read_csv(mirror / "gpu_profiler" / "gpu_traces" / "NVIDIA_GeForce_RTX_5090.csv")
    fams = pd.Series([model_family(m) for m in df["model"].unique()]).value_counts()
    assert fams.to_dict() == {"CNN": 32, "Transformer": 18, "Hybrid": 8, "MLP": 2}
    assert model_family("fastvit_t8") == "CNN" and model_family("coatnet_0_rw_224") == "Hybrid"
    with pytest.raises(UnknownNameError, match="no model family rule"):
        model_family("totally_new_net")


def write_raw(path: Path, gpu: str, rows: list[str]) -> Path:
    path.write_text(RAW_HEADER + "".join(r.replace("{gpu}", gpu) + "\n" for r in rows))
    return path


def test_normalise_traces_small_files(tmp_path):
    f = write_raw(tmp_path / "NVIDIA_GeForce_RTX_3060.csv", "NVIDIA_GeForce_RTX_3060", [
        "resnet50,224,16,fp32,40.5,False,{gpu},12,",
        "vit_large_patch16_224,224,64,fp32,,True,{gpu},12,",
        "resnet50,64,16,fp16,3.2,False,{gpu},12,slow_outlier",
    ])
    out = normalise_traces([f])
    assert list(out.columns[:3]) == ["gpu", "model", "family"]
    assert set(out["gpu"]) == {"RTX-3060"}
    oom = out[out["oom"]]
    assert len(oom) == 1 and oom["latency_ms"].isna().all()
    assert out.loc[out["cleanup"].notna(), "cleanup"].tolist() == ["slow_outlier"]
    bad = write_raw(tmp_path / "NVIDIA_GeForce_RTX_3070.csv", "NVIDIA_GeForce_RTX_3060",
                    ["resnet50,224,16,fp32,40.5,False,{gpu},12,"])
    with pytest.raises(SchemaError, match="file name names RTX-3070"):
        normalise_traces([bad])
    nolat = write_raw(tmp_path / "NVIDIA_GeForce_RTX_4090.csv", "NVIDIA_GeForce_RTX_4090",
                      ["resnet50,224,16,fp32,,False,{gpu},24,"])
    with pytest.raises(SchemaError, match="oom is False"):
        normalise_traces([nolat])


def test_cleanup_policy_excludes_flagged_rows_by_default():
    rows = pd.DataFrame(dict(gpu="RTX-3060", model=["a", "b", "c", "d"], family="CNN", img_px=64, batch_size=16,
                             precision="fp32", latency_ms=[1.0, 2.0, None, 4.0], oom=[False, False, True, False],
                             cleanup=[None, "slow_outlier", None, "precision_artifact"]))
    assert list(evaluation_slice(rows)["model"]) == ["a"]
    assert list(evaluation_slice(rows, include_cleanup=True)["model"]) == ["a", "b", "d"]
    assert list(evaluation_slice(rows, include_cleanup=True, drop_oom=False)["model"]) == ["a", "b", "c", "d"]
    assert list(evaluation_slice(rows, include_cleanup=True, exclude_models=["b"])["model"]) == ["a", "d"]
    assert evaluation_slice(rows, precision="fp16").empty


def test_retrieve_traces_skips_absent_and_fails_on_checksum(tmp_path):
    mirror = tmp_path / "mirror"
    (mirror / "gpu_profiler" / "gpu_traces").mkdir(parents=True)
    body = RAW_HEADER + "resnet50,224,16,fp32,40.5,False,NVIDIA_GeForce_RTX_3060,12,\n"
    (mirror / "gpu_profiler" / "gpu_traces" / "NVIDIA_GeForce_RTX_3060.csv").write_text(body)
    sha = hashlib.sha256(body.encode()).hexdigest()
    files = {"gpu_traces/NVIDIA_GeForce_RTX_3060.csv": sha, "gpu_traces/NVIDIA_GeForce_RTX_4090.csv": "0" * 64}
    src = Source("gpu_profiler", "https://invalid.example/{path}", files)
    man = retrieve_traces(src, tmp_path / "out", mirror, allow_download=False).set_index("gpu")
    assert bool(man.loc["RTX-3060", "present"]) and not bool(man.loc["RTX-4090", "present"])
    assert "cannot get" in man.loc["RTX-4090", "reason"]
    assert (tmp_path / "out" / "NVIDIA_GeForce_RTX_3060.csv").read_text() == body
    bad = Source("gpu_profiler", "https://invalid.example/{path}",
                 {"gpu_traces/NVIDIA_GeForce_RTX_3060.csv": "f" * 64})
    with pytest.raises(ChecksumError):
        retrieve_traces(bad, tmp_path / "out2", mirror, allow_download=False)
