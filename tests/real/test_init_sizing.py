"""`tune init` writes a study the real llama-server can serve (issue: a study sized by arithmetic overflowed the
server's one unified KV pool on its first scenario), and `tune check` refuses one sized past it.

The command is the issue's: SmolLM2-135M drafting for itself, ``-t 1 -c 2048``, and the same with ``-np 2``,
``-c 4096`` and three slots that do not share their KV (``-np 3 --no-kv-unified``: 2048 / 3 rounded up to 768 a
slot). Sized from the flags alone (with the stated margin) and by asking the server (``--ask-server``). Only the
request counts, the repeats and the gate are cut down after init: the request sizes are what it wrote.
"""

from __future__ import annotations

import re
from pathlib import Path

import optuna
import pytest

from tests.real.conftest import LlamaServerInstall, spawn_llama_server
from tuner.cli import main
from tuner.config import load_config
from tuner.sim.testing import free_port
from tuner.trials import record_of


def _issue_command(install: LlamaServerInstall, port: int, extra: list[str]) -> list[str]:
    gguf = str(install.gguf)
    c = extra[extra.index("-c") + 1] if "-c" in extra else "2048"
    rest = [a for i, a in enumerate(extra) if a != "-c" and (i == 0 or extra[i - 1] != "-c")]
    return [str(install.binary), "-m", gguf, "-md", gguf, "--spec-type", "draft-simple", "--spec-draft-n-max", "8",
            "--host", "127.0.0.1", "--port", str(port), "-t", "1", "-c", c, *rest]  # fmt: skip


def _short(text: str, tmp: Path) -> str:
    """The study init wrote, with fewer requests and repeats, one trial and no gate: its sizes untouched."""
    text = re.sub(r"^trials = .*$", f'trials = 1\nstorage = "sqlite:///{tmp}/study.db"', text, count=1, flags=re.M)
    text = re.sub(r"^on_exit = .*$", 'on_exit = "stop"', text, flags=re.M)
    text = text.replace('manager = "process"', f'manager = "process"\nlog_dir = "{tmp}/logs"\nstop_grace_s = 5')
    text = re.sub(r"^timeout_s = 900.*$", "timeout_s = 180\npoll_interval_s = 0.2", text, flags=re.M)
    text = re.sub(r"^warmup = .*$", "warmup = \"always\"", text, flags=re.M)
    text = re.sub(r"^warmup_requests = .*$", "warmup_requests = 0", text, flags=re.M)
    # What is checked is that the requests fit the server's KV, not its speed: a request on a machine whose cores
    # other tests take may run at 9 tok/s (a c4 scenario's requests wait for each other), so no 120 s limit.
    text = re.sub(r"^max_repeats = .*$", "max_repeats = 1\nrequest_timeout_s = 600", text, flags=re.M)
    # One request a stream: concurrency 1 -> 1 request, 4 -> 4.
    text = re.sub(r"^concurrency = (\d+)\n(prompt.*\n)(prompt.*\n)?(output_tokens = \d+\n)requests = \d+$",
                  lambda m: m.group(0).rsplit("=", 1)[0] + f"= {m.group(1)}", text, flags=re.M)
    return text.replace("[gate]\nenabled = true", "[gate]\nenabled = false")


@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    ("extra", "ask"),
    [
        ([], False),
        ([], True),
        (["-np", "2"], True),
        (["-c", "4096"], False),
        (["-np", "3", "--no-kv-unified"], True),
    ],
    ids=["c2048-flags", "c2048-asked", "np2-asked", "c4096-flags", "np3-own-kv-asked"],
)
def test_init_s_study_completes_its_baseline_on_the_real_server(
    llama_server_install: LlamaServerInstall, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    extra: list[str], ask: bool,
) -> None:  # fmt: skip
    path = tmp_path / "s.toml"
    command = _issue_command(llama_server_install, free_port(), extra)
    assert main(["init", "--out", str(path), *(["--ask-server"] if ask else []), "--", *command]) == 0
    captured = capsys.readouterr()
    written = path.read_text()
    if ask:
        assert re.search(r"tune init: the server answered after [\d.]+ s", captured.err), captured.err
        assert "# Sized by the server (started once to ask: " in written
    else:
        assert "# Sized to the command's flags: " in written
    path.write_text(_short(written, tmp_path))
    config = load_config(path)
    sizes = {s.name: (s.prompt_tokens, s.output_tokens) for s in config.benchmark.scenarios}
    assert main(["start", "--config", str(path)]) == 0, capsys.readouterr()
    study = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path}/study.db")
    baseline = study.trials[0]
    assert baseline.state == optuna.trial.TrialState.COMPLETE, baseline.user_attrs
    scenarios = record_of(baseline).scenarios
    for name in sizes:  # every scenario measured, none failed: the requests fit what the server holds
        assert scenarios.get(name, {}).get("tok_s", 0) > 0, (name, baseline.user_attrs)
    with capsys.disabled():
        print(f"\n{' '.join(extra) or '-c 2048'} ({'asked' if ask else 'flags'}): sizes {sizes}")


def test_check_refuses_a_study_the_running_server_cannot_hold(
    llama_server_install: LlamaServerInstall, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Four chat streams whose words and answers fit -c 2048's pool, but not once the server counts their tokens
    through its chat template: caught by asking the running server, one line, exit 2, before any trial."""
    port = free_port()
    command = _issue_command(llama_server_install, port, ["--metrics"])
    path = tmp_path / "s.toml"
    assert main(["init", "--out", str(path), "--", *command]) == 0
    text = _short(path.read_text(), tmp_path)
    text = re.sub(r'(name = "c4-chat"\nconcurrency = 4\nprompt_tokens = )\d+\noutput_tokens = \d+',
                  r"\g<1>350\noutput_tokens = 120", text)  # 4 x (350 + 8 + 120 + 17) = 1980: the floor fits
    path.write_text(text)
    capsys.readouterr()
    assert main(["check", "--config", str(path)]) in (0, 1)  # no server: only the flags, and they say it fits
    assert "every scenario fits the server's capacity (-c 2048, 4 slots" in capsys.readouterr().out
    server = spawn_llama_server(command, tmp_path, port)
    try:
        for verb in (["check"], ["start"]):
            assert main([*verb, "--config", str(path)]) == 2
            err = capsys.readouterr().err.strip()
            assert len(err.splitlines()) == 1 and "benchmark.scenarios c4-chat" in err, err
            assert "the server's tokens, chat template included" in err and "> the 2048-token KV pool" in err, err
            assert "/props: n_ctx 2048 a slot, 4 slots" in err
        assert not (tmp_path / "study.db").exists()  # before any trial
    finally:
        server.kill()
