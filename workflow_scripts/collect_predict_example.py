"""The predict API on the configured example (rule collect_table_predict_example)."""

from pathlib import Path

from traintime.core.io import write_table
from traintime.core.specs import load_specs
from traintime.core.workflow import run_script
from traintime.predict import TrainingTimePredictor

NOTE = """
Predicted with the workflow's saved models (step time: results/models/iteration; epochs:
results/models/convergence) for every GPU of the spec table, cheapest first. {probe} `*_low` / `*_high`: {pct}
intervals from the out-of-fold residuals of the same family (`step_protocol` / `epochs_protocol`: the
protocol whose held-out predictions were used, with its MAPE); the total's interval combines both.
`gpu_in_timing_data`: whether the released timing data has the GPU (otherwise the step time is an
extrapolation from its specifications). {notes}
"""


def main(snakemake):
    import torch

    torch.set_num_threads(snakemake.threads)
    c = snakemake.params.collect
    ex, pr = c["predict_example"], c["predict"]
    p = TrainingTimePredictor(model=ex["model"], dataset=ex["dataset"], optimizer=ex["optimizer"],
                              batch_size=ex["batch_size"], learning_rate=ex["learning_rate"],
                              precision=ex["precision"], gpu=ex["gpu"],
                              models_dir=str(Path(snakemake.input.iteration_model).parents[1]),
                              data_dir=str(Path(snakemake.input.iteration).parent),
                              iteration_model=snakemake.input.iteration_model,
                              convergence_model=snakemake.input.convergence_model,
                              probe_batch_size=pr["probe_batch_size"], probe_dataset=ex["probe_dataset"],
                              device=c["device"], data_root=c["data_root"], download=c["download"],
                              coverage=pr["coverage"], seed=c["seed"], specs=load_specs(snakemake.params.gpu_specs))
    table = p.ranking()
    table.insert(0, "probe_device", p.probe_summary()["device"])
    notes = " ".join(f"Note: {n}." for n in p.notes)
    probe = ("The probe (one forward + one backward pass at initialisation) ran on this machine's device."
             if p.probe_ran else "No probe ran: the convergence model reads no probe feature "
             f"({p.convergence_choice or Path(p.convergence_model_path).stem}).")
    write_table(table, snakemake.output.csv, snakemake.output.md,
                title=f"Predicted training time and cost: {p.describe()} (headline GPU {p.gpu})",
                note=NOTE.format(pct=f"{int(round(p.coverage * 100))}%", notes=notes, probe=probe), floatfmt=".4g")


if __name__ == "__main__":
    run_script(main, "collect_table_predict_example", globals())
