"""The preflight: what can be verified about a target without changing anything (``tune check``).

One generator of findings, so ``tune check`` prints each line as soon as it is known (an SSH connect can take
seconds) and other callers can stop at the first problem.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import httpx

from tuner.config import StudyConfig
from tuner.dialects import VersionedFlags
from tuner.errors import ConfigError, EnvironmentFault, HostError, TuneError
from tuner.target._build import make_host, make_service
from tuner.target.hosts import BaseHost
from tuner.target.services import BaseService, Finding

__all__ = ["dialect_findings", "preflight", "require_preflight"]


def preflight(
    config: StudyConfig,
    *,
    flags: bool = True,
    endpoint: bool = True,
    lock: bool = True,
    gate: bool = True,
    storage: str | None = None,
    dialect: bool = True,
) -> Iterator[Finding]:
    """Findings about the target: host and its key, the service's own checks, the tuned flags (``--help``),
    the endpoint, the port (free or ours), the command's ``--port``, the writable directories, the GPU memory
    command, the lock, and the gate's problems. Never changes anything.

    ``tune start`` runs the fast part (no dialect, flags, endpoint, lock or gate: the lock is taken right after,
    the dialect and the gate are the config's business) before it creates anything; ``storage`` is the study's
    URL when not the config's.
    """
    if dialect:
        yield from dialect_findings(config)
    try:
        host = make_host(config.target)
        yield Finding(ok=True, text=host.verify())
    except HostError as exc:
        yield Finding(ok=False, text=f"connect: {exc}")
        return
    try:
        service = make_service(config, host)
        found = service.preflight()
        yield from found.findings
        if flags:
            yield from _flags(config, host, list(found.program))
        if endpoint:
            yield _endpoint(config, service)
        yield from _environment(config, host, service, storage or config.study.storage)
        yield from _gpu(config, host)
        if lock:
            yield from _lock(config, host)
        if gate:
            yield from _gate(config)
    except TuneError as exc:
        yield Finding(ok=False, text=str(exc))
    finally:
        host.close()


def dialect_findings(config: StudyConfig) -> Iterator[Finding]:
    """The server dialect, what it lacks, and what in the space it would reject (no connection needed)."""
    lines = config.dialect.describe()
    yield Finding(ok=True, text=lines[0])
    for line in lines[1:]:
        yield Finding(ok=None if line.strip().startswith("missing:") else True, text=line.strip())
    problems = config.dialect.lint(config.space)
    problems += [f"[target] command: {p}" for p in config.dialect.command_problems(config.target.command)]
    for problem in problems:
        yield Finding(ok=False, text=problem)
    for note in config.dialect.command_notes(config.target.command):
        yield Finding(ok=None, text=f"[target] command: {note}")
    if not problems:
        yield Finding(ok=True, text=f"the search space is written the way {config.dialect.name} expects")


def _help_listing(
    config: StudyConfig, host: BaseHost, program: list[str]
) -> tuple[list[Finding], frozenset[str] | None]:
    """Run ``PROGRAM --help``: (what to say about it, the flags it lists or None when it listed none)."""
    limit = config.target.check_timeout_s
    help_cmd = [*program, *config.dialect.help_args]
    print(f"   running `{' '.join(help_cmd)}` (at most {limit:.0f} s, [target] check_timeout_s)", file=sys.stderr)
    # `timeout` signals its whole process group: a --help that starts a server instead leaves nothing behind.
    result = host.run(["timeout", "-k", "5", f"{limit:g}", *help_cmd], timeout=limit + 30) if program else None
    if result is not None and result.exit_status == 124:
        late = f"`{' '.join(help_cmd)}` did not exit within {limit:.0f} s: flags not verified"
        return [Finding(ok=None, text=late)], None
    text = (result.stdout + result.stderr) if result is not None else ""
    listed = config.dialect.listed_flags(text)
    if result is not None and not result.ok and not listed:
        # The program cannot even print its help (a missing module, an import error): it cannot start either.
        said = [line.strip() for line in (result.stderr or result.stdout).splitlines() if line.strip()]
        why = f": {said[-1][:300]}" if said else ""
        failed = Finding(
            ok=False,
            text=f"`{' '.join(help_cmd)}` failed (exit status {result.exit_status}){why} "
            "([target] check_flags = false skips this for a server without --help)",
        )
        return [failed], None
    if result is None or not result.ok or not listed:
        none = f"`{' '.join(help_cmd)}` gave no flag list: cannot verify the space's flags"
        return [Finding(ok=None, text=none)], None
    return [], frozenset(listed)


def _flags(config: StudyConfig, host: BaseHost, program: list[str]) -> Iterator[Finding]:
    versions = config.dialect.versions()
    if versions is not None:
        yield from _versioned_flags(config, versions, host, program)
        return
    tuned = [p for p in config.space.params if p.flag or p.json_flag]
    if not tuned:
        return
    if not config.target.check_flags:
        yield Finding(ok=None, text="tuned flags not checked against `--help` ([target] check_flags = false)")
        return
    notes, listed = _help_listing(config, host, program)
    yield from notes
    if listed is None:
        return
    names = {p.name: [n for n in (p.flag or p.json_flag, *p.aliases) if n] for p in tuned}
    missing = sorted({names[p.name][0] for p in tuned if not listed.intersection(names[p.name])})
    if missing:
        yield Finding(ok=False, text="flags unknown to the server (`--help` does not list them): " + ", ".join(missing))
    else:
        yield Finding(ok=True, text=f"all {len(tuned)} tuned flags are accepted by the server")
    yield from _env_params(config)


def _env_params(config: StudyConfig) -> Iterator[Finding]:
    for p in config.space.params:
        if p.env and not p.flag:
            yield Finding(ok=True, text=f"{p.name} is the environment variable {p.env}")


def _versioned_flags(
    config: StudyConfig, versions: VersionedFlags, host: BaseHost, program: list[str]
) -> Iterator[Finding]:
    """A server with versions (SGLang): the version (configured or found on the host), its flag table's
    verdicts, then ``--help``."""
    from tuner.target._versions import help_findings, judged_flags, table_findings, version_findings

    listed = None
    if config.target.check_flags:
        notes, listed = _help_listing(config, host, program)
        yield from notes
    else:
        yield Finding(ok=None, text="flags not checked against `--help` ([target] check_flags = false)")
    found, version = version_findings(versions, host, program, listed=listed)
    yield from found
    if version is not None:
        yield from table_findings(config, versions, version, spellings=versions.exact(version) or listed is None)
    if listed is not None:
        judged = judged_flags(config, versions, version)
        yield from help_findings(config, versions, listed, judged=judged, version=version)
    yield from _env_params(config)


def _endpoint_problem(url: str, health_path: str | None) -> str | None:
    try:
        with httpx.Client(timeout=5) as client:
            r = client.get(url + health_path) if health_path else None
            if r is None or r.status_code == 404:
                r = client.get(url + "/v1/models")
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}"
    return None if r.status_code < 500 else f"HTTP {r.status_code}"


def _endpoint(config: StudyConfig, service: BaseService) -> Finding:
    url = config.target.base_url
    problem = _endpoint_problem(url, config.readiness.health_path)
    if problem is None:
        return Finding(ok=True, text=f"endpoint {url} answers")
    try:
        running = service.state().running
    except TuneError:
        running = False
    if running:
        return Finding(ok=False, text=f"endpoint {url} unreachable ({problem}) although the server runs")
    return Finding(ok=None, text=f"endpoint {url} not answering ({problem}); the server is not running")


def _environment(config: StudyConfig, host: BaseHost, service: BaseService, storage: str) -> Iterator[Finding]:
    from tuner.target._environment import base_port, target_problems

    problems = target_problems(config, host=host, service=service, storage=storage)
    for problem in problems:
        yield Finding(ok=False, text=problem)
    if not problems:
        port = base_port(config.target.base_url)
        yield Finding(ok=True, text=f"port {port} free or ours; storage, log and artifact dirs writable")


def _gpu(config: StudyConfig, host: BaseHost) -> Iterator[Finding]:
    if config.target.gpu_wait is None:
        return
    from tuner.target.services import read_gpu_memory

    try:
        values = read_gpu_memory(host, config.target.gpu_wait)
        yield Finding(ok=True, text=f"GPU memory readable: {len(values)} GPUs, max {max(values):.0f} MiB used")
    except HostError as exc:
        yield Finding(ok=False, text=f"GPU memory command: {exc}")


def _lock(config: StudyConfig, host: BaseHost) -> Iterator[Finding]:
    if not config.target.lock:
        return
    from tuner.target._lock import TargetLock, lock_path_for

    lock = TargetLock(host=host, path=lock_path_for(config.target), study=config.study.name)
    holder = lock.holder()
    if holder is None:
        yield Finding(ok=True, text=f"lock {lock.path} free")
    else:
        who = f"{holder.owner} (pid {holder.pid}, study {holder.study!r})"
        yield Finding(ok=False, text=f"lock {lock.path} held by {who}")


def _gate(config: StudyConfig) -> Iterator[Finding]:
    if config.gate is None or not config.gate.enabled:
        return
    from tuner.gate import check_problems

    try:
        check_problems(config.gate, file=config.source)
    except ConfigError as exc:
        yield Finding(ok=False, text=f"gate problems: {exc}")


def require_preflight(config: StudyConfig, *, storage: str | None = None) -> None:
    """``tune start``'s preflight: raise :class:`EnvironmentFault` with one line per problem, nothing changed.

    For a server with versions (SGLang), first the version's flag table: a command it refuses (a renamed flag,
    DDTREE on mainline) is a :class:`ConfigError` before anything restarts.
    """
    versions = config.dialect.versions()
    if versions is not None:
        from tuner.target._versions import require_flags

        require_flags(config, versions)
    findings = preflight(config, flags=False, endpoint=False, lock=False, gate=False, storage=storage, dialect=False)
    problems = [f.text for f in findings if f.ok is False]
    if len(problems) == 1:
        raise EnvironmentFault(f"{problems[0]} (nothing was changed; --skip-preflight skips this check)")
    if problems:
        raise EnvironmentFault(
            "\n  - ".join([f"{len(problems)} problems, nothing was changed ({config.source}):", *problems])
            + "\n  (--skip-preflight skips these checks)"
        )
