from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from tuner.dialects._base import BaseServerDialect
from tuner.dialects._capacity import KvCapacity, answer_int, int_value
from tuner.dialects._counters import ServerSnapshot, drafts_snapshot
from tuner.space import SearchSpace
from tuner.spec import flag_value

__all__ = ["LlamaServerDialect", "spec_types"]

#: Flags llama-server has removed (it exits with "the argument has been removed. use ..."): old -> what it says
#: to use instead (common/arg.cpp). :meth:`LlamaServerDialect.replacement` picks one for a given command.
REMOVED_FLAGS: dict[str, str] = {
    "--draft": "--spec-draft-n-max or --spec-ngram-mod-n-max",
    "--draft-n": "--spec-draft-n-max or --spec-ngram-mod-n-max",
    "--draft-max": "--spec-draft-n-max or --spec-ngram-mod-n-max",
    "--draft-min": "--spec-draft-n-min or --spec-ngram-mod-n-min",
    "--draft-n-min": "--spec-draft-n-min or --spec-ngram-mod-n-min",
    "--spec-ngram-size-n": "the respective --spec-ngram-*-size-n or --spec-ngram-mod-n-match",
    "--spec-ngram-size-m": "the respective --spec-ngram-*-size-m",
    "--spec-ngram-min-hits": "the respective --spec-ngram-*-min-hits",
}
_DRAFT_LENGTH = {"--draft": "n-max", "--draft-n": "n-max", "--draft-max": "n-max", "--draft-min": "n-min",
                 "--draft-n-min": "n-min"}  # fmt: skip
_NGRAM_SIZE = {"--spec-ngram-size-n": "size-n", "--spec-ngram-size-m": "size-m", "--spec-ngram-min-hits": "min-hits"}
#: Every spelling of the draft model flag.
DRAFT_MODEL_FLAGS = ("--spec-draft-model", "-md", "--model-draft")
#: ``--spec-type`` values that draft with a model (``-md``); the rest are model-free (n-gram lookups).
MODEL_DRAFTERS = ("draft-simple", "draft-eagle3", "draft-mtp", "draft-dflash", "draft-dspark")
MODEL_FREE_DRAFTERS = ("ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod", "ngram-cache")
#: The draft model's drafting knobs (``params.draft``: common/speculative.cpp reads them only in the model
#: drafters' implementations), with their environment twins (common/arg.cpp).
DRAFTING_FLAGS = ("--spec-draft-n-max", "--spec-draft-n-min", "--spec-draft-p-min", "--draft-p-min",
                  "--spec-draft-p-split", "--draft-p-split")  # fmt: skip
DRAFTING_ENV = ("LLAMA_ARG_SPEC_DRAFT_N_MAX", "LLAMA_ARG_SPEC_DRAFT_N_MIN", "LLAMA_ARG_SPEC_DRAFT_P_MIN",
                "LLAMA_ARG_SPEC_DRAFT_P_SPLIT")  # fmt: skip
#: ``--spec-ngram-<type>-...`` belongs to that n-gram drafter alone (``params.ngram_<type>``).
_NGRAM_KNOB_TYPES = ("ngram-simple", "ngram-map-k4v", "ngram-map-k", "ngram-mod")


class LlamaServerDialect(BaseServerDialect):
    """llama.cpp's own C++ server, ``llama-server`` (not llama-cpp-python's Python server: that is ``llama.cpp``).

    Read from the llama.cpp sources llama-cpp-python 0.3.36 vendors (``tools/server``, ``common/arg.cpp``) and
    checked against a build of them. ``/health`` answers 503 while the model loads; streams carry ``usage`` and,
    in their last chunk, the request's ``timings`` (``draft_n`` / ``draft_n_accepted`` when it drafted);
    with ``--metrics``, ``/metrics`` has the counters ``llamacpp:spec_decode_num_drafts_total`` (verification
    steps) and ``llamacpp:spec_decode_num_accepted_tokens_total``: a scenario's acceptance length is
    1 + delta(accepted) / delta(drafts), the server's own "mean len". Speculation is ``--spec-type`` (default
    ``none``: a draft model given with ``-md`` alone drafts nothing) with ``--spec-draft-n-max`` /
    ``--spec-draft-n-min`` / ``--spec-draft-p-min``. Booleans are ``--flag`` / ``--no-flag``; every flag has an
    environment twin (``LLAMA_ARG_...``) that the command line overrides.
    """

    name = "llama-server"
    context_flags: ClassVar[tuple[str, ...]] = ("-c", "--ctx-size")
    draft_lengths: ClassVar[tuple[str, ...]] = ("draft_max", "ngram_mod_n_max")
    slot_flags: ClassVar[tuple[str, ...]] = ("-np", "--parallel")
    default_slots = 4  # no -np: 4 slots over one unified context (llama-server's default)
    # A request waits for a free slot: a client cap holds it the same way, but -np also splits -c between the
    # slots unless the KV cache is unified (docs/measuring.md, "Batch caps without a restart").
    batch_cap_flags: ClassVar[tuple[str, ...]] = ("-np", "--parallel")
    health_path = "/health"
    # Its start-up log (tools/server/server.cpp): the HTTP server is up first (/health: 503), then these.
    phase_markers: ClassVar[tuple[tuple[str, str], ...]] = (
        ("loading model", r"load_model: loading model"),
        ("loading draft model", r"loading draft model"),
        ("creating slots", r"load_model: initializing, n_slots"),
        ("serving", r"llama_server: model loaded|llama_server: listening on"),
    )
    fatal_patterns: ClassVar[tuple[str, ...]] = (
        r"error while handling (argument|environment variable)",
        r"failed to load model",
        r"llama_server: exiting due to",
        r"couldn't bind HTTP server socket",
    )
    flush_path = None
    acceptance = "prometheus"
    metrics_path = "/metrics"
    stream_usage = True
    tokenize_path = "/tokenize"
    bool_style = "negatable"
    default_port = 8080
    flag_separator = "-"
    removed_flags: ClassVar[dict[str, str]] = REMOVED_FLAGS
    draft_model_flags: ClassVar[tuple[str, ...]] = DRAFT_MODEL_FLAGS
    # `tune init` suggests spec_type (the command's --spec-type against "none") and the knobs of the drafters the
    # command uses; ranges hold the server's defaults (common/common.h) and are widened to the command's values.
    tunable = (
        {
            "name": "spec_type",
            "type": "categorical",
            "choices": ["draft-simple", "none"],
            "flag": "--spec-type",
            "absent": "none",
            "requires": ("--spec-type", None),
        },
        {"name": "draft_max", "type": "int", "low": 1, "high": 16, "flag": "--spec-draft-n-max", "default": 3,
         "requires": ("--spec-type", MODEL_DRAFTERS)},
        {"name": "draft_min", "type": "int", "low": 0, "high": 8, "flag": "--spec-draft-n-min", "default": 0,
         "requires": ("--spec-type", MODEL_DRAFTERS)},
        {"name": "draft_p_min", "type": "float", "low": 0.0, "high": 0.9, "step": 0.1, "flag": "--spec-draft-p-min",
         "aliases": ["--draft-p-min"], "default": 0.0, "requires": ("--spec-type", MODEL_DRAFTERS)},
        {"name": "ngram_mod_n_max", "type": "int", "low": 8, "high": 64, "step": 8, "flag": "--spec-ngram-mod-n-max",
         "default": 64, "requires": ("--spec-type", ("ngram-mod",))},
        {"name": "ngram_mod_n_min", "type": "int", "low": 0, "high": 48, "step": 8, "flag": "--spec-ngram-mod-n-min",
         "default": 48, "requires": ("--spec-type", ("ngram-mod",))},
        {"name": "ngram_mod_n_match", "type": "int", "low": 4, "high": 32, "step": 4,
         "flag": "--spec-ngram-mod-n-match", "default": 24, "requires": ("--spec-type", ("ngram-mod",))},
        {"name": "ngram_size_n", "type": "int", "low": 1, "high": 16, "flag": "--spec-ngram-simple-size-n",
         "default": 12, "requires": ("--spec-type", ("ngram-simple",))},
        {"name": "ngram_size_m", "type": "int", "low": 4, "high": 64, "step": 4, "flag": "--spec-ngram-simple-size-m",
         "default": 48, "requires": ("--spec-type", ("ngram-simple",))},
    )  # fmt: skip
    tunable_constraints = (("draft_min", "<=", "draft_max"), ("ngram_mod_n_min", "<=", "ngram_mod_n_max"))

    @classmethod
    def matches(cls, argv: Sequence[str]) -> str | None:
        for arg in argv:
            if arg.rsplit("/", 1)[-1] == "llama-server":
                return "llama-server"
        return None

    def token_count_request(self, text: str, model: str) -> dict[str, Any]:
        return {"content": text, "add_special": False}

    def read_counters(self, metrics: str, info: Mapping[str, Any] | None) -> ServerSnapshot:
        """vLLM's draft counters under ``llamacpp:`` (with ``--metrics``), read the same way."""
        return drafts_snapshot(metrics, prefix="llamacpp", generated="llamacpp:tokens_predicted_total")

    @staticmethod
    def replacement(flag: str, spec_types: Sequence[str]) -> str | None:
        """The flag that replaces the removed ``flag`` for a command drafting with ``spec_types`` (None: unsure)."""
        if flag in _DRAFT_LENGTH:
            drafter = "ngram-mod" if "ngram-mod" in spec_types else "draft"
            return f"--spec-{drafter}-{_DRAFT_LENGTH[flag]}"
        if flag in _NGRAM_SIZE:
            lookups = [t for t in spec_types if t in ("ngram-simple", "ngram-map-k", "ngram-map-k4v")]
            if len(lookups) == 1:
                return f"--spec-{lookups[0]}-{_NGRAM_SIZE[flag]}"
            if not lookups and "ngram-mod" in spec_types and flag == "--spec-ngram-size-n":
                return "--spec-ngram-mod-n-match"
        return None

    def init_command(self, argv: Sequence[str]) -> tuple[list[str], list[str]]:
        """Removed flags (``--draft-max`` ...) get their new names (``--spec-ngram-mod-n-*`` with ``--spec-type
        ngram-mod``); a draft model without ``--spec-type`` gets ``draft-simple`` (alone it drafts nothing);
        ``--metrics`` is added, since acceptance comes from its counters."""
        types = spec_types(argv)
        out: list[str] = []
        notes: list[str] = []
        for arg in argv:
            flag, eq, value = arg.partition("=")
            new = self.replacement(flag, types) if flag in self.removed_flags else None
            if flag in self.removed_flags and new is None:
                notes.append(f"{flag}: llama-server removed it; use {self.removed_flags[flag]} (not changed)")
            out.append(arg if new is None else new + eq + value)
            if new is not None:
                notes.append(f"{flag} is {new} now (llama-server removed {flag}: it exits at start)")
        flags = {a.partition("=")[0] for a in out}
        if flags.intersection(self.draft_model_flags) and "--spec-type" not in flags:
            out += ["--spec-type", "draft-simple"]
            notes.append("added --spec-type draft-simple: without it llama-server loads the draft model but drafts "
                         "nothing")
        if "--metrics" not in flags:
            out.append("--metrics")
            notes.append("added --metrics: the acceptance length comes from its speculative-decoding counters")
        return out, notes

    def init_space(self, entries: list[dict[str, Any]], argv: Sequence[str]) -> list[dict[str, Any]]:
        """The command's drafter against no speculation (``spec_type``), its knobs only while it drafts."""
        spec = flag_value(argv, "--spec-type")
        if not spec or spec == "none":
            return []
        out = []
        for entry in entries:
            if entry["name"] == "spec_type":
                entry = {**entry, "choices": [spec, "none"]}
            else:
                entry = {**entry, "when": {"spec_type": spec}}
            out.append(entry)
        return out

    def lint(self, space: SearchSpace) -> list[str]:
        problems = super().lint(space)
        for p in space.params:
            for flag in (p.flag, *p.aliases):
                if flag in self.removed_flags:
                    problems.append(f"[space.{p.name}] {flag}: llama-server removed it; use {self.removed_flags[flag]}")
        return problems

    def command_problems(self, argv: Sequence[str]) -> list[str]:
        types = spec_types(argv)
        problems = []
        for arg in argv:
            flag = arg.partition("=")[0]
            if flag in self.removed_flags:
                use = self.replacement(flag, types) or self.removed_flags[flag]
                problems.append(f"{flag}: llama-server removed it (it exits at start); use {use}")
        return problems

    def inert(self, argv: Sequence[str], env: Mapping[str, str]) -> frozenset[str]:
        """Drafting knobs of drafters the command does not use (llama.cpp's common/speculative.cpp, as vendored by
        llama-cpp-python 0.3.36): the draft length and probability bounds without a model drafter (with
        ``--spec-type none``, the default, nothing drafts at all), an n-gram drafter's sizes without that drafter.
        """
        given = any(a.partition("=")[0] == "--spec-type" for a in argv)  # the command line overrides the env
        types = set(spec_types(argv if given else ["--spec-type", env.get("LLAMA_ARG_SPEC_TYPE", "none")]))
        out: set[str] = set()
        if not types.intersection(MODEL_DRAFTERS):
            out.update(DRAFTING_FLAGS, DRAFTING_ENV)
        for arg in argv:
            flag = arg.partition("=")[0]
            if flag.startswith("--spec-ngram-"):
                owner = next((t for t in _NGRAM_KNOB_TYPES if flag.startswith(f"--spec-{t}-")), None)
                if owner is not None and owner not in types:
                    out.add(flag)
        return frozenset(out)

    def command_notes(self, argv: Sequence[str]) -> list[str]:
        flags = {a.partition("=")[0] for a in argv}
        notes = []
        if flags.intersection(self.draft_model_flags) and "--spec-type" not in flags:
            notes.append("a draft model (-md) without --spec-type drafts nothing: add --spec-type draft-simple")
        if "--metrics" not in flags:
            notes.append("no --metrics in the command: acceptance length is not measured (its counters are there)")
        return notes

    # -- capacity (tools/server/server.cpp, src/llama-context.cpp of the 0.3.36 vendor tree) --------------------
    capacity_paths: ClassVar[tuple[str, ...]] = ("/props",)
    template_path = "/apply-template"

    @staticmethod
    def kv_layout(argv: Sequence[str], env: Mapping[str, str]) -> tuple[int, bool, str]:
        """(slots, whether they share one unified KV pool, in words). Without ``-np`` (auto) llama-server takes 4
        slots and forces the unified pool, whatever ``--no-kv-unified`` says; with ``-np N`` the pool is unified
        only with ``-kvu`` / ``--kv-unified`` (or ``LLAMA_ARG_KV_UNIFIED``), else each slot has its own."""
        slots = int_value(argv, ("-np", "--parallel"), env, "LLAMA_ARG_N_PARALLEL")
        if slots is None or slots < 0:
            return 4, True, "4 slots (no -np: llama-server's auto) sharing one unified KV pool"
        last = None
        for arg in argv:
            if arg in ("-kvu", "--kv-unified", "-no-kvu", "--no-kv-unified"):
                last = arg
        if last is None:
            said = env.get("LLAMA_ARG_KV_UNIFIED", "").lower()
            unified = said in ("1", "true", "on", "enabled")
        else:
            unified = last in ("-kvu", "--kv-unified")
        if unified:
            return slots, True, f"{slots} slots sharing one unified KV pool ({last or 'LLAMA_ARG_KV_UNIFIED'})"
        return slots, False, f"{slots} slots, each with a KV of its own"

    def command_capacity(self, argv: Sequence[str], env: Mapping[str, str]) -> KvCapacity | None:
        """``-c`` rounded up to a multiple of 256 (llama_context does); unified: every slot may use all of it and
        the running requests share it; else each slot has ``c / slots`` (rounded up to 256) of its own."""
        context = int_value(argv, ("-c", "--ctx-size"), env, "LLAMA_ARG_CTX_SIZE")
        if context is None or context <= 0:
            return None  # 0 or none: the model's trained context, which only the server knows
        slots, unified, how = self.kv_layout(argv, env)
        pool = -(-context // 256) * 256
        per_slot = pool if unified else -(-(pool // slots) // 256) * 256
        flag = "-c" if flag_value(argv, ("-c",)) is not None else "--ctx-size"
        return KvCapacity(request=per_slot, pool=pool if unified else per_slot * slots, slots=slots,
                          source=f"{flag} {context}, {how}")  # fmt: skip

    def server_capacity(
        self, answers: Mapping[str, Any], argv: Sequence[str], env: Mapping[str, str]
    ) -> KvCapacity | None:
        """``/props``: ``default_generation_settings.n_ctx`` (a slot's context) and ``total_slots``; whether the
        slots share one pool it does not say, so the command's flags do (:meth:`kv_layout`)."""
        props = answers.get("/props")
        per_slot = answer_int(props, "default_generation_settings", "n_ctx")
        slots = answer_int(props, "total_slots")
        if per_slot is None or slots is None:
            return None
        _, unified, _ = self.kv_layout(argv, env)
        layout = "sharing one unified KV pool (as the command's flags say)" if unified else "each with its own KV"
        return KvCapacity(request=per_slot, pool=per_slot if unified else per_slot * slots, slots=slots,
                          source=f"/props: n_ctx {per_slot} a slot, {slots} slots {layout}")  # fmt: skip


def spec_types(argv: Sequence[str]) -> list[str]:
    """The drafters a llama-server command asks for (``--spec-type a,b``, possibly repeated; [] for none)."""
    out: list[str] = []
    for i, arg in enumerate(argv):
        name, eq, inline = arg.partition("=")
        if name == "--spec-type":
            value = inline if eq else (argv[i + 1] if i + 1 < len(argv) else "")
            out += [t for t in value.split(",") if t and t != "none"]
    return out

