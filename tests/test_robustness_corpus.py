"""Robustness corpus (tests/corpus/MANIFEST.yaml): every malformed input gets one clear message.

For each case the user-facing entry point runs in a fresh folder and must: exit non-zero, print
exactly one ``error:`` line matching the expected message (which names the culprit), print no
traceback, and leave nothing behind that looks like a valid result.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
CORPUS = Path(__file__).resolve().parent / "corpus"
CASES = yaml.safe_load((CORPUS / "MANIFEST.yaml").read_text())["cases"]
BIN = Path(sys.executable).parent


def _command(case: dict, work: Path) -> tuple[list[str], dict[str, str]]:
    env: dict[str, str] = {}
    f = str(work / case["file"]) if "file" in case else None
    kind = case["kind"]
    if kind == "config":
        return [str(BIN / "traintime"), "check-config", "--repo", str(REPO), f], env
    if kind == "snakemake-config":
        return [str(BIN / "snakemake"), "-s", str(REPO / "Snakefile"), "--directory", str(work), "-n",
                "--configfile", f], env
    if kind == "validate":
        return [str(BIN / "traintime"), "validate", case["table"], f], env
    if kind == "specs":
        return [str(BIN / "traintime"), "gpus", "--specs", f], env
    if kind == "predict":
        return [str(BIN / "traintime"), "predict", *case["argv"]], env
    if kind == "cli":  # any traintime command; {work} is the case's folder, set up by `setup`
        setup = case.get("setup", {})
        for d in setup.get("mkdir", []):
            (work / d).mkdir(parents=True, exist_ok=True)
        for dst, src in setup.get("copy", {}).items():
            (work / dst).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(CORPUS / src, work / dst)
        return [str(BIN / "traintime"), *[a.format(work=work, repo=REPO) for a in case["argv"]]], env
    if kind == "retrieve":
        mirror = work / "mirror" / "chronos" / case["path"]
        mirror.parent.mkdir(parents=True)
        shutil.copyfile(f, mirror)
        env["TRAINTIME_DATA_MIRROR"] = str(work / "mirror")
        offline = work / "offline.yaml"
        offline.write_text("data:\n  allow_download: false\n")
        return [str(BIN / "snakemake"), "-s", str(REPO / "Snakefile"), "--directory", str(work), "--cores", "1",
                f"results/raw/chronos/{case['path']}", "--configfile", str(offline)], env
    raise AssertionError(f"unknown corpus kind {kind}")


def test_corpus_is_large_and_ids_are_unique():
    ids = [c["id"] for c in CASES]
    assert len(ids) >= 30 and len(set(ids)) == len(ids)
    for c in CASES:
        if "file" in c:
            assert (CORPUS / c["file"]).exists(), c["file"]


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_malformed_input_gives_one_clear_message(case, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    if "file" in case:
        shutil.copyfile(CORPUS / case["file"], work / case["file"])
    before = {p for p in work.rglob("*")}
    cmd, env = _command(case, work)
    res = subprocess.run(cmd, cwd=work, env={**os.environ, **env}, capture_output=True, text=True, timeout=300)
    assert res.returncode != 0, res.stdout
    if "exit" in case:  # the documented status (traintime.core.boundary)
        assert res.returncode == case["exit"], (res.returncode, res.stderr)
    assert "Traceback" not in res.stderr
    text = res.stderr
    if case["kind"] == "retrieve":  # Snakemake reports the failed job; the message is in the rule's log
        text = (work / "results/logs/retrieve/chronos" / f"{case['path']}.log").read_text()
    errors = [line for line in text.splitlines() if re.search(r"(^|\s)error:|ERROR traintime", line)]
    if case["kind"] != "retrieve":
        errors = [line for line in text.splitlines() if line.startswith("error:")]
        assert len(errors) == 1, text
    assert re.search(case["expect"], "\n".join(errors)), f"expected /{case['expect']}/ in:\n{text}"
    # nothing that looks like a valid result was left behind
    produced = {p for p in work.rglob("*") if p.is_file()} - before
    results = [p for p in produced if "results" in p.parts and "logs" not in p.parts and p.suffix in (".csv", ".md", ".png")]
    assert results == [], results
