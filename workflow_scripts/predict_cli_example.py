"""Run the README's `traintime predict` example on this run's saved models (rule predict_cli_example)."""

from traintime.core.workflow import run_script
from traintime.predict_cli_example import write_cli_example


def main(snakemake):
    write_cli_example(snakemake.output[0], snakemake.params.models_dir, snakemake.params.data_dir,
                      specs=snakemake.params.gpu_specs)


if __name__ == "__main__":
    run_script(main, "predict_cli_example", globals())
