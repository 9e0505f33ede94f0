"""SGLang's versions on a host: how the version is found, and what its flag table and ``--help`` say of a study.

The version is ``[target] server_version`` when set; otherwise the launch command's interpreter reports its
``sglang`` (without importing it: that needs torch), else ``PROGRAM --version`` prints one, else ``--help``
shows one of the distinguishing flags. The commands are run by the caller (``run``: ``tune check`` runs all of
them; ``tune start`` asks the interpreter only); this module only reads what they printed.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence

from tuner.dialects._base import Run, Verdict
from tuner.dialects._sglang_check import check_command, flag_spellings, metrics_verdict, spelling_verdict
from tuner.dialects._sglang_versions import (
    SGLangVersion,
    probe_command,
    renamed_flags,
    renamed_in,
    version_from_help,
    version_from_output,
)
from tuner.space import SearchSpace

__all__ = ["detect_version", "help_verdicts", "judged_flags", "table_verdicts"]


def detect_version(
    run: Run, program: Sequence[str], *, listed: frozenset[str] | None = None, quick: bool = False
) -> tuple[SGLangVersion | None, str]:
    """(the version, how it was found) or (None, why not); ``listed``: the flags ``--help`` printed.

    ``quick`` (``tune start``): only the interpreter is asked, one short process; ``--version`` may have to
    import a whole server first."""
    probe = probe_command(program)
    tried = []
    if probe is not None:
        out = run(probe) or ""
        found = version_from_output(out)
        if found is not None:
            return found, f"{program[0]} has {out.split(' /')[0].strip()}"
        tried.append(f"{program[0]}: {out.strip() or 'no answer'}")
    if program and not quick:
        out = run([*program, "--version"]) or ""
        found = version_from_output(out)
        if found is not None:
            return found, f"`{shlex.join([*program, '--version'])}` printed {out.strip()[:60]!r}"
        tried.append("--version printed none")
    if listed is not None:
        found = version_from_help(listed)
        if found is not None:
            return found, "from the flags --help lists"
        tried.append("--help lists no flag that tells the version")
    return None, "; ".join(tried) or "no launch program"


def table_verdicts(
    version: SGLangVersion,
    command: Sequence[str],
    space: SearchSpace,
    env: Mapping[str, str],
    *,
    prefix: str | None,
    spellings: bool = True,
) -> list[Verdict]:
    """What the version's flag table says of the base command, the space and the environment, the line that
    says they fit, and what ``--enable-metrics`` missing costs (``prefix``: a wrapper's own options)."""
    verdicts = check_command(version, command, space=space, env=env, ignore_prefix=prefix, spellings=spellings)
    out = list(verdicts)
    if version.flags is not None and not any(v.ok is False for v in verdicts):
        out.append(Verdict(True, f"the base command and the space's flags and values fit the {version.flags.name} "
                                 "flag table"))
    metrics = metrics_verdict(command, space)
    if metrics is not None:
        out.append(metrics)
    return out


def _flags(command: Sequence[str], space: SearchSpace) -> list[str]:
    return [*flag_spellings(command), *(p.flag for p in space.params if p.flag)]


def judged_flags(version: SGLangVersion | None, command: Sequence[str], space: SearchSpace) -> set[str]:
    """The spellings the version's flag table had something to say about (``--help`` need not repeat it)."""
    table = version.flags if version else None
    if table is None or version is None or not version.exact:
        return set()
    return {f for f in _flags(command, space) if spelling_verdict(version, table, f) is not None}


def help_verdicts(
    listed: frozenset[str],
    command: Sequence[str],
    space: SearchSpace,
    *,
    judged: set[str],
    version: SGLangVersion | None,
    prefix: str | None,
) -> list[Verdict]:
    """Flags of the base command and the space that the live ``--help`` does not list (``judged``: flags the
    version's table already spoke about; ``prefix``: a wrapper's own options)."""
    flags = _flags(command, space)
    missing = [f for f in dict.fromkeys(flags) if f not in listed and f not in judged
               and not (prefix and f.startswith(prefix))]
    out, unknown = [], []
    table = version.flags if version else None
    for flag in missing:
        new = renamed_flags().get(flag)
        option = table.option(flag) if table else None
        if option is not None and option.hidden:
            out.append(Verdict(None, f"{flag}: not in --help, a hidden alias {version.label if version else ''} "
                                     f"still accepts; write {option.replaced_by or 'the listed spelling'}"))
        elif new is not None and new in listed:
            out.append(Verdict(False, f"{flag}: not in --help; did you mean {new} (renamed in {renamed_in(flag)})"))
        else:
            unknown.append(flag)
    if unknown:
        out.append(Verdict(False, "flags unknown to the server (`--help` does not list them): " + ", ".join(unknown)))
    elif not missing:
        checked = [f for f in dict.fromkeys(flags) if f not in judged and not (prefix and f.startswith(prefix))]
        other = " other" if len(checked) < len(dict.fromkeys(flags)) else ""
        out.append(Verdict(True, f"the {len(checked)}{other} flags of the command and the space are in --help"))
    return out
