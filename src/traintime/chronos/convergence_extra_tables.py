"""Tables of the probe ablation and the NTK-guided gap (issue 14; rules convergence_probe_ablation and
convergence_ntk_gap). No import reaches traintime.measure, so these rules run in the analysis environment."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from traintime.chronos.convergence_probe import (
    NTK_VARIANTS,
    PROBE_SETS,
    ablation_table,
    ntk_gap,
    probe_ablation,
)
from traintime.core.io import read_csv, to_markdown, write_csv, write_text

NTK_FORMULA = ("NTK-guided baseline (`ntk_guided`, reconstruction after Zancato et al. 2020; the release has no "
               "code for it): OLS per family file, `log10 T = a + b log10(lr * ||g||^2 * N / B)` with lr the "
               "learning rate, N the training samples, B the batch size and `||g||^2 = 10**ntk_trace_proxy_log10` "
               "(the squared norm of the one-batch mean-loss gradient at initialisation: the release's \"NTK trace\" "
               "column, exactly twice `gradient_norm_log10` in log10).")


PAPER_NTK_AVERAGE = 27.35


def _gap_verdict(avg: pd.Series) -> str:
    """One sentence from the measured averages: does any variant reach the published value?"""
    best = avg.idxmin()
    if avg[best] <= PAPER_NTK_AVERAGE:
        return (f"Variant `{best}` reaches {avg[best]:.1f} % <= {PAPER_NTK_AVERAGE} %: the gap is explained by what "
                "that variant changes.")
    return (f"No variant tried reaches {PAPER_NTK_AVERAGE} % (best: `{best}`, {avg[best]:.1f} %), not even the "
            "in-sample per-model fit, the training error of that formula with every model calibrated on its own runs. "
            "So the gap is not a held-out-fold, calibration-scope or exponent effect of this formula on the released "
            "columns: the spread of T_conv within a model at fixed lr * ||g||^2 * N / B is larger than the paper's "
            "number allows. Reaching 27 % needs something the release does not show (the paper's own NTK quantity or "
            "formula, or per-model tuning it does not describe).")


def write_probe_tables(convergence_csv: str, out: Mapping[str, str], protocols: Sequence[str],
                       seeds: Sequence[int], inner_max_folds: int = 3) -> None:
    """Probe ablation under nested CV (csv, md, per-fold choices) for ``protocols`` x ``seeds``."""
    rows = read_csv(convergence_csv)
    preds, choices = probe_ablation(rows, protocols, seeds, inner_max_folds=inner_max_folds)
    tab = ablation_table(preds, choices)
    write_csv(tab, out["csv"])
    write_csv(choices, out["choices"])
    sets = "; ".join(f"`{k}`: {', '.join(v) or 'no probe column'}" for k, v in PROBE_SETS.items())
    write_text(
        "# Do the probe features help? Nested-CV ablation on the released runs\n\n"
        "Estimator: XGBoost on log10 T_conv with the physical features of `xgb_monotone` (dataset size, classes, "
        "parameters, depth, optimizer, learning rate relative to the optimizer's default, batch size, steps per "
        f"epoch, precision, early-stopping settings; monotone where the direction is known) plus one probe set ({sets}). "
        "`nested`: the probe set chosen inside each outer-training fold by grouped inner CV "
        f"(traintime.chronos.selection.NestedSelector, at most {inner_max_folds} inner folds: by model inside LOMO, "
        "by dataset inside LODO, K-fold over runs inside CV); no outer test run reaches the choice. "
        "MAPE: nine-model average of the paper's table, per seed, then mean / sd / 95 % t-interval over "
        f"{len(list(seeds))} seeds ({', '.join(map(str, seeds))}); `gain_vs_none_pts` = MAPE(none) - MAPE(variant), "
        "paired by seed (positive: the probe helps). `nested_chose_a_probe_pct`: outer folds whose inner CV picked a "
        "probe set other than `none`.\n\n"
        "The normalised empirical NTK trace (tau = Tr(J J^T) / (B C), per-sample logit Jacobians, "
        "traintime.measure.probe) is not in the release (it needs per-sample Jacobians the released probe did not "
        "record), so it cannot be ablated on these runs; `ntk_proxy` (log10 ||g||^2) is the paper's column, a monotone "
        "transform of `gradient_norm`, hence identical splits for trees.\n\n" + to_markdown(tab), out["md"])


def write_ntk_gap(convergence_csv: str, out: Mapping[str, str], seeds: Sequence[int],
                  reference: pd.DataFrame | None = None) -> None:
    """Per-model MAPE of the NTK-guided variants under 5-fold CV beside the published NTK-guided column."""
    from traintime.chronos.convergence_tables import load_reference

    ref = load_reference() if reference is None else reference
    ref = ref[(ref["kind"] == "published") & (ref["method"] == "ntk_guided")][["model", "mape_pct"]]
    tab = ntk_gap(read_csv(convergence_csv), seeds, ref)
    write_csv(tab, out["csv"])
    avg = tab[tab["model"] == "average"].set_index("variant")["mape_mean_pct"]
    variants = "\n".join(f"- `{k}`: {v[0]}" for k, v in NTK_VARIANTS.items())
    wide = tab.pivot_table(index=["model", "model_label"], columns="variant", values="mape_mean_pct", sort=False)
    wide = wide[[v for v in NTK_VARIANTS if v in wide.columns]].reset_index()
    paper = tab.drop_duplicates("model").set_index("model")["paper_ntk_mape_pct"]
    wide.insert(2, "paper_ntk_guided", wide["model"].map(paper))
    write_text(
        "# The NTK-guided baseline's gap to the paper's 27.35 %\n\n" + NTK_FORMULA + "\n\nVariants (5-fold CV within "
        f"each family file as the paper; MAPE per model, mean over seeds {', '.join(map(str, seeds))}; "
        "`average`: the nine models of the paper's table):\n\n" + variants + "\n\n" + to_markdown(wide.round(2))
        + "\n\nWhat the measurement says: the formula as evaluated gives "
        f"{avg.get('ntk_guided', float('nan')):.1f} %; dropping the probe from it gives "
        f"{avg.get('ntk_no_probe', float('nan')):.1f} % (MAPE without minus with the probe term: "
        f"{avg.get('ntk_no_probe', float('nan')) - avg.get('ntk_guided', float('nan')):+.1f} points, positive = the probe helps); free exponents "
        f"{avg.get('ntk_free_exponents', float('nan')):.1f} %; a per-model intercept "
        f"{avg.get('ntk_per_model', float('nan')):.1f} %, per (model, dataset) "
        f"{avg.get('ntk_per_model_dataset', float('nan')):.1f} %; the training error of the per-model fit "
        f"(no held-out fold) is {avg.get('ntk_per_model_in_sample', float('nan')):.1f} %. " + _gap_verdict(avg) + "\n",
        out["md"])
