"""`tune sim`: the simulated server. `tune`'s main() hands it the whole command line before argparse runs (it
mimics sglang.launch_server's own argparse exactly), so this parser exists only to list it in `tune --help`."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    sub.add_parser(
        "sim",
        help="run the simulated SGLang server (same flags as sglang.launch_server, plus --sim-*)",
        add_help=False,
    )
