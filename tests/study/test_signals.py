"""A stop signal reaches the run exactly once, never inside a database session, never lost to the garbage collector.

Real signals to this process and a real SQLite storage (make_storage's engine); pytest runs tests in the main
thread, where the handler lives.
"""

from __future__ import annotations

import gc
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import text

from tuner.study import _signals
from tuner.study._signals import Stop, stop_signals
from tuner.study._storage import make_storage

WAIT_S = 10.0  # a bound for "soon", never a figure under test


def wait_for_stop() -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        time.sleep(0.005)
    raise AssertionError(f"no Stop within {WAIT_S} s")


def no_second_stop(seconds: float = 0.3) -> None:
    """Whatever re-delivery was scheduled has had time to fire: a second Stop would land here."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.005)


@pytest.fixture
def engine(tmp_path: Path):  # type: ignore[no-untyped-def]
    storage = make_storage(f"sqlite:///{tmp_path / 'study.db'}", busy_s=5)
    return storage.engine  # type: ignore[attr-defined]


def test_a_signal_outside_the_database_stops_at_once() -> None:
    with stop_signals():
        with pytest.raises(Stop) as stop:
            os.kill(os.getpid(), signal.SIGTERM)
            wait_for_stop()
        assert stop.value.signum == signal.SIGTERM
        no_second_stop()


def test_a_signal_waits_until_the_connection_is_back_in_the_pool(engine) -> None:  # type: ignore[no-untyped-def]
    with stop_signals():
        with pytest.raises(Stop):
            with engine.connect() as conn:
                conn.execute(text("BEGIN"))
                conn.execute(text("SELECT count(*) FROM studies")).fetchall()
                landed_inside = True
                os.kill(os.getpid(), signal.SIGHUP)
                for _ in range(20):  # plenty of bytecode boundaries where the handler would have raised
                    conn.execute(text("SELECT count(*) FROM trials")).fetchall()
                    time.sleep(0.01)
                conn.execute(text("COMMIT"))
                landed_inside = False
            wait_for_stop()
        assert not landed_inside
        no_second_stop()
        with engine.connect() as conn:  # the session ended cleanly: a write on a fresh connection goes through
            conn.execute(text("CREATE TABLE after_stop (x INTEGER)"))
            conn.commit()


def test_ctrl_c_behaves_like_sigterm(engine) -> None:  # type: ignore[no-untyped-def]
    with stop_signals(), pytest.raises(KeyboardInterrupt):
        with engine.connect() as conn:
            os.kill(os.getpid(), signal.SIGINT)
            conn.execute(text("SELECT 1")).fetchall()
            time.sleep(0.05)
        wait_for_stop()


def test_a_connection_held_too_long_no_longer_delays_the_stop(engine, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(_signals, "MAX_DEFER_S", 0.2)
    with stop_signals():
        conn = engine.connect()
        try:
            with pytest.raises(Stop):
                conn.execute(text("SELECT 1")).fetchall()
                os.kill(os.getpid(), signal.SIGTERM)
                wait_for_stop()
        finally:
            conn.close()
        no_second_stop()


class _CollectedDuringTheSignal:
    """An object whose finaliser is running when the signal arrives, as a weakref callback or ``__del__`` may."""

    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1000):  # the handler runs (and raises) in here, where Python can only print and drop it
            pass


def test_a_stop_dropped_by_a_finaliser_is_raised_again() -> None:
    dropped: list[BaseException | None] = []
    previous = _signals.sys.unraisablehook
    with stop_signals():
        with pytest.raises(Stop):
            hook = _signals.sys.unraisablehook
            _signals.sys.unraisablehook = lambda u: (dropped.append(u.exc_value), hook(u))  # type: ignore[func-returns-value]
            obj = _CollectedDuringTheSignal()
            del obj
            gc.collect()
            wait_for_stop()
        _signals.sys.unraisablehook = hook
        # Dropped at least once (again, when a re-delivery also met a finaliser), and the run saw it all the same.
        assert dropped and all(isinstance(e, Stop) for e in dropped)
        no_second_stop()
    assert _signals.sys.unraisablehook is previous


def test_outside_the_main_thread_signals_are_left_alone() -> None:
    before = signal.getsignal(signal.SIGTERM)
    seen: list[object] = []

    def run() -> None:
        with stop_signals():
            seen.append(signal.getsignal(signal.SIGTERM))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert seen == [before] and signal.getsignal(signal.SIGTERM) is before


def test_a_connection_returned_by_another_thread_releases_the_stop(engine) -> None:  # type: ignore[no-untyped-def]
    """The garbage collector may close the main thread's forgotten connection from any thread."""
    with stop_signals():
        conn = engine.connect()
        conn.execute(text("SELECT 1")).fetchall()
        with pytest.raises(Stop):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)
            closer = threading.Thread(target=conn.close)
            closer.start()
            closer.join()
            wait_for_stop()
        no_second_stop()


def test_a_stop_held_back_to_the_end_of_the_block_is_raised_there(engine) -> None:  # type: ignore[no-untyped-def]
    conn = engine.connect()
    try:
        with pytest.raises(Stop):
            with stop_signals():
                conn.execute(text("SELECT 1")).fetchall()
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.05)
            raise AssertionError("the block ended without the stop")
    finally:
        conn.close()


def test_a_signal_inside_an_event_loop_task_leaves_no_task_holding_it(caplog: pytest.LogCaptureFixture) -> None:
    """The benchmark's ``asyncio.run``: a signal that lands while one of its tasks runs (here: the task sends
    it) stops the loop from a callback, so ``asyncio.run`` cancels and awaits every task and none keeps the stop
    ("Task exception was never retrieved")."""
    import asyncio

    cleaned: list[str] = []

    async def worker(name: str, signals: bool) -> None:
        try:
            if signals:
                signal.raise_signal(signal.SIGINT)  # the handler runs inside this task's step
                for _ in range(1000):
                    time.sleep(0.001)  # still inside the step: a stop raised here would end this task
            await asyncio.sleep(WAIT_S)
        finally:
            cleaned.append(name)

    async def scenario() -> None:
        tasks = [asyncio.create_task(worker(f"w{i}", i == 1)) for i in range(3)]
        await asyncio.gather(*tasks)

    with caplog.at_level("ERROR", logger="asyncio"), stop_signals():
        with pytest.raises(Stop) as stop:
            asyncio.run(scenario())
        assert stop.value.signum == signal.SIGINT
        no_second_stop()
        gc.collect()
    assert sorted(cleaned) == ["w0", "w1", "w2"]  # every task was cancelled and ran its cleanup
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()], caplog.text
