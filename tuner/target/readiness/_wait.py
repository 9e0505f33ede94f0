from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import urlsplit

import httpx

from tuner.config import ReadinessSection
from tuner.endpoint import Endpoint
from tuner.errors import NotReady, StartFailed
from tuner.target.readiness._failfast import FailFast
from tuner.target.services import BaseService, Restarted
from tuner.wait import wait_until

Progress = Callable[[str], None]


@dataclass(frozen=True, kw_only=True)
class Ready:
    """The new server answered a real generation request."""

    seconds: float
    """From the restart to readiness, as seen by us."""
    phase_times: dict[str, float] = field(default_factory=dict)
    """Seconds since restart at which each phase marker first appeared in the log, as the poll that read its line
    saw it: markers that reach the log between two polls share that poll's time (their order is the log's)."""
    log_cursor: str = "0"
    endpoint: Endpoint | None = None
    """The endpoint with its model id resolved."""


class ReadinessCheck(Protocol):
    """How "the new server really serves" is established; :func:`wait_ready` by default."""

    def __call__(
        self,
        *,
        service: BaseService,
        restarted: Restarted,
        endpoint: Endpoint,
        config: ReadinessSection,
        progress: Progress | None = None,
    ) -> Ready: ...


_EXCEPTION_LINE = re.compile(r"^(?:[\w.]+\.)?\w*(?:Error|Exception)\b:\s")
_CAUSE_WORDS = re.compile(
    r"\b(?:error|failed|fatal|exceeded|out of memory|aborted|assertion|segmentation fault|killed)\b", re.IGNORECASE
)


class LogWatch:
    """Follows a service's log from a cursor: fatal patterns, phase markers and a tail kept for evidence."""

    def __init__(
        self,
        *,
        service: BaseService,
        cursor: str,
        fatal_patterns: tuple[str, ...],
        phase_markers: tuple[tuple[str, str], ...],
        tail_lines: int = 80,
    ) -> None:
        self._service = service
        self.cursor = cursor
        self._fatal = [re.compile(p, re.IGNORECASE) for p in fatal_patterns]
        self._markers = [(label, re.compile(p)) for label, p in phase_markers]
        self._partial = ""
        self.tail: deque[str] = deque(maxlen=tail_lines)
        self.fatal_lines: list[str] = []
        self.phase: str = "starting"
        self.phases_seen: dict[str, float] = {}

    def poll(self, *, elapsed: float) -> None:
        chunk = self._service.read_log(self.cursor)
        self.cursor = chunk.cursor
        if not chunk.text:
            return
        text = self._partial + chunk.text
        lines = text.split("\n")
        self._partial = lines.pop()
        for line in lines:
            self._line(line, elapsed)

    def flush(self, *, elapsed: float) -> None:
        """Treat a trailing partial line as complete (the process has exited: nothing more will come)."""
        if self._partial:
            self._line(self._partial, elapsed)
            self._partial = ""

    def _line(self, line: str, elapsed: float) -> None:
        self.tail.append(line)
        if any(p.search(line) for p in self._fatal):
            self.fatal_lines.append(line)
        for label, pattern in self._markers:
            if pattern.search(line) and label not in self.phases_seen:
                self.phases_seen[label] = round(elapsed, 3)
                self.phase = label

    def headline(self) -> str:
        """The most telling fatal line: a traceback's final exception line rather than its header; without a
        fatal line, the log's last words (a process that exits says why last: ``No module named 'sglang'``)."""
        if not self.fatal_lines:
            # `tune: ...` lines are the launcher's own notes in the log (the exit status), not the server's words.
            said = [line.strip() for line in self.tail if line.strip() and not line.startswith("tune: ")]
            return said[-1][:300] if said else ""
        specific = [line for line in self.fatal_lines if not line.startswith("Traceback (most recent call last)")]
        return (specific[-1] if specific else self.fatal_lines[0]).strip()[:300]

    def cause(self) -> str | None:
        """The log's line that says why the server stopped serving (None: no line says): a traceback's exception
        line (``RuntimeError: CUDA error: ...``), else the last line naming an error (llama-server's ``decode()
        failed: Context size has been exceeded``)."""
        said = [line.strip() for line in self.tail if line.strip() and not line.startswith("tune: ")]
        raised = [line for line in said if _EXCEPTION_LINE.match(line)]
        worded = raised or [line for line in said if _CAUSE_WORDS.search(line)]
        return worded[-1][:300] if worded else None

    def evidence(self) -> str:
        tail = "\n".join(self.tail)
        if not self.fatal_lines:
            return tail
        return "matching lines:\n" + "\n".join(self.fatal_lines[:20]) + "\n\nlog tail:\n" + tail


def _probe_health(client: httpx.Client, endpoint: Endpoint, path: str) -> str | None:
    """None when healthy, else a short description of the (expected, transient) answer."""
    try:
        r = client.get(endpoint.url(path), headers=endpoint.headers)
    except httpx.HTTPError as exc:
        return type(exc).__name__
    return None if r.status_code == 200 else f"{path} {r.status_code}"


def _probe_generation(client: httpx.Client, endpoint: Endpoint) -> str | None:
    """None when a real generation returned tokens; else why not (still transient)."""
    body = {
        "model": endpoint.model or "default",
        "messages": [{"role": "user", "content": "Say OK."}],
        "max_tokens": 4,
        "temperature": 0,
        "stream": False,
    }
    try:
        r = client.post(endpoint.url("/v1/chat/completions"), json=body, headers=endpoint.headers)
    except httpx.HTTPError as exc:
        return f"generation {type(exc).__name__}"
    if r.status_code != 200:
        return f"generation {r.status_code}"
    try:
        data = r.json()
        usage = data.get("usage") or {}
        message = data["choices"][0].get("message") or {}
    except (ValueError, KeyError, IndexError, TypeError):
        return "generation returned malformed JSON"
    produced = usage.get("completion_tokens") or len(
        (message.get("content") or "") + (message.get("reasoning_content") or "")
    )
    return None if produced else "generation returned no tokens"


def wait_ready(
    *,
    service: BaseService,
    restarted: Restarted,
    endpoint: Endpoint,
    config: ReadinessSection,
    progress: Progress | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Ready:
    """Wait until the NEW process really serves, failing fast when it cannot.

    The seed's sweep failed four ways, and each is closed here:
    - the old process kept answering after the restart: no answer counts while it is still alive, and the
      new process must itself be alive when readiness is declared;
    - "active" or ``/v1/models`` is not readiness: ``/health`` must be 200 *and* a real generation must
      return tokens (``/health`` has been seen green minutes before generation worked);
    - transient failures while loading (refused connections, 503, timeouts) are expected: only the process
      exiting, a fatal log line, or the timeout ends the wait;
    - "failed to start" said nothing: failures carry the matching log lines and the log tail.
    """
    timeout = httpx.Timeout(config.request_timeout_s, connect=min(config.request_timeout_s, 5.0))
    with httpx.Client(timeout=timeout) as client:
        probe = _ReadinessProbe(
            service=service, restarted=restarted, endpoint=endpoint, config=config, client=client, clock=clock
        )

        def tick(elapsed: float) -> None:
            if progress is not None and elapsed >= 1.0:  # a quick start needs no line (a log would get one a trial)
                progress(probe.status(elapsed))

        ready = wait_until(probe.check, timeout=config.timeout_s, interval=config.poll_interval_s, on_tick=tick,
                           clock=clock)  # fmt: skip
    if ready is None:
        raise NotReady(
            f"not ready after {config.timeout_s:.0f} s (last phase: {probe.watch.phase}; "
            f"last answer: {probe.last_answer})",
            evidence=probe.watch.evidence(),
            log=service.log_location(),
        )
    if progress:
        progress(f"ready after {ready.seconds:.1f} s")
    return ready


class _ReadinessProbe:
    """One readiness poll at a time: the log, the process, then (once the old process is gone) the endpoint."""

    def __init__(
        self,
        *,
        service: BaseService,
        restarted: Restarted,
        endpoint: Endpoint,
        config: ReadinessSection,
        client: httpx.Client,
        clock: Callable[[], float],
    ) -> None:
        self._service = service
        self._restarted = restarted
        self._endpoint = endpoint
        self._config = config
        self._client = client
        self._clock = clock
        self._start = clock()
        self._port = urlsplit(endpoint.base_url).port
        self.watch = LogWatch(
            service=service,
            cursor=restarted.log_cursor,
            fatal_patterns=config.fatal_patterns,
            phase_markers=config.phase_markers,
        )
        self.last_answer = "no answer yet"
        self._fail_fast = FailFast(
            service=service, restarted=restarted, base_url=endpoint.base_url, config=config, clock=clock
        )

    def status(self, elapsed: float) -> str:
        return f"waiting for {self._restarted.new}: {self.watch.phase}, {elapsed:.0f} s ({self.last_answer})"

    def check(self, elapsed: float) -> Ready | None:
        self._fail_if_dead(elapsed)
        old = self._restarted.old
        if old is not None and self._service.is_alive(old):
            self.last_answer = f"old process {old} still alive: its answers are ignored"
            return None
        if self._endpoint.model is None and self._config.generation_check:
            self._endpoint = _with_model(self._client, self._endpoint)
        self.last_answer = _probe(self._client, self._endpoint, self._config) or "ready"
        self._fail_fast.observe(self.last_answer)
        new = self._restarted.new
        if self.last_answer == "ready" and self._port and self._service.serves(new, self._port) is False:
            self.last_answer = f"port {self._port} answered by a process other than {new}"
        if self.last_answer != "ready" or not self._service.is_alive(new):
            return None
        self.watch.poll(elapsed=self._clock() - self._start)
        return Ready(
            seconds=round(self._clock() - self._start, 3),
            phase_times=dict(self.watch.phases_seen),
            log_cursor=self.watch.cursor,
            endpoint=self._endpoint,
        )

    def _fail_if_dead(self, elapsed: float) -> None:
        """A fatal log line or an exited process ends the wait at once, with the log as evidence."""
        watch, service, new = self.watch, self._service, self._restarted.new
        watch.poll(elapsed=elapsed)
        if watch.fatal_lines:
            _settle(watch, service, self._restarted, clock=self._clock, start=self._start)
            raise StartFailed(
                f"server logged a fatal error while {watch.phase}: {watch.headline()}",
                evidence=watch.evidence(),
                log=service.log_location(),
            )
        if not service.is_alive(new):
            watch.poll(elapsed=elapsed)
            watch.flush(elapsed=elapsed)
            state = service.state()
            status = f" with status {state.exit_status}" if state.exit_status is not None else ""
            said = watch.headline()
            raise StartFailed(
                f"server process exited{status} while {watch.phase}" + (f": {said}" if said else ""),
                evidence=watch.evidence(),
                log=service.log_location(),
            )


def _settle(
    watch: LogWatch, service: BaseService, restarted: Restarted, *, clock: Callable[[], float], start: float
) -> None:
    """A fatal line was seen: give the rest of the traceback a moment to reach the log (at most ~2 s)."""

    def quiet(_: float) -> bool | None:
        before = watch.cursor
        watch.poll(elapsed=clock() - start)
        return True if watch.cursor == before and not service.is_alive(restarted.new) else None

    wait_until(quiet, timeout=2.0, interval=0.1, clock=clock)
    watch.flush(elapsed=clock() - start)


def _with_model(client: httpx.Client, endpoint: Endpoint) -> Endpoint:
    # The model id is needed for the generation request; /v1/models answering is not readiness by itself.
    try:
        return endpoint.resolve_model(client)
    except (httpx.HTTPError, ValueError, KeyError, IndexError):
        return endpoint


def _probe(client: httpx.Client, endpoint: Endpoint, config: ReadinessSection) -> str | None:
    if config.health_path:
        problem = _probe_health(client, endpoint, config.health_path)
        if problem:
            return problem
    if config.generation_check:
        return _probe_generation(client, endpoint)
    return None
