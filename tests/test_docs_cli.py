"""Generated documentation is current; the schema/config CLI gives one-line answers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from traintime.cli import main
from traintime.core.docs import render_data_docs

REPO = Path(__file__).resolve().parents[1]


def test_docs_data_md_is_current():
    """docs/data.md must be regenerated (`traintime schemas > docs/data.md`) when a schema changes."""
    assert (REPO / "docs" / "data.md").read_text() == render_data_docs()


def test_docs_architecture_md_is_current():
    """docs/architecture.md (rule graph + package map) must be regenerated (`make docs`) when rules
    or module docstrings change."""
    from traintime.core.architecture import (
        architecture_markdown,
        package_map,
        rulegraph_mermaid,
    )

    text = architecture_markdown(rulegraph_mermaid(), package_map())
    assert "flowchart" in text and "traintime.chronos" in text
    assert (REPO / "docs" / "architecture.md").read_text() == text, "stale: run `make docs`"


def test_every_target_derived_column_is_flagged_in_the_docs():
    text = render_data_docs()
    for col in ("loader_ratio", "p90_step_time_ms", "t80_close_epochs"):
        line = next(l for l in text.splitlines() if l.startswith(f"| `{col}`"))
        assert "derived from the target" in line


def test_validate_accepts_the_packaged_spec_table(capsys):
    assert main(["validate", "gpu_specs", str(REPO / "src/traintime/resources/gpu_specs.csv")]) == 0
    assert capsys.readouterr().out.startswith("ok: ")


def test_check_config_accepts_the_default(capsys):
    assert main(["check-config", "--repo", str(REPO), str(REPO / "config.yaml")]) == 0


def test_cli_user_errors_are_one_line_without_traceback(tmp_path):
    bad = tmp_path / "c.yaml"
    bad.write_text("chronos_iteration:\n  familes: [CNN]\n")
    res = subprocess.run([sys.executable, "-m", "traintime.cli", "check-config", "--repo", str(REPO), str(bad)],
                         capture_output=True, text=True)
    assert res.returncode == 3  # EXIT_CONFIG (traintime.core.boundary)
    assert res.stderr.strip().splitlines() == [
        "error: config: chronos_iteration: unknown key(s) ('familes' was unexpected)"]
