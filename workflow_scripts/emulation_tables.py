"""Tables 1-5 of the zero-shot paper (rules emulation_table1 ... emulation_table5)."""

from traintime.core.io import read_csv, write_csv, write_table
from traintime.core.workflow import run_script
from traintime.emulation import analysis as A
from traintime.emulation import plots
from traintime.emulation import tables as T
from traintime.emulation.traces import MANIFEST

TITLES = {
    "table1": "Table 1: method comparison (APE %, Spearman rho, Pearson r of log latencies)",
    "table2": "Table 2: best and worst target GPUs and models by MAPE, per method",
    "table3": "Table 3: per-workload device-ranking Spearman, summarised over workloads",
    "table4": "Table 4: agreement between two hosts' emulation predictions",
    "table5": "Table 5: MAPE by model family, per method",
}


def main(snakemake):
    cfg, which, out = snakemake.params.cfg, snakemake.params.table, snakemake.output
    pred = A.read_predictions(snakemake.input.predictions)
    manifest = MANIFEST.validate(read_csv(snakemake.input.manifest), source=snakemake.input.manifest)
    main_pred = T.main_slice(pred, cfg["precision"], cfg["batch_size"])
    note = T.scope_note(cfg, main_pred, manifest)
    if which == "table1":
        status = read_csv(snakemake.input.mapping_status)
        table = T.table1(main_pred, status)
        if not status.empty and (status["status"] == "infeasible").any():
            note += (" Infeasible (host, target) mappings (nearest measured (p, f) beyond the distance limits "
                     "emulation.mapping_max_sm_distance / mapping_max_clock_distance, or a target with more SMs "
                     "than the host) get no prediction; column n_infeasible_targets counts them.")
    elif which == "table2":
        table = T.table2(main_pred)
        per = T.per_target(main_pred)
        write_csv(per, out.per_target)
        plots.per_target_bars(per, out.figure, note=f"{cfg['precision']}, batch {cfg['batch_size']}")
    elif which == "table3":
        table = T.table3(main_pred)
    elif which == "table4":
        emu = main_pred[(main_pred["method"] == "emulation")]
        table, extra = T.table4(emu)
        if "mean_abs_diff_pct" in table:
            note = extra + " " + note
    elif which == "table5":
        table = T.table5(main_pred)
        note += " Mean model size (M parameters) is not in the released traces and is not reported."
    else:
        raise ValueError(f"unknown table {which}")
    write_table(table, out.csv, out.md, title=TITLES[which], note=note, floatfmt=".3f")


if __name__ == "__main__":
    run_script(main, "emulation_table1", globals())
