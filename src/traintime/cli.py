"""The ``traintime`` command line: ``traintime predict ...``, ``traintime gpus``.

Subcommands register themselves in :data:`COMMANDS` with :func:`command` (a name, a help line, a
function adding arguments to an ``argparse`` parser and a function running the parsed arguments), so
more can be added without touching :func:`main`. Errors go through :mod:`traintime.core.boundary`:
one line ``error: ...`` naming the culprit and a documented exit status (2 bad argument or unknown
name, 3 config, 4 data, 5 file system, 6 run failed, 70 internal error); ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from traintime.core.errors import ArgumentError, TraintimeError


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


COMMANDS: dict[str, Command] = {}


def command(name: str, help: str) -> Callable[[Callable[[argparse.Namespace], int]], Callable[..., int]]:
    """Decorator registering ``run(args) -> exit status`` as subcommand ``name``; the function's
    ``add_arguments`` attribute (set by :func:`arguments`) fills its parser."""

    def deco(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        COMMANDS[name] = Command(name, help, getattr(run, "add_arguments", lambda p: None), run)
        return run

    return deco


def arguments(add: Callable[[argparse.ArgumentParser], None]) -> Callable[[Callable[..., int]], Callable[..., int]]:
    def deco(run: Callable[..., int]) -> Callable[..., int]:
        run.add_arguments = add  # type: ignore[attr-defined]
        return run

    return deco


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors and exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise _UsageError(f"{self.prog}: {message}")


class _UsageError(Exception):
    pass


# ----------------------------------------------------------------------------------------------
# predict
# ----------------------------------------------------------------------------------------------


def _predict_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="model name (the CHRONOS nine or any timm / torchvision model)")
    p.add_argument("--dataset", required=True, help="cifar10, cifar100, stl10, tinyimagenet, digits, synthetic")
    p.add_argument("--optimizer", default="sgd", help="sgd, adam, adamw, rmsprop, adafactor (default sgd)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--learning-rate", type=float, default=0.01)
    p.add_argument("--precision", type=int, default=32, help="16 (mixed precision) or 32 bits")
    p.add_argument("--gpu", default="T4", help="GPU of the headline estimate (see `traintime gpus`)")
    p.add_argument("--models-dir", default="results/models", help="saved models of the workflow")
    p.add_argument("--data-dir", default="results/data", help="canonical tables and out-of-fold predictions")
    p.add_argument("--data-root", default="data", help="folder of the torchvision datasets (probe data)")
    p.add_argument("--probe-dataset", default=None,
                   help="probe on stand-in data (synthetic | digits) when the dataset is not available locally")
    p.add_argument("--probe-batch-size", type=int, default=64)
    p.add_argument("--device", default="auto", help="where the probe runs: auto, cpu, cuda[:i]")
    p.add_argument("--coverage", type=float, default=0.8, help="coverage of the intervals (default 0.8)")
    p.add_argument("--curve", default=None, metavar="L1,L2,...",
                   help="validation losses of the first epochs of this run (comma-separated): the epochs estimate "
                        "becomes the extrapolated early-stopping epoch")
    p.add_argument("--model-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="model builder argument, e.g. embed_dim=256 for the CHRONOS MLPs (repeatable)")
    p.add_argument("--top", type=int, default=10, help="GPUs shown in the ranking (0: all)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.add_argument("--output", default=None, help="also write the full ranking to this CSV file")


def _model_kwargs(pairs: Sequence[str]) -> dict[str, Any]:
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
            number = 0.0
        if number != number or number in (float("inf"), float("-inf")):  # nan, inf, Infinity ...
            raise ArgumentError(f"--model-arg {key}={value}: not a finite number")
    return out


def _curve(text: str | None) -> list[float] | None:
    if text is None:
        return None
    try:
        return [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise TraintimeError(f"--curve {text!r} is not a comma-separated list of numbers") from None


def _fmt_interval(lo: float, hi: float, fmt: str) -> str:
    if lo != lo or hi != hi:  # NaN: no out-of-fold predictions found
        return "n/a"
    return f"[{format(lo, fmt)}, {format(hi, fmt)}]"


def _fmt_mape(v: float, protocol: str) -> str:
    return f"(out-of-fold MAPE {v:.1f}%, {protocol})" if v == v else f"(no out-of-fold predictions for {protocol})"


@command("predict", "predict epoch time, epochs to converge, hours and cost of a training run")
@arguments(_predict_args)
def _predict(args: argparse.Namespace) -> int:
    from traintime.core.io import write_csv
    from traintime.predict import TrainingTimePredictor
    from traintime.predict_checks import check_int, check_output_file

    check_int("--top", args.top, 0, 1 << 31)  # checked before any work
    if args.output:
        check_output_file("--output", args.output)
    p = TrainingTimePredictor(model=args.model, dataset=args.dataset, optimizer=args.optimizer,
                              batch_size=args.batch_size, learning_rate=args.learning_rate,
                              precision=args.precision, gpu=args.gpu, models_dir=args.models_dir,
                              data_dir=args.data_dir, probe_batch_size=args.probe_batch_size,
                              probe_dataset=args.probe_dataset, device=args.device, data_root=args.data_root,
                              coverage=args.coverage, model_kwargs=_model_kwargs(args.model_arg),
                              curve=_curve(args.curve))
    table = p.ranking()
    est = p.estimate()
    probe = p.probe_summary()
    if args.output:
        write_csv(table, args.output)
    if args.json:
        out = {"configuration": p.describe(), "gpu": est.gpu, "estimate": est.as_dict(), "probe": probe,
               "ranking": table.to_dict(orient="records")}
        print(json.dumps(out, indent=2, default=lambda v: None if v != v else str(v)))
        return 0
    pct = f"{int(round(est.coverage * 100))}%"
    print(f"{p.describe()} on {est.gpu}")
    print(f"probe: {probe['probe_batch_size']} samples on {probe['device']} in {probe['probe_time_s']:.2f} s "
          f"(initial loss {probe['initial_loss']:.3f}, gradient norm {probe['grad_norm']:.3g})")
    for note in est.notes:
        print(f"note: {note}")
    print(f"step time:          {est.step_ms:10.2f} ms   {pct} interval {_fmt_interval(est.step_ms_low, est.step_ms_high, '.2f')}"
          f"  {_fmt_mape(est.step_cv_mape_pct, est.step_protocol)}")
    print(f"epoch time:         {est.epoch_s:10.2f} s")
    print(f"epochs to converge: {est.epochs:10.1f}      {pct} interval {_fmt_interval(est.epochs_low, est.epochs_high, '.1f')}"
          f"  {_fmt_mape(est.epochs_cv_mape_pct, est.epochs_protocol)}")
    print(f"total:              {est.hours:10.2f} h    {pct} interval {_fmt_interval(est.hours_low, est.hours_high, '.2f')}")
    if est.price_per_hour_usd == est.price_per_hour_usd:
        print(f"cost:              ${est.cost_usd:10.2f}      {pct} interval "
              f"{_fmt_interval(est.cost_usd_low, est.cost_usd_high, '.2f')}  at ${est.price_per_hour_usd:.2f}/h")
    else:
        print("cost:               unknown (no price for this GPU in the spec table)")
    shown = table if args.top == 0 else table.head(args.top)
    print(f"\nGPUs by cost ({len(shown)} of {len(table)}; rank by time in the last column):")
    print(f"{'gpu':22s} {'$/h':>6s} {'step ms':>9s} {'hours':>8s} {'cost $':>9s} {'by time':>7s}")
    for _, r in shown.iterrows():
        price = "" if r["price_per_hour_usd"] != r["price_per_hour_usd"] else f"{r['price_per_hour_usd']:.2f}"
        cost = "" if r["cost_usd"] != r["cost_usd"] else f"{r['cost_usd']:.2f}"
        print(f"{r['gpu']:22s} {price:>6s} {r['step_ms']:9.2f} {r['hours']:8.2f} {cost:>9s} {int(r['rank_by_time']):7d}")
    return 0


# ----------------------------------------------------------------------------------------------
# gpus
# ----------------------------------------------------------------------------------------------


def _gpus_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--specs", default=None, help="GPU spec CSV (default: the packaged table)")
    p.add_argument("--csv", action="store_true", help="print CSV instead of a text table")


@command("gpus", "list the GPUs of the spec table (names, peak FLOP/s, bandwidth, price)")
@arguments(_gpus_args)
def _gpus(args: argparse.Namespace) -> int:
    from traintime.core.specs import load_specs

    specs = load_specs(args.specs)
    cols = ["gpu", "architecture", "sms", "memory_gb", "memory_bandwidth_gbps", "fp32_gflops", "fp16_gflops",
            "price_per_hour_usd", "price_provider"]
    df = specs[cols].sort_values("gpu")
    if args.csv:
        sys.stdout.write(df.to_csv(index=False, lineterminator="\n"))
        return 0
    print(f"{'gpu':22s} {'arch':14s} {'SMs':>4s} {'mem GB':>7s} {'GB/s':>6s} {'FP32 TF':>8s} {'$/h':>6s}")
    for _, r in df.iterrows():
        price = "" if pd_isna(r["price_per_hour_usd"]) else f"{r['price_per_hour_usd']:.2f}"
        print(f"{r['gpu']:22s} {str(r['architecture']):14s} {int(r['sms']):4d} {r['memory_gb']:7.0f} "
              f"{r['memory_bandwidth_gbps']:6.0f} {r['fp32_gflops'] / 1000:8.1f} {price:>6s}")
    return 0


def pd_isna(v: Any) -> bool:
    return v is None or v != v


# ----------------------------------------------------------------------------------------------
# schemas / validate / check-config: the data contracts, for users extending the meta-datasets
# ----------------------------------------------------------------------------------------------


@command("schemas", "print the documentation of every canonical table (docs/data.md)")
def _schemas(args: argparse.Namespace) -> int:
    from traintime.core.docs import render_data_docs

    sys.stdout.write(render_data_docs())
    return 0


def _validate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("table", help="table name (see `traintime schemas`), e.g. iteration, convergence, gpu_specs")
    p.add_argument("files", nargs="+", help="CSV files to check")


@command("validate", "check CSV files against a canonical table's schema (one line per file)")
@arguments(_validate_args)
def _validate(args: argparse.Namespace) -> int:
    from traintime.core.docs import schema_by_name
    from traintime.core.io import read_csv
    from traintime.core.specs import canonical_gpu, load_specs

    schema = schema_by_name(args.table)
    specs = load_specs()
    for f in args.files:
        df = schema.validate(read_csv(f), source=f)
        for col in ("gpu", "host_gpu"):  # names must resolve in the spec table ('cpu': local CPU rows)
            if col in df.columns and schema.name != "gpu_specs":
                for name in sorted(set(df[col].dropna()) - {"cpu"}):
                    try:
                        canonical_gpu(str(name), specs)
                    except TraintimeError as exc:
                        raise TraintimeError(f"{f}: column '{col}': {exc}") from None
        print(f"ok: {f}: {len(df)} rows match table '{schema.name}'")
    return 0


def _check_config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("configfiles", nargs="+", help="YAML files merged over the embedded config.yaml, in order")
    p.add_argument("--repo", default=".", help="repository root holding config.yaml and schemas/")


@command("check-config", "validate config files as Snakemake would (embedded default + overrides)")
@arguments(_check_config_args)
def _check_config(args: argparse.Namespace) -> int:
    from pathlib import Path

    from traintime.core.config import merge_config_files
    from traintime.core.config_checks import check_config

    root = Path(args.repo)
    config = merge_config_files([root / "config.yaml", *map(Path, args.configfiles)])
    check_config(config, root / "schemas" / "config.schema.yaml", names=True)
    print(f"ok: {', '.join(args.configfiles)} valid over {root / 'config.yaml'}")
    return 0


# ----------------------------------------------------------------------------------------------
# entry point
# ----------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="traintime", description="Predict training time and cost of deep-learning runs.",
                     epilog="Exit status: 0 ok, 2 bad argument, 3 bad config, 4 bad data, 5 file system, "
                            "6 run failed, 70 internal error, 130 interrupted (see traintime.core.boundary).")
    parser.add_argument("--debug", action="store_true",
                        help="show the traceback of an error (also accepted after the subcommand)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for cmd in COMMANDS.values():
        cmd.add_arguments(sub.add_parser(cmd.name, help=cmd.help, description=cmd.help))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns (and, as a console script, exits with) the status.

    Every failure goes through :mod:`traintime.core.boundary`: one ``error:`` line naming the
    culprit and a documented exit status; ``--debug`` (anywhere on the line) adds the traceback."""
    from traintime.core.boundary import guarded
    from traintime.core.errors import ArgumentError

    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    argv = [a for a in argv if a != "--debug"]
    parser = build_parser()

    def body() -> int:
        try:
            args = parser.parse_args(argv)
        except _UsageError as exc:
            raise ArgumentError(str(exc)) from None
        if not args.command:
            parser.print_help()
            return 2
        return COMMANDS[args.command].run(args)

    return guarded(body, debug=debug)


if __name__ == "__main__":
    sys.exit(main())
