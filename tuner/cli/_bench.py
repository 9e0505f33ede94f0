"""`tune bench`: benchmark the server as it runs now, with the study's scenarios, changing nothing.

It neither restarts nor reconfigures the server: it is the way to see what the benchmark sees (and to check
the benchmark itself) before starting a study. A scenario whose requests fail prints the failure and makes the
command exit 1, exactly as a trial would end PRUNED.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from tuner.cli._common import DEFAULT_CONFIG

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "bench",
        help="benchmark the running server with the study's scenarios (changes nothing)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--config", metavar="FILE", type=Path, default=None, help="study file (default: studies/demo.toml)")
    p.add_argument(
        "--scenario",
        metavar="NAME",
        action="append",
        default=None,
        help="run only this scenario (repeatable; default: all)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON document instead of a table")
    p.add_argument(
        "--requests",
        metavar="FILE",
        type=Path,
        default=None,
        help="also write every measured request to FILE, one JSON line each: when it was due, sent, answered and "
        "ended (seconds from its pass's start), its TTFT, TPOT, end to end, tokens and SLO verdict; a pass run "
        "again because the client was the bottleneck has counted=false (warm-ups are not written)",
    )
    p.set_defaults(func=handler)


@contextlib.contextmanager
def _request_log(path: Path | None) -> Iterator[Callable[[list[dict[str, object]]], None] | None]:
    """The ``--requests`` file, written a pass at a time (a failure later leaves the passes before it)."""
    if path is None:
        yield None
        return
    from tuner.cli._output import output_file, writing

    output_file(path, option="--requests")
    what = f"cannot write --requests {path}"
    with writing(path, what=what):
        out = path.open("w", encoding="utf-8")

    def write(rows: list[dict[str, object]]) -> None:
        with writing(path, what=what):
            out.writelines(json.dumps(row) + "\n" for row in rows)
            out.flush()

    try:
        yield write
    finally:
        out.close()


def handler(args: argparse.Namespace) -> int:
    from tuner.bench import HttpBenchmark, ScenarioResult
    from tuner.config import load_config
    from tuner.errors import ConfigError, DiedUnderLoad
    from tuner.target import endpoint_for

    config = load_config(args.config or DEFAULT_CONFIG)
    scenarios = config.benchmark.scenarios
    if args.scenario:
        known = {s.name: s for s in scenarios}
        unknown = [n for n in args.scenario if n not in known]
        if unknown:
            raise ConfigError(
                file=config.source,
                key="--scenario",
                expected="a [[benchmark.scenarios]] name: " + ", ".join(known),
                got=unknown[0],
            )
        scenarios = tuple(known[n] for n in args.scenario)
    endpoint = endpoint_for(config)
    results: list[ScenarioResult] = []
    failure: DiedUnderLoad | None = None
    with _request_log(args.requests) as on_requests:
        bench = HttpBenchmark(
            endpoint=endpoint, config=config.benchmark, dialect=config.dialect, on_requests=on_requests
        )
        try:
            for scenario in scenarios:
                if not args.json:
                    print(f"running {scenario.name} ...", file=sys.stderr, flush=True)
                results.append(bench.run_scenario(scenario))
        except DiedUnderLoad as exc:
            failure = exc
        finally:
            bench.close()
    if args.json:
        doc: dict[str, Any] = {
            "base_url": endpoint.base_url,
            "model": bench.endpoint.model,
            "scenarios": [r.to_dict() for r in results],
            "failure": None if failure is None else {"reason": failure.reason, "evidence": failure.evidence},
        }
        print(json.dumps(doc, indent=2))
    else:
        print(f"server {endpoint.base_url}  model {bench.endpoint.model}")
        known = {s.name: s for s in config.benchmark.scenarios}
        print(format_table(results, scenarios=known, confidence=config.benchmark.confidence))
        for line in slo_lines(results, known):
            print(line)
        for r in results:
            warning = r.client_warning()
            if warning:
                print(warning)
        if failure is not None:
            print(f"\nFAILED: {failure.reason}\n{failure.evidence}")
    return _status(results, failure)


def _status(results: list[Any], failure: Any) -> int:
    """1 when the server died under load; 4 (no answer) when a scenario missed its SLO ("not shown" says so in its
    line, and is no failure); else 0."""
    from tuner.cli._exits import NO_ANSWER

    if failure is not None:
        return 1
    return NO_ANSWER if any((v := r.verdict) is not None and not v.holds for r in results) else 0


def _fmt(v: float | None, scale: float = 1.0, digits: int = 1) -> str:
    return "-" if v is None else f"{v * scale:.{digits}f}"


def _client_cell(r: Any) -> str:
    """The load generator's CPU (cores over N processes), with ``BOUND`` when it set the pace."""
    if r.client_cpu_cores is None:
        return "-"
    cell = f"{r.client_cpu_cores:.2f}c/{r.client_processes or 1}p"
    return f"{cell} BOUND" if r.client_bound else cell


def slo_lines(results: list[Any], scenarios: Mapping[str, Any]) -> list[str]:
    """Per scenario with an SLO, its verdict (:class:`tuner.slo.SloVerdict`) in the study's words."""
    lines = []
    for r in results:
        slo = getattr(scenarios.get(r.name), "slo", None)
        if slo is not None and (verdict := r.verdict) is not None:
            lines.append(verdict.text(r.name, slo.describe()))
    return lines


def format_table(results: list[Any], *, scenarios: Mapping[str, Any] | None = None, confidence: float = 0.8) -> str:
    """A fixed-width table of scenario results (tok/s with its interval at ``confidence``, latencies in ms,
    acceptance); ``scenarios`` (by name) says each one's load: streams, or an open loop's rate."""
    head = (
        "scenario", "load", "out tok/s", "score", f"{confidence:.0%} CI", "stream tok/s",
        "TTFT p50/p99 ms", "TPOT p50/p99 ms", "accept", "reqs", "secs", "client",
    )  # fmt: skip
    rows = [head]
    for r in results:
        ci = "-" if r.ci_low is None else f"{r.ci_low:.0f}-{r.ci_high:.0f}"
        accept = "-" if r.accept_length is None else f"{r.accept_length:.2f} ({r.accept_method})"
        scenario = (scenarios or {}).get(r.name)
        rows.append(
            (
                r.name,
                scenario.load if scenario is not None else str(r.concurrency or "-"),
                _fmt(r.output_tok_s),
                _fmt(r.score),
                ci,
                _fmt(r.per_stream_tok_s),
                f"{_fmt(r.ttft_p50_s, 1000, 0)}/{_fmt(r.ttft_p99_s, 1000, 0)}",
                f"{_fmt(r.tpot_p50_s, 1000, 1)}/{_fmt(r.tpot_p99_s, 1000, 1)}",
                accept,
                str(r.requests),
                f"{r.seconds:.1f}",
                _client_cell(r),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = []
    for row in rows:
        cells = zip(row, widths, strict=True)
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(cells)))
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
