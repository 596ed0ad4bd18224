# Report stage: the HTML report's description (snakemake --report report.zip) and an index of every
# table, figure, model and data file (results/report_index.md). Included last: it indexes ALL_TARGETS.

report: "../report/workflow.rst"


REPORT_INPUTS = list(ALL_TARGETS)


rule report_index:
    """List every final product (and the other tables/figures/models) in one markdown file."""
    input:
        REPORT_INPUTS,
    output:
        f"{RESULTS}/report_index.md",
    log:
        f"{LOGS}/report/report_index.log",
    localrule: True
    conda:
        env("report")
    script:
        "../workflow_scripts/report_index.py"


ALL_TARGETS.append(f"{RESULTS}/report_index.md")
