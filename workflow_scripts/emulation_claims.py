"""Claims table of the zero-shot paper (rule emulation_claims)."""

from traintime.core.io import read_csv, write_csv, write_text
from traintime.core.specs import canonical_gpu, load_specs
from traintime.core.workflow import run_script
from traintime.emulation import analysis as A
from traintime.emulation import tables as T
from traintime.emulation.claims import (
    build_claims_table,
    claims_markdown,
    collect_values,
    load_claims,
)
from traintime.emulation.traces import MANIFEST, evaluation_slice, load_traces


def main(snakemake):
    cfg, i = snakemake.params.cfg, snakemake.input
    specs = load_specs(snakemake.params.gpu_specs)
    host = canonical_gpu(cfg["reference_host"], specs)
    pred = A.read_predictions(i.predictions)
    main_pred = T.main_slice(pred, cfg["precision"], cfg["batch_size"])
    manifest = MANIFEST.validate(read_csv(i.manifest), source=i.manifest)
    traces = load_traces(i.traces)
    tmain = evaluation_slice(traces, cfg["precision"], cfg["batch_size"], include_cleanup=True,
                             exclude_models=cfg["exclude_models"], drop_oom=False)
    tmain = tmain[tmain["gpu"] != host]
    t4 = read_csv(i.table4)
    values = collect_values(read_csv(i.table1), read_csv(i.table2), read_csv(i.table3), t4, read_csv(i.table5),
                            A.threshold_shares(main_pred), main_pred, tmain, paper_host="RTX-5090",
                            include_cleanup=cfg["include_cleanup"])
    emu_hosts = set(main_pred.loc[main_pred["method"] == "emulation", "host_gpu"])
    available = {"host": bool(emu_hosts), "host2": len(emu_hosts) >= 2,
                 "ops": bool({"habitat", "neusight"} & set(main_pred["method"])),
                 "traces": bool(manifest["present"].all())}
    table = build_claims_table(load_claims(), values, available)
    write_csv(table, snakemake.output.csv)
    write_text(claims_markdown(table, "\n" + T.scope_note(cfg, main_pred, manifest) + "\n"), snakemake.output.md)


if __name__ == "__main__":
    run_script(main, "emulation_claims", globals())
