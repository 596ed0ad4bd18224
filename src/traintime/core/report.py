"""The report index: one markdown list of every table, figure, model and data file of a run."""

from __future__ import annotations

import os
from pathlib import Path

KINDS: tuple[tuple[str, str], ...] = (
    ("tables", "Tables"), ("figures", "Figures"), ("models", "Models"), ("data", "Canonical data"),
)


def _title(path: Path) -> str:
    """First markdown heading of a ``.md`` file, else ''."""
    if path.suffix != ".md":
        return ""
    with path.open(errors="replace") as fh:
        for line in fh:
            if line.startswith("#"):
                return line.lstrip("#").strip()
    return ""


def report_index_markdown(results: str | os.PathLike[str], targets: list[str] | None = None) -> str:
    """Markdown listing the files under ``results``/{tables,figures,models,data} and the top-level
    ``results/*.md``/``*.csv`` (size in bytes, markdown title), sorted by path; ``targets`` (the
    workflow's final products) are marked. No timestamps, so the file is stable across runs."""
    root = Path(results)
    targets_set = {str(Path(t)) for t in (targets or [])}
    lines = ["# Report index", "",
             f"Every table, figure, model and canonical data file under `{root}/` (files of earlier runs with "
             "another configuration may remain). **bold**: a final product of `snakemake` (rule `all`).", ""]

    def entry(p: Path) -> str:
        rel = str(p)
        name = f"**`{rel}`**" if rel in targets_set else f"`{rel}`"
        title = _title(p)
        return f"- {name} ({p.stat().st_size} bytes)" + (f": {title}" if title else "")

    top = sorted(p for p in root.glob("*")
                 if p.is_file() and p.suffix in (".md", ".csv") and p.name != "report_index.md")
    if top:
        lines += ["## Claims and summaries", "", *(entry(p) for p in top), ""]
    for sub, label in KINDS:
        files = sorted(p for p in (root / sub).rglob("*") if p.is_file() and not p.name.startswith("."))
        if files:
            lines += [f"## {label}", "", *(entry(p) for p in files), ""]
    return "\n".join(lines)
