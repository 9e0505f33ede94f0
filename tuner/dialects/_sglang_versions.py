"""The SGLang versions `tune` knows: their flag tables, algorithms, log lines and how to tell them apart.

Three are known: mainline **0.5.23** (flag table read from its wheel), the **DDTree branch** (sgl-project/sglang
PR #29907, open; its table is 0.5.15.post1's, the release it is based on, plus what the PR adds), and
**0.5.10 or older** (the old log lines only; no flag table). Another version string maps to the nearest of them,
and says so: a table that is not the version's own turns its findings into warnings.

A version is found on the host by running the launch command's interpreter (see :data:`VERSION_PROBE`), else
``PROGRAM --version``, else by what ``PROGRAM --help`` lists (:func:`version_from_help`); ``[target]
server_version`` sets it instead.
"""

from __future__ import annotations

import dataclasses
import posixpath
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tuner.dialects._flagtable import FlagTable, known_tables, sglang_table

__all__ = [
    "DDTREE_BRANCH",
    "KNOWN_VERSIONS",
    "LEGACY",
    "MAINLINE",
    "VERSION_PROBE",
    "SGLangVersion",
    "probe_command",
    "renamed_flags",
    "renamed_in",
    "sglang_version",
    "version_from_help",
    "version_from_output",
]

DDTREE_PR = "sgl-project/sglang PR #29907"

# Start-up lines, in order (phase label, regex). 0.5.23 logs "Capture target verify CUDA graph end. bs=...,
# elapsed=..." where 0.5.10 and older logged "Capture cuda graph end. Time elapsed: ..."; "Init torch
# distributed" is gone in 0.5.23. Both are in the tables' "messages" with file and line. Alternatives are
# joined by "|" at the top level only (the dialect merges the versions' patterns by splitting on it).
_MARKERS_0_5_23 = (
    ("loading weights", r"Load weight begin|Loading safetensors checkpoint shards"),
    ("capturing cuda graphs", r"Load weight end|Capture \w+ \w+ CUDA graph begin"),
    ("warming up", r"Capture \w+ \w+ CUDA graph end"),
    ("serving", r"The server is fired up and ready to roll"),
)
_MARKERS_0_5_15 = (
    ("loading weights", r"Init torch distributed|Load weight begin|Loading safetensors checkpoint shards"),
    *_MARKERS_0_5_23[1:],
)
_MARKERS_OLD = (
    ("loading weights", r"Init torch distributed|Load weight begin|Loading safetensors checkpoint shards"),
    ("capturing cuda graphs", r"Load weight end|Capture cuda graph begin"),
    ("warming up", r"Capture cuda graph end"),
    ("serving", r"The server is fired up and ready to roll"),
)

# Where a rename came from, when it is known (the tables say which spelling each version accepts).
_RENAMED_IN = {"--speculative-dflash-draft-window-size": "SGLang 0.5.x, PR #25424"}


@dataclass(frozen=True, kw_only=True)
class SGLangVersion:
    """One SGLang version as `tune` treats it: the flags it accepts, what it logs, where acceptance comes from."""

    name: str
    """``0.5.23``, ``ddtree-pr29907``, or the version string the host reported."""
    label: str
    table: str | None
    """The flag table (``tuner/dialects/sglang_flags/<table>.json``); None: only ``--help`` can be checked."""
    exact: bool = True
    """False when the table is a neighbour's: its verdicts are warnings, not failures."""
    markers: tuple[tuple[str, str], ...] = _MARKERS_0_5_23
    health: tuple[str, ...] = ("/health", "/health_generate")
    """``/health`` answers 200 without generating; ``/health_generate`` generates one token."""
    acceptance: str = (
        "Prometheus counters sglang:generation_tokens_total / sglang:spec_verify_calls_total (needs "
        "--enable-metrics), else /server_info avg_spec_accept_length (server-wide, lagging)"
    )
    note: str = ""

    @property
    def flags(self) -> FlagTable | None:
        return sglang_table(self.table) if self.table else None

    @property
    def has_ddtree(self) -> bool:
        table = self.flags
        return table is not None and "DDTREE" in table.algorithms

    def describe(self) -> str:
        return self.label + (f"; {self.note}" if self.note else "")


MAINLINE = SGLangVersion(name="0.5.23", label="mainline SGLang 0.5.23", table="0.5.23")
DDTREE_BRANCH = SGLangVersion(
    name="ddtree-pr29907",
    label=f"the SGLang DDTree branch ({DDTREE_PR}, on 0.5.15.post1)",
    table="ddtree-pr29907",
    markers=_MARKERS_0_5_15,
)
LEGACY = SGLangVersion(
    name="0.5.10",
    label="SGLang 0.5.10 or older",
    table=None,
    markers=_MARKERS_OLD,
    note="no flag table: flags are checked against --help only",
)
KNOWN_VERSIONS = (MAINLINE, DDTREE_BRANCH, LEGACY)

_NUMBERS = re.compile(r"(\d+)\.(\d+)\.(\d+)((?:[.+-]?(?:post|dev|rc|a|b)\d*)*(?:\+[\w.]+)?)")


def sglang_version(text: str) -> SGLangVersion:
    """The known version ``text`` names (``0.5.23``, ``ddtree``, ``ddtree-pr29907``, ``0.5.20``, ...).

    A release without its own table maps to its nearest known version, marked inexact. Raises ValueError for
    something that is not a version.
    """
    text = text.strip()
    if text.lower() in ("ddtree", DDTREE_BRANCH.name):
        return DDTREE_BRANCH
    match = _NUMBERS.fullmatch(text)
    if match is None:
        raise ValueError(f"not an SGLang version: {text!r}")
    if text == MAINLINE.name:
        return MAINLINE
    if text in known_tables():  # a release whose table was made with scripts/sglang_flags.py
        return SGLangVersion(name=text, label=f"mainline SGLang {text}", table=text, markers=_MARKERS_0_5_15)
    numbers = tuple(int(g) for g in match.groups()[:3])
    if numbers <= (0, 5, 10):
        return dataclasses.replace(LEGACY, name=text, label=f"SGLang {text} (0.5.10 or older)")
    return dataclasses.replace(
        MAINLINE,
        name=text,
        label=f"SGLang {text}",
        exact=False,
        note=f"no flag table for {text}: checked against 0.5.23's (the nearest known), as warnings",
    )


def renamed_flags() -> dict[str, str]:
    """Old spelling -> new spelling, from every known table's deprecated aliases (``new_flag=`` in SGLang)."""
    out: dict[str, str] = {}
    for version in KNOWN_VERSIONS:
        table = version.flags
        if table is None:
            continue
        for option in table.options:
            new = option.replaced_by
            if new and re.fullmatch(r"--[\w-]+", new):
                out.update({f: new for f in option.flags if f != new})
    return out


def renamed_in(flag: str) -> str:
    """Where ``flag`` was renamed, as far as known (for "did you mean" lines)."""
    return _RENAMED_IN.get(flag, "SGLang 0.5.x")


# One interpreter call that neither imports sglang (that needs torch and takes seconds) nor fails without it:
# the installed distribution's version and whether the DDTree worker is in the package.
VERSION_PROBE = (
    "import importlib.util as u, importlib.metadata as m, os\n"
    "s = u.find_spec('sglang')\n"
    "if s is None:\n"
    "    print('sglang: not installed')\n"
    "else:\n"
    "    d = list(s.submodule_search_locations or [os.path.dirname(s.origin)])[0]\n"
    "    try:\n"
    "        v = m.version('sglang')\n"
    "    except m.PackageNotFoundError:\n"
    "        import sglang; v = sglang.__version__\n"
    "    dd = os.path.exists(os.path.join(d, 'srt', 'speculative', 'ddtree_worker.py'))\n"
    "    print('sglang', v, 'ddtree' if dd else 'mainline', d)\n"
)


def probe_command(program: Sequence[str]) -> list[str] | None:
    """``INTERPRETER -c VERSION_PROBE`` for a launch command run by a Python interpreter, else None."""
    if program and re.fullmatch(r"python[\d.]*", posixpath.basename(program[0])):
        return [program[0], "-c", VERSION_PROBE]
    return None


def version_from_output(text: str) -> SGLangVersion | None:
    """The version the probe (or ``--version``) printed, or None when it printed none."""
    match = re.search(r"sglang (\S+) (ddtree|mainline)", text)
    if match:
        return DDTREE_BRANCH if match.group(2) == "ddtree" else sglang_version(match.group(1))
    if "ddtree" in text.lower():
        return DDTREE_BRANCH
    found = _NUMBERS.search(text)
    if found is None:
        return None
    return sglang_version(found.group(0))


def version_from_help(listed: Iterable[str]) -> SGLangVersion | None:
    """The version a ``--help`` flag list shows, when one of the distinguishing flags is there."""
    flags = set(listed)
    if "--speculative-ddtree-budget" in flags:
        return DDTREE_BRANCH
    if "--speculative-draft-window-size" in flags:
        return dataclasses.replace(
            MAINLINE,
            name="0.5.x",
            label="SGLang 0.5.x (after the draft-window rename)",
            exact=False,
            note="checked against 0.5.23's flag table (the newest known), as warnings",
        )
    return None
