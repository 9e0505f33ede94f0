"""Command line of the simulated server: the emulated SGLang version's own flags, plus ``--sim-*`` knobs.

Whether a command line parses is the version's flag table's verdict (:meth:`tuner.dialects.FlagTable.parse_errors`,
read from SGLang's own code; ``--sim-*`` options are not SGLang's and are skipped there), so the simulator accepts
exactly that version's flags: an unknown flag fails like the real server (``sglang serve: error: unrecognized
arguments: ...``, exit status 2), and so does a prefix of several flags (``--cuda-graph-max-bs`` on 0.5.23:
``error: ambiguous option``) or a bad value. The values are then read by a parser built from the same table;
flags the model reads get SGLang's types and the simulator's defaults (a Kimi K2.6 deployment: ``--tp-size 8``;
its weights and drafter are built in, so ``--model-path`` and ``--speculative-draft-model-path``, which a real
server requires, have defaults), every other flag of the table parses and is ignored. After parsing,
:func:`tuner.sim._resolve.resolve_server_args` applies SGLang's own checks and defaults (``ServerArgsError``
carries the real message); a deprecated spelling is accepted with SGLang's warning.

DDTree's top-k cap is *not* a flag: like the DDTree branch, it is read from the environment variable
``SGLANG_DDTREE_MAX_TOPK`` (default 6), so a unit's ``Environment=`` lines are part of the configuration.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Mapping, Sequence
from typing import Any

from tuner.dialects import FlagOption
from tuner.sim._resolve import ServerArgsError, resolve_server_args
from tuner.sim._versions import DEFAULT_VERSION, VERSIONS, EmulatedVersion

__all__ = [
    "DDTREE_TOPK_ENV",
    "DEFAULT_DDTREE_TOPK",
    "PROG",
    "ServerArgsError",
    "build_parser",
    "parse_server_args",
    "select_version",
]

PROG = "sglang serve"
VERSION_FLAG = "--sim-sglang-version"
DDTREE_TOPK_ENV = "SGLANG_DDTREE_MAX_TOPK"
DEFAULT_DDTREE_TOPK = 6

#: The flags the model reads: SGLang's destination name -> argparse keywords (type and the simulator's default).
MODELLED: dict[str, dict[str, Any]] = {
    "model_path": {"type": str, "default": "moonshotai/Kimi-K2.6"},
    "served_model_name": {"type": str, "default": None},
    "host": {"type": str, "default": "127.0.0.1"},
    "port": {"type": int, "default": 30000},
    "tp_size": {"type": int, "default": 8},
    "pp_size": {"type": int, "default": 1},
    "mem_fraction_static": {"type": float, "default": 0.85},
    "context_length": {"type": int, "default": 32768},
    "max_running_requests": {"type": int, "default": None},
    "page_size": {"type": int, "default": None},
    "num_continuous_decode_steps": {"type": int, "default": 1},
    "decode_log_interval": {"type": int, "default": 40},
    "cuda_graph_max_bs_decode": {"type": int, "default": None},
    "speculative_algorithm": {"type": str, "default": None},
    "speculative_draft_model_path": {"type": str, "default": "moonshotai/Kimi-K2.6-DFlash"},
    "speculative_num_steps": {"type": int, "default": None},
    "speculative_eagle_topk": {"type": int, "default": None},
    "speculative_num_draft_tokens": {"type": int, "default": None},
    "speculative_dflash_block_size": {"type": int, "default": None},
    "speculative_draft_window_size": {"type": int, "default": None},
    "speculative_ddtree_budget": {"type": int, "default": None},
}


_MODEL_DEFAULT = ("--model-path", MODELLED["model_path"]["default"])


def select_version(argv: Sequence[str]) -> EmulatedVersion:
    """The version ``--sim-sglang-version`` asks for (read before the version's own parser exists)."""
    pre = argparse.ArgumentParser(prog=PROG, add_help=False, allow_abbrev=False)
    pre.add_argument(VERSION_FLAG, choices=sorted(VERSIONS), default=DEFAULT_VERSION.name)
    known, _ = pre.parse_known_args(list(argv))
    return VERSIONS[known.sim_sglang_version]


@functools.cache
def build_parser(version: EmulatedVersion = DEFAULT_VERSION, prog: str = PROG) -> argparse.ArgumentParser:
    """The parser of ``version``'s command line, shared by the server and :meth:`ServerConfig.from_argv`.

    ``prog`` names the program in usage and error lines (``tune sim`` when started through ``tune``)."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description=f"Simulated {version.title} server with DFlash/DDTree speculative decoding (no GPU needed).",
    )
    for option in version.table.options:
        _add_flag(parser, option)
    parser.add_argument("--version", action="version", version=version.version_line, help="print the SGLang version")
    _sim_flags(parser.add_argument_group("simulator-only options (not accepted by a real server)"))
    return parser


def _add_flag(parser: argparse.ArgumentParser, option: FlagOption) -> None:
    """One option of the table; values are read as text unless the model reads them (the table judged them)."""
    help_text = argparse.SUPPRESS if option.hidden else (option.help or "").replace("%", "%%")
    kwargs: dict[str, Any] = {"dest": option.dest, "help": help_text}
    if option.nargs == 0:
        parser.add_argument(*option.flags, action="store_true", **kwargs)
        return
    modelled = MODELLED.get(option.dest, {"default": None})
    parser.add_argument(*option.flags, nargs=option.nargs, **kwargs, **modelled)


def _sim_flags(sim: argparse._ArgumentGroup) -> None:
    """Knobs of the simulation itself: version, time scale, noise, and fault injection."""
    sim.add_argument(
        VERSION_FLAG,
        choices=sorted(VERSIONS),
        default=DEFAULT_VERSION.name,
        help=f"which SGLang to emulate (default {DEFAULT_VERSION.name}: {DEFAULT_VERSION.title})",
    )
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
        "--sim-drafter-block-size",
        type=int,
        default=16,
        metavar="N",
        help="the block_size in the drafter checkpoint's config.json (what DFLASH/DDTREE default to; 0: none there)",
    )
    sim.add_argument(
        "--sim-thinking",
        choices=("reasoning_content", "inline"),
        default="reasoning_content",
        help="stream reasoning as reasoning_content deltas or inline <think>...</think> in content",
    )
    _fault_flags(sim)


def _fault_flags(sim: argparse._ArgumentGroup) -> None:
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
    sim.add_argument("--sim-hang", action="store_true", help="after startup accept connections but never answer")
    sim.add_argument(
        "--sim-malformed-chunks",
        type=float,
        default=0.0,
        metavar="FRACTION",
        help="this fraction of SSE chunks carry malformed JSON",
    )
    sim.add_argument(
        "--sim-request-log",
        default=None,
        metavar="FILE",
        help="append one JSON line per finished generation request: its arrival, first token and finish "
        "(time.monotonic seconds, the clock a client on this machine reads) and its output tokens",
    )
    _stall_flags(sim)
    sim.add_argument(
        "--sim-crash-after",
        type=float,
        default=None,
        metavar="SECONDS",
        help="exit with a CUDA error traceback SECONDS after becoming ready",
    )
    sim.add_argument(
        "--sim-crash-above-batch-tokens",
        type=int,
        default=None,
        metavar="TOKENS",
        help="exit with a CUDA error traceback when a decode batch holds more than TOKENS of context",
    )


def _stall_flags(sim: argparse._ArgumentGroup) -> None:
    """An engine stall at the Nth arrival (and, with ``--sim-stall-every``, again every Mth after it)."""
    sim.add_argument(
        "--sim-stall-after",
        type=int,
        default=None,
        metavar="N",
        help="when the Nth generation request arrives, the engine stops stepping for --sim-stall-s",
    )
    sim.add_argument(
        "--sim-stall-every",
        type=int,
        default=None,
        metavar="M",
        help="stall again at every Mth arrival after the Nth of --sim-stall-after (a benchmark's passes of M "
        "requests then each stall at the same request, a pass run again included)",
    )
    sim.add_argument(
        "--sim-stall-s",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="how long (modelled seconds) the stall of --sim-stall-after lasts",
    )


def parse_server_args(argv: Sequence[str] | None, env: Mapping[str, str], *, prog: str = PROG) -> argparse.Namespace:
    """Parse ``argv`` as the selected SGLang version does, then resolve it as its ``ServerArgs`` would.

    Exits with status 2 on an argparse error (unknown or ambiguous flag, bad value), like the real server.
    Raises :class:`ServerArgsError` for what SGLang rejects after parsing. The namespace also carries
    ``sglang_version`` (an :class:`EmulatedVersion`), ``ddtree_max_topk`` (from ``SGLANG_DDTREE_MAX_TOPK``) and
    ``resolution_warnings`` (the lines SGLang logs while resolving).
    """
    argv = [] if argv is None else list(argv)
    version = select_version(argv)
    parser = build_parser(version, prog)
    if "--version" not in argv and "-h" not in argv and "--help" not in argv:
        # SGLang requires --model-path; the simulator has a default model, so the table parses it with one.
        errors = version.table.parse_errors([*_MODEL_DEFAULT, *argv], ignore_prefix="--sim-")
        if errors and not errors[0].startswith("ValueError: "):  # a ValueError is SGLang's, after parsing
            parser.error(errors[0])
    args = parser.parse_args(argv)
    if args.sim_time_scale <= 0:
        parser.error("--sim-time-scale must be > 0")
    if not 0.0 <= args.sim_malformed_chunks <= 1.0:
        parser.error("--sim-malformed-chunks must be within [0, 1]")
    if args.sim_stall_every is not None and (args.sim_stall_every < 1 or args.sim_stall_after is None):
        parser.error("--sim-stall-every needs --sim-stall-after and must be >= 1")
    for dest, spec in MODELLED.items():  # flags this version does not have keep the simulator's default
        if not hasattr(args, dest):
            setattr(args, dest, spec["default"])
    args.sglang_version = version
    resolve_server_args(args, env, topk_env=DDTREE_TOPK_ENV, default_topk=DEFAULT_DDTREE_TOPK)
    args.resolution_warnings[:0] = _deprecations(version, argv)
    return args


def _deprecations(version: EmulatedVersion, argv: Sequence[str]) -> list[str]:
    """What SGLang's ``DeprecatedAliasStoreAction`` prints for each deprecated spelling used."""
    out = []
    for token in argv:
        flag = token.split("=", 1)[0]
        option, _ = version.table.resolve(flag) if flag.startswith("--") else (None, [])
        if option is not None and option.replaced_by and flag != option.replaced_by:
            out.append(
                f"'{flag}' is deprecated and will be removed in a future release. Use '{option.replaced_by}' instead."
            )
    return out
