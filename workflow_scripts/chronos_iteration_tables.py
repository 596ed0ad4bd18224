"""Iteration-time tables from the merged test predictions (rule chronos_iteration_tables)."""

import pandas as pd

from traintime.chronos.iteration_tables import (
    GROUPED_PROTOCOLS,
    grouped_summary,
    grouped_table,
    load_predictions,
    load_reference,
    per_model_long,
    per_model_rmse_table,
    per_seed_summary,
    regressors_table,
)
from traintime.chronos.selection import nested_choices_table
from traintime.core.io import read_csv, write_csv, write_table
from traintime.core.workflow import run_script

REF_NOTE = ("`paper_*` columns are the published CHRONOS values, `released_*` the printout of the released "
            "scripts (seed 42) and `notes_*` an earlier 5-seed re-run of the released code; they are references "
            "from src/traintime/resources/paper_chronos_iteration.csv, not results of this run. Means and sds "
            "are over seeds (sd with ddof=1; empty for one seed); `*_ci95_low/high`: 95 % Student-t interval of the "
            "mean over seeds. `nested` rows: nested grouped CV (traintime.chronos.selection) - feature set and "
            "regressor chosen inside each outer training fold by inner folds of the same group kind; the scores "
            "are those of the outer test folds only, on the same folds and seeds as the fixed rows.")


def main(snakemake):
    pred = load_predictions(list(snakemake.input.predictions))
    ref = load_reference()
    out = snakemake.output
    write_table(per_model_rmse_table(pred, ref), out.per_model_rmse, out.per_model_rmse_md,
                title="Iteration time: per-model RMSE (ms), random 80/10/10 split, released features, XGBoost",
                note="`rmse_ms_seed42` is the released scripts' seed; `seed42_vs_released_pct` compares it with their "
                     "printout. `clean_*`: clean features (random split) and clean features under `grouped_random` "
                     "(no learning-rate replicate of a test row in training). " + REF_NOTE)
    write_table(per_model_long(pred), out.per_model, out.per_model_md,
                title="Iteration time: per-model MAPE (%) and RMSE (ms) of the random splits, every feature set and "
                      "estimator", note=REF_NOTE)
    write_table(regressors_table(pred, ref), out.regressors, out.regressors_md,
                title="Iteration time: regressors x feature sets x protocols",
                note="`pooled_mape_pct`: MAPE over every test row of every family; `mean_group_mape_pct`: mean of the "
                     "per-group MAPEs (group = held-out model/dataset/GPU x family for lomo/lodo/logo, model for the "
                     "random splits). The paper's 13.7/18.41/20.71 are called 'average iteration-time MAPE' without "
                     "a definition. " + REF_NOTE)
    write_csv(per_seed_summary(pred), out.seeds)
    for prot in GROUPED_PROTOCOLS:
        write_table(grouped_table(pred, prot), out[prot], out[f"{prot}_md"],
                    title=f"Iteration time: {prot.upper()}, every held-out group (MAPE %, RMSE ms)",
                    note="Empty when the protocol is not in `chronos_iteration.protocols`. " + REF_NOTE)
    parts = [read_csv(p) for p in snakemake.input.choices]
    parts = [p for p in parts if not p.empty]
    choices = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    write_table(nested_choices_table(choices), out.choices, out.choices_md,
                title="Iteration time: candidates chosen by the nested grouped CV (per outer fold and seed)",
                note="Inner scores are MAPE (%) on inner held-out groups of the outer training fold (the outer "
                     "test fold is never seen); `n_choices` = outer folds x seeds. Candidates and inner settings: "
                     "config `chronos_iteration.selection`.")
    write_table(grouped_summary(pred, ref), out.summary, out.summary_md,
                title="Iteration time: mean per-group MAPE (%) of LOMO / LODO / LOGO per family and overall",
                note="`ALL`: mean over every group of every family (LOMO 10, LODO 12, LOGO 30 groups). " + REF_NOTE)


if __name__ == "__main__":
    run_script(main, "chronos_iteration_tables", globals())
