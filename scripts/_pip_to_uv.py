"""Print, one per line, the `uv pip install` arguments that make uv use the package sources pip is configured with.

uv reads no pip configuration, so without these it would install from another index than the user's pip (a
company mirror, a wheel directory, a constraints file). Reads ``pip config list`` on standard input; for each key
the highest-precedence scope wins, as in pip (environment, then site, user, global). A cert becomes
``SSL_CERT_FILE=...`` on the first line when set: the caller exports it.
"""

from __future__ import annotations

import shlex
import sys

_SCOPES = {":env:": 0, "site": 1, "user": 2, "global": 3}
_LISTS = {
    "index-url": "--index-url",
    "extra-index-url": "--extra-index-url",
    "find-links": "--find-links",
    "constraint": "--constraint",
    "trusted-host": "--allow-insecure-host",
}


def _config(lines: list[str]) -> dict[str, str]:
    best: dict[str, tuple[int, str]] = {}
    for line in lines:
        name, _, value = line.strip().partition("=")
        scope, _, key = name.rpartition(".")
        rank = _SCOPES.get(scope)
        if rank is None or not value:
            continue
        text = " ".join(shlex.split(value))
        if key not in best or rank < best[key][0]:
            best[key] = (rank, text)
    return {key: text for key, (_, text) in best.items()}


def main() -> None:
    config = _config(sys.stdin.readlines())
    if "cert" in config:
        print(f"SSL_CERT_FILE={config['cert']}")
    if config.get("no-index", "").lower() in ("1", "true", "yes", "on"):
        print("--no-index")
    for key, flag in _LISTS.items():
        for value in config.get(key, "").split():
            print(flag)
            print(value)


if __name__ == "__main__":
    main()
