"""``[study] notify``: a command run when a run of the study ends, however it ends, told how on its stdin.

The summary is one JSON document (see :func:`summary`): the state and exit status, the reason of an early stop,
the trials, the recommended trial with its figure, speed-up and verdicts, and the commands to deploy it or go on.
The command runs with the study file's directory as working directory, ``TUNE_STUDY``, ``TUNE_STATE`` and
``TUNE_MESSAGE`` (one line for a person) in its environment, and at most ``[study] notify_timeout_s``; whatever
becomes of it (missing, failing, hanging) is one line on stderr and never changes how the run ends.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

from tuner.cli._exits import Ending
from tuner.config import StudyConfig

__all__ = ["notify", "summary"]


def summary(config: StudyConfig, *, study: str, storage: str, end: Ending, run: dict[str, Any]) -> dict[str, Any]:
    """What the hook is told. ``run`` adds the run's own facts (host, pid, log, times, trials run now).

    Everything the study can tell is read from it; a study that cannot be read (the storage failed: often
    why the run stopped) leaves those fields null. No secret is in it (:mod:`tuner.secrets`).
    """
    from tuner.study import resume_command

    out: dict[str, Any] = {
        "study": study,
        "state": end.state,
        "exit_status": end.status,
        "reason": end.reason,
        **run,
        "trials": None,
        "recommended": None,
        "resume": None,
    }
    with contextlib.suppress(Exception):  # the summary says what it can; the hook runs regardless
        out.update(_study_facts(config, study=study, storage=storage))
        if end.status != 0 and out["trials"] is not None:
            out["resume"] = resume_command(config, storage, out["trials"]["target"], study=study)
    out["message"] = _message(out)
    return dict(config.secrets.value(out))


def _study_facts(config: StudyConfig, *, study: str, storage: str) -> dict[str, Any]:
    from tuner.report import figure_text, launch_text, speedup_clause, study_speedup, tune_command
    from tuner.study import load_existing
    from tuner.trials import attrs, counted_trials, recommended

    loaded = load_existing(storage, study)
    target = loaded.user_attrs.get(attrs.TARGET_TRIALS, config.study.trials)
    facts: dict[str, Any] = {"trials": {"counted": counted_trials(loaded), "target": target}}
    rec = recommended(loaded)
    if rec is None:
        return facts
    t = rec.trial
    speedup = None if t.user_attrs.get(attrs.BASELINE) else study_speedup(loaded, config, t)
    facts["recommended"] = {
        "trial": t.number,
        "params": t.params,
        "score": t.values[0] if t.values and len(t.values) == 1 else t.values,
        "figure": figure_text(t, config),
        "speedup": round(speedup.ratio, 4) if speedup is not None else None,
        "speedup_text": speedup_clause(speedup) if speedup is not None else None,
        "speedup_detail": speedup.as_json() if speedup is not None else None,
        "baseline": bool(t.user_attrs.get(attrs.BASELINE)),
        "confirmed": rec.confirmed,
        "gate": rec.gate,
        "verified": not rec.missing(),
        "not_verified": rec.missing(),
        "launch": launch_text(config, t),
        "deploy": tune_command("apply --best", config, storage=storage, study=study),
    }
    return facts


def _message(out: dict[str, Any]) -> str:
    """One line for a person (``TUNE_MESSAGE``): what happened, and what it found."""
    trials = out.get("trials") or {}
    counted = f": {trials['counted']}/{trials['target']} trials" if trials else ""
    text = f"tune study {out['study']} {out['state'].replace('-', ' ')}{counted}"
    if out.get("reason") and out["state"] != "finished":
        text += f" ({out['reason']})"
    rec = out.get("recommended")
    if rec:
        speedup = f", {rec['speedup_text']}" if rec.get("speedup_text") else ""
        speedup = ", the baseline itself" if rec["baseline"] else speedup
        verified = "" if rec["verified"] else ", NOT VERIFIED"
        text += f"; recommended trial #{rec['trial']}, score {rec['figure']}{speedup}{verified}"
    return text


def notify(config: StudyConfig, payload: dict[str, Any]) -> None:
    """Run ``[study] notify`` with ``payload`` on stdin; report on stderr, never raise (but a second Ctrl-C)."""
    command = config.study.notify
    if not command:
        return
    name = os.path.basename(command[0])  # its arguments may carry a webhook's secret: never echoed
    env = {
        **os.environ,
        "TUNE_STUDY": str(payload["study"]),
        "TUNE_STATE": str(payload["state"]),
        "TUNE_MESSAGE": str(payload["message"]),
    }
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            list(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            cwd=config.base_dir,
            env=env,
            text=True,
            start_new_session=True,  # its own group: a hook that hangs is stopped with everything it started
        )
    except OSError as exc:
        _say(f"{name} could not be started: {exc.strerror or exc}")
        return
    text = json.dumps(payload, indent=2, ensure_ascii=False) + "\n"
    _finish(proc, text, name=name, timeout_s=config.study.notify_timeout_s)
    if proc.returncode == 0:
        _say(f"done ({name}, {time.monotonic() - started:.1f} s)")


def _finish(proc: subprocess.Popen[str], text: str, *, name: str, timeout_s: float) -> None:
    try:
        _, err = proc.communicate(text, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill(proc)
        _say(f"{name} did not finish within {timeout_s:g} s ([study] notify_timeout_s): stopped")
        return
    except BaseException:  # a second Ctrl-C: the hook goes with the run
        _kill(proc)
        raise
    if proc.returncode != 0:
        said = [line.strip() for line in (err or "").splitlines() if line.strip()]
        why = f": {said[-1][:200]}" if said else ""
        _say(f"{name} exited with status {proc.returncode}{why}")


def _kill(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(Exception):
        proc.communicate(timeout=5)


def _say(text: str) -> None:
    with contextlib.suppress(OSError):  # a terminal that hung up
        print(f"notify: {text}", file=sys.stderr, flush=True)
