# Retrieve third-party data (mirror or pinned URL, sha256-checked) and normalise it into the
# canonical tables documented in docs/data.md.


rule retrieve_file:
    """Copy one pinned file of a source from the mirror, or download it, and verify its sha256."""
    input:
        lib=lib("retrieve_file"),
    output:
        f"{RAW}/{{source}}/{{path}}",
    params:
        # Only the pinned checksum invalidates a retrieved file: the mirror folder, URL and
        # allow_download are read from the config by the script (a mistyped mirror must not make
        # Snakemake delete a verified file before failing).
        sha256=lambda w: config["data"]["sources"][w.source]["files"].get(w.path),
    wildcard_constraints:
        source="|".join(config["data"]["sources"]),
        path=r"[A-Za-z0-9_./-]+\.csv",
    # scheduling only: a retrieval takes < 1 s and gates whole stages (the convergence CSVs gate the chain to
    # predict_step_grouped), so it runs before the many evaluate jobs (a fresh-clone run without this priority
    # fetched them 8 min late and ended with predict_step_grouped alone on one core for 4 min)
    priority: LONGEST_JOB_PATH
    log:
        f"{LOGS}/retrieve/{{source}}/{{path}}.log",
    benchmark:
        bench(f"{LOGS}/retrieve/{{source}}/{{path}}.log")
    localrule: True
    conda:
        env("analysis")
    script:
        "../workflow_scripts/retrieve_file.py"
