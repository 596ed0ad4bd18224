# Calibration of `traintime predict`'s roofline step model and measured coverage of its intervals.

PRED_INT = config.get("predict_intervals", {})


rule predict_interval_coverage:
    """Roofline fitted per family on the release's compute times (saved for `traintime predict`) and the
    measured coverage of the split-conformal intervals (step: leave-one-GPU-out; epochs: leave-one-model-out)
    beside the nominal one."""
    input:
        iteration=f"{DATA}/iteration.csv",
        convergence_predictions=f"{DATA}/convergence_predictions/{config['chronos_convergence']['final_method']}.csv",
        lib=lib("predict_interval_coverage"),
    output:
        calibration=f"{RESULTS}/models/steptime/roofline_calibration.json",
        csv=f"{TABLES}/predict_interval_coverage.csv",
        md=f"{TABLES}/predict_interval_coverage.md",
    params:
        coverage=PRED_INT.get("coverage", 0.9),
        method=config["chronos_convergence"]["final_method"],
        gpu_specs=config["gpu_specs"],
    threads: 1
    log:
        f"{LOGS}/predict/interval_coverage.log",
    benchmark:
        bench(f"{LOGS}/predict/interval_coverage.log")
    conda:
        env("analysis")
    script:
        "../workflow_scripts/predict_interval_coverage.py"


ALL_TARGETS.extend(rules.predict_interval_coverage.output)


PUB = config.get("predict_public_eval", {})


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
        csv=f"{TABLES}/predict_public_eval.csv",
        md=f"{TABLES}/predict_public_eval.md",
        selection_csv=f"{TABLES}/predict_step_model_selection.csv",
        selection_md=f"{TABLES}/predict_step_model_selection.md",
    params:
        img_px=PUB.get("img_px", 224),
        precisions=PUB.get("precisions", ["fp32", "fp16"]),
        batch_sizes=PUB.get("batch_sizes", [16, 64]),
        models=PUB.get("models", []),
        operator_models=PUB.get("operator_models", []),
        cache_dir=PUB.get("cache_dir", f"{RESULTS}/cache/predict"),
        gpu_specs=config["gpu_specs"],
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


rule predict_step_grouped:
    """Step-time models on grouped outer folds of both sources (traces: leave one GPU / model / generation out;
    CHRONOS: leave one GPU out; plus the external check fitted on CHRONOS only), and the efficiency step model
    (`--step-model efficiency`) fitted on both sources, frozen with its conformal half-width."""
    input:
        traces=f"{DATA}/traces.csv",
        iteration=f"{DATA}/iteration.csv",
        calibration=f"{RESULTS}/models/steptime/roofline_calibration.json",
        lib=lib("predict_step_grouped"),
    output:
        csv=f"{TABLES}/predict_step_grouped.csv",
        md=f"{TABLES}/predict_step_grouped.md",
        coverage_csv=f"{TABLES}/predict_step_grouped_coverage.csv",
        model=f"{RESULTS}/models/steptime/efficiency_model.json",
    params:
        img_px=PUB.get("img_px", 224),
        precisions=PUB.get("precisions", ["fp32", "fp16"]),
        batch_sizes=PUB.get("batch_sizes", [16, 64]),
        cache_dir=PUB.get("cache_dir", f"{RESULTS}/cache/predict"),
        coverage=PRED_INT.get("coverage", 0.9),
        gpu_specs=config["gpu_specs"],
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
