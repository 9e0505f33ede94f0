"""The console written to a log file: repeated progress is rate-limited, a new activity never is."""

from __future__ import annotations

import io

import pytest

from tuner.study import Console


def test_log_file_gets_every_scenario_line_but_not_every_progress_tick(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr("tuner.study._console.time.monotonic", lambda: now[0])
    out = io.StringIO()
    console = Console(stream=out, live=False)
    console.status("waiting for pid 7 (started 1): loading weights, 1 s")
    console.status("waiting for pid 7 (started 1): loading weights, 2 s")  # same activity within 15 s: dropped
    console.status("c1-short: score 140.1 (142.6 ± 2.5) tok/s, 2 repeats, precise")
    console.status("c8-short: score 598.0 (608.9 ± 10.9) tok/s, 2 repeats, better")  # at once: still written
    now[0] += 16
    console.status("c8-short: score 598.0 (608.9 ± 10.9) tok/s, 2 repeats, better")  # 15 s later: again
    lines = out.getvalue().splitlines()
    assert lines == [
        "  waiting for pid 7 (started 1): loading weights, 1 s",
        "  c1-short: score 140.1 (142.6 ± 2.5) tok/s, 2 repeats, precise",
        "  c8-short: score 598.0 (608.9 ± 10.9) tok/s, 2 repeats, better",
        "  c8-short: score 598.0 (608.9 ± 10.9) tok/s, 2 repeats, better",
    ]
