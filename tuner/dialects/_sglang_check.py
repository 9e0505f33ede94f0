"""What a version's flag table says about a launch command and a search space, before anything starts.

``tune check``, ``tune start``'s preflight and ``tune init`` ask :func:`check_command`; each finding is a
:class:`Verdict` (``ok`` False: SGLang would refuse it; None: it starts, but look; True: fine).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from tuner.dialects._base import Verdict
from tuner.dialects._flagtable import FlagTable, server_argv
from tuner.dialects._sglang_versions import DDTREE_PR, SGLangVersion, renamed_flags, renamed_in
from tuner.space import Param, SearchSpace, format_value

__all__ = ["Verdict", "check_command", "flag_spellings", "metrics_verdict", "spelling_verdict"]

_ALGORITHM = "--speculative-algorithm"
_METRICS = "--enable-metrics"


def flag_spellings(argv: Sequence[str]) -> list[str]:
    """The long options a command line spells out (``--flag`` and ``--flag=value``), in order."""
    return [a.partition("=")[0] for a in server_argv(argv) if a.startswith("--")]


def _value_of(argv: Sequence[str], flag: str) -> str | None:
    args = server_argv(argv)
    for i, arg in enumerate(args):
        name, eq, inline = arg.partition("=")
        if name == flag:
            return inline if eq else (args[i + 1] if i + 1 < len(args) else None)
    return None


def _who(version: SGLangVersion, table: FlagTable) -> str:
    return version.label if version.exact else f"{version.label} (judged by {table.name}'s flag table)"


def _elsewhere(flag: str, table: FlagTable) -> str:
    """Which other known version has ``flag`` (a DDTree flag on mainline, ...)."""
    from tuner.dialects._sglang_versions import KNOWN_VERSIONS

    for other in KNOWN_VERSIONS:
        if other.table and other.table != table.name and other.flags and other.flags.option(flag):
            return f"; it is a flag of {other.label}"
    return ""


def spelling_verdict(version: SGLangVersion, table: FlagTable, flag: str) -> Verdict | None:
    """What ``version`` makes of one spelling (None: a plain, listed option)."""
    severity = False if version.exact else None
    who = _who(version, table)
    option, ambiguous = table.resolve(flag)
    if option is None:
        new = renamed_flags().get(flag)
        if new is not None and table.option(new) is not None:
            renamed = f"renamed in {renamed_in(flag)}"
            return Verdict(severity, f"{flag}: not accepted by {who}; did you mean {new} ({renamed})")
        if ambiguous:
            return Verdict(severity, f"{flag}: ambiguous option in {who}, could match {', '.join(ambiguous)}")
        return Verdict(severity, f"{flag}: unknown to {who}{_elsewhere(flag, table) or ' (not in its flag table)'}")
    if option.replaced_by:
        hidden = ", hidden from --help" if option.hidden else ""
        return Verdict(None, f"{flag}: a deprecated alias of {option.replaced_by} in {version.label} "
                             f"(accepted with a warning{hidden}); write {option.replaced_by}")
    if option.hidden:
        return Verdict(None, f"{flag}: accepted by {version.label} but hidden from --help")
    if flag not in option.flags:
        return Verdict(None, f"{flag}: an abbreviation of {option.flags[0]}; write it in full (tune matches "
                             "flags by their spelling)")
    return None


def _algorithm_verdicts(version: SGLangVersion, table: FlagTable, names: Sequence[str]) -> Iterator[Verdict]:
    severity = False if version.exact else None
    for name in dict.fromkeys(names):
        if table.canonical_algorithm(name) is not None:
            continue
        unknown = table.messages.get("unknown_algorithm", "Unknown speculative algorithm name: {name}")
        said = unknown.replace("{name}", name)
        if name.upper() == "DDTREE":
            yield Verdict(severity, f"{_ALGORITHM} {name} needs the DDTree branch ({DDTREE_PR}); {version.label} "
                                    f"has no DDTREE and stops at start-up with \"{said}\"")
        else:
            known = ", ".join(sorted({*table.algorithms, *table.algorithm_aliases}))
            yield Verdict(severity, f"{_ALGORITHM} {name}: not an algorithm of {version.label} (it has {known}); "
                                    f"it stops at start-up with \"{said}\"")


def _param_values(p: Param) -> list[str]:
    """The values of ``p`` worth checking against the table: every choice, or the ends of a range."""
    if p.kind == "categorical":
        return [format_value(c) for c in p.choices if p.effective(c) is not None]
    if p.kind in ("int", "float") and p.low is not None and p.high is not None:
        cast = int if p.kind == "int" else float
        return [format_value(cast(p.low)), format_value(cast(p.high))]
    return []


def _space_verdicts(
    version: SGLangVersion, table: FlagTable, space: SearchSpace, *, spellings: bool = True
) -> Iterator[Verdict]:
    severity = False if version.exact else None
    for p in space.params:
        if p.env and p.env.startswith("SGLANG_DDTREE_") and p.env not in table.environment:
            yield Verdict(None, f"[space.{p.name}] {p.env}: {version.label} never reads it (only the DDTree "
                                "branch does)")
        if not p.flag:
            continue
        found = spelling_verdict(version, table, p.flag) if spellings else None
        if found is not None:
            yield Verdict(found.ok, f"[space.{p.name}] {found.text}")
        option, _ = table.resolve(p.flag)
        if option is None:
            continue
        if (p.kind == "bool") != (not option.takes_value):
            what = "a switch (no value)" if not option.takes_value else "a flag that takes a value"
            yield Verdict(severity, f"[space.{p.name}] {p.flag} is {what} in {version.label}")
            continue
        if p.flag == _ALGORITHM:
            continue  # checked by name below, with SGLang's own words
        for text in _param_values(p):
            problem = table.value_error(p.flag, text)
            if problem:
                yield Verdict(severity, f"[space.{p.name}] = {text}: {problem}")


def metrics_verdict(argv: Sequence[str], space: SearchSpace | None) -> Verdict | None:
    """Speculative decoding without ``--enable-metrics``: what the acceptance figures lose."""
    if _value_of(argv, _ALGORITHM) is None and not (space and any(p.flag == _ALGORITHM for p in space.params)):
        return None
    if _METRICS in flag_spellings(argv) or (space and any(p.flag == _METRICS for p in space.params)):
        return None
    return Verdict(None, f"{_METRICS} is not in the command: acceptance then comes from /server_info "
                         "(avg_spec_accept_length: server-wide, recomputed every 40 decode batches, so per-scenario "
                         f"figures lag); add {_METRICS} for exact per-scenario acceptance from the Prometheus counters")


def check_command(
    version: SGLangVersion,
    argv: Sequence[str],
    *,
    space: SearchSpace | None = None,
    env: Mapping[str, str] | None = None,
    ignore_prefix: str | None = None,
    spellings: bool = True,
) -> list[Verdict]:
    """Everything ``version``'s flag table says about the base command (and the space's flags and values).

    Empty when the version has no table (only ``--help`` can be checked then). Options starting with
    ``ignore_prefix`` are a wrapper's (the simulator's ``--sim-``), not SGLang's. ``spellings=False`` leaves out
    the verdicts on flag names (when a neighbour's table stands in and the live ``--help`` judges them better).
    """
    table = version.flags
    if table is None:
        return []
    flags = [f for f in flag_spellings(argv) if not (ignore_prefix and f.startswith(ignore_prefix))]
    out = [v for f in dict.fromkeys(flags) if (v := spelling_verdict(version, table, f)) is not None]
    names = [n for n in [_value_of(argv, _ALGORITHM)] if n]
    if space is not None:
        out += list(_space_verdicts(version, table, space, spellings=spellings))
        names += [format_value(c) for p in space.params if p.flag == _ALGORITHM for c in p.choices]
    if not spellings:
        out = [v for v in out if not v.text.startswith(tuple(f"{f}:" for f in flags))]
    out += list(_algorithm_verdicts(version, table, names))
    said = set(flags) if out or not spellings else set()
    for error in table.parse_errors(argv, ignore_prefix=ignore_prefix):
        # What the verdicts above explain already (argparse names the flag it stopped at) is not said twice.
        if "Unknown speculative algorithm" not in error and not any(f in error for f in said):
            severity = False if version.exact else None
            out.append(Verdict(severity, f"the base command does not start on {_who(version, table)}: {error}"))
    for key in env or {}:
        if key.startswith("SGLANG_DDTREE_") and key not in table.environment:
            out.append(Verdict(None, f"environment {key}: {version.label} never reads it (only the DDTree branch)"))
    return out
