"""Predictions for the local rows before / after adding them to the training data (rule collect_table_before_after)."""

from traintime.core.io import write_table
from traintime.core.specs import load_specs
from traintime.core.workflow import run_script
from traintime.data.chronos import load_iteration
from traintime.measure.local import before_after_table, load_local_iteration

NOTE = """
The local device is outside the released GPU set (this default run measures a CPU, which has no GPU
specifications: those features are missing for it). `before`: the configured feature set and estimator
fitted on the released rows only (the saved step-time model itself now also learns the local rows,
collect.train_on). `after`: the same feature set and estimator (or, for the nested saved model, the same
nested selection) refitted on the released rows plus the
local rows of the other models (leave one local model out), predicting the held-out model's rows.
`local_rate`: the median measured ms per training FLOP of the other local models times the held-out
row's FLOPs per step (a local-only baseline). APE = |predicted - measured| / measured x 100.
"""


def main(snakemake):
    import torch

    torch.set_num_threads(snakemake.threads)
    p = snakemake.params
    local = load_local_iteration(snakemake.input.local)
    table = before_after_table(local, load_iteration(snakemake.input.released),
                               None, load_specs(p.gpu_specs),
                               feature_set=p.model["feature_set"], estimator=p.model["estimator"], seed=p.seed,
                               clean_options=p.clean, n_estimators_scale=p.test_only["n_estimators_scale"],
                               selection=p.selection, selection_protocol=p.model.get("selection_protocol", "logo"))
    write_table(table, snakemake.output.csv, snakemake.output.md,
                title="Local step times: predicted before and after adding the local rows", note=NOTE,
                floatfmt=".4g")


if __name__ == "__main__":
    run_script(main, "collect_table_before_after", globals())
