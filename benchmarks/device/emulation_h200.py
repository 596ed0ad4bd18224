#!/usr/bin/env python3
"""Host-emulation reference run on one lent NVIDIA H200 (green contexts only; <= 8 minutes).

What it does
    Measures the zero-shot paper's training step (timm model, SGD, fixed random batch, CUDA-graph
    timer, minimum of 10 replays) for a handful of timm models, fp32, batch 16, at 64/128/224 px,
    on the whole device and under CUDA green contexts of 16/32/64/96/128 SMs (H200: 132 SMs,
    CC 9.0, partitions in multiples of 8). First it checks that a green context really restricts
    the device: a 4096^3 fp32 matmul timed eagerly and as a CUDA graph on green streams of 16 and 64
    SMs against the whole device (expect ~8x and ~2x slower; a ratio near 1 means the partition
    does not bind and the sweep's green rows are not restricted -- the JSON says so).
    Optionally (--profile-ops), after the sweep: a per-op profile (torch.profiler, whole device, no
    green context) of a few models at fp32, batch 16, for the Habitat/NeuSight-style baselines
    (traintime.emulation.profile_ops; --ops-budget-s of the budget is kept for it).

What it never does
    No clock locking, no MPS, no power or compute-mode change, no GPU reset: green contexts (a
    per-process SM partition that vanishes with the process) and read-only NVML queries only.

Outputs (in --out, default $OUT, and copied to --reference-dir, default results/reference,
where the emulation analysis reads host rows; --cpu-smoke never copies)
    emulation_h200_host_latency.csv   host-latency rows (traintime.emulation.schema.HOST_LATENCY)
    emulation_h200_latency_vs_sms.png latency vs SMs, one panel per input size
    emulation_h200_run.json           device, versions, plan, green-context check, skipped points
    emulation_h200_ops.csv            per-op profile rows (emulation.baselines.OP_PROFILE), only
                                      with --profile-ops; the analysis reads op profiles through
                                      emulation.op_profile_glob (copy or point it there)

How to run (from the repository root of a fresh checkout; nothing to install)
    set -o pipefail; export PYTHONUNBUFFERED=1; timeout -s TERM 470 python3 \
        benchmarks/device/emulation_h200.py --out "$OUT" --budget-s 400 --profile-ops 2>&1 \
        | tee "$OUT/emulation_h200_log.txt"
    (device `run` with timeout_s=540; on SIGTERM the outputs so far are still written; expected
    wall time about 3-5 minutes.) Then copy the returned CSV/PNG/JSON into results/reference/.
    The script puts ./src on sys.path, so `pip install -e .` is not needed (an offline editable
    install would need `--no-build-isolation`). It needs torch (CUDA), timm, pandas, numpy,
    matplotlib, nvidia-ml-py and cuda-bindings: all are in the nvidia-h200 image (KINDS.md), so
    nothing must be carried. If timm were missing: carry timm's wheel plus huggingface-hub,
    safetensors and pyyaml wheels in .whl (see the device README's wheel recipe).
    --dry-run prints the plan without touching CUDA; --cpu-smoke runs the same loops on the CPU
    with a tiny model and a simulated (non-restricting) partition, rows marked synthetic.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO / "src") not in sys.path:
    sys.path.insert(0, str(REPO / "src"))

from traintime.core.errors import TraintimeError  # noqa: E402
from traintime.core.io import write_csv, write_json  # noqa: E402
from traintime.emulation.green_ctx import (  # noqa: E402
    GreenContextBackend,
    GreenHandle,
    round_green_sms,
    sm_resource_info,
)
from traintime.emulation.profile_ops import ops_to_frame, profile_workloads  # noqa: E402
from traintime.emulation.restriction import Applied, NoRestriction, Setting  # noqa: E402
from traintime.emulation.sweep import rows_to_frame, write_rows  # noqa: E402
from traintime.emulation.timer import (  # noqa: E402
    empty_row,
    free_device_memory,
    is_oom,
    measure_step,
)
from traintime.emulation.workload import WorkloadSpec, check_model_name, make_workload  # noqa: E402
from traintime.measure.device import (  # noqa: E402
    DeviceInfo,
    check_expected_device,
    describe_device,
    load_nvml,
)

MODELS = ["resnet18", "resnet50", "vit_tiny_patch16_224", "convnext_tiny", "mobilenetv3_large_100"]
IMGS = [224, 128, 64]
GREEN_SMS = [16, 32, 64, 96, 128]
BATCH = 16
PRECISION = "fp32"
EXPECTED_GPU = "H200"
H200_SMS, H200_CC = 132, "9.0"
PREFIX = "emulation_h200"
#: models of the optional per-op profile (--profile-ops), at every --ops-imgs size
OPS_MODELS = ["resnet50", "vit_tiny_patch16_224", "convnext_tiny"]
OPS_BUDGET_S = 90.0
OPS_REPEATS = 3


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT") or "results/device/emulation_h200",
                    help="output folder (default: $OUT, else results/device/emulation_h200)")
    ap.add_argument("--reference-dir", default="results/reference",
                    help="also copy the outputs here ('' to skip; never done for --cpu-smoke, whose "
                         "synthetic rows must not reach the analysis' measurement folders)")
    ap.add_argument("--models", nargs="+", default=MODELS)
    ap.add_argument("--imgs", nargs="+", type=int, default=IMGS)
    ap.add_argument("--sms", nargs="+", type=int, default=GREEN_SMS, help="green-context SM counts")
    ap.add_argument("--batch", type=int, default=BATCH)
    ap.add_argument("--replays", type=int, default=10)
    ap.add_argument("--budget-s", type=float, default=420.0,
                    help="stop starting new points after this many seconds (outputs are still written)")
    ap.add_argument("--skip-check", action="store_true", help="skip the green-context matmul check")
    ap.add_argument("--profile-ops", action="store_true",
                    help="after the sweep, profile the ops of --ops-models on the whole device (torch.profiler)")
    ap.add_argument("--ops-models", nargs="+", default=OPS_MODELS)
    ap.add_argument("--ops-imgs", nargs="+", type=int, default=None, help="input sizes (default: --imgs)")
    ap.add_argument("--ops-repeats", type=int, default=OPS_REPEATS, help="profiled steps (per-op time = minimum)")
    ap.add_argument("--ops-budget-s", type=float, default=OPS_BUDGET_S,
                    help="seconds of --budget-s kept for the per-op profiles (the sweep stops earlier)")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="print the plan; no CUDA")
    mode.add_argument("--cpu-smoke", action="store_true",
                      help="run the loops on the CPU with a tiny model (rows synthetic; for tests)")
    args = ap.parse_args(argv)
    if args.cpu_smoke:
        args.reference_dir = ""
        if args.models == MODELS:
            args.models, args.imgs, args.sms, args.batch, args.replays = ["test_vit"], [32], [16, 64], 2, 2
        if args.ops_models == OPS_MODELS:
            args.ops_models, args.ops_repeats = ["test_vit"], 1
    if args.ops_imgs is None:
        args.ops_imgs = list(args.imgs)
    return args


def say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def plan(args: argparse.Namespace, sms_total: int, cc: str) -> dict[str, Any]:
    """Workloads and settings; partitions rounded as the driver will be asked."""
    for m in [*args.models, *(args.ops_models if args.profile_ops else [])]:
        check_model_name(m)
    parts = sorted({round_green_sms(s, sms_total, cc) for s in args.sms})
    return {"models": list(args.models), "imgs": list(args.imgs), "batch": args.batch, "precision": PRECISION,
            "sms_requested": list(args.sms), "green_partitions": [p for p in parts if p < sms_total],
            "full_device_sms": sms_total, "replays": args.replays, "budget_s": args.budget_s,
            "points": len(args.models) * len(args.imgs) * (1 + len([p for p in parts if p < sms_total])),
            "ops_workloads": [f"{m} {s}px" for m in args.ops_models for s in args.ops_imgs] if args.profile_ops else []}


# --- green-context check --------------------------------------------------------------------


def green_check(backend: GreenContextBackend, sms_list: list[int], total: int, n: int = 4096,
                reps: int = 5) -> list[dict[str, Any]]:
    """Time an fp32 matmul eagerly and as a CUDA graph on green streams vs the whole device."""
    import torch

    a = torch.randn(n, n, device="cuda")
    b = torch.randn(n, n, device="cuda")
    flop = 2.0 * n ** 3
    out: list[dict[str, Any]] = []

    def timed(fn: Any, stream: Any) -> tuple[float | None, float]:
        """(event ms or None if events fail on this stream, wall ms) per call over reps calls."""
        with torch.cuda.stream(stream):
            fn()
            torch.cuda.synchronize()
            stream.synchronize()
            e0 = e1 = None
            try:
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
            except RuntimeError:
                e0 = None
            t0 = time.perf_counter()
            for _ in range(reps):
                fn()
            event_ms = None
            if e0 is not None and e1 is not None:
                try:
                    e1.record()
                    e1.synchronize()
                    event_ms = e0.elapsed_time(e1) / reps
                except RuntimeError:
                    event_ms = None
            stream.synchronize()
            torch.cuda.synchronize()
            return event_ms, (time.perf_counter() - t0) * 1e3 / reps

    for sms in [total, *sms_list]:
        rec: dict[str, Any] = {"sms_requested": sms}
        try:
            setting = Setting(sms=sms)
            be = NoRestriction() if sms >= total else backend
            with be.apply(Setting() if sms >= total else setting) as ap:
                rec["effective_sms"] = ap.effective_sms if ap.effective_sms is not None else min(sms, total)
                rec["note"] = ap.note
                mk = ap.stream_factory or torch.cuda.Stream
                work = mk()
                rec["eager_event_ms"], rec["eager_wall_ms"] = timed(lambda: torch.mm(a, b), work)
                cap = mk()
                g = torch.cuda.CUDAGraph()
                with torch.cuda.stream(work):
                    torch.cuda.synchronize()
                    with torch.cuda.graph(g, stream=cap):
                        torch.mm(a, b)
                    cap.synchronize()
                rec["graph_event_ms"], rec["graph_wall_ms"] = timed(g.replay, work)
                del g
                for mode in ("eager", "graph"):  # events when they work on this stream, else wall clock
                    rec[f"{mode}_ms"] = rec[f"{mode}_event_ms"] if rec[f"{mode}_event_ms"] else rec[f"{mode}_wall_ms"]
                rec["eager_tflops"] = flop / rec["eager_ms"] / 1e9
                rec["status"] = "ok"
        except Exception as exc:  # record and go on: the sweep itself says what fails
            rec["status"] = "error"
            rec["error"] = f"{type(exc).__name__}: {exc}"
        out.append(rec)
        say(f"check sms={sms}: {json.dumps({k: v for k, v in rec.items() if k != 'note'}, default=str)}")
    full = out[0]
    for rec in out[1:]:
        if rec.get("status") == "ok" and full.get("status") == "ok":
            for mode in ("eager", "graph"):
                rec[f"{mode}_slowdown"] = rec[f"{mode}_ms"] / full[f"{mode}_ms"]
            ideal = total / rec["effective_sms"]
            rec["ideal_slowdown"] = ideal
            rec["restriction_binds_eager"] = rec["eager_slowdown"] > 0.5 * ideal
            rec["restriction_binds_graph"] = rec["graph_slowdown"] > 0.5 * ideal
    del a, b
    free_device_memory()
    return out


def write_trusted_reference(raw_csv: Path, ref_csv: Path, run: dict[str, Any]) -> None:
    """Copy the rows of ``raw_csv`` whose restriction check passed or was not needed to ``ref_csv``;
    the raw file keeps every row with its ``check``; the count left out goes into ``run``."""
    import pandas as pd

    from traintime.emulation.trust import trusted

    df = pd.read_csv(raw_csv)
    good, bad = trusted(df, source=str(raw_csv))
    run["reference_rows_excluded"] = {str(k): int(v) for k, v in bad["check"].value_counts().items()}
    if good.empty:
        say(f"no trusted rows: nothing copied to {ref_csv}")
        return
    good.drop(columns=["check_reason"]).to_csv(ref_csv, index=False)


# --- sweep ----------------------------------------------------------------------------------


def run_sweep(args: argparse.Namespace, host: str, info: DeviceInfo, green: GreenContextBackend,
              clock_reader: Any, deadline: float, device: str, synthetic: bool, rows: list[dict[str, Any]],
              skipped: list[str], flush: Any = None, extra_note: str = "", green_note: str = "",
              green_check: str | None = None) -> None:
    """Measure every (model, img) on the whole device and every green partition; rows and
    skipped points are appended in place and ``flush()`` is called after every workload.
    ``green_check``: "failed" or "skipped" when the green-context binding check failed or was
    skipped; recorded in the ``check`` column of every green row (traintime.emulation.trust)."""
    total = int(info.sms or H200_SMS)
    parts = plan(args, total, info.compute_capability or H200_CC)["green_partitions"]
    settings = [None] + parts  # None: the whole device, no restriction
    failed_parts: dict[int, str] = {}  # partition -> why it could not be created (not retried)
    for model in args.models:
        for img in args.imgs:
            spec = WorkloadSpec(model, img, args.batch, PRECISION)
            label = f"{model} {img}px b{args.batch}"
            if time.time() > deadline:
                skipped.append(label)
                continue
            try:
                step = make_workload(spec, device)
            except TraintimeError:
                raise
            except Exception as exc:
                status = "oom" if is_oom(exc) else "error"
                say(f"{label}: build failed ({status}): {exc}")
                for sms in settings:
                    row = empty_row(spec, host, Applied(backend="none" if sms is None else "green_ctx",
                                                        requested_sm_pct=100.0 if sms is None else
                                                        round(100.0 * sms / total, 4)))
                    row.update(status=status, oom=status == "oom", note=f"build failed: {exc}"[:300],
                               synthetic=synthetic, device_name=info.name)
                    rows.append(row)
                free_device_memory()
                if flush is not None:
                    flush()
                continue
            try:
                for sms in settings:
                    if time.time() > deadline:
                        skipped.append(f"{label} sms={sms or 'all'}")
                        continue
                    t0 = time.time()
                    be = NoRestriction() if sms is None else green
                    setting = Setting() if sms is None else Setting(sms=sms)
                    try:
                        if sms is not None and sms in failed_parts:
                            raise TraintimeError(failed_parts[sms])
                        with be.apply(setting) as applied:
                            applied.clock_reader = clock_reader
                            if extra_note:
                                applied.notes.append(extra_note)
                            if green_note and sms is not None:
                                applied.notes.append(green_note)
                            row = measure_step(step, spec, host_gpu=host, device=device, applied=applied,
                                               replays=args.replays, synthetic=synthetic)
                    except Exception as exc:  # the partition could not be applied: an error row
                        msg = str(exc) if isinstance(exc, TraintimeError) else f"{type(exc).__name__}: {exc}"
                        if sms is not None:
                            failed_parts.setdefault(sms, msg)
                        row = empty_row(spec, host, Applied(
                            backend="none" if sms is None else "green_ctx",
                            requested_sm_pct=100.0 if sms is None else round(100.0 * sms / total, 4)))
                        row.update(note=msg[:300], synthetic=synthetic, device_name=info.name)
                    if sms is not None and green_check:
                        row["check"] = green_check
                    rows.append(row)
                    lat = row.get("latency_ms")
                    say(f"{label} sms={row.get('effective_sms') or sms or 'all'}: {row['status']} "
                        f"{'' if lat is None else f'{lat:.4f} ms'} iters={row.get('iters_per_replay')} "
                        f"clock={row.get('effective_clock_mhz')} ({time.time() - t0:.1f} s)")
            finally:
                step.release()
                del step
                free_device_memory()
            if flush is not None:
                flush()


# --- optional per-op profile ----------------------------------------------------------------


def run_ops(args: argparse.Namespace, host: str, device: str, synthetic: bool, deadline: float, path: Path,
            summary: dict[str, Any]) -> None:
    """Per-op profiles of --ops-models x --ops-imgs (fp32, --batch) on the whole device, no green
    context; the CSV is rewritten after every workload and ``summary`` updated in place."""
    frames: list[Any] = []
    summary.update(workloads=0, rows=0, skipped=[], unattributed_ms={})
    for model in args.ops_models:
        for img in args.ops_imgs:
            spec = WorkloadSpec(model, img, args.batch, PRECISION)
            t0 = time.time()
            got, skipped = profile_workloads([spec], device, host, repeats=args.ops_repeats, synthetic=synthetic,
                                             deadline=deadline)
            summary["skipped"].extend(skipped)
            for df in got:
                frames.append(df)
                summary["unattributed_ms"][f"{model} {img}px"] = round(float(df.attrs.get("unattributed_ms", 0.0)), 6)
                say(f"ops {model} {img}px: {len(df)} ops, {df['time_ms'].sum():.4f} ms summed, "
                    f"{df['flops'].sum() / 1e9:.3f} GFLOP, {df['blocks'].notna().sum()} with a grid "
                    f"({time.time() - t0:.1f} s)")
            for why in skipped:
                say(f"ops {why}")
            if got:
                table = ops_to_frame(frames, source=str(path))
                write_csv(table, path)
                summary.update(workloads=len(frames), rows=len(table))


def plot(df: Any, path: Path, title: str, total: int | None = None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    ok = df[(df["status"] == "ok") & df["latency_ms"].notna()].copy()
    if total:  # rows without a read-back count: the requested share of the device
        ok["effective_sms"] = ok["effective_sms"].astype(float).fillna(ok["requested_sm_pct"] * total / 100.0)
    imgs = sorted(ok["img_px"].unique()) or [0]
    fig, axes = plt.subplots(1, len(imgs), figsize=(max(7.0, 5.0 * len(imgs)), 4.4), squeeze=False)
    for ax, img in zip(axes[0], imgs):
        sub = ok[ok["img_px"] == img]
        for model, g in sub.groupby("model"):
            g = g.sort_values("effective_sms")
            line, = ax.plot(g["effective_sms"], g["latency_ms"], "o-", label=model)
            full = g[g["backend"] == "none"]
            if not full.empty:  # ideal 1/SM scaling from the whole-device point
                s0, t0 = float(full["effective_sms"].iloc[0]), float(full["latency_ms"].iloc[0])
                xs = np.linspace(g["effective_sms"].min(), s0, 50)
                ax.plot(xs, t0 * s0 / xs, ":", color=line.get_color(), alpha=0.6)
        ax.set_xlabel("SMs available (green-context partition)")
        ax.set_ylabel("training-step latency (ms, log scale)")
        ax.set_yscale("log")
        ax.set_title(f"{img} px")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize=8, title="model (dotted: ideal 1/SM)")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    t_start = time.time()
    deadline = t_start + args.budget_s
    sweep_deadline = deadline - (min(args.ops_budget_s, args.budget_s) if args.profile_ops else 0.0)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import timm
    import torch

    run: dict[str, Any] = {"torch": torch.__version__, "timm": timm.__version__, "python": sys.version.split()[0],
                           "argv": sys.argv[1:] if argv is None else argv, "warnings": []}
    if args.dry_run:
        p = plan(args, H200_SMS, H200_CC)
        say("plan (assuming an H200, 132 SMs, CC 9.0): " + json.dumps(p))
        gc_api = hasattr(torch.cuda, "GreenContext") or hasattr(getattr(torch.cuda, "green_contexts", None),
                                                                 "GreenContext")
        say(f"torch {torch.__version__} here has a green-context API: {gc_api}")
        return 0

    synthetic = bool(args.cpu_smoke)
    if args.cpu_smoke:
        device = "cpu"
        info = DeviceInfo(name="cpu", is_cuda=False, sms=H200_SMS, compute_capability=H200_CC,
                          torch_version=torch.__version__)
        host = "cpu"
        green = GreenContextBackend(host_sms=H200_SMS, compute_capability=H200_CC,
                                    factory=lambda n, i: GreenHandle(None, None, n, "cpu smoke: simulated"))
        clock_reader = None
        extra = "cpu smoke: simulated partition, nothing restricted"
        run["warnings"].append("cpu smoke run: rows are synthetic and restrict nothing")
    else:
        if not torch.cuda.is_available():
            say("error: no CUDA device (use --cpu-smoke or --dry-run here)")
            return 2
        device = "cuda"
        nv = load_nvml()
        info = describe_device(0, nvml=nv if nv is not None else False)
        try:
            host = check_expected_device(EXPECTED_GPU, info=info)
        except TraintimeError as exc:
            run["warnings"].append(f"device check: {exc}")
            say(f"warning: {exc}; measuring anyway, rows name the device present")
            host = info.name
        green = GreenContextBackend(host_sms=info.sms, compute_capability=info.compute_capability)
        clock_reader = None
        if nv is not None:
            handle = nv.nvmlDeviceGetHandleByIndex(0)
            clock_reader = lambda: float(nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_SM))  # noqa: E731
        extra = ""
    green_note = ""
    green_status: str | None = "skipped" if args.skip_check or device != "cuda" else None
    run["device"] = info.to_dict()
    if device == "cuda":
        run["driver_sm_resource"] = sm_resource_info(0)
    run["host_gpu"] = host
    run["plan"] = plan(args, int(info.sms or H200_SMS), info.compute_capability or H200_CC)
    run["torch_flags"] = {"cudnn.benchmark": torch.backends.cudnn.benchmark,
                          "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
                          "matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32}
    say(f"device {info.name} ({info.sms} SMs, CC {info.compute_capability}), torch {torch.__version__}, "
        f"timm {timm.__version__}; plan {run['plan']['points']} points")

    if device == "cuda" and not args.skip_check:
        parts = run["plan"]["green_partitions"]
        check_sms = sorted({parts[0], 64} & set(parts)) if parts else []
        run["green_check"] = green_check(green, check_sms, int(info.sms))
        binds = [r.get("restriction_binds_graph") for r in run["green_check"][1:]]
        if not all(b is True for b in binds):
            msg = ("green-context check: the partition does not bind for CUDA-graph replays "
                   f"({binds}); green_ctx rows may not be restricted")
            run["warnings"].append(msg)
            say("WARNING: " + msg)
            green_note = "WARNING: green-context check found the partition not binding for graph replays"
            green_status = "failed"

    rows: list[dict[str, Any]] = []
    skipped: list[str] = []
    csv = out / f"{PREFIX}_host_latency.csv"
    png = out / f"{PREFIX}_latency_vs_sms.png"
    js = out / f"{PREFIX}_run.json"
    ops_csv = out / f"{PREFIX}_ops.csv"

    def flush(final: bool = False) -> None:
        """Rewrite the outputs (atomically) with everything measured so far."""
        run["skipped"] = skipped
        run["elapsed_s"] = round(time.time() - t_start, 1)
        run["complete"] = final
        if rows:
            try:
                df = write_rows(rows, csv)
                run["rows"] = {str(k): int(v) for k, v in df["status"].value_counts().sort_index().items()}
                if final:
                    plot(df, png, f"{host}: training-step latency vs SMs (timm, {PRECISION}, batch "
                                  f"{args.batch}, green contexts{'; CPU SMOKE, synthetic' if synthetic else ''})",
                         total=int(info.sms or 0))
            except Exception as exc:  # never lose measurements to a table or plotting bug
                run["output_error"] = f"{type(exc).__name__}: {exc}"
                write_json(rows, out / f"{PREFIX}_rows_raw.json")
        write_json(run, js)

    def on_term(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        run_sweep(args, host, info, green, clock_reader, sweep_deadline, device, synthetic, rows, skipped,
                  flush=flush, extra_note=extra, green_note=green_note, green_check=green_status)
        if args.profile_ops:
            run["ops"] = {}
            try:
                run_ops(args, host, device, synthetic, deadline, ops_csv, run["ops"])
            except Exception as exc:  # the sweep's outputs matter more: record and go on
                run["ops"]["error"] = f"{type(exc).__name__}: {exc}"
                say(f"ops: failed: {run['ops']['error']}")
    finally:
        signal.signal(signal.SIGTERM, previous)
        if not rows:
            run["warnings"].append("no rows measured")
        flush(final=True)
        files = [f for f in (csv, png, js, out / f"{PREFIX}_rows_raw.json", ops_csv) if f.exists()]
        if args.reference_dir and Path(args.reference_dir).resolve() != out.resolve():
            ref = Path(args.reference_dir)
            ref.mkdir(parents=True, exist_ok=True)
            for f in files:
                if f == csv:  # only rows whose restriction check passed (or needed none) land there
                    write_trusted_reference(csv, ref / f.name, run)
                else:
                    shutil.copy2(f, ref / f.name)
        say(f"done in {run['elapsed_s']} s: {run.get('rows')} rows, {len(skipped)} skipped; outputs in {out}")
    if rows:
        print(rows_to_frame(rows)[["model", "img_px", "backend", "effective_sms", "latency_ms", "status"]]
              .to_string(index=False), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
