"""Out-of-fold T_conv predictions of one estimator under every protocol and seed (rule convergence_evaluate)."""

import logging
import time

from traintime.chronos.convergence_protocols import PREDICTIONS, evaluate
from traintime.core.io import write_csv
from traintime.core.workflow import run_script
from traintime.data.chronos_convergence import load_convergence

log = logging.getLogger("traintime.chronos.convergence")


def main(snakemake):
    rows = load_convergence(snakemake.input[0])
    t0 = time.perf_counter()
    preds = evaluate(rows, [snakemake.wildcards.method], snakemake.params.protocols, snakemake.params.seeds,
                     group_protocol_seeds=snakemake.params.group_protocol_seeds, n_jobs=snakemake.threads,
                     nested_candidates=snakemake.params.nested_candidates)
    write_csv(PREDICTIONS.validate(preds, source=snakemake.output[0]), snakemake.output[0])
    log.info("%s: %d predictions in %.1f s", snakemake.wildcards.method, len(preds), time.perf_counter() - t0)


if __name__ == "__main__":
    run_script(main, "convergence_evaluate", globals())
