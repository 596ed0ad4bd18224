"""Host sweep (rule emulation_host_sweep): every configured workload at every (p, f) grid point on
the configured host GPU; one host-latency CSV written when the whole sweep has finished."""

from traintime.core.specs import load_specs
from traintime.core.workflow import run_script
from traintime.emulation.sweep import host_sweep_job


def main(snakemake):
    host_sweep_job(snakemake.params.host, snakemake.output[0], specs=load_specs(snakemake.params.gpu_specs))


if __name__ == "__main__":
    run_script(main, "emulation_host_sweep", globals())
