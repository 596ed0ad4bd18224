"""`traintime predict` on the public consumer-GPU traces it never saw, and the grouped choice of its step
model on CHRONOS (rule predict_public_eval)."""

import json
import os
from pathlib import Path

from traintime.core.gpudb import gpu_database
from traintime.core.io import read_csv, write_table
from traintime.core.workflow import run_script


def main(snakemake):
    p = snakemake.params
    os.environ["TRAINTIME_CACHE"] = str(Path(p.cache_dir).resolve())  # static features of every traced model
    from traintime.predict_public_eval import LABEL, public_eval, step_model_selection

    cal = json.loads(Path(snakemake.input.calibration).read_text())
    specs = gpu_database(p.gpu_specs)
    iteration = read_csv(snakemake.input.iteration, low_memory=False)
    op_graphs, operator = None, None
    if snakemake.input.get("op_chronos"):  # the steptime stage is on: compare the operator model too
        from traintime.predict_operator import OperatorStepModel, fit_operator_model

        op_graphs = read_csv(snakemake.input.op_chronos)
        operator = OperatorStepModel(fit_operator_model(iteration, op_graphs, specs), specs)
    table, md = public_eval(read_csv(snakemake.input.traces), cal, p.gpu_specs, p.img_px, p.precisions,
                            p.batch_sizes, p.models or None, operator, p.operator_models)
    table.insert(0, "data", LABEL)
    table.to_csv(snakemake.output.csv, index=False)
    Path(snakemake.output.md).write_text(md)
    sel = step_model_selection(iteration, specs, op_graphs)
    write_table(sel, snakemake.output.selection_csv, snakemake.output.selection_md,
                title="Step model of traintime predict: grouped choice on CHRONOS (leave one GPU out)",
                note="Compute-time MAPE on the release's compute_time_ms, outer folds only; the traces are never "
                     "used for this choice. `chosen`: lowest MAPE per family.", floatfmt=".3g")


if __name__ == "__main__":
    run_script(main, "predict_public_eval", globals())
