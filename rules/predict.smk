# Calibration of `traintime predict`'s roofline step model and measured coverage of its intervals.

PRED_INT = config.get("predict_intervals", {})


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
        csv=f"{TABLES}/predict_interval_coverage.csv",
        md=f"{TABLES}/predict_interval_coverage.md",
    params:
        coverage=PRED_INT.get("coverage", 0.9),
        method=config["chronos_convergence"]["final_method"],
        gpu_specs=config["gpu_specs"],
        train_on=config["collect"].get("train_on", "released_and_local"),
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
