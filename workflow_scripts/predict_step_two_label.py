"""Step time from two labels (predict's compute models + a loader-wait model) on the release's grouped folds, beside
the previous one-label models (rule predict_step_two_label)."""

import pandas as pd

from traintime.chronos.two_label import (
    per_group,
    previous_predictions,
    summarise,
    two_label_predictions,
)
from traintime.core.io import read_csv, write_table
from traintime.core.workflow import run_script

NOTE = """
Step time as the release measured it = compute + DataLoader wait (traintime.chronos.two_label). Compute: the
out-of-fold predictions of results/tables/predict_step_grouped.md (fitted without the held-out GPU, model or
dataset); loader wait: gradient-boosted trees on the dataset, input size, batch, dataset size and the host's provider
(never a GPU column) fitted on the same outer training fold, once per seed. Previous: the project's one-label models
fitted on step_time_ms directly (rule chronos_iteration_evaluate, same folds, per family). MAPE pooled over rows
(the iteration tables average per group instead); mean, sd and 95 % interval over seeds. meets_target: yes when the
interval lies at or below issue 13's step-time target, no when above, else inconclusive.
"""


GROUPS_NOTE = """
The two-label rows of results/tables/predict_step_two_label.md under leave one dataset out, per held-out dataset.
`step_mape_pct_measured_loader`: the same out-of-fold compute predictions plus the *measured* loader wait - what a
perfect loader-wait model would leave. A dataset whose loader wait is unlike every other dataset's (the loader-wait
model is fitted on the other datasets only) shows as measured and predicted medians far apart. Mean over seeds.
"""


def main(snakemake):
    iteration = read_csv(snakemake.input.iteration, low_memory=False)
    pred = two_label_predictions(iteration, read_csv(snakemake.input.compute), snakemake.params.seeds)
    previous = previous_predictions({p: read_csv(f) for p, f in zip(snakemake.params.previous_protocols,
                                                                     snakemake.input.previous)})
    table = summarise(iteration, pd.concat([pred, previous], ignore_index=True) if len(previous) else pred)
    write_table(table.sort_values("protocol", key=lambda s: s.map({"chronos LOGO": 0, "chronos LOMO": 1,
                                                                    "chronos LODO": 2}), kind="stable"),
                snakemake.output.csv, snakemake.output.md,
                title="Step time from two labels (compute + loader wait) on the release's grouped folds", note=NOTE)
    write_table(per_group(iteration, pred), snakemake.output.groups_csv, snakemake.output.groups_md,
                title="Two-label step time per held-out dataset (leave one dataset out)", note=GROUPS_NOTE)


if __name__ == "__main__":
    run_script(main, "predict_step_two_label", globals())
