"""The `tune` command line."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import sys

__all__ = ["main"]

# One module per group of subcommands; each exposes register(subparsers).
_COMMAND_MODULES = ("_study", "_run", "_sim", "_bench", "_remote", "_report", "_init")


class _HelpWithDefaults(argparse.HelpFormatter):
    """``(default: X)`` after every option whose default means something and whose help does not say it already
    (argparse's own ArgumentDefaultsHelpFormatter would add ``(default: None)`` to every optional flag too)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            not action.option_strings
            or default in (None, False, argparse.SUPPRESS)
            or "default" in text
            or isinstance(action, argparse._HelpAction | argparse._VersionAction)
        ):
            return action.help
        return f"{text} (default: %(default)s)".lstrip()


class _RawWithDefaults(_HelpWithDefaults, argparse.RawDescriptionHelpFormatter):
    """The same, for commands whose description is laid out by hand."""


def build_parser() -> argparse.ArgumentParser:
    from tuner import __version__

    parser = argparse.ArgumentParser(
        prog="tune",
        description="Find the fastest correct launch configuration of a speculative-decoding LLM server.",
    )
    parser.add_argument("--version", action="version", version=f"tune {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in _COMMAND_MODULES:
        importlib.import_module(f"tuner.cli.{name}").register(sub)
    for command in sub.choices.values():
        if command.formatter_class is argparse.HelpFormatter:
            command.formatter_class = _HelpWithDefaults
        elif command.formatter_class is argparse.RawDescriptionHelpFormatter:
            command.formatter_class = _RawWithDefaults
    return parser


def _quiet_optuna() -> None:
    """Our own progress lines say what matters; Optuna's per-trial INFO logs and experimental-API
    warnings (``group=True``, metric names) would drown them."""
    import warnings

    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)


def main(argv: list[str] | None = None) -> int:
    from tuner.cli._exits import ending

    args_list = sys.argv[1:] if argv is None else argv
    if args_list[:1] == ["sim"]:
        # The simulator owns its whole command line (it mimics sglang.launch_server's argparse exactly).
        from tuner.sim import main as sim_main

        return sim_main(args_list[1:], prog="tune sim")
    args = build_parser().parse_args(args_list)
    args.argv = args_list  # a detached run starts itself again with them
    _quiet_optuna()
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:
        # `tune status --json | head`: the reader left; nothing more to say, and nothing to say it on.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (Exception, KeyboardInterrupt) as exc:
        end = ending(exc)
        if end is None:
            raise
        with contextlib.suppress(OSError):  # a terminal that hung up hears nothing; the exit status still tells
            print(end.line, file=sys.stderr)
        return end.status
