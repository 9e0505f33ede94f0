from __future__ import annotations

import contextlib
import dataclasses
import os
import sqlite3
import time
import warnings
from pathlib import Path

import optuna
import sqlalchemy.exc

from tuner.config import StudyConfig, parse_config
from tuner.errors import ConfigError, EnvironmentFault, TuneError
from tuner.objective import objective_of
from tuner.secrets import REDACTED, masked_url
from tuner.study._faults import describe, watch_busy
from tuner.study._signals import defer_during_connections
from tuner.trials import study_record, write_study
from tuner.wait import wait_until


class FingerprintMismatch(TuneError):
    """The study was created with a different search space, objective or benchmark."""


class NoSuchStudy(TuneError):
    """A command that reads a study was pointed at one that does not exist (nothing was created)."""


def make_storage(url: str, *, busy_s: float = 60.0, create: bool = True) -> optuna.storages.BaseStorage:
    """An RDB storage; SQLite files are created with WAL on so the dashboard can read while we write.

    ``busy_s`` is how long a write waits for another process's lock; ``create=False`` (commands that only
    read) refuses a SQLite file that does not exist instead of creating an empty one.
    """
    kwargs: dict[str, object] = {"pool_pre_ping": True}
    _check_url(url)
    if url.startswith("sqlite:///"):
        path = Path(url.removeprefix("sqlite:///"))
        if not create and not path.exists():
            raise NoSuchStudy(f"no study database at {path}: run `tune start` first")
        _make_directory(path)
        _use_wal(path, busy_s=busy_s)
        kwargs = {"connect_args": {"timeout": busy_s}}
    attempts = 8
    for attempt in range(attempts):
        try:
            storage = optuna.storages.RDBStorage(url, engine_kwargs=kwargs)
            defer_during_connections(storage.engine)
            if url.startswith("sqlite:///"):
                watch_busy(storage.engine, label=url.removeprefix("sqlite:///"), limit_s=busy_s)
            return storage
        except (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.OperationalError, sqlalchemy.exc.ProgrammingError):
            # Workers starting together on a fresh database race to create Optuna's schema ("table studies
            # already exists", a duplicate alembic row; PostgreSQL: DuplicateTable "alembic_version"); the loser
            # finds it created on the next attempt. A database that is really unreachable still fails after the
            # last attempt.
            if attempt == attempts - 1:
                raise
            time.sleep(0.25 * (attempt + 1))
    raise AssertionError("unreachable")


def _check_url(url: str) -> None:
    """A storage URL SQLAlchemy can open: a typo or a missing driver is one line, not a traceback."""
    try:
        parsed = sqlalchemy.engine.make_url(url)
        parsed.get_dialect().import_dbapi()
    except sqlalchemy.exc.ArgumentError:  # also NoSuchModuleError: a scheme no dialect is known for
        raise ConfigError(
            file=None, key="storage", expected="a database URL: sqlite:///PATH or postgresql://USER@HOST/DB",
            got=masked_url(url),
        ) from None
    except ImportError as exc:
        raise EnvironmentFault(
            f"storage {masked_url(url)}: its database driver is not installed ({exc.name or exc})"
        ) from None
    if parsed.get_backend_name() == "sqlite" and not parsed.database:
        raise ConfigError(file=None, key="storage", expected="a SQLite file's path after sqlite:///", got=url)


def storage_problem(url: str) -> str | None:
    """Why ``tune start`` could not use storage ``url`` (None: it can), without creating anything: the URL and
    its driver, and a database server that answers; a SQLite file's directory is the preflight's (``tune
    check``)."""
    try:
        _check_url(url)
        if url.startswith("sqlite:///"):
            return None
        engine = sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.NullPool)
        try:
            with engine.connect():
                return None
        finally:
            engine.dispose()
    except TuneError as exc:
        return str(exc)
    except sqlalchemy.exc.SQLAlchemyError as exc:
        return describe(exc, url) or f"storage {masked_url(url)}: {type(exc).__name__}"


def _make_directory(path: Path) -> None:
    """The SQLite file's directory, made: one line naming it when it cannot be (a pseudo or read-only file
    system, a file where a directory should be, no permission)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        where = exc.filename or path.parent
        raise EnvironmentFault(
            f"storage {path}: its directory cannot be made ({where}: {exc.strerror or exc}); fix it or choose "
            "another --storage"
        ) from None


def _use_wal(path: Path, *, busy_s: float) -> None:
    """Switch the file to WAL. Workers starting together on a new file race to do it, and SQLite may answer a
    loser "database is locked" at once rather than through its busy handler (seen with eight workers): wait
    here, up to the same limit."""
    locked: list[sqlite3.OperationalError] = []

    def switched(_elapsed: float) -> bool | None:
        try:
            with contextlib.closing(sqlite3.connect(path, timeout=busy_s)) as conn:
                conn.execute("PRAGMA journal_mode=WAL")
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc):
                raise
            locked[:] = [exc]  # the last one, for the error at the limit
            return None
        return True

    if wait_until(switched, timeout=busy_s, interval=0.05) is None:
        raise locked[-1]


def open_study(
    config: StudyConfig,
    *,
    storage: str | None = None,
    study_name: str | None = None,
    force_config: bool = False,
) -> optuna.Study:
    """Create the study or load it, refusing to mix trials from a different configuration.

    ``create_study(load_if_exists=True)`` silently ignores a changed direction, so comparability is
    checked with our own fingerprint of the space, objective, scenarios and gate.
    """
    name = study_name or config.study.name
    store = make_storage(storage or config.study.storage, busy_s=config.study.storage_busy_s)
    objective = objective_of(config)
    study = optuna.create_study(
        study_name=name,
        storage=store,
        directions=objective.directions(),
        load_if_exists=True,
    )
    stored = study_record(study).fingerprint
    fingerprint = config.fingerprint()
    if stored is not None and stored != fingerprint and not force_config and _has_measurements(study):
        raise FingerprintMismatch(
            f"study {name!r} was created from a different configuration (fingerprint {stored}, this config "
            f"{fingerprint}: search space, objective, scenarios, gate or base command changed). Its trials would "
            f"not be comparable. Use a new study name, or pass --force-config to continue anyway."
        )
    if study.directions != objective.directions():
        said = lambda ds: "/".join(d.name.lower() for d in ds)  # noqa: E731
        raise FingerprintMismatch(
            f"study {name!r} has {len(study.directions)} objective(s) ({said(study.directions)}), this config has "
            f"{len(objective.directions())} ({said(objective.directions())})"
        )
    if stored != fingerprint:
        write_study(
            study,
            fingerprint=fingerprint,
            config_text=config.secrets.text(config.text),  # config_from_study restores
            config_source=config.source,
            config_dir=str(config.base_dir),
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names(objective.metric_names())
    return study


def _has_measurements(study: optuna.Study) -> bool:
    """Whether any trial ran to a verdict: a study whose every trial failed to start (a broken base command
    fixed since) holds nothing a changed configuration could be incomparable with."""
    done = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    return any(t.state in done for t in study.get_trials(deepcopy=False))


def load_existing(storage: str, study_name: str) -> optuna.Study:
    """An existing study, or one line naming the studies that are there; never creates anything."""
    store = make_storage(storage, create=False)
    names = [s.study_name for s in optuna.get_all_study_summaries(store)]
    if study_name not in names:
        raise NoSuchStudy(f"no study {study_name!r} in {storage}; studies there: {', '.join(names) or 'none'}")
    return optuna.load_study(study_name=study_name, storage=store)


def config_from_study(storage: str, study_name: str | None) -> StudyConfig:
    """Rebuild the config a study was started with (``tune resume``)."""
    store = make_storage(storage, create=False)
    names = [s.study_name for s in optuna.get_all_study_summaries(store)]
    if study_name is None:
        if len(names) != 1:
            raise ConfigError(
                file=None,
                key="--study",
                expected=f"a study name (storage {storage} holds {len(names)}: {', '.join(names) or 'none'})",
            )
        study_name = names[0]
    if study_name not in names:
        raise ConfigError(file=None, key="--study", expected=f"one of {names} in {storage}", got=study_name)
    study = optuna.load_study(study_name=study_name, storage=store)
    record = study_record(study)
    text = record.config_text
    if not text:
        raise ConfigError(file=None, key="--study", expected="a study created by `tune start`", got=study_name)
    source = record.config_source or "(stored)"
    base_dir = Path(record.config_dir or ".")
    config = parse_config(
        _with_secrets(text, source=source, base_dir=base_dir, name=study_name),
        source=f"{source} (stored in study {study_name})",
        base_dir=base_dir,
        default_name=study_name,
    )
    return _env_secrets(config)


def _with_secrets(text: str, *, source: str, base_dir: Path, name: str) -> str:
    """The stored study file, with the secrets it was stored without: the file's own text when the file is still
    there and is what the study stores (the study keeps ``***`` in their place, see open_study)."""
    with contextlib.suppress(OSError, ConfigError):
        original = (base_dir / Path(source).name).read_text()  # the source as typed may be relative to any cwd
        if original != text:
            config = parse_config(original, source=source, base_dir=base_dir, default_name=name)
            if config.secrets.text(original) == text:
                return original
    return text


def _env_secrets(config: StudyConfig) -> StudyConfig:
    """Secret variables stored as ``***`` take their value from tune's own environment, where one is set."""
    env = {k: os.environ.get(k, v) if v == REDACTED else v for k, v in config.target.env.items()}
    if env == config.target.env:
        return config
    return dataclasses.replace(config, target=dataclasses.replace(config.target, env=env))
