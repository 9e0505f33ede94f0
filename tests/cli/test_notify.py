"""``[study] notify``: one JSON summary on the hook's stdin when a run ends, however it ends; a hook that fails or
hangs never changes how the run ends. Real `tune start` processes against the simulator."""

from __future__ import annotations

import http.server
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fixtures_faults import Case, alive

# Each summary in a file of its own, named by state; the one-line message and the hook's pid beside it.
HOOK = (
    'notify = ["sh", "-c", "f=notified-$TUNE_STATE-$$.json; cat > $f; '
    'echo \\"$TUNE_STUDY|$TUNE_STATE|$TUNE_MESSAGE\\" >> messages.txt"]'
)


@pytest.fixture
def case(tmp_path: Path, port: int) -> Iterator[Case]:
    c = Case(tmp_path, port, trials=2)
    c.edit(lambda t: t)
    try:
        yield c
    finally:
        c.cleanup()


def hooked(case: Case, hook: str = HOOK, *, change: Any = lambda t: t) -> None:
    case.edit(lambda t: change(t).replace("[study]\n", f"[study]\n{hook}\n", 1))


def summaries(case: Case) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(case.root.glob("notified-*.json"))]


def test_a_normal_end_sends_the_recommendation(case: Case) -> None:
    hooked(case)
    run = case.start()
    assert run.rc == 0, run.err
    [sent] = summaries(case)
    assert sent["state"] == "finished" and sent["exit_status"] == 0 and sent["reason"] is None
    assert sent["study"] == "fault" and sent["trials"] == {"counted": 2, "target": 2} and sent["run_now"] == 2
    rec = sent["recommended"]
    assert rec["verified"] is True and rec["not_verified"] == []
    assert rec["deploy"] == "tune apply --best --config fault.toml"
    assert rec["launch"].startswith("env ") or rec["launch"].startswith(sys.executable)
    assert rec["figure"] in run.out  # the same figure the end of the run printed
    assert rec["speedup_text"] is None or rec["speedup_text"] in run.out or rec["baseline"]
    assert "notify: done (sh, " in run.err
    study, state, message = (case.root / "messages.txt").read_text().strip().split("|")
    assert (study, state) == ("fault", "finished")
    assert message.startswith(f"tune study fault finished: 2/2 trials; recommended trial #{rec['trial']}")


def test_an_environment_stop_sends_its_reason(case: Case) -> None:
    hooked(case, change=lambda t: t.replace('"--sim-seed", "5",', '"--sim-seed", "5", "--no-such-flag",'))
    run = case.start()
    assert run.rc == 3, run.err
    [sent] = summaries(case)
    assert sent["state"] == "environment" and sent["exit_status"] == 3
    assert sent["reason"].startswith("the unmodified base command fails: [ready]")
    assert run.message == f"tune: environment: {sent['reason']}"  # the verdict is still tune's last line
    assert sent["trials"] == {"counted": 0, "target": 2} and sent["recommended"] is None
    assert sent["resume"] == "tune start --trials 2 --config fault.toml"


def test_a_repeated_failure_stop_sends_its_reason(case: Case) -> None:
    ghost = '[space.ghost]\ntype = "int"\nlow = 1\nhigh = 64\nflag = "--no-such-tuned-flag"\ndefault = 1\n\n'
    hooked(case, change=lambda t: t.replace("[[constraints]]", ghost + "[[constraints]]"))
    run = case.start("--trials", "6")
    assert run.rc == 3, run.err
    [sent] = summaries(case)
    assert sent["state"] == "environment" and "3 trials in a row" in sent["reason"]
    assert sent["trials"]["counted"] == 1 and sent["recommended"]["trial"] == 0  # the baseline


def test_an_interrupt_sends_the_command_that_resumes(case: Case) -> None:
    hooked(case)
    proc = case.spawn(trials=4)
    case.wait_running(proc, after=1)
    os.kill(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    [sent] = summaries(case)
    assert sent["state"] == "interrupted" and sent["exit_status"] == 130
    assert sent["reason"].startswith("stopped at 1/4 trials. Resume with: ")
    assert sent["resume"] == "tune start --trials 4 --config fault.toml"
    assert err.splitlines()[-1] == f"tune: {sent['reason']}"


def test_a_failing_or_hanging_hook_never_changes_the_end(case: Case) -> None:
    hooked(case, 'notify = ["sh", "-c", "echo the webhook said no >&2; exit 7"]')
    run = case.start()
    assert run.rc == 0, run.err
    assert "notify: sh exited with status 7: the webhook said no" in run.err
    # 3 s: the hook must have written its pid before it is stopped, also on a loaded machine.
    hooked(case, 'notify = ["sh", "-c", "echo $$ > hook.pid; exec sleep 3600"]\nnotify_timeout_s = 3')
    t0 = time.monotonic()
    run = case.start("--trials", "3")
    assert run.rc == 0, run.err
    assert "notify: sh did not finish within 3 s ([study] notify_timeout_s): stopped" in run.err
    assert not alive(int((case.root / "hook.pid").read_text()))
    assert time.monotonic() - t0 < 1800  # not held by the hour-long hook (a loaded machine's slack below it)
    hooked(case, 'notify = ["/opt/nowhere/notify-me"]')
    run = case.start("--trials", "3")
    assert run.rc == 0 and "notify: notify-me could not be started: No such file or directory" in run.err


@pytest.fixture
def webhook() -> Iterator[tuple[str, list[bytes]]]:
    """A real HTTP endpoint on loopback that keeps every body POSTed to it."""
    received: list[bytes] = []

    class Hook(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            received.append(self.rfile.read(int(self.headers["Content-Length"])))
            self.send_response(204)
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hooks/tune", received
    finally:
        server.shutdown()


def test_the_documented_webhook_posts_the_summary(
    case: Case, webhook: tuple[str, list[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    example = docs[docs.index("A webhook: post the summary") :]
    line = next(x for x in example.splitlines() if x.startswith("notify = "))  # the documented hook, verbatim
    url, received = webhook
    monkeypatch.setenv("TUNE_WEBHOOK_URL", url)
    hooked(case, line)
    run = case.start()
    assert run.rc == 0, run.err
    assert "notify: done (sh, " in run.err
    [body] = received
    sent = json.loads(body)
    assert sent["state"] == "finished" and sent["trials"] == {"counted": 2, "target": 2}
