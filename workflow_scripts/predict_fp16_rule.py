"""The 16-bit rule of `traintime predict` on the CHRONOS out-of-fold predictions (rule predict_fp16_rule)."""

from traintime.chronos.precision_rule import fp16_rule_check
from traintime.core.gpudb import gpu_rows, has_fast_fp16
from traintime.core.io import read_csv, write_table
from traintime.core.workflow import run_script

NOTE = """
`traintime predict` answers a 16-bit run on a card with neither tensor cores nor a 16-bit rate above its FP32 one
(traintime.core.gpudb.has_fast_fp16; in the release: the P4) with the card's 32-bit step time. Scored here on the
release's 16-bit rows whose configuration was also measured at 32 bits: the neighbour step model's out-of-fold
compute prediction of the row itself (16-bit answer) and of the same configuration at 32 bits in the same outer fold
(32-bit answer), against the measured 16-bit compute time; the cards with a fast 16-bit rate, where predict keeps the
16-bit answer, beside them. The rule came from the spec sheets and one query (a GeForce GTX 1080 Ti answered 1.9x
faster at 16 bits than at 32), but these P4 rows had been looked at before it was written (a first pairing that
counted learning-rate replicates several times): this table shows the rule on the release, it is not an independent
check of it. The P4 is the release's only card without a fast 16-bit rate.
"""


def main(snakemake):
    iteration = read_csv(snakemake.input.iteration, low_memory=False)
    names = sorted(iteration["gpu"].dropna().astype(str).unique())
    fast = dict(zip(names, has_fast_fp16(gpu_rows(names, snakemake.params.gpu_specs)).tolist()))
    table = fp16_rule_check(iteration, read_csv(snakemake.input.compute), fast)
    write_table(table, snakemake.output.csv, snakemake.output.md,
                title="16-bit on cards without a fast 16-bit rate: the 16-bit and the 32-bit answer (grouped folds)",
                note=NOTE)


if __name__ == "__main__":
    run_script(main, "predict_fp16_rule", globals())
