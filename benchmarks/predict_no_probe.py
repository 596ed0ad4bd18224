"""Benchmark: wall time of ``traintime predict --no-probe`` for every GPU (target <= 1 s on a 2-core CPU).

Prints three numbers per model, so nothing is hidden:

* ``cold process``: ``python -m traintime.cli predict ... --no-probe`` in a fresh interpreter (imports of
  torch, pandas and the spec database included);
* ``first call``: :func:`traintime.predict_run.run_predict` in this process after the imports (spec database
  load and the model's shape analysis included);
* ``warm call``: the same call again (caches filled), what a service or notebook pays per question.

    PYTHONPATH=src .venv/bin/python benchmarks/predict_no_probe.py [--all-gpus] [--models resnet50 vit_base_patch16_224]
"""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
import time
from contextlib import redirect_stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["resnet50", "vit_base_patch16_224"])
    ap.add_argument("--all-gpus", action="store_true", help="every card of the spec database")
    ap.add_argument("--dataset", default="imagenet")
    a = ap.parse_args()
    import torch

    torch.set_num_threads(2)
    from traintime.cli import build_parser
    from traintime.predict_run import run_predict

    for model in a.models:
        argv = ["predict", "--model", model, "--dataset", a.dataset, "--batch-size", "256", "--no-probe", "--json"]
        if a.all_gpus:
            argv.append("--all-gpus")
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "traintime.cli", *argv], check=True, capture_output=True)
        cold = time.perf_counter() - t0
        args = build_parser().parse_args(argv)
        times = []
        for _ in range(2):
            buf = io.StringIO()
            t0 = time.perf_counter()
            with redirect_stdout(buf):
                run_predict(args, out=buf, err=io.StringIO())
            times.append(time.perf_counter() - t0)
        n = buf.getvalue().count('"gpu"')
        print(f"{model}: {n} GPUs; cold process {cold:.2f} s, first call {times[0]:.2f} s, warm call {times[1]:.2f} s")


if __name__ == "__main__":
    main()
