from __future__ import annotations

import hashlib
import json
import tomllib
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tuner.config._gate import GateSection, parse_gate
from tuner.config._objective import ObjectiveSection, parse_objective, precision_share
from tuner.config._reader import Table
from tuner.config._search import SearchSection, parse_search
from tuner.config._sections import (
    BenchmarkSection,
    ReadinessSection,
    StudySection,
    TargetSection,
    parse_benchmark,
    parse_readiness,
    parse_study,
    parse_target,
)
from tuner.config._slo import Slo, parse_slo
from tuner.config._space import parse_space
from tuner.dialects import BaseServerDialect, get_dialect
from tuner.errors import ConfigError
from tuner.secrets import Secrets
from tuner.space import SearchSpace, Value, baseline_params
from tuner.spec import LaunchSpec


@dataclass(frozen=True, kw_only=True)
class StudyConfig:
    """A validated study file. ``text`` is kept verbatim so ``tune resume`` can rebuild it from the study."""

    source: str
    text: str
    base_dir: Path
    study: StudySection
    target: TargetSection
    space: SearchSpace
    benchmark: BenchmarkSection
    objective: ObjectiveSection
    readiness: ReadinessSection
    gate: GateSection | None
    search: SearchSection
    baseline: dict[str, Value]
    dialect: BaseServerDialect
    """The target server's dialect (``[target] server``, or detected from the launch command)."""
    slo: Slo | None = None
    """``[slo]``: each scenario carries its own (this, or its override) as ``Scenario.slo``."""

    @property
    def secrets(self) -> Secrets:
        """The base command's secrets (:mod:`tuner.secrets`); what the space tunes is never one."""
        tuned = {n for p in self.space.params for n in (p.flag, p.json_flag, p.env, *p.aliases) if n}
        return Secrets.of(
            LaunchSpec(argv=self.target.command, env=self.target.env),
            flags=self.target.secret_flags,
            env=self.target.secret_env,
            exempt=tuned,
            values=(self.target.api_key, urlsplit(self.study.storage).password),
        )

    def fingerprint(self) -> str:
        """Hash of what makes two trials comparable: space, constraints, objective, scenarios and gate.

        Resuming with a different fingerprint would mix incomparable scores in one study. The target (host,
        port, base command) is left out on purpose: several workers, each with its own server, share a study.
        """
        material = {
            "space": [asdict(p) for p in self.space.params],
            "constraints": [asdict(c) for c in self.space.constraints],
            "objective": asdict(self.objective),
            "scenarios": [s.comparable() for s in self.benchmark.scenarios],
            # The score's definition: a t lower bound on log throughput at this level (no longer k*MAD).
            "score": ["t-lower-bound", self.benchmark.confidence],
            "gate": asdict(self.gate) if self.gate else None,
        }
        blob = json.dumps(material, sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


def load_config(path: str | Path) -> StudyConfig:
    """Read and validate a study file; every error names the file, the key and what was expected."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise ConfigError(file=p, key="(file)", expected=f"a readable TOML file ({exc.strerror})") from None
    return parse_config(text, source=str(p), base_dir=p.resolve().parent)


def parse_config(text: str, *, source: str, base_dir: Path, default_name: str | None = None) -> StudyConfig:
    try:
        data: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(file=source, key="(syntax)", expected=f"valid TOML ({exc})") from None
    top = Table(data, file=Path(source), key="")
    study = parse_study(
        top.table("study") or Table({}, file=Path(source), key="study"),
        base_dir=base_dir,
        default_name=default_name or Path(source).stem,
    )
    target = parse_target(_required(top, "target"), base_dir=base_dir)
    dialect = _dialect(target, source)
    space = replace(parse_space(_required(top, "space"), top.tables("constraints")), bool_style=dialect.bool_style)
    slo = parse_slo(top.table("slo"))
    benchmark = parse_benchmark(_required(top, "benchmark"), base_dir=base_dir, slo=slo)
    objective = parse_objective(top.table("objective"), benchmark)
    benchmark = replace(benchmark, precision_share=precision_share(benchmark, objective))
    readiness = parse_readiness(top.table("readiness"), dialect)
    gate = parse_gate(top.table("gate"), base_dir=base_dir)
    search = parse_search(top.table("search"))
    top.finish()
    base = LaunchSpec(argv=target.command, env=dict(target.env))
    try:
        baseline = baseline_params(space, base)
        for i, seed in enumerate(search.seed_trials):
            _check_seed_trial(space, seed, key=f"search.seed_trials[{i}]")
    except ConfigError as exc:
        raise ConfigError(file=source, key=exc.key, expected=exc.expected, got=exc.got) from None
    return StudyConfig(
        source=source,
        text=text,
        base_dir=base_dir,
        study=study,
        target=target,
        space=space,
        benchmark=benchmark,
        objective=objective,
        readiness=readiness,
        gate=gate,
        search=search,
        baseline=baseline,
        dialect=dialect,
        slo=slo,
    )


def _dialect(target: TargetSection, source: str) -> BaseServerDialect:
    """The server's dialect; for SGLang with ``[target] server_version``, that version's."""
    dialect = get_dialect(target.server, target.command)
    if target.server_version == "auto":
        return dialect
    versions = dialect.versions()
    if versions is None:
        raise ConfigError(
            file=source,
            key="target.server_version",
            expected=f'"auto" for a {dialect.name} server (versions are known for SGLang only)',
            got=target.server_version,
        )
    return versions.pinned(target.server_version, "[target] server_version")  # its section checked the name


def _required(top: Table, name: str) -> Table:
    t = top.table(name, required=True)
    assert t is not None
    return t


def _check_seed_trial(space: SearchSpace, seed: dict[str, Any], *, key: str) -> None:
    names = {p.name for p in space.params}
    for name, value in seed.items():
        if name not in names:
            raise ConfigError(file=None, key=f"{key}.{name}", expected="a parameter name from [space]", got=name)
        if not space.by_name(name).contains(value):
            raise ConfigError(file=None, key=f"{key}.{name}", expected="a value inside the space", got=value)
