"""``tune init`` for SGLang: which version the command is checked against, and what that version says of it.

``--server-version`` names the version; without it, a command that runs DDTREE is checked against the DDTree
branch and any other against mainline 0.5.23 (the newest known), and the study file keeps ``server_version =
"auto"`` so ``tune check`` finds the host's. A command the version refuses (a renamed flag, an algorithm it
does not have) is not written into a study; what it only warns about is printed.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from tuner.dialects import (
    DDTREE_BRANCH,
    MAINLINE,
    BaseServerDialect,
    SGLangDialect,
    check_command,
    metrics_verdict,
    sglang_version,
)
from tuner.errors import ConfigError

__all__ = ["drafter_block_size", "versioned_dialect"]


def _value(argv: Sequence[str], flag: str) -> str | None:
    for i, arg in enumerate(argv):
        name, eq, inline = arg.partition("=")
        if name == flag:
            return inline if eq else (argv[i + 1] if i + 1 < len(argv) else None)
    return None


def versioned_dialect(
    dialect: BaseServerDialect, command: Sequence[str], env: Mapping[str, str], server_version: str
) -> BaseServerDialect:
    """The dialect with the version the command is checked against; raises ConfigError when it would not start."""
    if not isinstance(dialect, SGLangDialect):
        if server_version != "auto":
            raise ConfigError(file=None, key="tune init --server-version", expected="an SGLang launch command",
                              got=server_version)
        return dialect
    if server_version != "auto":
        try:
            version = sglang_version(server_version)
        except ValueError:
            expected = "an SGLang version such as 0.5.23 or ddtree-pr29907"
            raise ConfigError(file=None, key="tune init --server-version", expected=expected,
                              got=server_version) from None
        dialect = dialect.with_version(version, "tune init --server-version")
    else:
        runs_ddtree = (_value(command, "--speculative-algorithm") or "").upper() == "DDTREE"
        version = DDTREE_BRANCH if runs_ddtree else MAINLINE
        dialect = dialect.with_version(version, "assumed by tune init; --server-version names another")
    # The same table and the same exemption as `tune check` (tuner.target's table_findings): the simulator's own
    # `--sim-...` options are not SGLang's.
    verdicts = check_command(version, command, env=env, ignore_prefix=dialect.own_flag_prefix(command))
    metrics = metrics_verdict(command, None)
    for v in [*verdicts, *([metrics] if metrics else [])]:
        if v.ok is not True:
            print(f"tune init: {v.text}", file=sys.stderr)
    if any(v.ok is False for v in verdicts):
        raise ConfigError(file=None, key="tune init", expected=f"a launch command {version.label} starts "
                          "(see above; --server-version names another version)")
    return dialect


def drafter_block_size(command: Sequence[str]) -> int | None:
    """The block size the DFlash drafter was trained with, from its config.json when the path is local."""
    path = _value(command, "--speculative-draft-model-path") or _value(command, "--speculative-draft-model")
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
