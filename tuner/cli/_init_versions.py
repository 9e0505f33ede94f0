"""``tune init`` for a server with versions (SGLang): which version the command is checked against, and what that
version says of it.

``--server-version`` names the version; without it the dialect assumes one from the command (SGLang: the
DDTree branch for a DDTREE command, mainline 0.5.23 for any other), and the study file keeps ``server_version =
"auto"`` so ``tune check`` finds the host's. A command the version refuses (a renamed flag, an algorithm it
does not have) is not written into a study; what it only warns about is printed.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence

from tuner.dialects import BaseServerDialect
from tuner.errors import ConfigError

__all__ = ["versioned_dialect"]


def versioned_dialect(
    dialect: BaseServerDialect, command: Sequence[str], env: Mapping[str, str], server_version: str
) -> BaseServerDialect:
    """The dialect with the version the command is checked against; raises ConfigError when it would not start."""
    versions = dialect.versions()
    if versions is None:
        if server_version != "auto":
            raise ConfigError(file=None, key="tune init --server-version", expected="an SGLang launch command",
                              got=server_version)
        return dialect
    try:
        dialect, verdicts, expected = versions.init_check(command, env, server_version)
    except ValueError as exc:
        raise ConfigError(file=None, key="tune init --server-version", expected=str(exc), got=server_version) from None
    for v in verdicts:
        if v.ok is not True:
            print(f"tune init: {v.text}", file=sys.stderr)
    if any(v.ok is False for v in verdicts):
        raise ConfigError(file=None, key="tune init", expected=f"{expected} (see above; --server-version names "
                          "another version)")
    return dialect
