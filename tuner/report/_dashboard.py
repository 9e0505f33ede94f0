"""optuna-dashboard on a study, with the feasibility it ignores put back.

optuna-dashboard 0.21 picks "Best trial" with ``storage.get_best_trial`` (or a Pareto front over every
COMPLETE trial) and reads constraints from a system attr Optuna 5 no longer writes. So a fast config that
failed the correctness gate is shown as the best, and a leader the end-of-study re-measurement overturned is
shown instead of the recommendation. :func:`dashboard_app` wraps the dashboard's WSGI app: the study-detail JSON's
``best_trials`` become tune's recommendation (:func:`tuner.trials.recommended`; the Pareto front for
multi-objective studies) and every trial carries its constraint values, which the dashboard's UI does know how to
show; its parameter importances become the report's (:func:`tuner.report.importances`).

The dashboard is read-only unless asked (``allow_edits``): a night's results must not be one click from gone.
:class:`_ReadOnly` answers 403 to every request that would change the storage or the artifacts (deleting or
renaming a study, telling or skipping a trial, user attrs, artifact upload and deletion, preferences) but the
notes: tune's verdict notes, which a person may edit (a human edit wins, :mod:`tuner.report._notes`).
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import optuna

from tuner.config import StudyConfig
from tuner.report._importance import dashboard_importances
from tuner.trials import Outcome, recommended, study_trials
from tuner.trials.adapter import trial_id

__all__ = ["DashboardServer", "dashboard_app", "refresh_notes", "serve_dashboard"]

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

_DETAIL = re.compile(r"^/api/studies/(\d+)/?$")
_FAILED = (Outcome.NOT_STARTED, Outcome.DIED, Outcome.OTHER)
"""Outcomes of a trial that failed, whatever state it is stored in: the dashboard's badge says "Fail" too."""
_NOTE = re.compile(r"^/api/studies/\d+/(\d+/)?note/?$")
_READS = ("GET", "HEAD", "OPTIONS")
READ_ONLY_REASON = "this dashboard is read-only: restart it with `tune dashboard --allow-edits` to change the study"
_IMPORTANCES = re.compile(r"^/api/studies/(\d+)/param_importances/?$")


def _constraint_list(t: optuna.trial.FrozenTrial) -> list[float]:
    """Constraint values in the pre-Optuna-5 list form the dashboard renders (> 0 = violated)."""
    values = [float(v) for _, v in sorted(t.constraints.items())]
    if (
        t.state == optuna.trial.TrialState.COMPLETE
        # measured and unchecked is not wrong
        and Outcome.of(t) not in (Outcome.FEASIBLE, Outcome.NOT_GATED, Outcome.NOT_GATED_YET, Outcome.NOT_FINALIST)
        and not any(v > 0 for v in values)
    ):
        values.append(1.0)  # infeasible by our gate verdict without a constraint row: still show it
    return values


class _FeasibilityMiddleware:
    def __init__(self, *, app: WSGIApp, storage: optuna.storages.BaseStorage) -> None:
        self._app = app
        self._storage = storage

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        match = _DETAIL.match(path)
        if environ.get("REQUEST_METHOD") == "GET" and (imp := _IMPORTANCES.match(path)):
            with contextlib.suppress(Exception):  # unreadable: the dashboard's own answer is still an answer
                return self._json(self._importances(int(imp.group(1))), start_response)
        if environ.get("REQUEST_METHOD") != "GET" or match is None:
            return self._app(environ, start_response)
        captured: dict[str, Any] = {}

        def capture(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[[bytes], Any]:
            captured["status"], captured["headers"] = status, headers
            return lambda data: None

        body = b"".join(self._app(environ, capture))
        status, headers = captured["status"], captured["headers"]
        if status.startswith("200"):
            # A view we cannot correct is still better than no dashboard.
            with contextlib.suppress(Exception):
                body = self._rewrite(int(match.group(1)), body)
        headers = [(k, v) for k, v in headers if k.lower() != "content-length"]
        headers.append(("Content-Length", str(len(body))))
        start_response(status, headers)
        return [body]

    @staticmethod
    def _json(data: Any, start_response: Callable[..., Any]) -> Iterable[bytes]:
        body = json.dumps(data).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]

    def _importances(self, study_id: int) -> dict[str, Any]:
        name = self._storage.get_study_name_from_id(study_id)
        return dashboard_importances(optuna.load_study(study_name=name, storage=self._storage))

    def _rewrite(self, study_id: int, body: bytes) -> bytes:
        from optuna_dashboard._serializer import serialize_frozen_trial

        data = json.loads(body)
        name = self._storage.get_study_name_from_id(study_id)
        study = optuna.load_study(study_name=name, storage=self._storage)
        trials = {trial_id(t): t for t in study_trials(study)}
        for entry in data.get("trials", []):
            t = trials.get(entry.get("trial_id"))
            if t is not None:
                entry["constraints"] = _constraint_list(t)
                if Outcome.of(t) in _FAILED:  # stored PRUNED so the sampler learns; every other view says failed
                    entry["state"] = "Fail"
            _round(entry)
        system_attrs = self._storage.get_study_system_attrs(study_id)
        rec = recommended(study)
        best = []
        for t in (rec.front or (rec.trial,)) if rec is not None else ():
            entry = serialize_frozen_trial(study_id, t, system_attrs)
            entry["constraints"] = _constraint_list(t)
            best.append(_round(entry))
        data["best_trials"] = best
        return json.dumps(data).encode()


def _round(entry: dict[str, Any]) -> dict[str, Any]:
    """Values to one decimal, as every other view of `tune` shows them (the UI prints floats whole)."""
    if isinstance(entry.get("values"), list):
        entry["values"] = [round(v, 1) if isinstance(v, float) else v for v in entry["values"]]
    for step in entry.get("intermediate_values") or ():
        if isinstance(step, dict) and isinstance(step.get("value"), float):
            step["value"] = round(step["value"], 1)
    return entry


class _ReadOnly:
    """Refuses every write but a note's (see the module doc) with 403 and the reason, as the UI shows it."""

    def __init__(self, *, app: WSGIApp) -> None:
        self._app = app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD", "GET").upper()
        if method in _READS or (method == "PUT" and _NOTE.match(environ.get("PATH_INFO", ""))):
            return self._app(environ, start_response)
        body = json.dumps({"reason": READ_ONLY_REASON}).encode()
        start_response("403 Forbidden", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]


def dashboard_app(
    storage: optuna.storages.BaseStorage, *, artifact_store: Any = None, allow_edits: bool = False
) -> WSGIApp:
    """optuna-dashboard's WSGI app for ``storage``, with feasible-only best trials and visible constraints;
    read-only but for the notes unless ``allow_edits``."""
    from optuna_dashboard import wsgi

    app: WSGIApp = _FeasibilityMiddleware(app=wsgi(storage, artifact_store=artifact_store), storage=storage)
    return app if allow_edits else _ReadOnly(app=app)


def refresh_notes(storage: optuna.storages.BaseStorage, *, configs: Mapping[str, StudyConfig] | None = None) -> int:
    """Verdict notes on every study's trials (infeasible, failed, recommended); returns how many changed.
    ``configs``: study files by study name, for the figures the notes show."""
    from tuner.report._notes import annotate_trials

    changed = 0
    for summary in storage.get_all_studies():
        study = optuna.load_study(study_name=summary.study_name, storage=storage)
        changed += annotate_trials(study, config=(configs or {}).get(summary.study_name))
    return changed


class DashboardServer:
    """The dashboard on a threaded WSGI server; trial notes are refreshed every ``refresh_s`` seconds."""

    def __init__(
        self,
        *,
        storage: optuna.storages.BaseStorage,
        artifact_store: Any = None,
        host: str = "127.0.0.1",
        port: int = 8080,
        refresh_s: float | None = 30.0,
        configs: Mapping[str, StudyConfig] | None = None,
        allow_edits: bool = False,
    ) -> None:
        from socketserver import ThreadingMixIn
        from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

        class _Quiet(WSGIRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # the UI polls every few seconds
                pass

        class _Threaded(ThreadingMixIn, WSGIServer):
            daemon_threads = True

        self._storage = storage
        self._refresh_s = refresh_s
        self._configs = dict(configs or {})
        self._stop = threading.Event()
        self._served = False
        self._server = make_server(
            host,
            port,
            dashboard_app(storage, artifact_store=artifact_store, allow_edits=allow_edits),
            server_class=_Threaded,
            handler_class=_Quiet,
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def _refresh_loop(self) -> None:
        while True:
            # Notes are a convenience: a busy database must not stop the dashboard.
            with contextlib.suppress(Exception):
                refresh_notes(self._storage, configs=self._configs)
            if self._refresh_s is None or self._stop.wait(self._refresh_s):
                return

    def start(self) -> DashboardServer:
        """Serve in background threads (tests, embedding); :meth:`serve_forever` blocks instead."""
        self._served = True
        threading.Thread(target=self._refresh_loop, name="tune-dashboard-notes", daemon=True).start()
        threading.Thread(target=self._server.serve_forever, name="tune-dashboard", daemon=True).start()
        return self

    def serve_forever(self) -> None:
        self._served = True
        threading.Thread(target=self._refresh_loop, name="tune-dashboard-notes", daemon=True).start()
        try:
            self._server.serve_forever()
        finally:
            self.close()

    def close(self) -> None:
        self._stop.set()
        if self._served:
            # shutdown() waits for serve_forever to finish, forever if it never started.
            self._server.shutdown()
            self._served = False
        self._server.server_close()

    def __enter__(self) -> DashboardServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve_dashboard(
    storage: optuna.storages.BaseStorage,
    *,
    artifact_store: Any = None,
    host: str = "127.0.0.1",
    port: int = 8080,
    allow_edits: bool = False,
) -> None:
    """Block serving the dashboard (``tune dashboard``)."""
    server = DashboardServer(
        storage=storage, artifact_store=artifact_store, host=host, port=port, allow_edits=allow_edits
    )
    server.serve_forever()
