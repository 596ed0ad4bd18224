# CHRONOS, second half: the convergence epoch T_conv (normalise, evaluate estimators x protocols x seeds,
# tables and figures, the saved model), the end-to-end example and the CHRONOS claims table.
# Inputs from the iteration-time stage (rules/chronos_iteration.smk, included before this file): the
# canonical iteration table, the saved iteration model and the merged test predictions of the random and
# grouped_random protocols (CI_PRED, CI_PROTOCOLS, CI_MODEL are defined there).

CONV = config["chronos_convergence"]
CONV_FAMILIES = ["CNN", "MLP", "Transformer"]
CONV_MODEL = f"{MODELS}/convergence/{CONV['final_method']}.joblib"
ITERATION_TABLE = f"{DATA}/iteration.csv"
ITERATION_MODEL = f"{CI_MODEL}.joblib"
ITERATION_PREDICTIONS = [f"{CI_PRED}/{p}.csv" for p in ("random", "grouped_random") if p in CI_PROTOCOLS]


rule convergence_normalise:
    """The three released convergence CSVs -> the canonical table results/data/convergence.csv."""
    input:
        **{f: raw_path("chronos", f"epoch_convergence_prediction/data/{f}.csv") for f in CONV_FAMILIES},
        lib=lib("convergence_normalise"),
    output:
        f"{DATA}/convergence.csv",
    priority: LONGEST_JOB_PATH
    log:
        f"{LOGS}/convergence/normalise.log",
    benchmark:
        bench(f"{LOGS}/convergence/normalise.log")
    conda:
        env("analysis")
    script:
        "../workflow_scripts/convergence_normalise.py"


rule convergence_evaluate:
    """Out-of-fold T_conv predictions of one estimator under every protocol and seed."""
    input:
        f"{DATA}/convergence.csv",
        lib=lib("convergence_evaluate"),
    output:
        f"{DATA}/convergence_predictions/{{method}}.csv",
    params:
        protocols=CONV["protocols"],
        seeds=config["seeds"],
        group_protocol_seeds=CONV["group_protocol_seeds"],
        nested_candidates=CONV["nested_candidates"],
    wildcard_constraints:
        method="|".join(CONV["methods"]),
    priority: LONGEST_JOB_PATH
    log:
        f"{LOGS}/convergence/evaluate_{{method}}.log",
    benchmark:
        bench(f"{LOGS}/convergence/evaluate_{{method}}.log")
    conda:
        env("analysis")
    script:
        "../workflow_scripts/convergence_evaluate.py"


rule convergence_tables:
    """Per-model and summary MAPE tables beside the paper's values; two figures."""
    input:
        predictions=expand(f"{DATA}/convergence_predictions/{{method}}.csv", method=CONV["methods"]),
        lib=lib("convergence_tables"),
    output:
        per_model_csv=report(f"{TABLES}/convergence_per_model.csv", caption="../report/convergence_per_model.rst",
                             category="CHRONOS convergence"),
        per_model_md=f"{TABLES}/convergence_per_model.md",
        summary_csv=report(f"{TABLES}/convergence_summary.csv", caption="../report/convergence_summary.rst",
                           category="CHRONOS convergence"),
        summary_md=f"{TABLES}/convergence_summary.md",
        scatter=report(f"{FIGURES}/convergence_pred_vs_measured.png",
                       caption="../report/convergence_pred_vs_measured.rst", category="CHRONOS convergence"),
        bars=report(f"{FIGURES}/convergence_per_model_mape.png", caption="../report/convergence_per_model_mape.rst",
                    category="CHRONOS convergence"),
    params:
        methods=CONV["methods"],
        protocols=CONV["protocols"],
        figure_method=CONV["final_method"],
        seed=config["seeds"][0],
    log:
        f"{LOGS}/convergence/tables.log",
    benchmark:
        bench(f"{LOGS}/convergence/tables.log")
    conda:
        env("analysis")
    script:
        "../workflow_scripts/convergence_tables.py"


rule convergence_limits:
    """What limits epoch accuracy: per-group oracle bounds (5-fold CV) and LOMO with the held-out model's level
    given by an oracle, beside issue 14's targets."""
    input:
        table=f"{DATA}/convergence.csv",
        predictions=expand(f"{DATA}/convergence_predictions/{{method}}.csv", method=CONV["methods"]),
        lib=lib("convergence_limits"),
    output:
        csv=report(f"{TABLES}/convergence_limits.csv", caption="../report/convergence_limits.rst",
                   category="CHRONOS convergence"),
        md=f"{TABLES}/convergence_limits.md",
    log:
        f"{LOGS}/convergence/limits.log",
    benchmark:
        bench(f"{LOGS}/convergence/limits.log")
    conda:
        env("analysis")
    script:
        "../workflow_scripts/convergence_limits.py"


rule convergence_model:
    """The chosen estimator (chronos_convergence.final_method; nested: its candidate chosen per family by inner
    folds of honest_protocol's kind) fitted on the 324 released runs plus the merged local runs (collect.train_on),
    saved with a JSON card recording the choice and the local runs."""
    input:
        table=f"{DATA}/convergence.csv",
        **({"local": f"{DATA}/local_convergence.csv"} if TRAIN_LOCAL else {}),
        lib=lib("convergence_model"),
    output:
        model=CONV_MODEL,
        card=f"{MODELS}/convergence/{CONV['final_method']}.json",
    params:
        method=CONV["final_method"],
        protocol=CONV["honest_protocol"],
        candidates=CONV["nested_candidates"],
        seed=config["seeds"][0],
        train_on=config["collect"]["train_on"],
    log:
        f"{LOGS}/convergence/model.log",
    benchmark:
        bench(f"{LOGS}/convergence/model.log")
    conda:
        env("torch")  # loads the merged local runs (traintime.measure.local imports the collection code)
    script:
        "../workflow_scripts/convergence_model.py"


rule end_to_end_example:
    """Step time x N/B x epochs and cost of the config `example` configuration on each GPU."""
    input:
        convergence=f"{DATA}/convergence.csv",
        convergence_model=CONV_MODEL,
        iteration=ITERATION_TABLE,
        iteration_model=ITERATION_MODEL,
        lib=lib("end_to_end_example"),
    output:
        csv=report(f"{TABLES}/end_to_end_example.csv", caption="../report/claims_end_to_end.rst",
                   category="CHRONOS end-to-end"),
        md=f"{TABLES}/end_to_end_example.md",
    params:
        example=config["example"],
        seeds=config["seeds"],
        gpu_specs=config["gpu_specs"],
    log:
        f"{LOGS}/convergence/end_to_end_example.log",
    benchmark:
        bench(f"{LOGS}/convergence/end_to_end_example.log")
    conda:
        env("analysis")
    script:
        "../workflow_scripts/end_to_end_example.py"


rule claims_chronos:
    """Every quantitative claim of the CHRONOS paper beside its reproduction and a verdict."""
    input:
        convergence=f"{DATA}/convergence.csv",
        convergence_per_model=f"{TABLES}/convergence_per_model.csv",
        convergence_summary=f"{TABLES}/convergence_summary.csv",
        end_to_end=f"{TABLES}/end_to_end_example.csv",
        iteration=ITERATION_TABLE,
        iteration_predictions=ITERATION_PREDICTIONS,
        lib=lib("claims_chronos"),
    output:
        md=report(f"{RESULTS}/claims_chronos.md", caption="../report/claims_chronos.rst", category="CHRONOS claims"),
        csv=f"{RESULTS}/claims_chronos.csv",
    params:
        honest_protocol=CONV["honest_protocol"],
        example=config["example"],
        gpu_specs=config["gpu_specs"],
    log:
        f"{LOGS}/convergence/claims_chronos.log",
    benchmark:
        bench(f"{LOGS}/convergence/claims_chronos.log")
    conda:
        env("analysis")
    script:
        "../workflow_scripts/claims_chronos.py"


ALL_TARGETS.extend(
    [
        f"{DATA}/convergence.csv",
        f"{TABLES}/convergence_per_model.csv",
        f"{TABLES}/convergence_summary.csv",
        f"{TABLES}/convergence_limits.csv",
        CONV_MODEL,
        f"{TABLES}/end_to_end_example.csv",
        f"{RESULTS}/claims_chronos.md",
    ]
)


rule claims_counts:
    """Claims per verdict (reproduced / not reproduced / inconclusive / not reproducible) of both papers,
    for the README (one verdict rule: traintime.core.verdict)."""
    input:
        chronos=f"{RESULTS}/claims_chronos.csv",
        zero_shot=f"{RESULTS}/claims_zero_shot.csv",
        lib=lib("claims_counts"),
    output:
        report(f"{TABLES}/claims_counts.csv", caption="../report/claims_counts.rst", category="Claims"),
    log:
        f"{LOGS}/claims_counts.log",
    benchmark:
        bench(f"{LOGS}/claims_counts.log")
    conda:
        env("analysis")
    script:
        "../workflow_scripts/claims_counts.py"


ALL_TARGETS.append(f"{TABLES}/claims_counts.csv")
