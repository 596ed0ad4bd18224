"""The report index (one markdown list of every table, figure, model and data file of a run) and the
cost of the DAG (wall time and peak memory per rule, from Snakemake's ``benchmark:`` records)."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

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


#: Columns of ``results/tables/dag_cost.csv``.
DAG_COST_COLUMNS: tuple[str, ...] = ("rule", "jobs", "wall_s_total", "wall_s_max", "max_rss_mb", "cpu_s_total",
                                     "first_start", "last_end")


def benchmark_records(bench_dir: str | os.PathLike[str]) -> pd.DataFrame:
    """One row per Snakemake ``benchmark:`` file under ``bench_dir``: ``rule`` (the extended
    record's ``rule_name``, else the file's path below ``bench_dir``), ``job`` (the path), ``wall_s``,
    ``max_rss_mb``, ``cpu_s`` and ``finished_at`` / ``started_at`` (POSIX seconds: the file is
    written when the job ends, so start = modification time - wall time). Empty when none. Snakemake samples a
    job's memory every 0.5 s (``snakemake.benchmark``): a sub-second job has no sample (recorded as 0) or one taken
    before its interpreter loaded (tens of kB); a record under 1 MB becomes NaN here (not measured, not zero)."""
    rows = []
    root = Path(bench_dir)
    for path in sorted(root.rglob("*.tsv")):
        table = pd.read_csv(path, sep="\t")
        if table.empty:
            continue
        rec = table.iloc[-1]
        job = str(path.relative_to(root).with_suffix(""))
        rule = rec["rule_name"] if "rule_name" in table.columns and isinstance(rec["rule_name"], str) else job
        finished = path.stat().st_mtime
        rss = pd.to_numeric(rec.get("max_rss"), errors="coerce")
        rows.append({"rule": rule, "job": job, "wall_s": float(rec["s"]),
                     "max_rss_mb": float(rss) if pd.notna(rss) and rss >= 1.0 else float("nan"),
                     "cpu_s": float(pd.to_numeric(rec.get("cpu_time"), errors="coerce")),
                     "started_at": finished - float(rec["s"]), "finished_at": finished})
    cols = ["rule", "job", "wall_s", "max_rss_mb", "cpu_s", "started_at", "finished_at"]
    return pd.DataFrame(rows, columns=cols).astype({c: float for c in cols[2:]})  # numeric when empty too


def dag_cost_table(records: pd.DataFrame) -> pd.DataFrame:
    """Per rule: number of jobs, total and longest wall time (s), largest peak RSS (MB), total CPU
    time (s), first job start and last job end (POSIX s), sorted by total wall time (largest first).
    From a run from scratch, max(last_end) - min(first_start) is the DAG's wall time."""
    g = records.groupby("rule", sort=True)
    out = pd.DataFrame({
        "jobs": g.size(),
        "wall_s_total": g["wall_s"].sum().round(2),
        "wall_s_max": g["wall_s"].max().round(2),
        "max_rss_mb": g["max_rss_mb"].max().round(1),
        "cpu_s_total": g["cpu_s"].sum().round(2),
        "first_start": g["started_at"].min().round(1),
        "last_end": g["finished_at"].max().round(1),
    }).reset_index()
    return out.sort_values(["wall_s_total", "rule"], ascending=[False, True], ignore_index=True)[
        list(DAG_COST_COLUMNS)]


#: columns of ``make_run_setup.csv`` (:func:`setup_record`)
SETUP_COLUMNS: tuple[str, ...] = ("step", "started_at", "finished_at", "wall_s")


def setup_record(prefix: str | Path, dag_start: float, max_gap_s: float = 120.0) -> pd.DataFrame:
    """``make run``'s virtual-environment set-up just before this DAG, as one row of :data:`SETUP_COLUMNS`: from the
    creation of ``<prefix>/pyvenv.cfg`` to the Makefile's install stamp ``<prefix>/.installed``, kept only when the
    stamp precedes the DAG's first job (``dag_start``, POSIX s) by at most ``max_gap_s`` - a `make run` that set up
    the environment and went straight on; no row (an environment set up earlier, or none) otherwise."""
    cfg, stamp = Path(prefix) / "pyvenv.cfg", Path(prefix) / ".installed"
    rows = []
    if cfg.exists() and stamp.exists():
        t0, t1 = cfg.stat().st_mtime, stamp.stat().st_mtime
        if t0 <= t1 <= dag_start and dag_start - t1 <= max_gap_s:
            rows.append({"step": "virtual environment (make setup)", "started_at": round(t0, 1),
                         "finished_at": round(t1, 1), "wall_s": round(t1 - t0, 1)})
    return pd.DataFrame(rows, columns=list(SETUP_COLUMNS))


def overlapping_jobs(records: pd.DataFrame, tolerance_s: float = 0.5) -> list[tuple[str, str]]:
    """Pairs of jobs whose [started_at, finished_at] intervals overlap by more than ``tolerance_s``."""
    r = records.sort_values("started_at").reset_index(drop=True)
    pairs = []
    for i in range(len(r)):
        for j in range(i + 1, len(r)):
            if r.loc[j, "started_at"] >= r.loc[i, "finished_at"] - tolerance_s:
                break
            pairs.append((r.loc[i, "job"], r.loc[j, "job"]))
    return pairs
