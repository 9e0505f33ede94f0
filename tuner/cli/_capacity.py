"""The study's requests against the server's capacity, before anything restarts (``tune check``, ``tune start``).

A scenario whose largest request times the requests that hold KV at once exceeds what the server holds fails
mid-stream on the first trial (llama-server: "failed to find free space in the KV cache"): that is the study
file's mistake, said in one line with the numbers (exit 2), not a night's first failure.
"""

from __future__ import annotations

from tuner.config import StudyConfig
from tuner.errors import ConfigError

__all__ = ["require_fit"]


def require_fit(config: StudyConfig) -> str | None:
    """Raise ConfigError naming the first scenario that does not fit (and how many more do not); otherwise the
    line that says what was checked against what (None: neither the server nor the command says its capacity)."""
    import httpx

    from tuner.bench import LiveServer, study_fits

    # A short connect timeout: a server that is down (the usual case before `tune start`) costs no wait.
    with httpx.Client(timeout=httpx.Timeout(10.0, connect=2.0), trust_env=False) as client:
        live = LiveServer(url=config.target.base_url, dialect=config.dialect, client=client)
        capacity, fits = study_fits(config, live=live)
    if capacity is None:
        return None
    bad = [f for f in fits if f.problem is not None]
    if bad:
        more = f" (and {len(bad) - 1} more scenario(s))" if len(bad) > 1 else ""
        raise ConfigError(
            file=config.source, key=f"benchmark.scenarios {bad[0].scenario}",
            expected=f"requests the server can hold: {bad[0].problem}{more}; lower prompt_tokens, output_tokens or "
            "concurrency, or give the server more context",
        )  # fmt: skip
    largest = max(fits, key=lambda f: f.streams * f.size.total, default=None)
    if largest is None:
        return None
    return (f"every scenario fits the server's capacity ({capacity.source}); the most: {largest.scenario}, "
            f"{largest.streams} x {largest.size.total} tokens")  # fmt: skip
