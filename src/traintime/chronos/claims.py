"""The CHRONOS claims table: every quantitative claim of the paper beside its reproduction.

Published claims live in ``resources/paper_chronos_claims.csv`` (:data:`CLAIMS`): an id, the
claim, the published value, its unit and source section, the ``metric`` key its reproduction is
looked up under, and the ``kind`` of check. :func:`collect_values` computes the reproduced values
from the project's tables (two columns: the paper's protocol and an honest one);
:func:`build_claims_table` applies the verdict rule (:func:`verdict`) and writes the reasons.

Verdict rule (one rule for every claim of this project, CHRONOS and zero-shot; implemented once in
:mod:`traintime.core.verdict` and stated in the rendered tables):

numeric claims (``value``: errors, times, ranks, ratios, correlations alike)
    tolerance = 10 % of |published| (:data:`~traintime.core.verdict.REL_TOL`); the seed spread never
    widens it. The reproduced value is the mean over seeds; its 95 % interval is the two-sided
    Student-t interval mean +- t(0.975, n-1) x sd / sqrt(n) (zero width for one seed or a
    deterministic value). Checked in this order:

    1. *inconclusive* when the interval's half-width exceeds the tolerance (the interval is shown):
       seed noise can never yield *reproduced*;
    2. *reproduced* when |mean - published| <= tolerance;
    3. else *not reproduced*, with the signed difference (mean - published).
``max`` (a published bound ``< x``)
    reproduced when the whole 95 % interval is at or below the bound, not reproduced when it is
    wholly above, else inconclusive.
``count``
    reproduced when equal (to 1e-9).
``statement``
    reproduced when the statement holds (value 1) under the paper's protocol.
``share`` / ``all``
    the value is the share (%) of released configurations where the statement holds; reproduced
    when at least 50% (``share``) or 100% (``all``) of them satisfy it.
``none``
    *not reproducible from released data*; the ``note`` says why.

A claim whose reproduced value is missing (an input table absent) gets *not evaluated*.
:func:`traintime.core.verdict.verdict_counts` counts the verdicts of the claim tables.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources

import numpy as np
import pandas as pd

from traintime.core.io import read_csv, to_markdown
from traintime.core.metrics import mape, mean_sd, rmse
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
from traintime.data.chronos_convergence import MODEL_LABELS, PAPER_MODELS

SHARE_MIN_PCT = 50.0

KINDS = ("value", "max", "count", "statement", "share", "all", "none")

CLAIMS = TableSchema(
    name="paper_chronos_claims",
    description="Quantitative claims of the CHRONOS paper (published values, with their source).",
    key=("claim_id",),
    columns=(
        Column("claim_id", "str", "stable identifier"),
        Column("claim", "str", "the claim, paraphrased"),
        Column("published", "str", "the published value as stated"),
        Column("published_value", "float", "the published number, where there is one", nullable=True),
        Column("unit", "str", "unit of the value", nullable=True),
        Column("source", "str", "paper section"),
        Column("metric", "str", "key of the reproduced value (see traintime.chronos.claims.collect_values)", nullable=True),
        Column("kind", "str", "how the claim is checked", allowed=KINDS),
        Column("note", "str", "why a claim cannot be reproduced, or caveats", nullable=True),
    ),
)


@dataclass(frozen=True)
class ClaimValue:
    """A reproduced value under the paper's protocol and under the honest one (mean, sd, seeds)."""

    paper: tuple[float, float, int]
    honest: tuple[float, float, int] | None = None
    detail: str = ""


def load_claims(path: str | os.PathLike[str] | None = None) -> pd.DataFrame:
    """The published claims (default: the packaged CSV), validated."""
    path = path or str(resources.files("traintime") / "resources" / "paper_chronos_claims.csv")
    df = read_csv(path, keep_default_na=False, na_values={"published_value": [""]})
    df = df.replace({"": None}) if "note" in df else df
    return CLAIMS.validate(df, source=str(path))


def verdict(kind: str, published: float | None, mean: float | None, sd: float | None = 0.0,
            n: int = 1) -> Verdict:
    """The :class:`~traintime.core.verdict.Verdict` of one claim; see the module doc for the rule."""
    if kind == "none":
        return Verdict(NOT_REPRODUCIBLE, "")
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return Verdict(NOT_EVALUATED, "reproduced value missing (input table absent)")
    if kind == "value":
        return value_verdict(published, mean, sd, n)  # type: ignore[arg-type]
    if kind == "max":
        return bound_verdict(float(published), mean, sd, n)  # type: ignore[arg-type]
    if kind == "count":
        return exact_verdict(abs(mean - float(published)) <= 1e-9, f"counted {mean:g}")  # type: ignore[arg-type]
    if kind == "statement":
        ok = mean >= 0.5
        return exact_verdict(ok, "holds" if ok else "does not hold")
    if kind in ("share", "all"):
        need = 100.0 if kind == "all" else SHARE_MIN_PCT
        return exact_verdict(mean >= need - 1e-9, f"holds in {mean:.0f}% of the released cases "
                                                  f"(needs {'all' if kind == 'all' else 'a majority'})")
    raise ValueError(f"unknown claim kind {kind!r}")


def _fmt(v: tuple[float, float, int] | None, kind: str = "value", digits: int = 2) -> str:
    """A reproduced value as text: counts as integers, shares in percent, statements as true/false."""
    if v is None or v[0] is None or (isinstance(v[0], float) and math.isnan(v[0])):
        return ""
    m, sd, n = v
    if kind == "count":
        return f"{m:.0f}"
    if kind in ("share", "all"):
        return f"{m:.0f}% of cases"
    if kind == "statement":
        return "true" if m >= 0.5 else "false"
    if kind == "max":
        return f"{m:.3f}"
    return f"{m:.{digits}f} +- {sd:.{digits}f} ({n} seeds)" if n > 1 else f"{m:.{digits}f}"


def _interval(vd: Verdict) -> str:
    """The 95 % interval as text; empty for a deterministic value (zero width) or no number."""
    if math.isnan(vd.ci_low) or vd.ci_low == vd.ci_high:
        return ""
    return f"[{vd.ci_low:.4g}, {vd.ci_high:.4g}]"


def _signed(vd: Verdict) -> str:
    return "" if math.isnan(vd.difference) else f"{vd.difference:+.4g}"


def build_claims_table(claims: pd.DataFrame, values: Mapping[str, ClaimValue],
                       paper_protocol: str = "", honest_protocol: str = "") -> pd.DataFrame:
    """One row per claim: published, reproduced (paper / honest protocol), verdict and why.

    Text columns ``interval_95`` (the 95 % t-interval of the paper-protocol mean over seeds) and
    ``difference`` (signed, reproduced - published); numeric columns ``paper_mean``, ``paper_sd``,
    ``honest_mean``, ``honest_sd``, ``n_seeds``, ``tolerance``, ``difference_value``, ``ci95_low``,
    ``ci95_high`` keep the values for machine use.
    """
    rows = []
    for c in claims.itertuples(index=False):
        val = values.get(c.metric) if c.metric else None
        paper = val.paper if val else None
        honest = val.honest if val else None
        pub = None if c.published_value is None or pd.isna(c.published_value) else float(c.published_value)
        mean = None if paper is None else paper[0]
        vd = verdict(c.kind, pub, mean, None if paper is None else paper[1], 1 if paper is None else int(paper[2]))
        why = "; ".join(x for x in (vd.reason, val.detail if val else "", c.note or "") if x)
        rows.append(dict(
            claim_id=c.claim_id, claim=c.claim, published=c.published + (f" {c.unit}" if c.unit else ""),
            reproduced_paper_protocol=_fmt(paper, c.kind), reproduced_honest_protocol=_fmt(honest, c.kind),
            verdict=vd.verdict, interval_95=_interval(vd), difference=_signed(vd), why=why,
            source=c.source,
            paper_mean=np.nan if paper is None else paper[0], paper_sd=np.nan if paper is None else paper[1],
            honest_mean=np.nan if honest is None else honest[0], honest_sd=np.nan if honest is None else honest[1],
            n_seeds=0 if paper is None else int(paper[2]),
            tolerance=vd.tolerance, difference_value=vd.difference, ci95_low=vd.ci_low, ci95_high=vd.ci_high,
        ))
    return pd.DataFrame(rows)


def claims_markdown(table: pd.DataFrame, paper_protocols: str, honest_protocols: str) -> str:
    """The claims table as markdown, with the verdict rule and protocol definitions."""
    counts = table["verdict"].value_counts()
    summary = ", ".join(f"{counts.get(v, 0)} {v}" for v in VERDICTS if counts.get(v, 0))
    head = f"""# CHRONOS: published claims vs. this reproduction

{len(table)} claims: {summary}.

**Columns.** *published*: the paper's value (source section in the CSV). *reproduced (paper protocol)*:
{paper_protocols} *reproduced (honest protocol)*: {honest_protocols} Values are mean +- sd over seeds where
several seeds were run.

{VERDICT_RULE_MD}
Here the rule is applied to the paper-protocol column. Statements over configurations must hold in at least
{SHARE_MIN_PCT:.0f}% of the released configurations (all of them for 'all runs' statements).
"""
    show = table[["claim_id", "claim", "published", "reproduced_paper_protocol", "reproduced_honest_protocol",
                  "verdict", "interval_95", "difference", "why"]]
    return head + "\n" + to_markdown(show)


# --------------------------------------------------------------------------------------------
# Reproduced values


def convergence_values(per_model: pd.DataFrame, summary: pd.DataFrame, paper_protocol: str = "cv",
                       honest_protocol: str = "lomo") -> dict[str, ClaimValue]:
    """``convergence/mape_pct/<method>/<model|average>`` from the convergence tables."""
    out: dict[str, ClaimValue] = {}

    def pick(frame: pd.DataFrame, protocol: str, mean_col: str, sd_col: str) -> tuple[float, float, int] | None:
        g = frame[frame["protocol"] == protocol]
        if g.empty:
            return None
        r = g.iloc[0]
        return float(r[mean_col]), float(r[sd_col]), int(r["n_seeds"])

    for (method, model), _g in per_model.groupby(["method", "model"], sort=True):
        sel = per_model[(per_model["method"] == method) & (per_model["model"] == model)]
        p = pick(sel, paper_protocol, "mape_mean_pct", "mape_sd_pct")
        if p is not None:
            out[f"convergence/mape_pct/{method}/{model}"] = ClaimValue(
                p, pick(sel, honest_protocol, "mape_mean_pct", "mape_sd_pct"))
    for method, _g in summary.groupby("method", sort=True):
        sel = summary[summary["method"] == method]
        p = pick(sel, paper_protocol, "avg_model_mape_mean_pct", "avg_model_mape_sd_pct")
        if p is not None:
            out[f"convergence/mape_pct/{method}/average"] = ClaimValue(
                p, pick(sel, honest_protocol, "avg_model_mape_mean_pct", "avg_model_mape_sd_pct"),
                "mean of the per-model MAPEs of the nine paper models")
    return out


#: (protocol, feature_set, estimator) of the iteration-time reproduction under the paper's protocol
#: and under the honest one (H1's protocols and feature sets, :mod:`traintime.chronos.evaluation`).
ITERATION_PAPER = ("random", "paper", "xgboost")
ITERATION_HONEST = ("grouped_random", "clean", "xgboost")
ITERATION_PREDICTION_COLUMNS = ("protocol", "feature_set", "estimator", "seed", "model", "y_true_ms", "y_pred_ms")


def iteration_values(preds: pd.DataFrame, paper: tuple[str, str, str] = ITERATION_PAPER,
                     honest: tuple[str, str, str] = ITERATION_HONEST) -> dict[str, ClaimValue]:
    """``iteration/rmse_ms/<model>`` and ``iteration/mape_pct/<estimator>`` from test predictions
    (columns :data:`ITERATION_PREDICTION_COLUMNS`, one row per test row, all families).

    Per seed: RMSE (ms) over the test rows of each model, MAPE (%) pooled over every test row;
    then mean and sd over seeds. The estimator ablation (``mape_pct/<estimator>``) uses the given
    protocol and feature set with each estimator present.
    """
    missing = [c for c in ITERATION_PREDICTION_COLUMNS if c not in preds.columns]
    if missing:
        from traintime.core.errors import SchemaError

        raise SchemaError(f"iteration predictions lack column(s) {', '.join(missing)}")

    def sel(protocol: str, fs: str, est: str) -> pd.DataFrame:
        return preds[(preds["protocol"] == protocol) & (preds["feature_set"] == fs) & (preds["estimator"] == est)]

    def per_seed(d: pd.DataFrame, fn: Callable[..., float], by_model: str | None) -> tuple[float, float, int] | None:
        if by_model is not None:
            d = d[d["model"] == by_model]
        if d.empty:
            return None
        vals = [fn(g["y_true_ms"], g["y_pred_ms"]) for _, g in d.groupby("seed", sort=True)]
        m, sd = mean_sd(vals)
        return m, sd, len(vals)

    out: dict[str, ClaimValue] = {}
    p_sel, h_sel = sel(*paper), sel(*honest)
    for model in sorted(set(preds["model"])):
        p = per_seed(p_sel, rmse, model)
        if p is not None:
            out[f"iteration/rmse_ms/{model}"] = ClaimValue(p, per_seed(h_sel, rmse, model))
    for est in sorted(set(preds["estimator"])):
        p = per_seed(sel(paper[0], paper[1], est), mape, None)
        if p is not None:
            out[f"iteration/mape_pct/{est}"] = ClaimValue(
                p, per_seed(sel(honest[0], honest[1], est), mape, None), "pooled over every test row")
    return out


def arithmetic_values(dataset_size: int = 50_000, batch_size: int = 128) -> dict[str, ClaimValue]:
    """The probe-cost arithmetic: ceil(N / B) mini-batches per epoch and 1 / that in percent."""
    steps = math.ceil(dataset_size / batch_size)
    return {
        "arithmetic/steps_per_epoch": ClaimValue((float(steps), 0.0, 1), None, f"ceil({dataset_size}/{batch_size})"),
        "arithmetic/probe_fraction_pct": ClaimValue((100.0 / steps, 0.0, 1), None,
                                                    f"100 / {steps} = {100 / steps:.3f}%"),
    }


def end_to_end_values(e2e: pd.DataFrame, description: str = "") -> dict[str, ClaimValue]:
    """``end_to_end/hours_ape_pct``: mean over GPUs of the total-time APE; paper protocol = the saved
    models (trained on every row, in-sample), honest = held-out refits."""
    d = e2e.dropna(subset=["hours_measured"])
    if d.empty:
        return {}
    ins = float(d["hours_in_sample_ape_pct"].mean())
    held = float(d["hours_ape_pct"].mean())
    n = int(d["n_seeds"].max()) if "n_seeds" in d else 1
    return {"end_to_end/hours_ape_pct": ClaimValue(
        (ins, 0.0, 1), (held, float(d["hours_predicted_sd"].mean()) if n > 1 else 0.0, n),
        f"{description}; mean over {len(d)} GPUs" if description else f"mean over {len(d)} GPUs")}


def cost_statement_values(iteration: pd.DataFrame, prices: Mapping[str, float]) -> dict[str, ClaimValue]:
    """Share (%) of the released configurations where each cost statement holds, from measured step
    times x price (the epochs to converge do not depend on the GPU, so they cancel).

    ``iteration``: canonical iteration rows (``model``, ``dataset``, ``optimizer``, ``batch_size``,
    ``precision_bits``, ``learning_rate``, ``gpu``, ``step_time_ms``); ``prices``: GPU -> USD/hour.
    """
    out: dict[str, ClaimValue] = {}
    price_items = {g: p for g, p in prices.items() if p is not None and not pd.isna(p)}
    if price_items:
        gpus = sorted(set(iteration["gpu"])) if "gpu" in iteration else sorted(price_items)
        in_data = {g: price_items[g] for g in gpus if g in price_items}
        if in_data:
            cheapest = min(in_data, key=lambda g: in_data[g])
            out["statement/t4_lowest_price"] = ClaimValue(
                (1.0 if cheapest == "T4" else 0.0, 0.0, 1), None,
                f"cheapest of the GPUs in the data: {cheapest} ({in_data[cheapest]:.2f} USD/h, GPU spec table)")
    keys = ["model", "dataset", "optimizer", "batch_size", "precision_bits", "learning_rate"]
    if "status" in iteration:
        iteration = iteration[iteration["status"] == "ok"]

    def share(model: str, dataset: str,
              test: Callable[[pd.Series, dict[str, float]], bool | None]) -> tuple[float, int, str]:
        d = iteration[(iteration["model"] == model) & (iteration["dataset"] == dataset)]
        hits, n = 0, 0
        priciest: dict[str, int] = {}
        for _, g in d.groupby(keys, sort=True):
            t = g.groupby("gpu")["step_time_ms"].mean()
            cost = {gpu: t[gpu] * price_items[gpu] for gpu in t.index if gpu in price_items}
            res = test(t, cost)
            if res is None:
                continue
            n += 1
            hits += bool(res)
            top = max(cost, key=lambda gpu: cost[gpu])
            priciest[top] = priciest.get(top, 0) + 1
        most = ", ".join(f"{g} {k}" for g, k in sorted(priciest.items(), key=lambda kv: (-kv[1], kv[0])))
        return (100.0 * hits / n if n else float("nan")), n, most

    def a40_t4(t: pd.Series, cost: dict[str, float]) -> bool | None:
        return None if not {"A40", "T4"} <= set(cost) else cost["A40"] < cost["T4"]

    def v100_max(t: pd.Series, cost: dict[str, float]) -> bool | None:
        if "V100-SXM2-16GB" not in cost or len(cost) < 2:
            return None
        return max(cost, key=lambda gpu: cost[gpu]) == "V100-SXM2-16GB"

    def rtx5090(t: pd.Series, cost: dict[str, float]) -> bool | None:
        others = [g for g in ("A100-PCIe-80GB", "V100-SXM2-16GB", "L40S") if g in cost]
        if "RTX-5090" not in cost or not others:
            return None
        return all(t["RTX-5090"] < t[g] and cost["RTX-5090"] < cost[g] for g in others)

    for key, (model, dataset, fn) in {
        "statement/a40_cheaper_than_t4": ("resnet50", "TinyImageNet", a40_t4),
        "statement/v100_most_expensive": ("resnet50", "TinyImageNet", v100_max),
        "statement/rtx5090_vit_cifar100": ("ViT", "CIFAR100", rtx5090),
    }.items():
        pct, n, most = share(model, dataset, fn)
        if n:
            out[key] = ClaimValue((pct, 0.0, 1), None, f"{n} configurations (optimizer, batch, precision, lr); "
                                                       f"most expensive run per configuration: {most}")
    return out


def data_values(iteration: pd.DataFrame | None, convergence: pd.DataFrame | None) -> dict[str, ClaimValue]:
    """Counts of the released data: timing rows, runs, GPUs, paper models; early-stopping share."""
    out: dict[str, ClaimValue] = {}
    if iteration is not None:
        rel = iteration[iteration["source"] == "chronos-release"] if "source" in iteration else iteration
        out["data/timing_rows"] = ClaimValue((float(len(rel)), 0.0, 1), None, "rows of the canonical iteration table")
        out["data/gpus"] = ClaimValue((float(rel["gpu"].nunique()), 0.0, 1), None, "distinct GPUs")
    if convergence is not None:
        out["data/convergence_runs"] = ClaimValue((float(len(convergence)), 0.0, 1), None,
                                                  "rows of the canonical convergence table")
        models = set(convergence["model"])
        n_paper = len([m for m in PAPER_MODELS if m in models])
        out["data/paper_models"] = ClaimValue((float(n_paper), 0.0, 1), None,
                                              f"{len(models)} models in the data: "
                                              + ", ".join(MODEL_LABELS.get(m, m) for m in sorted(models)))
        hit = (np.isclose(convergence["min_delta"].astype(float), 5e-4)) & (convergence["patience"] == 7)
        fams = ", ".join(f"{f}: patience {','.join(map(str, sorted(set(g['patience']))))}, delta "
                         f"{','.join(f'{v:g}' for v in sorted(set(g['min_delta'])))}"
                         for f, g in convergence.groupby("family", sort=True))
        out["data/early_stopping_share"] = ClaimValue((100.0 * float(hit.mean()), 0.0, 1), None,
                                                      f"{int(hit.sum())} of {len(hit)} runs; {fams}")
    return out


def collect_values(convergence_per_model: pd.DataFrame | None = None, convergence_summary: pd.DataFrame | None = None,
                   iteration_predictions: pd.DataFrame | None = None, iteration: pd.DataFrame | None = None,
                   convergence: pd.DataFrame | None = None, end_to_end: pd.DataFrame | None = None,
                   prices: Mapping[str, float] | None = None, paper_protocol: str = "cv",
                   honest_protocol: str = "lomo", e2e_description: str = "",
                   iteration_paper: tuple[str, str, str] = ITERATION_PAPER,
                   iteration_honest: tuple[str, str, str] = ITERATION_HONEST) -> dict[str, ClaimValue]:
    """Every reproduced value the claims need, from whichever inputs are given."""
    out: dict[str, ClaimValue] = dict(arithmetic_values())
    if convergence_per_model is not None and convergence_summary is not None:
        out.update(convergence_values(convergence_per_model, convergence_summary, paper_protocol, honest_protocol))
    if iteration_predictions is not None:
        out.update(iteration_values(iteration_predictions, iteration_paper, iteration_honest))
    if end_to_end is not None:
        out.update(end_to_end_values(end_to_end, e2e_description))
    if iteration is not None and prices is not None:
        out.update(cost_statement_values(iteration, prices))
    out.update(data_values(iteration, convergence))
    return out


def protocol_descriptions(paper_protocol: str, honest_protocol: str,
                          iteration_paper: Sequence[str] = ITERATION_PAPER,
                          iteration_honest: Sequence[str] = ITERATION_HONEST) -> tuple[str, str]:
    """Sentences describing the two reproduced columns."""
    from traintime.chronos.convergence import PROTOCOLS

    paper = (f"iteration time: protocol `{iteration_paper[0]}`, features `{iteration_paper[1]}`, estimator "
             f"`{iteration_paper[2]}` (the released 80/10/10 row split and features); convergence: `{paper_protocol}` "
             f"({PROTOCOLS.get(paper_protocol, paper_protocol)}); end-to-end: the saved models, trained on every "
             f"row (the configuration included), as the released predictor is.")
    honest = (f"iteration time: protocol `{iteration_honest[0]}`, features `{iteration_honest[1]}`, estimator "
              f"`{iteration_honest[2]}` (no learning-rate replicate of a test row in training, no target-derived "
              f"feature); convergence: `{honest_protocol}` ({PROTOCOLS.get(honest_protocol, honest_protocol)}); "
              f"end-to-end: refits that never saw the configuration (on any GPU, any learning rate).")
    return paper, honest
