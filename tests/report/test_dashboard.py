"""A real optuna-dashboard on a loopback port, read through its HTTP API like the browser does."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import optuna
import pytest
from optuna.artifacts import FileSystemArtifactStore

from tuner.report import DashboardServer, mark_feasibility, write_study_note
from tuner.report._importance import importances
from tuner.report._notes import annotate_trials, study_note_text
from tuner.trials import best_trials, recommended, record_of
from tuner.trials._confirmed import CONFIRMATION

Case = Any  # tests/report/conftest.py's StudyCase (conftest modules are not importable by name)


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
        return json.loads(response.read())


def _serve(case: Case) -> DashboardServer:
    store = FileSystemArtifactStore(str(case.config.study.artifacts_dir))
    return DashboardServer(storage=case.study._storage, artifact_store=store, port=0, refresh_s=None)


def _detail(server: DashboardServer, name: str) -> dict[str, Any]:
    studies = _get(f"{server.url}/api/studies")["study_summaries"]
    (entry,) = [s for s in studies if s["study_name"] == name]
    return dict(_get(f"{server.url}/api/studies/{entry['study_id']}"))


def test_dashboard_serves_the_real_study_with_our_attrs_and_artifacts(sim_study: Case) -> None:
    write_study_note(sim_study.study, sim_study.config)
    with _serve(sim_study) as server:
        detail = _detail(server, "sim")
    assert detail["objective_names"] == ["weighted geomean output_tok_s"]  # set by open_study
    assert len(detail["trials"]) == len(sim_study.study.trials)
    first = detail["trials"][0]
    keys = {a["key"] for a in first["user_attrs"]}
    assert {"baseline", "command", "c2.tok_s", "c2.repeats", "c2.accept_length", "ready_s"} <= keys
    assert any(a["filename"] == "benchmark.json" for a in first["artifacts"])
    assert "## Search space" in detail["note"]["body"] and "budget" in detail["note"]["body"]
    # What tune recommends: the confirmed winner when the top was re-measured (this study was).
    rec = recommended(sim_study.study)
    assert rec is not None and rec.confirmed and [t["number"] for t in detail["best_trials"]] == [rec.trial.number]


def test_dashboard_best_is_never_an_infeasible_trial(synthetic_study: Case) -> None:
    study = synthetic_study.study
    fastest = max((t for t in study.trials if t.values), key=lambda t: t.values[0])
    assert fastest.user_attrs["correct"] is False  # the dashboard alone would call this one best
    assert study._storage.get_best_trial(study._study_id).number == fastest.number
    annotate_trials(study)
    with _serve(synthetic_study) as server:
        detail = _detail(server, "syn")
    best_numbers = [t["number"] for t in detail["best_trials"]]
    assert best_numbers == [best_trials(study)[0].number] and fastest.number not in best_numbers
    by_number = {t["number"]: t for t in detail["trials"]}
    assert by_number[fastest.number]["constraints"] == [1.0]  # the UI shows it as infeasible
    assert "infeasible: wrong answers (gate 1/2)" in by_number[fastest.number]["note"]["body"]
    assert "failed: did not start" in by_number[4]["note"]["body"]
    assert "OutOfMemoryError" in by_number[4]["note"]["body"]
    assert "RECOMMENDED" in by_number[best_numbers[0]]["note"]["body"]
    assert not any("<!--" in (t.get("note") or {}).get("body", "") for t in detail["trials"])  # shown raw
    assert any(a["filename"] == "server-log.txt" for a in by_number[4]["artifacts"])


def test_dashboard_best_is_the_confirmed_winner(synthetic_study: Case) -> None:
    study = synthetic_study.study
    measured_best = best_trials(study)[0]
    runner_up = next(
        t for t in sorted(study.trials, key=lambda t: -(t.values or [0])[0])
        if t.number != measured_best.number and record_of(t).feasible and t.values
    )
    # The re-measurement of the top put the runner-up first: that is what tune recommends, and what the UI shows.
    study.set_user_attr(CONFIRMATION, {"trials": [measured_best.number, runner_up.number], "winner": runner_up.number,
                                       "best_before": measured_best.number, "held": False, "values": {}})
    annotate_trials(study)
    with _serve(synthetic_study) as server:
        detail = _detail(server, "syn")
    assert [t["number"] for t in detail["best_trials"]] == [runner_up.number]
    by_number = {t["number"]: t for t in detail["trials"]}
    assert "RECOMMENDED" in by_number[runner_up.number]["note"]["body"]
    assert "RECOMMENDED" not in (by_number[measured_best.number].get("note") or {}).get("body", "")


def test_notes_are_idempotent_and_a_human_edit_wins(synthetic_study: Case) -> None:
    from optuna_dashboard import get_note, save_note

    study, config = synthetic_study.study, synthetic_study.config
    write_study_note(study, config)
    write_study_note(study, config)
    assert get_note(study) == study_note_text(config, study_name="syn")
    assert "`draft_window >= block_size`" in get_note(study)
    assert annotate_trials(study) > 0
    assert annotate_trials(study) == 0  # nothing changed: nothing rewritten
    save_note(study, "my own notes")
    write_study_note(study, config)
    assert get_note(study) == "my own notes"
    assert "<!--" not in study_note_text(config)  # the dashboard shows a note's text raw


def test_a_human_edit_of_a_trial_note_wins(synthetic_study: Case) -> None:
    from optuna_dashboard._note import get_note_from_system_attrs, save_note_with_version

    study = synthetic_study.study
    annotate_trials(study)
    storage, sid = study._storage, study._study_id
    wrong = 3  # the fast config that failed the gate: tune writes a note on it
    tid = study.trials[wrong]._trial_id
    note = get_note_from_system_attrs(storage.get_study_system_attrs(sid), tid)
    assert note["body"].startswith("**infeasible")
    save_note_with_version(storage, sid, tid, note["version"] + 1, "checked by hand: a bad kernel, see ticket 12")
    annotate_trials(study)
    assert get_note_from_system_attrs(storage.get_study_system_attrs(sid), tid)["body"].startswith("checked by hand")


def test_dashboard_importances_are_the_report_s(synthetic_study: Case) -> None:
    study = synthetic_study.study
    ours, _, why = importances(study)
    assert why is None and ours
    with _serve(synthetic_study) as server:
        studies = _get(f"{server.url}/api/studies")["study_summaries"]
        (entry,) = [s for s in studies if s["study_name"] == "syn"]
        shown = _get(f"{server.url}/api/studies/{entry['study_id']}/param_importances")["param_importances"]
    assert {p["name"]: round(p["importance"], 6) for p in shown[0]} == {k: round(v, 6) for k, v in ours.items()}


def test_mark_feasibility_labels_a_live_trial(synthetic_study: Case) -> None:
    study = synthetic_study.study
    trial = study.ask()
    trial.set_user_attr("gate", "1/2")
    trial.set_user_attr("correct", False)
    trial.set_constraint("correctness", 1.0)
    assert mark_feasibility(trial) == "no: wrong answers (gate 1/2)"
    study.tell(trial, [1.0])
    ok = study.ask()
    ok.set_constraint("correctness", 0.0)
    assert mark_feasibility(ok) == "yes"
    study.tell(ok, [1.0])
    assert optuna.load_study(study_name="syn", storage=study._storage).trials[-1].user_attrs["feasible"] == "yes"


def _send(method: str, url: str, body: bytes | None = None, content_type: str = "application/json") -> int:
    request = urllib.request.Request(url, data=body, method=method, headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as refused:
        return int(refused.code)


def _upload() -> tuple[bytes, str]:
    """A multipart artifact upload, as the dashboard's UI sends it."""
    boundary = "tune-test-boundary"
    body = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="x.txt"\r\n'
        f"Content-Type: text/plain\r\n\r\nhello\r\n--{boundary}--\r\n"
    ).encode()
    return body, f"multipart/form-data; boundary={boundary}"


def test_the_dashboard_is_read_only_but_for_notes(synthetic_study: Case) -> None:
    study = synthetic_study.study
    trial = study.trials[0]
    with _serve(synthetic_study) as server:
        sid = study._study_id
        api = f"{server.url}/api"
        assert _send("DELETE", f"{api}/studies/{sid}") == 403
        assert _send("POST", f"{api}/studies/{sid}/rename", b'{"study_name": "gone"}') == 403
        assert _send("POST", f"{api}/trials/{trial._trial_id}/user-attrs", b'{"user_attrs": {"x": 1}}') == 403
        assert _send("POST", f"{api}/artifacts/{sid}/{trial._trial_id}", *_upload()) == 403
        note = json.dumps({"version": 1, "body": "checked by hand"}).encode()
        assert _send("PUT", f"{api}/studies/{sid}/note", note) in (200, 204)  # a person's note is welcome
        refused = urllib.request.Request(f"{api}/studies/{sid}", method="DELETE")
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(refused, timeout=10)
        assert "tune dashboard --allow-edits" in json.loads(caught.value.read())["reason"]
    still = optuna.load_study(study_name=study.study_name, storage=study._storage)
    assert len(still.trials) == len(study.trials) and still.study_name == study.study_name
    assert "x" not in still.trials[0].user_attrs
    assert list((synthetic_study.config.study.artifacts_dir).rglob("x.txt")) == []


def test_allow_edits_opens_the_dashboard(synthetic_study: Case) -> None:
    storage = synthetic_study.study._storage
    doomed = optuna.create_study(study_name="doomed", storage=storage)
    store = FileSystemArtifactStore(str(synthetic_study.config.study.artifacts_dir))
    with DashboardServer(storage=storage, artifact_store=store, port=0, refresh_s=None, allow_edits=True) as server:
        assert _send("DELETE", f"{server.url}/api/studies/{doomed._study_id}") == 204
    assert "doomed" not in [s.study_name for s in optuna.get_all_study_summaries(storage)]


def test_a_failed_trial_is_failed_on_the_dashboard_too(synthetic_study: Case) -> None:
    """Stored PRUNED so the sampler learns from it, a trial that did not start or died is 'failed' in status and
    the report: the dashboard's badge must not call it pruned."""
    from tuner.trials import Outcome

    with _serve(synthetic_study) as server:
        detail = _detail(server, "syn")
    states = {t["number"]: t["state"] for t in detail["trials"]}
    failed = [t.number for t in synthetic_study.study.trials if Outcome.of(t) == Outcome.NOT_STARTED]
    assert failed and all(states[n] == "Fail" for n in failed), states
    assert all(t.state.name == "PRUNED" for t in synthetic_study.study.trials if t.number in failed)  # as stored
