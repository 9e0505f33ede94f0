"""Per-stream event accounting (``StreamEvents``): what the benchmark counts from a stream's bytes."""

from __future__ import annotations

import json

import pytest

from tuner.bench._record import RequestRecord, StreamError, StreamEvents


def _event(obj: object) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _chat(content: str | None, *, cum: int | None = None, finish: str | None = None) -> bytes:
    obj: dict[str, object] = {"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish}]}
    if cum is not None:
        obj["usage"] = {"prompt_tokens": 7, "completion_tokens": cum}
    return _event(obj)


def _fill(events: StreamEvents) -> RequestRecord:
    events.check_complete()
    rec = RequestRecord(index=0, t_start=0.0, t_end=10.0)
    events.fill(rec)
    return rec


def test_per_chunk_counts_attribute_tokens_exactly() -> None:
    ev = StreamEvents(chat=True)
    for t, (text, cum) in enumerate([("a b", 3), ("c", 4), ("d e f", 8)], start=1):
        ev.feed(_chat(text, cum=cum), float(t))
    ev.feed(_chat(None, finish="length") + b"data: [DONE]\n\n", 4.0)
    rec = _fill(ev)
    assert rec.event_times == [1.0, 2.0, 3.0]
    assert rec.event_tokens == [3, 1, 4] and rec.output_tokens == 8 and rec.tokens_from_usage
    assert rec.prompt_tokens == 7 and rec.finish_reason == "length"


def test_without_counts_the_final_usage_is_apportioned_by_words() -> None:
    ev = StreamEvents(chat=False)
    for t, text in enumerate(["one two", "three", "four five six"], start=1):
        ev.feed(_event({"choices": [{"text": text, "finish_reason": None}]}), float(t))
    ev.feed(_event({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 6}}), 4.0)
    ev.feed(b"data: [DONE]\n\n", 4.0)
    rec = _fill(ev)
    assert rec.event_tokens == [2, 1, 3] and rec.output_tokens == 6


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (b"data: {not json\n\n", "malformed chunk"),
        (b"data: [1, 2]\n\n", "malformed chunk"),
        (b'data: {"error": {"message": "boom"}}\n\n', "server error in stream"),
    ],
)
def test_bad_events_raise_stream_errors(data: bytes, kind: str) -> None:
    with pytest.raises(StreamError) as info:
        StreamEvents(chat=True).feed(data, 0.0)
    assert info.value.kind == kind


def test_a_stream_without_an_end_is_incomplete_and_abort_is_a_failure() -> None:
    ev = StreamEvents(chat=True)
    ev.feed(_chat("x"), 1.0)
    with pytest.raises(StreamError, match="incomplete stream"):
        ev.check_complete()
    ev.feed(_chat(None, finish="abort"), 2.0)
    with pytest.raises(StreamError, match="aborted by server"):
        ev.check_complete()


@pytest.mark.parametrize("chat", [True, False])
def test_keep_text_keeps_the_generated_text_only_when_asked(chat: bool) -> None:
    def event(text: str) -> bytes:
        choice = {"delta": {"content": text}} if chat else {"text": text}
        return _event({"choices": [{**choice, "finish_reason": None}]})

    for keep in (True, False):
        ev = StreamEvents(chat=chat, keep_text=keep)
        ev.feed(event("Hello") + event(" world"), 1.0)
        ev.feed(b"data: [DONE]\n\n", 2.0)
        rec = _fill(ev)
        assert rec.text == ("Hello world" if keep else None)
