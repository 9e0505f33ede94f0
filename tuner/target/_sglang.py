"""SGLang on the host: which version runs there, and what its flag table and ``--help`` say of the study.

The version is ``[target] server_version`` when set; otherwise the launch command's interpreter reports its
``sglang`` (without importing it: that needs torch), else ``PROGRAM --version`` prints one, else ``--help``
shows one of the distinguishing flags. ``tune check`` runs all of it; ``tune start`` asks the interpreter only.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Iterator, Sequence

from tuner.config import StudyConfig
from tuner.dialects import (
    SGLangDialect,
    SGLangVersion,
    Verdict,
    check_command,
    flag_spellings,
    metrics_verdict,
    probe_command,
    renamed_flags,
    renamed_in,
    spelling_verdict,
    version_from_help,
    version_from_output,
)
from tuner.errors import ConfigError, HostError
from tuner.hosts import BaseHost
from tuner.services import Finding
from tuner.spec import program_part

__all__ = ["detect_version", "help_findings", "judged_flags", "require_flags", "table_findings", "version_findings"]

_PROBE_TIMEOUT_S = 60.0


def _run(host: BaseHost, argv: Sequence[str], timeout: float) -> str | None:
    try:
        result = host.run(["timeout", "-k", "5", f"{timeout:g}", *argv], timeout=timeout + 30)
    except HostError:
        return None
    return result.stdout if result.ok else None


def detect_version(
    host: BaseHost, program: Sequence[str], *, listed: frozenset[str] | None = None, quick: bool = False
) -> tuple[SGLangVersion | None, str]:
    """(the version, how it was found) or (None, why not); ``listed``: the flags ``--help`` printed.

    ``quick`` (``tune start``): only the interpreter is asked, one short process; ``--version`` may have to
    import a whole server first."""
    probe = probe_command(program)
    tried = []
    if probe is not None:
        out = _run(host, probe, _PROBE_TIMEOUT_S) or ""
        found = version_from_output(out)
        if found is not None:
            return found, f"{program[0]} has {out.split(' /')[0].strip()}"
        tried.append(f"{program[0]}: {out.strip() or 'no answer'}")
    if program and not quick:
        out = _run(host, [*program, "--version"], _PROBE_TIMEOUT_S) or ""
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


def _to_finding(v: Verdict) -> Finding:
    return Finding(ok=v.ok, text=v.text)


def version_findings(
    config: StudyConfig, host: BaseHost, program: Sequence[str], *, listed: frozenset[str] | None = None
) -> tuple[list[Finding], SGLangVersion | None]:
    """The version line (configured, or found on the host) and the version it names."""
    dialect = config.dialect
    assert isinstance(dialect, SGLangDialect)
    if dialect.version is not None:
        return [], dialect.version  # said with the dialect, at the top
    version, how = detect_version(host, program, listed=listed)
    if version is None:
        return [Finding(ok=None, text=f"SGLang version not found ({how}); set [target] server_version to check "
                                      "flags against its table")], None
    return [Finding(ok=True, text=dialect.with_version(version, how).version_line())], version


def table_findings(config: StudyConfig, version: SGLangVersion, *, spellings: bool = True) -> Iterator[Finding]:
    """What the version's flag table says of the base command, the space and the environment (``spellings``:
    also of the flag names; off when a neighbour's table stands in and ``--help`` can judge them)."""
    dialect = config.dialect
    assert isinstance(dialect, SGLangDialect)
    command = config.target.command
    verdicts = check_command(version, command, space=config.space, env=config.target.env,
                             ignore_prefix=dialect.own_flag_prefix(command), spellings=spellings)
    yield from map(_to_finding, verdicts)
    if version.flags is not None and not any(v.ok is False for v in verdicts):
        yield Finding(ok=True, text=f"the base command and the space's flags and values fit the {version.flags.name} "
                                    "flag table")
    metrics = metrics_verdict(command, config.space)
    if metrics is not None:
        yield _to_finding(metrics)


def judged_flags(config: StudyConfig, version: SGLangVersion | None) -> set[str]:
    """The spellings the version's flag table had something to say about (``--help`` need not repeat it)."""
    table = version.flags if version else None
    if table is None or version is None or not version.exact:
        return set()
    flags = [*flag_spellings(config.target.command), *(p.flag for p in config.space.params if p.flag)]
    return {f for f in flags if spelling_verdict(version, table, f) is not None}


def help_findings(
    config: StudyConfig, listed: frozenset[str], *, judged: set[str], version: SGLangVersion | None
) -> Iterator[Finding]:
    """Flags of the base command and the space that the live ``--help`` does not list (``judged``: flags the
    version's table already spoke about)."""
    dialect = config.dialect
    assert isinstance(dialect, SGLangDialect)
    prefix = dialect.own_flag_prefix(config.target.command)
    flags = [*flag_spellings(config.target.command), *(p.flag for p in config.space.params if p.flag)]
    missing = [f for f in dict.fromkeys(flags) if f not in listed and f not in judged
               and not (prefix and f.startswith(prefix))]
    unknown = []
    table = version.flags if version else None
    for flag in missing:
        new = renamed_flags().get(flag)
        option = table.option(flag) if table else None
        if option is not None and option.hidden:
            yield Finding(ok=None, text=f"{flag}: not in --help, a hidden alias {version.label if version else ''} "
                                        f"still accepts; write {option.replaced_by or 'the listed spelling'}")
        elif new is not None and new in listed:
            yield Finding(ok=False, text=f"{flag}: not in --help; did you mean {new} (renamed in {renamed_in(flag)})")
        else:
            unknown.append(flag)
    if unknown:
        yield Finding(ok=False, text="flags unknown to the server (`--help` does not list them): " + ", ".join(unknown))
    elif not missing:
        checked = [f for f in dict.fromkeys(flags) if f not in judged and not (prefix and f.startswith(prefix))]
        other = " other" if len(checked) < len(dict.fromkeys(flags)) else ""
        yield Finding(ok=True, text=f"the {len(checked)}{other} flags of the command and the space are in --help")


def require_flags(config: StudyConfig) -> None:
    """``tune start``: the version (configured, or reported by the host: no ``--help``, that takes long) and
    its table's verdicts; raise ConfigError when SGLang would refuse the command or the space, nothing changed."""
    from tuner.target._build import make_host

    dialect = config.dialect
    assert isinstance(dialect, SGLangDialect)
    version = dialect.version
    if version is None:
        try:
            host = make_host(config.target)
        except HostError:
            return  # the preflight that follows says why the host cannot be reached
        try:
            version, how = detect_version(host, program_part(config.target.command), quick=True)
        finally:
            host.close()
        if version is None:
            return
        print(dialect.with_version(version, how).version_line(), file=sys.stderr)
    refused = [f.text for f in table_findings(config, version) if f.ok is False]
    if refused:
        raise ConfigError(
            file=config.source,
            key="target.command",
            expected=f"a command and space {version.label} accepts (nothing was changed): " + "; ".join(refused),
        )
