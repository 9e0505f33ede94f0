"""The knobs ``tune init`` offers for an SGLang DFLASH / DDTREE command, as people tune them on real servers.

Block size (up to the drafter's trained size: SGLang's default when the flag is unset, and the drafter
accepts less beyond it), draft window, ``--mem-fraction-static``, ``--max-running-requests`` (DFLASH sets 48
when it is unset), ``--cuda-graph-max-bs-decode`` (no larger than the running requests: a captured batch size
no request mix reaches only costs memory), the draft KV-cache dtype and the draft attention backend; DDTree's
budget and top-k cap on the DDTree branch. A knob whose flag the version does not have is left out.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tuner.dialects._flagtable import server_argv
from tuner.dialects._sglang_versions import SGLangVersion, renamed_flags
from tuner.spec import flag_value

__all__ = ["DDTREE_ENV", "DFLASH_CONSTRAINTS", "algorithm", "dflash_knobs", "drafter_block_size", "fit_knobs"]

_ALGORITHM = "--speculative-algorithm"
_DFLASH_FAMILY = ("DFLASH", "DDTREE")
#: The DDTree branch's environment knobs (PR #29907): read by its DDTREE worker alone.
DDTREE_ENV = ("SGLANG_DDTREE_MAX_TOPK", "SGLANG_DDTREE_DEPTH_BONUS", "SGLANG_DDTREE_RANK_PROBE")

DFLASH_CONSTRAINTS = (
    ("window", ">=", "block_size"),  # SGLang refuses a draft window below the block size
    ("cuda_graph_max_bs_decode", "<=", "max_running_requests"),
)


def dflash_knobs() -> tuple[dict[str, Any], ...]:
    """Every DFLASH-family knob as a ``[space.NAME]`` table (``requires``: offered for a command with it)."""
    any_algorithm = (_ALGORITHM, None)
    return (
        {"name": "block_size", "type": "int", "low": 4, "high": 16, "step": 4, "default": 16,
         "flag": "--speculative-dflash-block-size", "aliases": ["--speculative-num-draft-tokens"],
         "requires": any_algorithm},
        {"name": "window", "type": "categorical", "choices": ["none", 1024, 2048, 4096], "absent": "none",
         "flag": "--speculative-draft-window-size", "requires": any_algorithm},
        {"name": "mem_fraction_static", "type": "float", "low": 0.7, "high": 0.92, "step": 0.01,
         "flag": "--mem-fraction-static", "requires": any_algorithm},
        {"name": "max_running_requests", "type": "int", "low": 8, "high": 128, "step": 8, "default": 48,
         "flag": "--max-running-requests", "requires": any_algorithm},
        {"name": "cuda_graph_max_bs_decode", "type": "categorical", "choices": ["auto", 8, 16, 32, 48, 64, 96, 128],
         "absent": "auto", "flag": "--cuda-graph-max-bs-decode", "requires": any_algorithm},
        {"name": "draft_kv_cache_dtype", "type": "categorical", "choices": ["default", "fp8_e4m3", "bf16"],
         "absent": "default", "flag": "--speculative-draft-kv-cache-dtype", "requires": any_algorithm},
        {"name": "draft_attention_backend", "type": "categorical",
         "choices": ["default", "flashinfer", "fa3", "triton"], "absent": "default",
         "flag": "--speculative-draft-attention-backend", "requires": any_algorithm},
    )  # fmt: skip


_DFLASH_NAMES = frozenset(k["name"] for k in dflash_knobs())


def algorithm(argv: Sequence[str]) -> str | None:
    """The command's ``--speculative-algorithm``, upper-cased (None: no speculation)."""
    args = server_argv(argv)
    for i, arg in enumerate(args):
        name, eq, inline = arg.partition("=")
        if name == _ALGORITHM:
            return (inline if eq else (args[i + 1] if i + 1 < len(args) else "")).upper()
    return None


def _has(version: SGLangVersion | None, entry: dict[str, Any]) -> bool:
    """Whether the version's table knows the knob's flag / environment variable (no table: assume so)."""
    table = version.flags if version else None
    if table is None:
        return True
    if entry.get("flag") and table.resolve(entry["flag"])[0] is None:
        return False
    env = entry.get("env")
    return not (env and env.startswith("SGLANG_DDTREE_") and env not in table.environment)


def _block_size(entry: dict[str, Any], trained: int | None) -> dict[str, Any]:
    if trained is None:
        return entry
    entry = {**entry, "high": trained, "default": trained}
    if (trained - entry["low"]) % entry.get("step", 1):
        entry.pop("step")
    return entry


def fit_knobs(
    tunable: Sequence[dict[str, Any]],
    argv: Sequence[str],
    version: SGLangVersion | None,
    *,
    trained_block_size: int | None = None,
) -> tuple[dict[str, Any], ...]:
    """The knobs for ``argv`` on ``version`` (see the module docstring)."""
    chosen = algorithm(argv)
    old = renamed_flags()
    present = {a.partition("=")[0] for a in server_argv(argv)}
    out = []
    for entry in tunable:
        if entry["name"] in _DFLASH_NAMES and chosen not in _DFLASH_FAMILY:
            continue
        if not _has(version, entry):
            continue
        e = dict(entry)
        spellings = [o for o, new in old.items() if new == e.get("flag") and o in present]
        if spellings:  # the command's deprecated spelling: read its value, write the new one
            e["aliases"] = [*e.get("aliases", []), *spellings]
        if e["name"] == "block_size":
            e = _block_size(e, trained_block_size)
        if e["name"] == "mem_fraction_static" and not present & {e["flag"]}:
            # Unset, SGLang sizes it itself; "auto" keeps that as the baseline.
            e = {k: v for k, v in e.items() if k not in ("low", "high", "step")}
            e.update(type="categorical", choices=["auto", 0.78, 0.82, 0.86, 0.9], absent="auto")
        out.append(e)
    return tuple(out)


def drafter_block_size(command: Sequence[str]) -> int | None:
    """The block size the DFlash drafter was trained with, from its config.json when the path is local."""
    path = flag_value(command, "--speculative-draft-model-path") or flag_value(command, "--speculative-draft-model")
    if not path:
        return None
    try:
        config = json.loads((Path(path) / "config.json").read_text())
    except (OSError, ValueError):
        return None
    # SGLang reads dflash_config.block_size, else a top-level block_size (speculative/dflash_utils.py).
    inner = config.get("dflash_config") if isinstance(config.get("dflash_config"), dict) else {}
    size = inner.get("block_size", config.get("block_size"))
    return size if isinstance(size, int) and size > 1 else None
