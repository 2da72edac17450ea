"""The ``ksched`` command: the top-level parser, with one subcommand per module of this package
(simulate, bench, serve, run, dispatch, webhook, replay, compare), logging set-up and :func:`main`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from types import ModuleType

import ksched
from ksched.cli import bench, compare, dispatch, replay, run, serve, simulate, snapshot, webhook
from ksched.cli.common import EXIT_INVALID_INPUT

__all__ = ["EXIT_INVALID_INPUT", "build_parser", "main"]

# Each module registers its subcommand (add_parser) and runs it (run); this order is the help's.
COMMANDS: dict[str, ModuleType] = {"simulate": simulate, "bench": bench, "serve": serve, "run": run,
                                   "dispatch": dispatch, "webhook": webhook, "replay": replay, "compare": compare}
COMMANDS["snapshot"] = snapshot


class _VersionAction(argparse.Action):
    """``--version``: the version is looked up only when asked for (see ``ksched.__version__``)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 default: str = argparse.SUPPRESS, help: str | None = "show program's version number and exit") -> None:
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        sys.stdout.write(f"ksched {ksched.__version__}\n")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ksched",
        description="A Kubernetes scheduler and scheduling simulator, faithful to upstream kube-scheduler.")
    parser.add_argument("--version", action=_VersionAction)
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-v, -vv)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS.values():
        command.add_parser(sub)
    return parser


def _setup_logging(verbosity: int) -> None:
    import logging

    level = logging.WARNING if verbosity == 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    if verbosity == 0:
        # urllib3 warns about each retry of each request while an API server restarts; the
        # reflectors already say which watch failed.
        logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)


def _tune_gc() -> None:
    """Fewer cyclic-GC passes: the scheduler allocates many short-lived objects per pod and
    almost no reference cycles; collecting every 700 allocations costs ~10-15% of throughput
    (measured with SchedulingBasic). Cycles are still collected, just less often."""
    import gc

    gc.set_threshold(20_000, 20, 20)


def _single_threaded_blas() -> None:
    """One OpenBLAS thread (unless the environment says otherwise), set before NumPy is imported.

    NumPy's OpenBLAS starts a thread per core at import, and those threads spin waiting for
    work: about 0.12 CPU seconds of a second core at every start (0.19 against 0.07 CPU s for
    ``import numpy`` on the project's 2-core machine), taken from the API server or the other
    processes there. ksched's array work is elementwise (no BLAS call in the scheduling cycle),
    so the threads never help."""
    import os

    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def main(argv: Sequence[str] | None = None) -> int:
    _single_threaded_blas()
    parser = build_parser()
    args = parser.parse_args(argv)
    _setup_logging(args.verbose)
    _tune_gc()
    if args.command is None:
        parser.print_help()
        return 0
    try:
        return COMMANDS[args.command].run(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # Output piped into a command that stopped reading (e.g. head): not an error of ours.
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
