"""``tune start`` on a fleet: one worker process per ``[target.ssh] hosts`` entry, all on one study.

Each worker is a ``tune start --fleet-host I`` child: its own process, SSH connection, server lock and log file
(``runs/<study>/workers/<name>.log``); its lines reach the terminal prefixed with ``[name]``. Ctrl-C (or SIGTERM)
is passed to every worker, each of which marks its running trial FAIL and puts its server back per ``on_exit``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO

from tuner.config import StudyConfig, fleet_member

__all__ = ["run_fleet"]

_print_lock = threading.Lock()


@dataclass
class _Worker:
    name: str
    proc: subprocess.Popen[str]
    log: Path
    pump: threading.Thread


def run_fleet(args: argparse.Namespace, config: StudyConfig) -> int:
    from tuner.study import default_worker_name

    assert config.target.ssh is not None
    members = [fleet_member(config, i) for i in range(len(config.target.ssh.hosts))]  # all checked before any starts
    names = [default_worker_name(m) for m in members]
    log_dir = Path(config.study.artifacts_dir).parent / "workers"
    log_dir.mkdir(parents=True, exist_ok=True)
    workers = [_start(i, name, _child_argv(args, config, i), log_dir) for i, name in enumerate(names)]
    study = args.study or config.study.name
    _say(f"tune: {len(workers)} workers on study {study}: {', '.join(names)}; logs in {log_dir}")
    interrupted = False
    with _sigterm_raises():
        try:
            codes = [w.proc.wait() for w in workers]
        except KeyboardInterrupt:
            interrupted = True
            codes = _stop_all(workers)
    for w in workers:
        w.pump.join(timeout=10)
    failed = [(w, code) for w, code in zip(workers, codes, strict=True) if code not in (0, 130)]
    for w, code in failed:
        _say(f"tune: worker {w.name} exited with status {code} (log: {w.log})")
    if interrupted or any(code == 130 for code in codes):
        return 130
    return 1 if failed else 0


def _child_argv(args: argparse.Namespace, config: StudyConfig, index: int) -> list[str]:
    argv = [sys.executable, "-m", "tuner", "start", "--config", config.source, "--fleet-host", str(index)]
    for flag, value in (("--trials", args.trials), ("--storage", args.storage), ("--study", args.study)):
        if value is not None:
            argv += [flag, str(value)]
    argv += ["--force-config"] if args.force_config else []
    argv += ["--allow-mixed-targets"] if args.allow_mixed_targets else []
    return argv


def _start(index: int, name: str, argv: list[str], log_dir: Path) -> _Worker:
    log = log_dir / f"{index}-{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}.log"
    # A session of its own: the terminal's Ctrl-C reaches the launcher only, which passes it on exactly once.
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1, start_new_session=True
    )
    assert proc.stdout is not None
    pump = threading.Thread(target=_pump, args=(name, proc.stdout, log), name=f"tune-fleet-{index}", daemon=True)
    pump.start()
    return _Worker(name=name, proc=proc, log=log, pump=pump)


def _pump(name: str, stream: IO[str], log: Path) -> None:
    with log.open("a") as out:
        for line in stream:
            out.write(line)
            out.flush()
            _say(f"[{name}] {line.rstrip()}")


def _say(text: str) -> None:
    with _print_lock:
        print(text, file=sys.stderr, flush=True)


def _stop_all(workers: list[_Worker]) -> list[int]:
    _say(f"tune: stopping {len(workers)} workers (each marks its running trial FAIL and puts its server back)")
    for w in workers:
        if w.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(w.proc.pid, signal.SIGINT)
    codes = []
    for w in workers:
        while True:
            try:
                codes.append(w.proc.wait())
                break
            except KeyboardInterrupt:
                _say(f"tune: still waiting for {w.name} to put its server back")
    return codes


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
