"""Spec-mapped host run (rule emulation_host_mapped): every configured workload at the single
(p, f) the zero-shot mapping picks for one target GPU; one host-latency CSV."""

from traintime.core.specs import load_specs
from traintime.core.workflow import run_script
from traintime.emulation.sweep import host_mapped_job


def main(snakemake):
    host_mapped_job(snakemake.params.host, snakemake.wildcards.target, snakemake.output[0],
                    specs=load_specs(snakemake.params.gpu_specs))


if __name__ == "__main__":
    run_script(main, "emulation_host_mapped", globals())
