from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sim",
        help="run the simulated SGLang server (same flags as sglang.launch_server, plus --sim-*)",
        add_help=False,
    )
    p.add_argument("sim_args", nargs=argparse.REMAINDER)
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from tuner.sim import main

    return main(list(args.sim_args))
