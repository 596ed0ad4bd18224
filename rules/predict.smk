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
