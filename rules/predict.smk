# Calibration of `traintime predict`'s roofline step model and measured coverage of its intervals.

PRED_INT = config["predict_intervals"]


rule predict_interval_coverage:
    """Roofline fitted per family on the release's compute times plus the merged local rows of GPUs in the
    spec table (collect.train_on; saved for `traintime predict`) and the
    measured coverage of the split-conformal intervals (step: leave-one-GPU-out; epochs: leave-one-model-out)
    beside the nominal one."""
    input:
        iteration=f"{DATA}/iteration.csv",
        **({"local": f"{DATA}/local_iteration.csv"} if TRAIN_LOCAL else {}),
        convergence_predictions=f"{DATA}/convergence_predictions/{config['chronos_convergence']['final_method']}.csv",
        lib=lib("predict_interval_coverage"),
    output:
        calibration=f"{RESULTS}/models/steptime/roofline_calibration.json",
        csv=report(f"{TABLES}/predict_interval_coverage.csv", caption="../report/predict_interval_coverage.rst",
                   category="Prediction (traintime predict)"),
        md=f"{TABLES}/predict_interval_coverage.md",
    params:
        coverage=PRED_INT["coverage"],
        method=config["chronos_convergence"]["final_method"],
        gpu_specs=config["gpu_specs"],
        train_on=config["collect"]["train_on"],
    priority: LONGEST_JOB_PATH
    threads: 1
    log:
        f"{LOGS}/predict/interval_coverage.log",
    benchmark:
        bench(f"{LOGS}/predict/interval_coverage.log")
    conda:
        env("torch")  # loads the merged local rows (traintime.measure.local imports the collection code)
    script:
        "../workflow_scripts/predict_interval_coverage.py"


ALL_TARGETS.extend(rules.predict_interval_coverage.output)


PUB = config["predict_public_eval"]


rule predict_public_eval:
    """`traintime predict --no-probe` (library path) on public consumer-GPU traces it never saw (gpu_profiler):
    step-time MAPE, median APE, GPU pairs ordered right, current and previous step model; and the grouped
    choice of the step model on CHRONOS (leave one GPU out)."""
    input:
        traces=f"{DATA}/traces.csv",
        iteration=f"{DATA}/iteration.csv",
        calibration=f"{RESULTS}/models/steptime/roofline_calibration.json",
        # the operator model takes part only when the (hour-long) steptime stage is on
        op_chronos=f"{DATA}/op_graphs_chronos.csv" if config["steptime"]["enabled"] else [],
        lib=lib("predict_public_eval"),
    output:
        csv=report(f"{TABLES}/predict_public_eval.csv", caption="../report/predict_public_eval.rst",
                   category="Prediction (traintime predict)"),
        md=f"{TABLES}/predict_public_eval.md",
        selection_csv=report(f"{TABLES}/predict_step_model_selection.csv", caption="../report/predict_step_model_selection.rst",
                             category="Prediction (traintime predict)"),
        selection_md=f"{TABLES}/predict_step_model_selection.md",
    params:
        img_px=PUB["img_px"],
        precisions=PUB["precisions"],
        batch_sizes=PUB["batch_sizes"],
        models=PUB["models"],
        operator_models=PUB["operator_models"],
        cache_dir=PUB["cache_dir"],
        gpu_specs=config["gpu_specs"],
    priority: LONGEST_JOB_PATH
    threads: 1
    log:
        f"{LOGS}/predict/public_eval.log",
    benchmark:
        bench(f"{LOGS}/predict/public_eval.log")
    conda:
        env("torch")
    script:
        "../workflow_scripts/predict_public_eval.py"


ALL_TARGETS.extend(rules.predict_public_eval.output)
rule predict_cli_example:
    """The README's `traintime predict` example (traintime.predict_cli_example.EXAMPLE_ARGS) run on this
    run's saved models: the transcript the README shows (generated block `predict-example`)."""
    input:
        calibration=rules.predict_interval_coverage.output.calibration,
        neighbour=f"{RESULTS}/models/steptime/neighbour_model.json",  # --step-model auto reads it (rule predict_step_grouped)
        memory=f"{RESULTS}/models/memory/memory_fit.json",  # the fit call reads it (rule predict_memory_fit)
        iteration=f"{DATA}/iteration.csv",
        lib=lib("predict_cli_example"),
    output:
        f"{RESULTS}/predict_cli_example.txt",
    params:
        models_dir=lambda w, input: os.path.dirname(os.path.dirname(input.calibration)),
        data_dir=lambda w, input: os.path.dirname(input.iteration),
        gpu_specs=config["gpu_specs"],
    threads: 1
    log:
        f"{LOGS}/predict/cli_example.log",
    benchmark:
        bench(f"{LOGS}/predict/cli_example.log")
    conda:
        env("torch")
    script:
        "../workflow_scripts/predict_cli_example.py"


ALL_TARGETS.append(f"{RESULTS}/predict_cli_example.txt")


EXT = config["predict_external"]


rule retrieve_external:
    """The optional external benchmark's pinned files (mirror or URL, sha256-checked); absent files are listed."""
    input:
        lib=lib("retrieve_external"),
    output:
        files=directory(f"{RAW}/{EXT['source']}"),
        manifest=f"{DATA}/external_manifest.csv",
    params:
        sha256=config["data"]["sources"].get(EXT["source"], {}).get("files"),  # mirror / URL: read by the script
        source=EXT["source"],
    log:
        f"{LOGS}/predict/retrieve_external.log",
    benchmark:
        bench(f"{LOGS}/predict/retrieve_external.log")
    localrule: True
    conda:
        env("analysis")
    script:
        "../workflow_scripts/retrieve_external.py"


rule predict_external_eval:
    """`traintime predict` (this run's saved models, --no-probe) against Lambda's public ResNet-50 training
    throughput on data-center and workstation GPUs it never saw; the data reported absent when not retrieved."""
    input:
        files=rules.retrieve_external.output.files,
        manifest=rules.retrieve_external.output.manifest,
        calibration=rules.predict_interval_coverage.output.calibration,
        neighbour=f"{RESULTS}/models/steptime/neighbour_model.json",
        iteration=f"{DATA}/iteration.csv",
        lib=lib("predict_external_eval"),
    output:
        csv=report(f"{TABLES}/predict_external_eval.csv", caption="../report/predict_external_eval.rst",
                   category="Prediction (traintime predict)"),
        md=f"{TABLES}/predict_external_eval.md",
        rows=f"{DATA}/predict_external_rows.csv",  # per-row predictions (data, not a report table)
    params:
        models_dir=lambda w, input: os.path.dirname(os.path.dirname(input.calibration)),
        data_dir=lambda w, input: os.path.dirname(input.iteration),
        gpu_names=EXT["gpu_names"],
        gpu_specs=config["gpu_specs"],
    threads: 1
    log:
        f"{LOGS}/predict/external_eval.log",
    benchmark:
        bench(f"{LOGS}/predict/external_eval.log")
    conda:
        env("torch")
    script:
        "../workflow_scripts/predict_external_eval.py"


ALL_TARGETS.append(f"{TABLES}/predict_external_eval.csv")


rule predict_step_grouped:
    """Step-time models on grouped outer folds of both sources (traces: leave one GPU / model / generation out;
    CHRONOS: leave one GPU / model / dataset out; plus the external check fitted on CHRONOS only), and the efficiency
    and neighbour step models (`--step-model efficiency | neighbour`) fitted on both sources (plus the merged local
    rows of GPUs in the spec table, collect.train_on), frozen with their
    conformal half-widths; the CHRONOS out-of-fold predictions for the two-label table."""
    input:
        traces=f"{DATA}/traces.csv",
        iteration=f"{DATA}/iteration.csv",
        calibration=f"{RESULTS}/models/steptime/roofline_calibration.json",
        **({"local": f"{DATA}/local_iteration.csv"} if TRAIN_LOCAL else {}),  # joins the frozen models' fit only
        # order only: predict_public_eval fills the static-feature cache (PUB["cache_dir"]) for the same trace
        # workloads, so the model walks are not done twice (or side by side) in one run
        public_eval=rules.predict_public_eval.output.csv,
        lib=lib("predict_step_grouped"),
    output:
        csv=report(f"{TABLES}/predict_step_grouped.csv", caption="../report/predict_step_grouped.rst",
                   category="Prediction (traintime predict)"),
        md=f"{TABLES}/predict_step_grouped.md",
        coverage_csv=report(f"{TABLES}/predict_step_grouped_coverage.csv", caption="../report/predict_step_grouped_coverage.rst",
                            category="Prediction (traintime predict)"),
        folds_csv=report(f"{TABLES}/predict_step_grouped_folds.csv", caption="../report/predict_step_grouped_folds.rst",
                         category="Prediction (traintime predict)"),
        folds_md=f"{TABLES}/predict_step_grouped_folds.md",
        sizes_csv=report(f"{TABLES}/predict_step_grouped_sizes.csv", caption="../report/predict_step_grouped_sizes.rst",
                         category="Prediction (traintime predict)"),
        sizes_md=f"{TABLES}/predict_step_grouped_sizes.md",
        interior_csv=report(f"{TABLES}/predict_step_interior_batch.csv",
                            caption="../report/predict_step_interior_batch.rst", category="Prediction (traintime predict)"),
        interior_md=f"{TABLES}/predict_step_interior_batch.md",
        scaling_csv=report(f"{TABLES}/predict_step_batch_scaling.csv",
                           caption="../report/predict_step_batch_scaling.rst", category="Prediction (traintime predict)"),
        scaling_md=f"{TABLES}/predict_step_batch_scaling.md",
        model=f"{RESULTS}/models/steptime/efficiency_model.json",
        neighbour_model=f"{RESULTS}/models/steptime/neighbour_model.json",
        chronos_predictions=f"{DATA}/step_grouped_chronos_predictions.csv",
        fit_times=f"{LOGS}/predict/step_grouped_fit_times.csv",  # wall times of the fits: a record of the machine
    params:
        img_px=PUB["step_img_px"],
        precisions=PUB["precisions"],
        batch_sizes=PUB["batch_sizes"],
        cache_dir=PUB["cache_dir"],
        coverage=PRED_INT["coverage"],
        gpu_specs=config["gpu_specs"],
        train_on=config["collect"]["train_on"],
        max_outer_folds=PUB["test_only"]["max_outer_folds"],
        lomo_model_groups=PUB["lomo_model_groups"],
    priority: LONGEST_JOB_PATH
    threads: 1
    log:
        f"{LOGS}/predict/step_grouped.log",
    benchmark:
        bench(f"{LOGS}/predict/step_grouped.log")
    conda:
        env("torch")
    script:
        "../workflow_scripts/predict_step_grouped.py"


ALL_TARGETS.extend(rules.predict_step_grouped.output)


# the previous one-label models' step-time predictions on the same grouped folds (rule chronos_iteration_merge)
TWO_LABEL_PROTOCOLS = [p for p in ("logo", "lomo", "lodo") if p in CI_PROTOCOLS]


rule predict_step_two_label:
    """Step time = predicted compute (predict_step_grouped's CHRONOS out-of-fold predictions) + a loader-wait model
    (host and data features only), per CHRONOS grouped protocol and seed, beside the previous one-label models."""
    input:
        iteration=f"{DATA}/iteration.csv",
        compute=rules.predict_step_grouped.output.chronos_predictions,
        previous=expand(f"{CI_PRED}/{{protocol}}.csv", protocol=TWO_LABEL_PROTOCOLS),
        lib=lib("predict_step_two_label"),
    output:
        csv=report(f"{TABLES}/predict_step_two_label.csv", caption="../report/predict_step_two_label.rst",
                   category="Prediction (traintime predict)"),
        md=f"{TABLES}/predict_step_two_label.md",
        groups_csv=report(f"{TABLES}/predict_step_two_label_groups.csv",
                          caption="../report/predict_step_two_label_groups.rst", category="Prediction (traintime predict)"),
        groups_md=f"{TABLES}/predict_step_two_label_groups.md",
    params:
        seeds=config["seeds"],
        previous_protocols=TWO_LABEL_PROTOCOLS,
    threads: 1
    log:
        f"{LOGS}/predict/step_two_label.log",
    benchmark:
        bench(f"{LOGS}/predict/step_two_label.log")
    conda:
        env("analysis")
    script:
        "../workflow_scripts/predict_step_two_label.py"


ALL_TARGETS.extend(rules.predict_step_two_label.output)


rule predict_step_benchmark:
    """Issue 13's benchmark: per protocol and data source, the new and the previous step model's errors on the same
    outer folds and the wall time of one fit (benchmarks/step_models.py prints the same lines)."""
    input:
        grouped=rules.predict_step_grouped.output.csv,
        grouped_fit_times=rules.predict_step_grouped.output.fit_times,
        two_label=rules.predict_step_two_label.output.csv,
        host=rules.emulation_power_law.output.csv,
        host_fit_times=rules.emulation_power_law.output.fit_times,
        lib=lib("predict_step_benchmark"),
    output:
        csv=report(f"{TABLES}/predict_step_benchmark.csv", caption="../report/predict_step_benchmark.rst",
                   category="Prediction (traintime predict)"),
        md=f"{TABLES}/predict_step_benchmark.md",
        txt=f"{RESULTS}/predict_step_benchmark.txt",
    threads: 1
    log:
        f"{LOGS}/predict/step_benchmark.log",
    benchmark:
        bench(f"{LOGS}/predict/step_benchmark.log")
    conda:
        env("analysis")
    script:
        "../workflow_scripts/predict_step_benchmark.py"


ALL_TARGETS.extend(rules.predict_step_benchmark.output)


rule predict_fp16_rule:
    """The 16-bit rule of `traintime predict` (the 32-bit answer on cards without a fast 16-bit rate) scored on
    predict_step_grouped's CHRONOS out-of-fold predictions, beside the cards where the 16-bit answer is kept."""
    input:
        iteration=f"{DATA}/iteration.csv",
        compute=rules.predict_step_grouped.output.chronos_predictions,
        lib=lib("predict_fp16_rule"),
    output:
        csv=report(f"{TABLES}/predict_fp16_rule.csv", caption="../report/predict_fp16_rule.rst",
                   category="Prediction (traintime predict)"),
        md=f"{TABLES}/predict_fp16_rule.md",
    params:
        gpu_specs=config["gpu_specs"],
    threads: 1
    log:
        f"{LOGS}/predict/fp16_rule.log",
    benchmark:
        bench(f"{LOGS}/predict/fp16_rule.log")
    conda:
        env("analysis")
    script:
        "../workflow_scripts/predict_fp16_rule.py"


ALL_TARGETS.extend(rules.predict_fp16_rule.output)


rule predict_memory_fit:
    """Does the run fit the GPU's memory: predict's estimate (weights, gradients, optimizer state, saved
    activations; traintime.measure.memory) against the consumer-GPU traces' out-of-memory runs, leave one card
    memory size out; the usable fraction fitted on every run, which `traintime predict` applies."""
    input:
        traces=f"{DATA}/traces.csv",
        # order only: predict_step_grouped fills the static-feature cache (PUB["cache_dir"]) for every traced model
        grouped=rules.predict_step_grouped.output.csv,
        lib=lib("predict_memory_fit"),
    output:
        csv=report(f"{TABLES}/predict_memory_fit.csv", caption="../report/predict_memory_fit.rst",
                   category="Prediction (traintime predict)"),
        md=f"{TABLES}/predict_memory_fit.md",
        model=f"{RESULTS}/models/memory/memory_fit.json",
    params:
        cache_dir=PUB["cache_dir"],
    threads: 1
    log:
        f"{LOGS}/predict/memory_fit.log",
    benchmark:
        bench(f"{LOGS}/predict/memory_fit.log")
    conda:
        env("torch")
    script:
        "../workflow_scripts/predict_memory_fit.py"


ALL_TARGETS.extend(rules.predict_memory_fit.output)
