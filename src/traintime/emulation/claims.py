"""Claims table of the zero-shot paper: every quantitative claim beside its reproduction.

Published values live in ``resources/paper_zero_shot.csv`` (:data:`CLAIMS`): an id, the claim,
the published value with unit, the source (paper section / table),
the ``metric`` key of the reproduced value (:func:`collect_values`), the ``kind`` of check and
what it ``needs`` (``host``: host emulation measurements; ``host2``: two hosts; ``ops``: per-op
host profiles; ``host+ops``: both; ``traces``: every pinned trace file).

Verdict rule: the project's one rule (:mod:`traintime.core.verdict`, documented in
:mod:`traintime.chronos.claims`): numeric claims are *reproduced* when |mean - published| <= 10 % of
|published|, *inconclusive* when the 95 % t-interval of the mean over seeds is wider than that,
else *not reproduced*; bounds must hold over the whole interval; counts and names must be equal.
A claim whose ``needs`` are not met is *not reproducible from released data* (the public traces
hold the targets' latencies only; the host sweeps need a GPU with MPS and clock locking); a claim
whose needs are met but whose value could not be computed is *not evaluated*. No claim carries a
tolerance of its own.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources

import numpy as np
import pandas as pd

from traintime.core import metrics as M
from traintime.core.io import read_csv, to_markdown
from traintime.core.schema import Column, TableSchema
from traintime.core.verdict import (
    NOT_EVALUATED,
    NOT_REPRODUCIBLE,
    VERDICT_RULE_MD,
    VERDICTS,
    Verdict,
    bound_verdict,
    exact_verdict,
    value_verdict,
)

KINDS = ("value", "max", "count", "set", "none")
NEEDS = ("host", "host2", "ops", "host+ops", "traces")
PAPER = ("Geimer, Fiz, Stripelis: Local Zero-Shot Latency Prediction for Low-End GPUs, "
         "arXiv:2611.02811v1 (2026)")

CLAIMS = TableSchema(
    name="paper_zero_shot_claims",
    description="Quantitative claims of the zero-shot host-emulation paper (published values, with source).",
    key=("claim_id",),
    columns=(
        Column("claim_id", "str", "stable identifier"),
        Column("claim", "str", "the claim, paraphrased"),
        Column("published", "str", "the published value as stated"),
        Column("published_value", "float", "the published number", nullable=True),
        Column("unit", "str", "unit", nullable=True),
        Column("source", "str", "paper, section or table"),
        Column("metric", "str", "key of the reproduced value", nullable=True),
        Column("kind", "str", "how the claim is checked", allowed=KINDS),
        Column("needs", "str", "what the reproduction needs beyond the public traces", nullable=True,
               allowed=NEEDS),
        Column("note", "str", "caveats", nullable=True),
    ),
)

NEED_REASONS = {
    "host": "needs host emulation measurements (an RTX 5090 or similar host restricted by MPS and "
            "locked clocks; rules emulation_host_* on a GPU); none present under the measurement folders",
    "host2": "needs host emulation measurements from two different host GPUs; fewer present",
    "traces": "needs every pinned target trace file; some could not be retrieved (see the trace manifest)",
    "ops": "needs per-op host profiles (torch.profiler on the host GPU) for the Habitat/NeuSight-style "
           "baselines; none present",
}


@dataclass(frozen=True)
class Reproduced:
    """A reproduced value: number (mean over ``n`` seeds) or names, sd over seeds, and a detail."""

    value: float | str
    sd: float = 0.0
    detail: str = ""
    n: int = 1


def load_claims(path: str | os.PathLike[str] | None = None) -> pd.DataFrame:
    path = path or str(resources.files("traintime") / "resources" / "paper_zero_shot.csv")
    return CLAIMS.validate(read_csv(path, dtype={"published": str}), source=str(path))


def needs_met(needs: str | None, available: Mapping[str, bool]) -> tuple[bool, str]:
    """Whether the claim's needs are met; the reason when not."""
    if not needs:
        return True, ""
    missing = [n for n in needs.split("+") if not available.get(n, False)]
    return (not missing), "; ".join(NEED_REASONS[n] for n in missing)


def verdict(kind: str, published: str, published_value: float | None, rep: Reproduced | None) -> Verdict:
    """The :class:`~traintime.core.verdict.Verdict` of one claim whose needs are met (see module doc)."""
    if kind == "none":
        return Verdict(NOT_REPRODUCIBLE, "")
    if rep is None:
        return Verdict(NOT_EVALUATED, "reproduced value missing (input table absent or empty)")
    if kind == "set":
        want = {s.strip() for s in published.split(";")}
        got = {s.strip() for s in str(rep.value).split(";")}
        return exact_verdict(want == got, "same names" if want == got else f"got {rep.value}")
    v = float(rep.value)
    if kind == "count":
        return exact_verdict(abs(v - float(published_value)) < 1e-9, f"counted {v:g}")  # type: ignore[arg-type]
    if kind == "max":
        return bound_verdict(float(published_value), v, rep.sd, rep.n)  # type: ignore[arg-type]
    return value_verdict(float(published_value), v, rep.sd, rep.n)  # type: ignore[arg-type]


def _fmt(rep: Reproduced | None, unit: str | None, kind: str = "value") -> str:
    if rep is None:
        return ""
    if isinstance(rep.value, str):
        return rep.value
    v = float(rep.value)
    if kind == "count":
        return f"{v:.0f}" + (f" {unit}" if unit else "")
    digits = 3 if abs(v) < 2 else 2
    s = f"{v:.{digits}f}"
    if rep.sd:
        s += f" +- {rep.sd:.{digits}f}"
    return s + (f" {unit}" if unit else "")


def build_claims_table(claims: pd.DataFrame, values: Mapping[str, Reproduced],
                       available: Mapping[str, bool]) -> pd.DataFrame:
    """One row per claim: claim_id, claim, published, reproduced, verdict, interval_95 (95 %
    t-interval of the mean over seeds), difference (signed, reproduced - published), why, source,
    and the numbers (published_value, reproduced_value, reproduced_sd, n_seeds, tolerance,
    difference_value, ci95_low, ci95_high)."""
    rows = []
    for c in claims.itertuples(index=False):
        unit = c.unit or ""
        ok, need_reason = needs_met(c.needs, available)
        rep = values.get(c.metric) if c.metric else None
        if ok:
            vd = verdict(c.kind, c.published, c.published_value, rep)
        else:  # a partial value (e.g. counted over the files present) is still shown
            vd = Verdict(NOT_REPRODUCIBLE, need_reason)
        why = "; ".join(x for x in (vd.reason, rep.detail if rep else "", c.note or "") if x)
        interval = "" if np.isnan(vd.ci_low) or vd.ci_low == vd.ci_high else f"[{vd.ci_low:.4g}, {vd.ci_high:.4g}]"
        num = float(rep.value) if rep is not None and not isinstance(rep.value, str) else np.nan
        rows.append({"claim_id": c.claim_id, "claim": c.claim,
                     "published": c.published + (f" {unit}" if unit and c.kind != "set" else ""),
                     "reproduced": _fmt(rep, unit if c.kind != "set" else None, c.kind), "verdict": vd.verdict,
                     "interval_95": interval,
                     "difference": "" if np.isnan(vd.difference) else f"{vd.difference:+.4g}", "why": why,
                     "source": c.source, "published_value": c.published_value, "reproduced_value": num,
                     "reproduced_sd": rep.sd if rep is not None and not isinstance(rep.value, str) else np.nan,
                     "n_seeds": rep.n if rep is not None else 0, "tolerance": vd.tolerance,
                     "difference_value": vd.difference, "ci95_low": vd.ci_low, "ci95_high": vd.ci_high})
    return pd.DataFrame(rows)


def claims_markdown(table: pd.DataFrame, context: str = "") -> str:
    """The claims table as markdown with the verdict rule."""

    counts = table["verdict"].value_counts()
    summary = ", ".join(f"{counts.get(v, 0)} {v}" for v in VERDICTS if counts.get(v, 0))
    head = f"""# Zero-shot latency prediction by host emulation: published claims vs. this reproduction

Paper: {PAPER}. {len(table)} claims: {summary}.

{VERDICT_RULE_MD}
Here *not reproducible from released data* means the claim needs measurements the public traces do not
contain (host emulation sweeps, per-op host profiles, two hosts); the reason says which. Learned-baseline
values are mean +- sd over seeds.
{context}
"""
    return head + "\n" + to_markdown(table[["claim_id", "claim", "published", "reproduced", "verdict", "interval_95",
                                                   "difference", "why"]])


# --------------------------------------------------------------------------------------------
# Reproduced values from the stage's tables
# --------------------------------------------------------------------------------------------

def collect_values(table1: pd.DataFrame, table2: pd.DataFrame, table3: pd.DataFrame, table4: pd.DataFrame,
                   table5: pd.DataFrame, shares: pd.DataFrame, main_pred: pd.DataFrame,
                   traces_main: pd.DataFrame, paper_host: str = "RTX-5090",
                   ablation_host: str = "RTX-4070-SUPER", include_cleanup: bool = False) -> dict[str, Reproduced]:
    """Metric key -> reproduced value, from the stage's tables (main slice) and traces.

    Emulation values are taken for ``paper_host`` when that host was measured, else for the first
    host in Table 1 (the detail names the host). ``traces_main``: every main-slice trace row of the
    target GPUs (OOM and cleanup-flagged rows included: counts are over all cases); the latency span
    follows the cleanup policy (``include_cleanup``).
    """
    out: dict[str, Reproduced] = {}
    t1 = table1[table1["n"].notna()] if "n" in table1 else table1.iloc[0:0]
    for method, g in t1.groupby("method", sort=False):
        hosts = list(g["host_gpu"])
        row = g[g["host_gpu"] == paper_host].iloc[0] if paper_host in hosts else g.iloc[0]
        detail = f"host {row['host_gpu']}; {int(row['n_gpus'])} targets, {int(row['n_workloads'])} workloads"
        for m in ("mape", "median_ape", "sd_ape", "spearman", "pearson_log"):
            sd = row.get(f"{m}_sd", 0.0)
            out[f"t1/{method}/{m}"] = Reproduced(float(row[m]), 0.0 if pd.isna(sd) else float(sd), detail,
                                                 max(1, int(row.get("n_seeds", 1) or 1)))
        if method == "emulation" and ablation_host in hosts:
            out["ablation/both"] = Reproduced(float(g[g["host_gpu"] == ablation_host].iloc[0]["mape"]), 0.0,
                                              f"host {ablation_host}")
    if "t1/emulation/mape" in out and "t1/habitat/mape" in out:
        red = 100.0 * (1.0 - float(out["t1/emulation/mape"].value) / float(out["t1/habitat/mape"].value))
        out["t1/reduction_vs_habitat"] = Reproduced(red)
    for r in table3.itertuples(index=False):
        for k in ("mean", "sd", "median", "p10", "p90"):
            out[f"t3/{r.method}/{k}"] = Reproduced(float(getattr(r, k)), 0.0, f"{r.n_workloads} workloads")
    for r in shares.itertuples(index=False):
        out[f"fig5/{r.method}/share_le_{int(r.threshold_pct)}"] = Reproduced(100.0 * float(r.share))
    for r in table5.itertuples(index=False):
        out[f"t5/{r.method}/{r.family}"] = Reproduced(float(r.mape), float(r.mape_sd or 0.0), f"{r.n_models} models")
    for (method, kind), g in table2[table2["scope"] == "gpu"].groupby(["method", "kind"]) if not table2.empty else []:
        out[f"t2/{method}/{kind}_gpu"] = Reproduced(str(g.sort_values("rank")["name"].iloc[0]))
    if "mean_abs_diff_pct" in table4:
        a = table4[table4["scope"] == "all"].iloc[0]
        out["t4/mean_abs_diff_pct"] = Reproduced(float(a["mean_abs_diff_pct"]), 0.0, f"{a['host_a']} vs {a['host_b']}")
        out["t4/share_le_20"] = Reproduced(100.0 * float(a["share_le_20"]))
    emu = main_pred[main_pred["method"] == "emulation"]
    if not emu.empty:
        emu = emu[emu["host_gpu"] == paper_host] if paper_host in set(emu["host_gpu"]) else emu
        ape = M.ape(emu["latency_ms"], emu["pred_ms"])
        from scipy import stats
        out["emulation/ape_latency_pearson"] = Reproduced(float(stats.pearsonr(np.log(emu["latency_ms"]), ape).statistic))
    # data facts
    fam = traces_main.drop_duplicates("model")["family"].value_counts()
    for f in ("CNN", "Transformer", "Hybrid", "MLP"):
        out[f"data/family/{f}"] = Reproduced(float(fam.get(f, 0)))
    out["data/n_models"] = Reproduced(float(traces_main["model"].nunique()))
    n_gpu = traces_main["gpu"].nunique()
    n_wk = traces_main[["model", "img_px"]].drop_duplicates().shape[0]
    out["data/cases"] = Reproduced(float(len(traces_main)), 0.0, f"{n_gpu} targets present x {n_wk} workloads")
    out["data/non_oom_cases"] = Reproduced(float((~traces_main["oom"].astype(bool)).sum()), 0.0,
                                           f"on the {n_gpu} targets present")
    ok = traces_main.dropna(subset=["latency_ms"])
    if not include_cleanup:
        ok = ok[ok["cleanup"].isna()]
    span = ok.groupby(["gpu", "img_px"])["latency_ms"].agg(lambda s: s.max() / s.min())
    by_px = span.groupby(level="img_px").median()
    detail = "median over GPUs per input size: " + ", ".join(f"{px}px {v:.1f}x" for px, v in by_px.items())
    out["data/span_low"] = Reproduced(float(by_px.min()), 0.0, detail)
    out["data/span_high"] = Reproduced(float(by_px.max()), 0.0, detail)
    return out
