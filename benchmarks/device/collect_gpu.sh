#!/usr/bin/env bash
# Local-collection check on a lent GPU (e.g. one NVIDIA H200): the collect stage's code paths on CUDA.
#
# What it runs (same library code as rules/collect.smk with collect.device = auto -> cuda):
#   1. benchmark (CHRONOS protocol: 5 warm-up + 20 timed steps, 2 loader workers, CUDA events):
#      resnet50 and mixer at fp16 (autocast + GradScaler) and fp32, batch 64 and 128, on the offline
#      `digits` images at 32 px (real data, CIFAR-sized input), plus resnet50 at batch 4096 fp32 on
#      `synthetic` data to exercise the OOM-or-ok path;
#   2. probe: resnet50 and mixer at probe batches 32 / 64 / 128, normalised empirical NTK trace
#      (exact where K x P is small, per-sample Hutchinson otherwise) and the released proxy;
#   3. one short run to early stopping (resmlp, digits 32 px, SGD, patience 3, at most 12 epochs).
# Outputs in $OUT (at most 8 files): collect_gpu_iteration.csv (canonical iteration rows),
# collect_gpu_probe.csv, collect_gpu_convergence.csv (+ _curve.csv), collect_gpu_run.json (device,
# versions, timings), collect_gpu_log.txt. The lead copies them to results/reference/.
#
# How to run (device `run`, from the repository root; nothing to install: PYTHONPATH=src):
#   bash benchmarks/device/collect_gpu.sh            # with timeout_s=300; expected 1.5-3 min on an H200
# Locally, a CPU smoke test of the same script (tiny settings, rows say device cpu):
#   OUT=/tmp/collect_gpu SMOKE=1 bash benchmarks/device/collect_gpu.sh
# Never changes device state (no clocks, no MPS, no reset); reads the device name through torch/NVML.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:?set OUT to an output folder}"
mkdir -p "$OUT"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
PY="${PYTHON:-python3}"
timeout -s TERM "${BUDGET_S:-270}" "$PY" - "$OUT" "${SMOKE:-0}" <<'PYEOF' 2>&1 | tee "$OUT/collect_gpu_log.txt"
import json
import sys
import time
from pathlib import Path

import pandas as pd
import torch

from traintime.measure.collect import run_convergence_job, run_probe_job
from traintime.core.io import write_csv, write_json
from traintime.measure.timing import BenchmarkJob, resolve_device, run_benchmark, software_versions

out, smoke = Path(sys.argv[1]), sys.argv[2] == "1"
t_start = time.perf_counter()
dev = resolve_device("auto")
if dev.type != "cuda" and not smoke:
    sys.exit("error: no CUDA device (set SMOKE=1 for a CPU smoke run)")
px = 16 if smoke else 32
collect = {
    "device": str(dev), "expected_gpu": None, "data_root": "data", "download": False, "img_px": px,
    "num_workers": 0 if smoke else 2, "warmup_iterations": 1 if smoke else 5,
    "measured_iterations": 2 if smoke else 20, "seed": 42,
    "probe": {"batch_sizes": [32] if smoke else [32, 64, 128], "repeats": 1 if smoke else 2,
              "ntk_method": "hutchinson" if smoke else "auto", "ntk_projections": 2 if smoke else 4},
    "convergence": {"min_delta": 5e-4, "patience": 1 if smoke else 3, "max_epochs": 2 if smoke else 12,
                    "probe_batch_size": 32 if smoke else 64},
}
info = {"device": str(dev), "smoke": smoke, **software_versions(), "timings_s": {}}
if dev.type == "cuda":
    p = torch.cuda.get_device_properties(dev)
    info.update(device_name=p.name, sms=p.multi_processor_count, memory_gib=round(p.total_memory / 2**30, 1))

# 1. benchmark
rows = []
models = ["mixer"] if smoke else ["resnet50", "mixer"]
for model in models:
    for prec in ([32] if smoke else [16, 32]):
        for bs in ([32] if smoke else [64, 128]):
            t0 = time.perf_counter()
            job = BenchmarkJob(model, "digits", "sgd", bs, prec, 1e-3, img_px=px)
            row = run_benchmark(job, device=dev, num_workers=collect["num_workers"],
                                warmup=collect["warmup_iterations"], measured=collect["measured_iterations"])
            rows.append(row)
            print(f"bench {job.job_id}: {row['status']} step {row['step_time_ms']} ms "
                  f"(loader {row['loader_wait_ms']}, compute {row['compute_time_ms']}) in "
                  f"{time.perf_counter() - t0:.1f} s", flush=True)
if not smoke:  # a large batch: an OOM row or a valid one, never a crash
    row = run_benchmark(BenchmarkJob("resnet50", "synthetic", "sgd", 4096, 32, 1e-3, img_px=224), device=dev,
                        num_workers=0, warmup=1, measured=2, synthetic_size=4096)
    rows.append(row)
    print(f"bench resnet50 synthetic b4096 224px: {row['status']} {row['error_message'] or ''}", flush=True)
write_csv(pd.DataFrame(rows), out / "collect_gpu_iteration.csv")
info["timings_s"]["benchmark"] = round(time.perf_counter() - t_start, 1)

# 2. probe
t1 = time.perf_counter()
probes = pd.concat([run_probe_job(m, "digits", collect, device=dev) for m in models], ignore_index=True)
write_csv(probes, out / "collect_gpu_probe.csv")
print(probes[["model", "probe_batch_size", "repeat", "initial_loss", "grad_norm", "ntk_trace", "ntk_trace_se",
              "ntk_method", "probe_time_s", "ntk_time_s"]].to_string(), flush=True)
info["timings_s"]["probe"] = round(time.perf_counter() - t1, 1)

# 3. one run to early stopping
t2 = time.perf_counter()
run = {"model": "resmlp", "dataset": "digits", "optimizer": "sgd", "batch_size": 128, "learning_rate": 0.1,
       "precision": 32}
row, curve = run_convergence_job(run, collect, device=dev)
write_csv(pd.DataFrame([row]), out / "collect_gpu_convergence.csv")
write_csv(curve, out / "collect_gpu_convergence_curve.csv")
print(f"convergence: {row['status']} after {row['epochs_to_converge']} epochs (best {row['best_epoch']}), "
      f"val acc {row['final_val_accuracy']:.3f}, {row['wall_time_s']:.1f} s", flush=True)
info["timings_s"]["convergence"] = round(time.perf_counter() - t2, 1)
info["timings_s"]["total"] = round(time.perf_counter() - t_start, 1)
write_json(info, out / "collect_gpu_run.json")
print(json.dumps(info["timings_s"]))
PYEOF
