"""With-host step-time protocols of the traces: per-workload power law beside FLOPS scaling and the learned
baseline (rule emulation_power_law)."""

from pathlib import Path

from traintime.chronos.step_benchmark import split_fit_times
from traintime.core.io import read_csv, to_markdown, write_csv
from traintime.core.specs import canonical_gpu, load_specs
from traintime.core.workflow import run_script
from traintime.emulation.power_law import host_protocols
from traintime.emulation.traces import evaluation_slice, load_traces


def main(snakemake):
    cfg, specs = snakemake.params.cfg, load_specs(snakemake.params.gpu_specs)
    rows = evaluation_slice(load_traces(snakemake.input.traces), None, None, cfg["include_cleanup"],
                            cfg["exclude_models"])
    host = canonical_gpu(cfg["reference_host"], specs)
    learned = read_csv(snakemake.input.learned)
    learned = learned[(learned["method"] == "learned") & (learned["host_gpu"] == host)]
    table, fit_times = split_fit_times(host_protocols(rows, host, specs, cfg["precision"], cfg["batch_size"], learned))
    write_csv(table, snakemake.output.csv)
    write_csv(fit_times, snakemake.output.fit_times)  # wall times apart: the table is the same on every run
    Path(snakemake.output.md).write_text(
        f"# Step time with a host measurement ({host}), consumer-GPU traces\n\n"
        "Out-of-fold MAPE; `power_law`: per-workload least squares of log(t / t_host) on the log FLOPs, bandwidth "
        "and SM ratios (shrunk toward one global fit; deterministic); `flops`: host time x FP32 peak ratio, nothing "
        "fitted; `learned`: the XGBoost cross-GPU baseline (mean over seeds). Targets: issue 13.\n\n"
        + to_markdown(table, floatfmt=".2f") + "\n")


if __name__ == "__main__":
    run_script(main, "emulation_power_law", globals())
