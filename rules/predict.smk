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
        csv=report(f"{TABLES}/predict_interval_coverage.csv", caption="../report/predict_interval_coverage.rst",
                   category="Prediction (traintime predict)"),
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


rule predict_cli_example:
    """The README's `traintime predict` example (traintime.predict_cli_example.EXAMPLE_ARGS) run on this
    run's saved models: the transcript the README shows (generated block `predict-example`)."""
    input:
        calibration=rules.predict_interval_coverage.output.calibration,
        iteration=f"{DATA}/iteration.csv",
        lib=lib("predict_cli_example"),
    output:
        f"{RESULTS}/predict_cli_example.txt",
    params:
        models_dir=MODELS,
        data_dir=DATA,
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
