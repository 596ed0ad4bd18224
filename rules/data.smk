# Retrieve third-party data (mirror or pinned URL, sha256-checked) and normalise it into the
# canonical tables documented in docs/data.md.


rule retrieve_file:
    """Copy one pinned file of a source from the mirror, or download it, and verify its sha256."""
    input:
        lib=lib("retrieve_file"),
    output:
        f"{RAW}/{{source}}/{{path}}",
    params:
        allow_download=config["data"]["allow_download"],
        source=lambda w: config["data"]["sources"][w.source],
    wildcard_constraints:
        source="|".join(config["data"]["sources"]),
        path=r"[A-Za-z0-9_./-]+\.csv",
    log:
        f"{LOGS}/retrieve/{{source}}/{{path}}.log",
    benchmark:
        bench(f"{LOGS}/retrieve/{{source}}/{{path}}.log")
    localrule: True
    conda:
        env("analysis")
    script:
        "../workflow_scripts/retrieve_file.py"
