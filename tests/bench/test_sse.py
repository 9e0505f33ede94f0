from __future__ import annotations

from tuner.bench._record import RequestRecord, _apportion
from tuner.bench._sse import SSEDecoder


def test_events_split_across_chunks_and_line_endings() -> None:
    d = SSEDecoder()
    assert d.feed(b'data: {"a"') == []
    assert d.feed(b": 1}\r\n") == []
    assert d.feed(b"\r\n: heartbeat comment\n\nevent: x\ndata:[DONE]\n\n") == [b'{"a": 1}', b"[DONE]"]
    assert not d.pending


def test_multi_line_data_is_joined_and_unterminated_tail_flushed_on_close() -> None:
    d = SSEDecoder()
    assert d.feed(b"data: one\ndata: two\n\ndata: tail") == [b"one\ntwo"]
    assert d.pending
    assert d.close() == [b"tail"]


def test_apportion_keeps_totals_and_one_token_per_event() -> None:
    assert _apportion(9, [4, 5]) == [4, 5]  # words are tokens: exact
    out = _apportion(20, [1, 1, 2])
    assert sum(out) == 20 and min(out) >= 1 and out[2] > out[0]
    assert sum(_apportion(2, [3, 1, 5])) == 2


def test_itls_attribute_multi_token_events() -> None:
    rec = RequestRecord(index=0, t_start=0.0, t_end=1.0)
    rec.event_times = [0.1, 0.5, 0.6]
    rec.event_tokens = [3, 4, 1]
    rec.output_tokens = 8
    rec.t_first, rec.t_last = 0.1, 0.6
    gaps = rec.itls()
    assert len(gaps) == 5
    assert gaps[:4] == [0.1] * 4 or all(abs(g - 0.1) < 1e-12 for g in gaps[:4])
    assert abs(gaps[4] - 0.1) < 1e-12
    # Decode pace counts only tokens after the first event over first-to-last event time.
    assert abs((rec.decode_tok_s or 0) - 5 / 0.5) < 1e-9


def test_one_event_per_chunk_fast_path_matches_the_general_decoder() -> None:
    chunks = [b"data: {}\n\n", b"data: \n\n", b"data: x\r\n\n", b"data: a\n\ndata: b\n\n", b"data:no-space\n\n"]
    for chunk in chunks:
        whole = SSEDecoder().feed(chunk)
        split = SSEDecoder()
        pieces = [*split.feed(chunk[:3]), *split.feed(chunk[3:])]  # never takes the fast path
        assert whole == pieces, chunk
    d = SSEDecoder()
    assert d.feed(b"data: one\n") == []
    assert d.feed(b"data: two\n\n") == [b"one\ntwo"]  # pending data: the fast path must not bypass it
