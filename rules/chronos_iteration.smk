# CHRONOS, first half: the iteration (step) time. Normalise the three released timing CSVs into the
# canonical table, evaluate regressors (estimators x feature sets x seeds) per protocol and family,
# merge the test predictions per protocol, build tables and figures, and train the saved model
# (clean features by default) for the end-to-end example and the predict CLI.
# Configuration: config.yaml `chronos_iteration` (schemas/config.schema.yaml).

CI = config["chronos_iteration"]
CI_FAMILIES = CI["families"]
CI_PROTOCOLS = CI["protocols"]
CI_PRED = f"{DATA}/iteration_predictions"
CI_MODEL = f"{MODELS}/iteration/iteration_model"
# collect.train_on (released_and_local | released_only): the saved models also learn the merged local rows
TRAIN_LOCAL = config["collect"]["train_on"] == "released_and_local"


CI_CHOICES = [f for p in CI_PROTOCOLS for f in ci_parts(p, "choices")]


rule chronos_iteration_normalise:
    """The three released timing CSVs -> results/data/iteration.csv (validated canonical table)."""
    input:
        CNN=raw_path("chronos", "epoch_time_prediction/data/CNN.csv"),
        MLP=raw_path("chronos", "epoch_time_prediction/data/MLP.csv"),
        Transformer=raw_path("chronos", "epoch_time_prediction/data/Transformer.csv"),
        lib=lib("chronos_iteration_normalise"),
    output:
        f"{DATA}/iteration.csv",
    params:
        gpu_specs=config["gpu_specs"],
    log:
        f"{LOGS}/chronos_iteration/normalise.log",
    benchmark:
        bench(f"{LOGS}/chronos_iteration/normalise.log")
    conda:
        env("analysis")
    script:
        "../workflow_scripts/chronos_iteration_normalise.py"


rule chronos_iteration_evaluate:
    """Test predictions of one protocol and seed: families x feature sets x estimators (x the nested entry).
    Protocol and seed are wildcards; families, feature sets and estimators run inside the job (one Python start
    and table load per job, about 2 s on 2 cores: one job per family as well cost about 60 s of job time more)."""
    input:
        f"{DATA}/iteration.csv",
        lib=lib("chronos_iteration_evaluate"),
    output:
        predictions=f"{CI_PRED}/parts/{{protocol}}_{{seed}}.predictions.csv",
        choices=f"{CI_PRED}/parts/{{protocol}}_{{seed}}.choices.csv",
    params:
        settings=lambda w: CI["protocol_settings"][w.protocol],
        seeds=lambda w: [int(w.seed)],
        clean=CI["clean"],
        selection=CI["selection"],
        test_only=CI["test_only"],
        gpu_specs=config["gpu_specs"],
        families=CI_FAMILIES,
    wildcard_constraints:
        protocol="|".join(CI_PROTOCOLS),
        seed=r"\d+",
    threads: 1
    log:
        f"{LOGS}/chronos_iteration/evaluate_{{protocol}}_{{seed}}.log",
    benchmark:
        bench(f"{LOGS}/chronos_iteration/evaluate_{{protocol}}_{{seed}}.log")
    conda:
        env("analysis")
    script:
        "../workflow_scripts/chronos_iteration_evaluate.py"


rule chronos_iteration_merge:
    """All seeds' test predictions of one protocol in one file (the aggregation step)."""
    input:
        parts=lambda w: ci_parts(w.protocol),
        lib=lib("chronos_iteration_merge"),
    output:
        f"{CI_PRED}/{{protocol}}.csv",
    wildcard_constraints:
        protocol="|".join(CI_PROTOCOLS),
    log:
        f"{LOGS}/chronos_iteration/merge_{{protocol}}.log",
    benchmark:
        bench(f"{LOGS}/chronos_iteration/merge_{{protocol}}.log")
    localrule: True
    conda:
        env("analysis")
    script:
        "../workflow_scripts/chronos_iteration_merge.py"


rule chronos_iteration_tables:
    """Per-model RMSE beside the paper, regressor comparison, per-group LOMO/LODO/LOGO tables."""
    input:
        predictions=expand(f"{CI_PRED}/{{protocol}}.csv", protocol=CI_PROTOCOLS),
        choices=CI_CHOICES,
        lib=lib("chronos_iteration_tables"),
    output:
        per_model_rmse=report(f"{TABLES}/iteration_per_model_rmse.csv",
                              caption="../report/chronos_iteration_per_model_rmse.rst",
                              category="CHRONOS iteration time"),
        per_model_rmse_md=f"{TABLES}/iteration_per_model_rmse.md",
        per_model=report(f"{TABLES}/iteration_per_model.csv", caption="../report/iteration_per_model.rst",
                         category="CHRONOS iteration time"),
        per_model_md=f"{TABLES}/iteration_per_model.md",
        regressors=report(f"{TABLES}/iteration_regressors.csv",
                          caption="../report/chronos_iteration_regressors.rst",
                          category="CHRONOS iteration time"),
        regressors_md=f"{TABLES}/iteration_regressors.md",
        seeds=report(f"{TABLES}/iteration_seeds.csv", caption="../report/iteration_seeds.rst",
                     category="CHRONOS iteration time"),
        lomo=report(f"{TABLES}/iteration_grouped_lomo.csv", caption="../report/iteration_grouped_lomo.rst",
                    category="CHRONOS iteration time"),
        lomo_md=f"{TABLES}/iteration_grouped_lomo.md",
        lodo=report(f"{TABLES}/iteration_grouped_lodo.csv", caption="../report/iteration_grouped_lodo.rst",
                    category="CHRONOS iteration time"),
        lodo_md=f"{TABLES}/iteration_grouped_lodo.md",
        logo=report(f"{TABLES}/iteration_grouped_logo.csv", caption="../report/iteration_grouped_logo.rst",
                    category="CHRONOS iteration time"),
        logo_md=f"{TABLES}/iteration_grouped_logo.md",
        summary=report(f"{TABLES}/iteration_grouped_summary.csv",
                       caption="../report/chronos_iteration_grouped_summary.rst",
                       category="CHRONOS iteration time"),
        summary_md=f"{TABLES}/iteration_grouped_summary.md",
        choices=report(f"{TABLES}/iteration_nested_choices.csv", caption="../report/iteration_nested_choices.rst",
                       category="CHRONOS iteration time"),
        choices_md=f"{TABLES}/iteration_nested_choices.md",
    log:
        f"{LOGS}/chronos_iteration/tables.log",
    benchmark:
        bench(f"{LOGS}/chronos_iteration/tables.log")
    conda:
        env("analysis")
    script:
        "../workflow_scripts/chronos_iteration_tables.py"


rule chronos_iteration_figures:
    """Predicted vs measured (log-log), per-group MAPE bars, per-model RMSE across seeds."""
    input:
        predictions=expand(f"{CI_PRED}/{{protocol}}.csv", protocol=CI_PROTOCOLS),
        lib=lib("chronos_iteration_figures"),
    output:
        scatter=report(f"{FIGURES}/iteration_pred_vs_measured.png",
                       caption="../report/chronos_iteration_pred_vs_measured.rst",
                       category="CHRONOS iteration time"),
        grouped=report(f"{FIGURES}/iteration_grouped_mape.png",
                       caption="../report/chronos_iteration_grouped_mape.rst",
                       category="CHRONOS iteration time"),
        seeds=report(f"{FIGURES}/iteration_seed_spread.png",
                     caption="../report/chronos_iteration_seed_spread.rst",
                     category="CHRONOS iteration time"),
    log:
        f"{LOGS}/chronos_iteration/figures.log",
    benchmark:
        bench(f"{LOGS}/chronos_iteration/figures.log")
    conda:
        env("analysis")
    script:
        "../workflow_scripts/chronos_iteration_figures.py"


rule chronos_iteration_model:
    """The configured feature set + estimator (default: the nested procedure's choice) trained on every row of
    each family (released + merged local rows; collect.train_on), with a JSON card (cross-validated MAPE of the
    same entry from the merged predictions; the local rows it learnt)."""
    input:
        table=f"{DATA}/iteration.csv",
        predictions=expand(f"{CI_PRED}/{{protocol}}.csv", protocol=CI_PROTOCOLS),
        **({"local": f"{DATA}/local_iteration.csv"} if TRAIN_LOCAL else {}),
        lib=lib("chronos_iteration_model"),
    output:
        model=f"{CI_MODEL}.joblib",
        card=f"{CI_MODEL}.json",
    params:
        model=CI["model"],
        selection=CI["selection"],
        families=CI_FAMILIES,
        seed=config["seeds"][0],
        clean=CI["clean"],
        test_only=CI["test_only"],
        gpu_specs=config["gpu_specs"],
        train_on=config["collect"]["train_on"],
    threads: 1
    log:
        f"{LOGS}/chronos_iteration/model.log",
    benchmark:
        bench(f"{LOGS}/chronos_iteration/model.log")
    conda:
        env("torch")  # loads the merged local rows (traintime.measure.local imports the collection code)
    script:
        "../workflow_scripts/chronos_iteration_model.py"


rule chronos_iteration_noise_floor:
    """Noise floor of the timing labels: the spread of the learning-rate replicates of each workload and GPU; and how
    well classes of step-time models fit the labels in sample (every GPU included)."""
    input:
        iteration=f"{DATA}/iteration.csv",
        lib=lib("chronos_iteration_noise_floor"),
    output:
        csv=report(f"{TABLES}/iteration_noise_floor.csv", caption="../report/iteration_noise_floor.rst",
                   category="CHRONOS iteration time"),
        md=f"{TABLES}/iteration_noise_floor.md",
        fit_csv=report(f"{TABLES}/iteration_fit_floor.csv", caption="../report/iteration_fit_floor.rst",
                       category="CHRONOS iteration time"),
        fit_md=f"{TABLES}/iteration_fit_floor.md",
    log:
        f"{LOGS}/chronos_iteration/noise_floor.log",
    benchmark:
        bench(f"{LOGS}/chronos_iteration/noise_floor.log")
    conda:
        env("analysis")
    script:
        "../workflow_scripts/chronos_iteration_noise_floor.py"


ALL_TARGETS.extend(
    [
        f"{DATA}/iteration.csv",
        f"{TABLES}/iteration_noise_floor.csv",
        f"{TABLES}/iteration_fit_floor.csv",
        f"{TABLES}/iteration_per_model_rmse.csv",
        f"{TABLES}/iteration_regressors.csv",
        f"{TABLES}/iteration_grouped_summary.csv",
        f"{FIGURES}/iteration_pred_vs_measured.png",
        f"{FIGURES}/iteration_grouped_mape.png",
        f"{FIGURES}/iteration_seed_spread.png",
        f"{CI_MODEL}.joblib",
    ]
)


rule end_to_end_out_of_sample:
    """Every configuration's epoch time, epochs, hours and cost predicted by models that never saw it (grouped
    folds: the iteration stage's LOMO or LODO test predictions, T_conv refitted leaving the same group out),
    compared with the measured values; the GPU cost ranking scored the same way; mean, sd, 95 % interval
    over seeds."""
    input:
        iteration=f"{DATA}/iteration.csv",
        convergence=f"{DATA}/convergence.csv",
        predictions=f"{CI_PRED}/{CI['end_to_end']['protocol']}.csv",
        # the same estimator's out-of-fold T_conv from rule convergence_evaluate, read instead of refitted
        **({"epochs": f"{DATA}/convergence_predictions/{CI['end_to_end']['convergence_method']}.csv"}
           if CI["end_to_end"]["convergence_method"] in config["chronos_convergence"]["methods"] else {}),
        lib=lib("end_to_end_out_of_sample"),
    output:
        csv=report(f"{TABLES}/end_to_end_out_of_sample.csv", caption="../report/end_to_end_out_of_sample.rst",
                   category="CHRONOS end-to-end"),
        md=f"{TABLES}/end_to_end_out_of_sample.md",
        pairs=report(f"{TABLES}/end_to_end_out_of_sample_pairs.csv", caption="../report/end_to_end_out_of_sample_pairs.rst",
                     category="CHRONOS end to end"),
    params:
        settings=CI["end_to_end"],
        seeds=ci_seeds(CI["end_to_end"]["protocol"]),
        gpu_specs=config["gpu_specs"],
    threads: 1
    log:
        f"{LOGS}/chronos_iteration/end_to_end_out_of_sample.log",
    benchmark:
        bench(f"{LOGS}/chronos_iteration/end_to_end_out_of_sample.log")
    conda:
        env("analysis")
    script:
        "../workflow_scripts/end_to_end_out_of_sample.py"


if CI["end_to_end"]["protocol"] in CI_PROTOCOLS:
    ALL_TARGETS.append(f"{TABLES}/end_to_end_out_of_sample.csv")
