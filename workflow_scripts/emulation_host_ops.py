"""Per-op host profiles (rule emulation_host_ops): every configured model and input size at the
configured ops batch sizes and precisions on the whole, unrestricted host GPU, under
torch.profiler; one op-profile CSV (schema op_profile) for the Habitat/NeuSight-style baselines."""

from traintime.core.specs import load_specs
from traintime.core.workflow import run_script
from traintime.emulation.profile_ops import host_ops_job


def main(snakemake):
    host_ops_job(snakemake.params.host, snakemake.output[0], specs=load_specs(snakemake.params.gpu_specs))


if __name__ == "__main__":
    run_script(main, "emulation_host_ops", globals())
