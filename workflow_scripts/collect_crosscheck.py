"""Analytic features vs the released CHRONOS columns (rule collect_table_crosscheck)."""

from traintime.core.io import write_table
from traintime.core.workflow import run_script
from traintime.measure.local import analytic_crosscheck

NOTE = """
`analytic` is computed here on the meta device (torch FlopCounterMode, a multiply-add = 2 FLOPs) for
the same model and input size as the released rows; `released` is the CHRONOS column. CNN rows agree
exactly (the release hooks Conv2d/Linear forward calls with the same convention). MLP rows differ by
the release's hand formula: it adds 4 FLOPs per token and channel for each LayerNorm and omits the
classification head. Transformer rows compare CHRONOS' per-token formula (reproduced, so equal); its
attention term (2 seq d_model d_head multiply-adds per token) is d_head times the real QK^T + AV cost,
which is why the measured forward FLOPs per sample are far below the per-sample count the release
implies (`measured_vs_chronos_pct`; see docs/analytic_features.md). Parameter counts match except for
ResMLP (timm's affine norm + layer scale: 2 x D more parameters per block than the release's LayerNorm).
"""


def main(snakemake):
    df = analytic_crosscheck({"CNN": snakemake.input.CNN, "MLP": snakemake.input.MLP,
                              "Transformer": snakemake.input.Transformer})
    write_table(df, snakemake.output.csv, snakemake.output.md,
                title="Analytic FLOPs and parameters vs the released CHRONOS columns", note=NOTE, floatfmt=".4g")


if __name__ == "__main__":
    run_script(main, "collect_table_crosscheck", globals())
