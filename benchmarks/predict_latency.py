"""Benchmark: cold wall time of ``traintime predict --no-probe`` for every GPU (target <= 1 s on a 2-core CPU).

Every measurement is a new process (``python -m traintime.cli predict ... --no-probe --json``), so imports and
file reads are included. Per model it prints:

* ``first call``: with an empty static-feature cache (a fresh ``TRAINTIME_CACHE`` folder): imports torch / timm,
  builds the network on the meta device, converts the spec database, and fills the cache;
* ``cached calls``: the same command again (median and max of ``--repeat`` runs), which reads the cache and
  never imports torch (checked: the run also reports whether ``torch`` was in ``sys.modules`` at exit);
* ``cpu``: user + system CPU seconds of the cached calls (less sensitive to other load than wall time).

    PYTHONPATH=src .venv/bin/python benchmarks/predict_latency.py [--models resnet50 vit_base_patch16_224]
        [--repeat 5] [--all-gpus] [--batch-size 64]

Machine load changes wall times; ``os.getloadavg()`` is printed beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

#: runs the CLI, then reports whether torch was imported (stdout of the CLI is discarded)
_RUNNER = (
    "import sys, io, contextlib\n"
    "from traintime.cli import main\n"
    "buf = io.StringIO()\n"
    "with contextlib.redirect_stdout(buf):\n"
    "    rc = main(sys.argv[1:])\n"
    "print(json.dumps({'rc': rc, 'torch': 'torch' in sys.modules, 'gpus': buf.getvalue().count('\"gpu\"')}))\n"
)


def _run(argv: list[str], env: dict[str, str]) -> tuple[float, float, dict]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", "import json\n" + _RUNNER, *argv], env=env, check=True,
                       capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["resnet50", "vit_base_patch16_224"])
    ap.add_argument("--dataset", default="imagenet")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--all-gpus", action="store_true", help="every card of the spec database")
    a = ap.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    for model in a.models:
        with tempfile.TemporaryDirectory(prefix="traintime-cache-") as cache:
            env = dict(os.environ, TRAINTIME_CACHE=cache)
            argv = ["predict", "--model", model, "--dataset", a.dataset, "--batch-size", str(a.batch_size),
                    "--no-probe", "--json"] + (["--all-gpus"] if a.all_gpus else [])
            first, first_cpu, info = _run(argv, env)
            runs = [_run(argv, env) for _ in range(a.repeat)]
            walls = [r[0] for r in runs]
            cpus = [r[1] for r in runs]
            torch_cached = any(r[2]["torch"] for r in runs)
            print(f"{model}: {info['gpus']} GPUs; first call {first:.2f} s (cpu {first_cpu:.2f} s, torch imported: "
                  f"{info['torch']}); cached calls median {statistics.median(walls):.2f} s, max {max(walls):.2f} s "
                  f"(cpu median {statistics.median(cpus):.2f} s, torch imported: {torch_cached}; "
                  f"{a.repeat} runs, load average {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
