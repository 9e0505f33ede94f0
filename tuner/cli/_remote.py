"""``tune check`` (preflight), ``tune apply`` (a stored trial's config) and ``tune restore`` (the base unit)."""

from __future__ import annotations

import argparse
import re
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

    stop = subparsers.add_parser("stop", help="stop the server tune recorded for this target (nothing else)")
    _config_arg(stop)
    stop.set_defaults(func=cmd_stop)


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
    try:
        with httpx.Client(timeout=5) as client:
            r = client.get(url + "/health")
            if r.status_code == 404:
                r = client.get(url + "/v1/models")
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}"
    return None if r.status_code < 500 else f"HTTP {r.status_code}"


def run_check(config: StudyConfig, *, out: Callable[[str], None] = print) -> int:
    """The preflight checklist; returns the number of failed items."""
    from tuner.lock import TargetLock, lock_path_for
    from tuner.target import make_host, make_service

    t = config.target
    c = Checklist(out)
    out(f"tune check: {config.source}")
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
        _check_environment(c, config, host, service)
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


def _check_environment(c: Checklist, config: StudyConfig, host: BaseHost, service: BaseService) -> None:
    """What `tune start` checks before it creates anything: the same function, listed item by item."""
    from tuner.preflight import base_port, target_problems

    problems = target_problems(config, host=host, service=service, storage=config.study.storage)
    for problem in problems:
        c.item(BAD, problem)
    if not problems:
        c.item(OK, f"port {base_port(config.target.base_url)} free or ours; storage, log and artifact dirs writable")


def _safe_running(service: BaseService) -> bool:
    try:
        return service.state().running
    except TuneError:
        return False


def _check_flags(c: Checklist, config: StudyConfig, host: BaseHost, program: list[str]) -> None:
    flags = [p for p in config.space.params if p.flag]
    if not flags:
        return
    if not config.target.check_flags:
        c.item(WARN, "tuned flags not checked against `--help` ([target] check_flags = false)")
        return
    limit = config.target.check_timeout_s
    print(f"   running `{' '.join(program)} --help` (at most {limit:.0f} s, [target] check_timeout_s)", file=sys.stderr)
    # `timeout` signals its whole process group: a --help that starts a server instead leaves nothing behind.
    result = host.run(["timeout", "-k", "5", f"{limit:g}", *program, "--help"], timeout=limit + 30) if program else None
    if result is not None and result.exit_status == 124:
        c.item(WARN, f"`{' '.join(program)} --help` did not exit within {limit:.0f} s: flags not verified")
        return
    text = (result.stdout + result.stderr) if result is not None else ""
    if result is None or not result.ok or "--" not in text:
        c.item(WARN, f"`{' '.join(program)} --help` gave no flag list: cannot verify the space's flags")
        return
    missing = []
    for p in flags:
        names = (p.flag, *p.aliases)
        if not any(re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", text) for n in names if n):
            missing.append(p.flag or "")
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
        problem = _cycle(config)
        if problem:
            print(f" {BAD} the cycle failed: {problem}")
            return 1
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
    bench = HttpBenchmark(endpoint=endpoint, config=section)
    try:
        result = bench.run_scenario(
            Scenario(name="check", concurrency=1, prompt_tokens=32, output_tokens=16, requests=1)
        )
    finally:
        bench.close()
    accept = f", acceptance {result.accept_length:.2f}" if result.accept_length else ""
    print(f" {OK} tiny benchmark: {result.output_tok_s:.1f} tok/s{accept}")


def _cycle(config: StudyConfig) -> str | None:
    """One apply -> restart -> ready -> benchmark -> restore; the failure, if any, to print last."""
    from tuner.space import render
    from tuner.target import base_spec

    spec = render(config.space, base_spec(config.target), config.baseline)
    problems: list[str] = []

    def act(service: BaseService, host: BaseHost) -> None:
        was_running = service.state().running
        try:
            _bring_up(config, service, spec, "check-cycle", measure=True)
        except TuneError as exc:
            problems.append(str(exc))
        finally:
            if was_running:
                _bring_up(config, service, None, "check-restore")
            else:  # nothing ran before the check: nothing runs after it
                service.revert()
                service.stop()
                print(f" {OK} server stopped again (it was not running before the check)")

    _with_target(config, act)
    return problems[0] if problems else None


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


def cmd_stop(args: argparse.Namespace) -> int:
    config = load_config(args.config)

    def act(service: BaseService, host: BaseHost) -> None:
        state = service.state()
        service.stop()  # also an interrupted launch's leftover, found by its record
        what = f"stopped {state.identity}" if state.running else f"nothing tune started is running ({state.detail})"
        print(f" {OK} {what}")

    _with_target(config, act)
    return 0


__all__ = ["register", "run_check"]
