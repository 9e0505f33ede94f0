"""Benchmark prompts: a target length, a unique start per request, and the same text on every trial.

Why these choices:

* **Unique prefix per request.** A server with a prefix cache (SGLang's radix cache) would skip the prefill of
  any prompt that shares a start with an earlier one, flattering TTFT and throughput. Every prompt starts with
  its own tag and then its own random words, so no two share even their first token.
* **Deterministic from the seed.** Each trial must see the same work, or two configs are compared on different
  prompts. The words are drawn from a generator seeded by ``(seed, scenario, phase, repeat, index)``, so a
  prompt does not depend on how many other prompts were built before it.
* **Length in words.** The simulator counts prompt tokens as whitespace-separated words, and common short
  English words are one token each in real BPE tokenizers (with their leading space), so ``N`` words from the
  list below is ``N`` tokens for the simulator and close to ``N`` for a real model (chat templates add a few).
"""

from __future__ import annotations

import hashlib
import random

__all__ = ["build_prompt", "prompt_seed"]

# Short, frequent English words: each is a single token in the GPT/Llama/Kimi-style BPE vocabularies.
# fmt: off
_WORDS = (
    "the", "of", "and", "to", "in", "is", "it", "that", "for", "on", "was", "with", "as", "be", "by", "at",
    "this", "are", "from", "or", "have", "an", "they", "which", "one", "you", "were", "all", "we", "when",
    "there", "can", "more", "if", "no", "out", "so", "said", "what", "up", "its", "about", "into", "than",
    "them", "only", "other", "new", "some", "time", "could", "these", "two", "may", "first", "then", "do",
    "any", "like", "my", "now", "over", "such", "our", "man", "me", "even", "most", "made", "after", "also",
    "did", "many", "off", "before", "must", "well", "back", "through", "years", "much", "where", "your",
    "way", "down", "should", "because", "each", "just", "those", "people", "how", "too", "little", "state",
    "good", "very", "make", "world", "still", "own", "see", "men", "work", "long", "here", "get", "both",
    "between", "life", "being", "under", "never", "day", "same", "another", "know", "while", "last",
    "might", "us", "great", "old", "year", "come", "since", "against", "go", "came", "right", "used",
    "take", "three", "small", "place", "found", "part", "once", "high", "upon", "every", "went", "end",
    "few", "house", "use", "during", "without", "again", "home", "around", "always", "however", "away",
    "something", "fact", "water", "hand", "head", "number",
)
# fmt: on


def prompt_seed(seed: int, *parts: object) -> int:
    """A stable 64-bit seed from the study seed and labels (Python's ``hash`` is salted per process)."""
    text = "\x1f".join([str(seed), *map(str, parts)])
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


def build_prompt(*, tokens: int, seed: int, scenario: str, phase: str, repeat: int, index: int) -> str:
    """A prompt of exactly ``tokens`` whitespace-separated words, unique to its request.

    ``phase`` separates warm-up from measured prompts so a warm-up never pre-fills a measured request's cache.
    The first word is a request tag (``r<hex>:``), the rest random words; with ``tokens == 1`` only the tag.
    """
    if tokens < 1:
        raise ValueError(f"a prompt needs at least one token, got {tokens}")
    s = prompt_seed(seed, scenario, phase, repeat, index)
    rng = random.Random(s)
    words = [f"r{s & 0xFFFFFFFF:08x}:"]
    words.extend(rng.choices(_WORDS, k=tokens - 1))
    return " ".join(words)
