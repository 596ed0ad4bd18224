"""The CHRONOS claims table (rule claims_chronos): published claims vs. this reproduction."""

from traintime.chronos.claims import (
    build_claims_table,
    claims_markdown,
    collect_values,
    load_claims,
    protocol_descriptions,
)
from traintime.chronos.cost import RunConfig
from traintime.chronos.iteration_tables import load_predictions
from traintime.core.io import read_csv, write_csv, write_text
from traintime.core.specs import load_specs
from traintime.core.workflow import run_script
from traintime.data.chronos import load_iteration
from traintime.data.chronos_convergence import load_convergence


def main(snakemake):
    i, p = snakemake.input, snakemake.params
    iteration = load_iteration(i.iteration)
    preds = load_predictions(list(i.iteration_predictions))
    specs = load_specs(p.gpu_specs)
    values = collect_values(
        convergence_per_model=read_csv(i.convergence_per_model), convergence_summary=read_csv(i.convergence_summary),
        iteration_predictions=preds, iteration=iteration, convergence=load_convergence(i.convergence),
        end_to_end=read_csv(i.end_to_end), prices=specs.set_index("gpu")["price_per_hour_usd"].to_dict(),
        paper_protocol="cv", honest_protocol=p.honest_protocol,
        e2e_description=RunConfig.from_config(p.example).describe())
    table = build_claims_table(load_claims(), values)
    paper_desc, honest_desc = protocol_descriptions("cv", p.honest_protocol)
    write_csv(table, snakemake.output.csv)
    write_text(claims_markdown(table, paper_desc, honest_desc), snakemake.output.md)


if __name__ == "__main__":
    run_script(main, "claims_chronos", globals())
