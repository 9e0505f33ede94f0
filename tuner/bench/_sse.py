"""A lean Server-Sent Events decoder for OpenAI-style streams.

Written for the hot path: at 64 concurrent streams the client handles thousands of events per second on a
small box, and every microsecond spent per event is a microsecond the load generator is not sending load
(REFERENCE.md, "Load-generator cost"). So it works on raw bytes from ``aiter_raw``, splits on newlines only,
and hands back the ``data`` payload as bytes for ``json.loads`` (which accepts bytes); no str decoding, no
per-field objects.

It follows the SSE framing rules that matter for these streams: ``data:`` lines (one optional space after the
colon is dropped), several ``data`` lines of one event joined with newlines, comment lines (``:``) and other
fields (``event``, ``id``, ``retry``) ignored, ``\\r\\n`` or ``\\n`` line ends, and an event dispatched at the
blank line that ends it.
"""

from __future__ import annotations

__all__ = ["SSEDecoder"]


class SSEDecoder:
    """Incremental decoder: :meth:`feed` bytes as they arrive, get the complete events' data back."""

    __slots__ = ("_buf", "_data")

    def __init__(self) -> None:
        self._buf = b""
        self._data: list[bytes] = []

    def feed(self, chunk: bytes) -> list[bytes]:
        """Add ``chunk``; return the data of every event completed by it (possibly none)."""
        # The common case, one whole ``data: ...\n\n`` event per chunk (a server flushes each token): no line
        # split, no joining.
        if (
            not self._buf
            and not self._data
            and chunk.startswith(b"data: ")
            and chunk.count(b"\n") == 2
            and chunk.endswith(b"\n\n")
            and not chunk.endswith(b"\r\n\n")
        ):
            return [chunk[6:-2]]
        buf = self._buf + chunk if self._buf else chunk
        if b"\n" not in buf:
            self._buf = buf
            return []
        lines = buf.split(b"\n")
        self._buf = lines.pop()  # the unterminated tail (b"" when the chunk ended on a newline)
        out: list[bytes] = []
        data = self._data
        for line in lines:
            if line.endswith(b"\r"):
                line = line[:-1]
            if not line:
                if data:
                    out.append(data[0] if len(data) == 1 else b"\n".join(data))
                    data.clear()
                continue
            if line.startswith(b"data:"):
                value = line[5:]
                if value.startswith(b" "):
                    value = value[1:]
                data.append(value)
            # Comments (":" heartbeats) and other fields carry nothing a benchmark needs.
        return out

    def close(self) -> list[bytes]:
        """End of stream: return an event whose terminating blank line never came (servers do omit it)."""
        tail = self._buf
        self._buf = b""
        out = self.feed(tail + b"\n\n") if tail or self._data else []
        return out

    @property
    def pending(self) -> bool:
        """Whether bytes of an unfinished event are buffered."""
        return bool(self._buf or self._data)
