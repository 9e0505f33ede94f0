"""The judge contract, run against both judges, and adversarial programs: real sandbox processes.

Every adversarial program must fail (or at worst pass harmlessly) *and* leave nothing behind: no process, no
file outside its work dir, no signal to us.
"""

from __future__ import annotations

import os
import socket
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tuner.gate import (
    BaseJudge,
    NamespaceJudge,
    RlimitJudge,
    Verdict,
    default_judge,
    namespaces_available,
    read_problem_file,
)

IS_ROOT = os.geteuid() == 0
JUDGES = ["rlimit", "namespace"]


@pytest.fixture
def temp_root() -> Iterator[Path]:
    # A scratch root unique to the test (traversable by the sandbox's throwaway uid, unlike pytest's 0700
    # tmp_path), so leftover processes can be found by the path in their command line.
    root = Path(tempfile.mkdtemp(prefix="tune-gate-test-"))
    root.chmod(0o711)
    yield root
    for leftover in root.iterdir():
        raise AssertionError(f"judge left {leftover} behind")
    root.rmdir()


@pytest.fixture(params=JUDGES)
def judge(request: pytest.FixtureRequest, temp_root: Path) -> BaseJudge:
    if request.param == "namespace":
        if not namespaces_available():
            pytest.skip("namespaces are not available here (needs root or unprivileged user namespaces)")
        return NamespaceJudge(temp_root=temp_root)
    return RlimitJudge(temp_root=temp_root)


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(f"{entry}: {cmdline}")
    return found


def _assert_no_leftovers(temp_root: Path) -> None:
    deadline = time.monotonic() + 2.0  # killed processes may take a moment to disappear from /proc
    while (left := _processes_mentioning(str(temp_root))) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert left == []


# --- the contract: what every judge must do --------------------------------------------------------------


def test_a_correct_program_passes(judge: BaseJudge) -> None:
    verdict = judge.judge("def f(x):\n    return x + 1\n\nassert f(1) == 2\nprint('hello')\n", timeout_s=10)
    assert verdict == Verdict(
        passed=True,
        reason="passed",
        output="hello",
        seconds=verdict.seconds,
        protections=verdict.protections,
    )


def test_a_failing_assertion_fails_with_its_error(judge: BaseJudge) -> None:
    verdict = judge.judge("def f(x):\n    return x\n\nassert f(1) == 2, 'f(1) should be 2'\n", timeout_s=10)
    assert not verdict.passed
    assert verdict.reason == "AssertionError: f(1) should be 2"
    assert "Traceback" in verdict.output


def test_a_syntax_error_fails(judge: BaseJudge) -> None:
    verdict = judge.judge("def f(:\n", timeout_s=10)
    assert not verdict.passed
    assert verdict.reason.startswith("SyntaxError")


@pytest.mark.parametrize("exit_call", ["import sys; sys.exit(0)", "import os; os._exit(0)"])
def test_exiting_before_the_tests_end_fails(judge: BaseJudge, exit_call: str) -> None:
    verdict = judge.judge(f"{exit_call}\nassert False\n", timeout_s=10)
    assert not verdict.passed
    assert "before the tests finished" in verdict.reason


def test_closing_stdout_fails_without_hanging(judge: BaseJudge) -> None:
    # A hang would last until the timeout: a generous one tells the two apart also on a loaded machine.
    verdict = judge.judge("import os\nos.close(1)\nos.close(2)\nassert True\n", timeout_s=60)
    assert not verdict.passed
    assert not verdict.reason.startswith("timeout") and verdict.seconds < 30


def test_flooding_stdout_is_cut_off(judge: BaseJudge, temp_root: Path) -> None:
    verdict = judge.judge("while True:\n    print('x' * 10000)\n", timeout_s=60)
    assert not verdict.passed
    assert not verdict.reason.startswith("timeout"), "the output size limit, not the timeout, must stop it"
    assert len(verdict.output) <= 4000
    _assert_no_leftovers(temp_root)


def test_an_infinite_loop_times_out_and_leaves_no_process(judge: BaseJudge, temp_root: Path) -> None:
    # Children in the group, and a grandchild that left the group with setsid(), must all be gone.
    program = (
        "import os, subprocess, sys\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', __file__])\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', __file__],\n"
        "                 start_new_session=True)\n"
        "while True:\n    pass\n"
    )
    started = time.monotonic()
    verdict = judge.judge(program, timeout_s=1.5)
    assert not verdict.passed
    assert verdict.reason == "timeout after 1.5 s"
    # Stopped at the timeout, not when the 300 s sleepers end (the bound leaves a loaded machine its slack).
    assert time.monotonic() - started < 60
    _assert_no_leftovers(temp_root)


def test_a_fork_bomb_fails_and_leaves_no_process(judge: BaseJudge, temp_root: Path) -> None:
    program = "import os\nwhile True:\n    os.fork()\n"
    started = time.monotonic()
    verdict = judge.judge(program, timeout_s=5)
    assert not verdict.passed
    assert time.monotonic() - started < 10
    _assert_no_leftovers(temp_root)
    # The machine is still usable: we can start processes.
    assert os.system("true") == 0


def test_a_memory_hog_fails_fast(judge: BaseJudge) -> None:
    program = "hog = []\nwhile True:\n    hog.append(bytearray(50 * 1024 * 1024))\n"
    verdict = judge.judge(program, timeout_s=10)
    assert not verdict.passed
    assert verdict.reason == "MemoryError"


def test_killing_the_parent_or_the_tuner_harms_nothing(judge: BaseJudge) -> None:
    program = (
        "import os, signal\n"
        "for target in (os.getppid(), " + str(os.getpid()) + "):\n"
        "    try:\n"
        "        os.kill(target, signal.SIGKILL)\n"
        "    except OSError:\n"
        "        pass\n"
        "try:\n"
        "    os.kill(-1, signal.SIGKILL)\n"
        "except OSError:\n"
        "    pass\n"
    )
    verdict = judge.judge(program, timeout_s=5)
    # Still alive to assert anything at all; and the judge still works afterwards.
    assert isinstance(verdict, Verdict)
    assert judge.judge("assert 1 + 1 == 2\n", timeout_s=10).passed


def test_secrets_in_our_environment_are_not_inherited(judge: BaseJudge, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUNE_TEST_SECRET", "hunter2")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    program = (
        "import os\n"
        "assert 'TUNE_TEST_SECRET' not in os.environ and 'OPENAI_API_KEY' not in os.environ, dict(os.environ)\n"
        "assert os.environ['HOME'] == os.getcwd(), (os.environ['HOME'], os.getcwd())\n"
        "assert set(os.environ) <= {'PATH', 'HOME', 'TMPDIR', 'LANG', 'LC_CTYPE'}, sorted(os.environ)\n"
        "assert os.listdir('.') == ['solution.py'], os.listdir('.')\n"
        "open('scratch.txt', 'w').write('writing in the work dir is fine')\n"
    )
    verdict = judge.judge(program, timeout_s=10)
    assert verdict.passed, verdict.output


@pytest.mark.skipif(not IS_ROOT, reason="without root the program runs as our own uid and can write our files")
def test_writing_outside_the_work_dir_is_prevented(judge: BaseJudge, tmp_path: Path) -> None:
    target = tmp_path / "escaped.txt"
    home_target = Path.home() / f".tune-gate-escape-{os.getpid()}"
    program = (
        f"for path in ({str(target)!r}, {str(home_target)!r}, '/work/tune-gate-escape'):\n"
        "    try:\n"
        "        open(path, 'w').write('pwned')\n"
        "    except OSError:\n"
        "        pass\n"
    )
    judge.judge(program, timeout_s=10)
    assert not target.exists()
    assert not home_target.exists()
    assert not Path("/work/tune-gate-escape").exists()


def test_the_uid_is_a_throwaway_one_as_root(judge: BaseJudge) -> None:
    verdict = judge.judge("import os\nprint(os.getuid(), os.getgid(), os.getgroups())\n", timeout_s=10)
    assert verdict.passed
    uid, gid, groups = verdict.output.split(" ", 2)
    if IS_ROOT:
        assert int(uid) >= 1_000_000_000 and uid == gid and groups == "[]"
        assert "uid" in verdict.protections
    else:
        assert int(uid) == os.getuid()


def test_canonical_solutions_pass_and_mangled_ones_fail(judge: BaseJudge) -> None:
    # A sample of real problems, judged concurrently as the gate does.
    problems = list(read_problem_file().values())[::8]  # 21 of 164, spread over the set
    programs = [p.test_program(p.prompt + p.canonical_solution) for p in problems]
    with ThreadPoolExecutor(max_workers=4) as pool:
        verdicts = list(pool.map(lambda program: judge.judge(program, timeout_s=20), programs))
    failed = {p.task_id: v.reason for p, v in zip(problems, verdicts, strict=True) if not v.passed}
    assert failed == {}
    wrong = problems[0].test_program(problems[0].prompt + "    return None\n")
    assert not judge.judge(wrong, timeout_s=10).passed


# --- what only the namespace judge does ------------------------------------------------------------------


@pytest.fixture
def namespace_judge(temp_root: Path) -> NamespaceJudge:
    if not namespaces_available():
        pytest.skip("namespaces are not available here")
    return NamespaceJudge(temp_root=temp_root)


def test_namespace_judge_cuts_the_network(namespace_judge: NamespaceJudge) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.settimeout(0.5)
        port = server.getsockname()[1]
        program = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2).sendall(b'leak')\n"
        verdict = namespace_judge.judge(program, timeout_s=10)
        assert not verdict.passed
        with pytest.raises(TimeoutError):
            server.accept()
    assert "netns" in verdict.protections


def test_namespace_judge_makes_world_writable_dirs_private(namespace_judge: NamespaceJudge) -> None:
    targets = [Path(d) / f"tune-gate-escape-{os.getpid()}" for d in ("/tmp", "/var/tmp", "/dev/shm")]
    program = "".join(f"open({str(t)!r}, 'w').write('x')\n" for t in targets)
    verdict = namespace_judge.judge(program, timeout_s=10)
    assert verdict.passed, verdict.output  # the writes succeed, but only inside the sandbox
    assert [t for t in targets if t.exists()] == []


def test_namespace_judge_hides_outside_processes(namespace_judge: NamespaceJudge) -> None:
    program = "import os\npids = [p for p in os.listdir('/proc') if p.isdigit()]\nprint(os.getpid(), pids)\n"
    verdict = namespace_judge.judge(program, timeout_s=10)
    assert verdict.passed
    assert verdict.output == "1 ['1']"


def test_default_judge_picks_by_kind() -> None:
    assert isinstance(default_judge(kind="rlimit"), RlimitJudge)
    assert not isinstance(default_judge(kind="rlimit"), NamespaceJudge)
    expected = NamespaceJudge if namespaces_available() else RlimitJudge
    assert type(default_judge(kind="auto")) is expected
    with pytest.raises(ValueError, match="unknown sandbox kind"):
        default_judge(kind="docker")
