"""Command line of the simulated server: the subset of ``sglang.launch_server`` that ``tune`` touches.

The parser deliberately uses :meth:`argparse.ArgumentParser.parse_args` (not ``parse_known_args``) so that a
misspelt or invented flag (the seed script's ``--speculative-ddtree-topk-cap``) fails exactly like the real
server: ``error: unrecognized arguments: ...`` on stderr and exit status 2.

DDTree's top-k cap is *not* a flag: like the DDTree pull requests, it is read from the environment variable
``SGLANG_DDTREE_MAX_TOPK`` (default 6), so a unit's ``Environment=`` lines are part of the configuration.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence

__all__ = [
    "DDTREE_TOPK_ENV",
    "DEFAULT_DDTREE_TOPK",
    "SPECULATIVE_ALGORITHMS",
    "build_parser",
    "parse_server_args",
]

SPECULATIVE_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DDTREE")
DDTREE_TOPK_ENV = "SGLANG_DDTREE_MAX_TOPK"
DEFAULT_DDTREE_TOPK = 6
SGLANG_PROG = "python -m sglang.launch_server"
"""The program name the simulator's messages give by default: the real server's, so logs read the same."""


def build_parser(prog: str = SGLANG_PROG) -> argparse.ArgumentParser:
    """Return the argument parser shared by the server and :meth:`ServerConfig.from_argv`.

    ``prog`` names the program in usage and error lines (``tune sim`` when started through ``tune``)."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Simulated SGLang server with DFlash/DDTree speculative decoding (no GPU needed).",
    )
    _server_flags(parser)
    _sim_flags(parser.add_argument_group("simulator-only options (not accepted by a real server)"))
    return parser


def _server_flags(parser: argparse.ArgumentParser) -> None:
    """The subset of sglang.launch_server's flags that `tune` studies use, with SGLang's defaults."""
    add = parser.add_argument
    add("--model-path", type=str, default="moonshotai/Kimi-K2.6")
    add("--served-model-name", type=str, default=None)
    add("--host", type=str, default="127.0.0.1")
    add("--port", type=int, default=30000)
    add("--tp-size", "--tp", dest="tp_size", type=int, default=8)
    add("--mem-fraction-static", type=float, default=0.85)
    add("--context-length", type=int, default=32768)
    add("--max-running-requests", type=int, default=64)
    add("--page-size", type=int, default=1)
    add("--num-continuous-decode-steps", type=int, default=1)
    add("--attention-backend", type=str, default="triton")
    add("--trust-remote-code", action="store_true")
    add("--grammar-backend", type=str, default="xgrammar")
    add("--speculative-algorithm", type=str.upper, choices=SPECULATIVE_ALGORITHMS, default=None)
    add("--speculative-draft-model-path", type=str, default=None)
    # Upstream DFLASH spells the block size ``--speculative-num-draft-tokens``; the DDTree branch added the
    # clearer alias. Both land in the same destination.
    add(
        "--speculative-dflash-block-size",
        "--speculative-num-draft-tokens",
        dest="speculative_dflash_block_size",
        type=int,
        default=16,
    )
    add("--speculative-ddtree-budget", type=int, default=12)
    add("--speculative-dflash-draft-window-size", type=int, default=None)
    add("--enable-metrics", action="store_true")
    add("--api-key", type=str, default=None)  # accepted (and logged in server_args, as SGLang does), not enforced


def _sim_flags(sim: argparse._ArgumentGroup) -> None:
    """Knobs of the simulation itself: time scale, noise, and fault injection."""
    sim.add_argument(
        "--sim-time-scale",
        type=float,
        default=1.0,
        help="divide every modelled duration (load, pacing, fault delays) by this factor",
    )
    sim.add_argument(
        "--sim-load-time",
        type=float,
        default=2.0,
        help="modelled seconds of weight loading (a real 590 GB checkpoint takes ~360)",
    )
    sim.add_argument("--sim-noise", type=float, default=0.02, help="relative speed noise (0 = exact model)")
    sim.add_argument("--sim-seed", type=int, default=None)
    sim.add_argument(
        "--sim-thinking",
        choices=("reasoning_content", "inline"),
        default="reasoning_content",
        help="stream reasoning as reasoning_content deltas or inline <think>...</think> in content",
    )
    sim.add_argument(
        "--sim-old-answers-after-sigterm",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="after SIGTERM keep answering (/health, /v1/models 200) for SECONDS before exiting",
    )
    sim.add_argument(
        "--sim-health-before-ready",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="/health answers 200 for SECONDS while generation still fails with 503",
    )
    sim.add_argument(
        "--sim-hang", action="store_true", help="after startup accept connections but never answer"
    )
    sim.add_argument(
        "--sim-malformed-chunks",
        type=float,
        default=0.0,
        metavar="FRACTION",
        help="this fraction of SSE chunks carry malformed JSON",
    )
    sim.add_argument(
        "--sim-crash-after",
        type=float,
        default=None,
        metavar="SECONDS",
        help="exit with a CUDA error traceback SECONDS after becoming ready",
    )


def parse_server_args(
    argv: Sequence[str] | None, env: Mapping[str, str], *, prog: str = SGLANG_PROG
) -> tuple[argparse.Namespace, int]:
    """Parse ``argv`` (exits 2 on an unknown flag) and read the DDTree top-k cap from ``env``.

    Returns the namespace and the top-k cap. A malformed ``SGLANG_DDTREE_MAX_TOPK`` is reported through the
    parser too, because the real server fails at startup on it as well.
    """
    parser = build_parser(prog)
    args = parser.parse_args(None if argv is None else list(argv))
    raw = env.get(DDTREE_TOPK_ENV, "")
    if raw.strip() == "":
        topk = DEFAULT_DDTREE_TOPK
    else:
        try:
            topk = int(raw)
        except ValueError:
            parser.error(f"invalid int value for {DDTREE_TOPK_ENV}: {raw!r}")
        if topk < 1:
            parser.error(f"{DDTREE_TOPK_ENV} must be >= 1, got {topk}")
    if args.sim_time_scale <= 0:
        parser.error("--sim-time-scale must be > 0")
    if not 0.0 <= args.sim_malformed_chunks <= 1.0:
        parser.error("--sim-malformed-chunks must be within [0, 1]")
    return args, topk
