"""``tune check`` (preflight), ``tune apply`` (a stored trial's config) and ``tune restore`` (the base unit)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import httpx

from tuner.cli._common import DEFAULT_CONFIG
from tuner.config import StudyConfig, load_config
from tuner.endpoint import Endpoint
from tuner.errors import HostError, TuneError
from tuner.hosts import BaseHost
from tuner.services import BaseService, LaunchSpec

OK, BAD, WARN = "✓", "✗", "!"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    check = subparsers.add_parser("check", help="preflight: verify the target can be tuned (changes nothing)")
    _config_arg(check)
    check.add_argument("--cycle", action="store_true", help="also run one apply -> restart -> ready -> restore cycle")
    check.set_defaults(func=cmd_check)

    apply = subparsers.add_parser("apply", help="apply a stored trial's configuration and wait until ready")
    _config_arg(apply)
    which = apply.add_mutually_exclusive_group(required=True)
    which.add_argument("--trial", type=int, metavar="N", help="trial number")
    which.add_argument("--best", action="store_true", help="the best feasible trial")
    apply.set_defaults(func=cmd_apply)

    restore = subparsers.add_parser("restore", help="drop tune's changes, restart the base config, wait ready")
    _config_arg(restore)
    restore.set_defaults(func=cmd_restore)


def _config_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE", type=Path, default=DEFAULT_CONFIG, help="study file")


class Checklist:
    def __init__(self, out: Callable[[str], None] = print) -> None:
        self.failed = 0
        self._out = out

    def item(self, mark: str, text: str) -> None:
        if mark == BAD:
            self.failed += 1
        self._out(f" {mark} {text}")


def _endpoint_ok(config: StudyConfig) -> str | None:
    url = config.target.base_url
    health = config.readiness.health_path
    try:
        with httpx.Client(timeout=5) as client:
            r = client.get(url + health) if health else None
            if r is None or r.status_code == 404:
                r = client.get(url + "/v1/models")
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}"
    return None if r.status_code < 500 else f"HTTP {r.status_code}"


def dialect_checks(config: StudyConfig, c: Checklist) -> None:
    """The server dialect, what it lacks, and what in the space it would reject (no connection needed)."""
    for line in config.dialect.describe():
        c.item(WARN if line.lstrip().startswith("missing:") else OK, line.strip())
    problems = config.dialect.lint(config.space)
    for problem in problems:
        c.item(BAD, problem)
    if not problems:
        c.item(OK, f"the search space is written the way {config.dialect.name} expects")


def run_check(config: StudyConfig, *, out: Callable[[str], None] = print) -> int:
    """The preflight checklist; returns the number of failed items."""
    from tuner.lock import TargetLock, lock_path_for
    from tuner.target import make_host, make_service

    t = config.target
    c = Checklist(out)
    out(f"tune check: {config.source}")
    dialect_checks(config, c)
    try:
        host = make_host(t)
        verified = host.verify()
    except HostError as exc:
        c.item(BAD, f"connect: {exc}")
        return c.failed
    try:
        c.item(OK, verified)
        service = make_service(config, host)
        preflight = service.preflight()
        for finding in preflight.findings:
            c.item({True: OK, None: WARN, False: BAD}[finding.ok], finding.text)
        _check_flags(c, config, host, list(preflight.program))
        problem = _endpoint_ok(config)
        running = _safe_running(service)
        if problem is None:
            c.item(OK, f"endpoint {t.base_url} answers")
        elif running:
            c.item(BAD, f"endpoint {t.base_url} unreachable ({problem}) although the server runs")
        else:
            c.item(WARN, f"endpoint {t.base_url} not answering ({problem}); the server is not running")
        if t.gpu_wait is not None:
            from tuner.services._gpu import read_gpu_memory

            try:
                values = read_gpu_memory(host, t.gpu_wait)
                c.item(OK, f"GPU memory readable: {len(values)} GPUs, max {max(values):.0f} MiB used")
            except HostError as exc:
                c.item(BAD, f"GPU memory command: {exc}")
        if t.lock:
            lock = TargetLock(host=host, path=lock_path_for(t), study=config.study.name)
            holder = lock.holder()
            if holder is None:
                c.item(OK, f"lock {lock.path} free")
            else:
                c.item(BAD, f"lock {lock.path} held by {holder.owner} (pid {holder.pid}, study {holder.study!r})")
    except TuneError as exc:
        c.item(BAD, str(exc))
    finally:
        host.close()
    return c.failed


def _safe_running(service: BaseService) -> bool:
    try:
        return service.state().running
    except TuneError:
        return False


def _check_flags(c: Checklist, config: StudyConfig, host: BaseHost, program: list[str]) -> None:
    flags = [p for p in config.space.params if p.flag or p.json_flag]
    if not flags:
        return
    dialect = config.dialect
    help_cmd = [*program, *dialect.help_args]
    result = host.run(help_cmd, timeout=300) if program else None
    text = (result.stdout + result.stderr) if result is not None else ""
    listed = dialect.listed_flags(text)
    if result is None or not result.ok or not listed:
        c.item(WARN, f"`{' '.join(help_cmd)}` gave no flag list: cannot verify the space's flags")
        return
    names = {p.name: [n for n in (p.flag or p.json_flag, *p.aliases) if n] for p in flags}
    missing = sorted({names[p.name][0] for p in flags if not listed.intersection(names[p.name])})
    if missing:
        c.item(BAD, "flags unknown to the server (`--help` does not list them): " + ", ".join(missing))
    else:
        c.item(OK, f"all {len(flags)} tuned flags are accepted by the server")
    for p in config.space.params:
        if p.env and not p.flag:
            c.item(OK, f"{p.name} is the environment variable {p.env}")


def cmd_check(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    failed = run_check(config)
    if failed:
        print(f"{failed} check(s) failed", file=sys.stderr)
        return 1
    if args.cycle:
        print("cycle: baseline config -> restart -> ready -> tiny benchmark -> restore")
        _cycle(config)
        print(f" {OK} one full apply/restart/ready/benchmark/restore cycle worked")
    return 0


def _with_target(config: StudyConfig, action: Callable[[BaseService, BaseHost], None]) -> None:
    from tuner.lock import TargetLock, lock_path_for
    from tuner.target import make_host, make_service

    host = make_host(config.target)
    try:
        service = make_service(config, host)
        lock = TargetLock(host=host, path=lock_path_for(config.target), study=config.study.name)
        if not config.target.lock:
            action(service, host)
            return
        with lock:
            action(service, host)
    finally:
        host.close()


def _bring_up(
    config: StudyConfig, service: BaseService, spec: LaunchSpec | None, label: str, *, measure: bool = False
) -> None:
    """The trial's own steps (apply -> restart -> ready -> verify), optionally with a tiny benchmark."""
    from tuner.readiness import wait_ready
    from tuner.study import apply_config, restart_server, verify_applied
    from tuner.study._parts import endpoint_for

    applied = None
    if spec is None:
        service.revert()
    else:
        applied = apply_config(service, spec)
    restarted = restart_server(service, label=label)
    ready = wait_ready(
        service=service,
        restarted=restarted,
        endpoint=endpoint_for(config),
        config=config.readiness,
        progress=lambda m: print(f"   {m}", file=sys.stderr),
    )
    if applied is not None:
        verify_applied(service, applied)
    print(f" {OK} {label}: ready after {ready.seconds:.1f} s ({restarted.new})")
    if measure:
        _tiny_benchmark(config, ready.endpoint or endpoint_for(config))


def _tiny_benchmark(config: StudyConfig, endpoint: Endpoint) -> None:
    """One short streamed request through the real benchmark engine: proves the measuring path end to end."""
    from dataclasses import replace

    from tuner.bench import HttpBenchmark
    from tuner.config import Scenario

    section = replace(config.benchmark, warmup_requests=0, repeats=1)
    bench = HttpBenchmark(endpoint=endpoint, config=section, dialect=config.dialect)
    try:
        result = bench.run_scenario(
            Scenario(name="check", concurrency=1, prompt_tokens=32, output_tokens=16, requests=1)
        )
    finally:
        bench.close()
    accept = f", acceptance {result.accept_length:.2f}" if result.accept_length else ""
    print(f" {OK} tiny benchmark: {result.output_tok_s:.1f} tok/s{accept}")


def _cycle(config: StudyConfig) -> None:
    from tuner.space import render
    from tuner.target import base_spec

    spec = render(config.space, base_spec(config.target), config.baseline)

    def act(service: BaseService, host: BaseHost) -> None:
        try:
            _bring_up(config, service, spec, "check-cycle", measure=True)
        finally:
            _bring_up(config, service, None, "check-restore")

    _with_target(config, act)


def cmd_apply(args: argparse.Namespace) -> int:
    from tuner.space import render
    from tuner.study import best_trials, open_study
    from tuner.target import base_spec

    config = load_config(args.config)
    study = open_study(config)
    if args.best:
        best = best_trials(study)
        if not best:
            raise TuneError(f"study {study.study_name!r} has no feasible completed trial yet")
        trial = best[0]
    else:
        matches = [t for t in study.trials if t.number == args.trial]
        if not matches:
            raise TuneError(f"study {study.study_name!r} has no trial {args.trial}")
        trial = matches[0]
    spec = render(config.space, base_spec(config.target), trial.params)
    print(f"applying trial {trial.number}: {trial.params}")
    _with_target(config, lambda service, host: _bring_up(config, service, spec, f"apply-trial-{trial.number}"))
    return 0


def cmd_restore(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    _with_target(config, lambda service, host: _bring_up(config, service, None, "restore"))
    return 0


__all__ = ["dialect_checks", "register", "run_check"]
