"""The stream clients by name: what ``[benchmark] http_client`` chooses, once per benchmark.

Each implementation's module is imported when it is chosen, not before: aiohttp's import is not free, and ``import
tuner.study`` must not pay for it (``tests/test_architecture.py``).
"""

from __future__ import annotations

from collections.abc import Callable

from tuner.bench._client import BaseStreamClient

__all__ = ["STREAM_CLIENTS", "stream_client"]


def _aiohttp() -> type[BaseStreamClient]:
    from tuner.bench._aiohttp import AiohttpStreamClient

    return AiohttpStreamClient


def _httpx() -> type[BaseStreamClient]:
    from tuner.bench._httpx import HttpxStreamClient

    return HttpxStreamClient


_LOADERS: dict[str, Callable[[], type[BaseStreamClient]]] = {"aiohttp": _aiohttp, "httpx": _httpx}
#: The names ``[benchmark] http_client`` accepts.
STREAM_CLIENTS = tuple(_LOADERS)


def stream_client(name: str) -> type[BaseStreamClient]:
    """The stream client ``name`` names (one of :data:`STREAM_CLIENTS`)."""
    try:
        load = _LOADERS[name]
    except KeyError:
        raise ValueError(f"http_client must be one of {', '.join(STREAM_CLIENTS)}, got {name!r}") from None
    return load()
