"""Streams open their connections before anything is measured (``tuner.bench._load.preconnect``)."""

from __future__ import annotations

import asyncio

import pytest

from tuner.bench._load import LoadTarget, preconnect
from tuner.bench._workers import InProcessRunner, LoadPlan


class _KeepAliveServer:
    """A minimal HTTP/1.1 server on loopback that answers every request ``{}`` and counts connections."""

    def __init__(self) -> None:
        self.connections = 0
        self.requests: list[str] = []
        self.port = 0

    async def __aenter__(self) -> _KeepAliveServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                self.requests.append(head.split(b"\r\n", 1)[0].decode())
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@pytest.mark.parametrize("library", ["aiohttp", "httpx"])
def test_each_stream_connects_once_before_the_load_and_keeps_its_connection(library: str) -> None:
    async def scenario() -> tuple[int, list[str]]:
        async with _KeepAliveServer() as server:
            target = LoadTarget(
                url=f"http://127.0.0.1:{server.port}/v1/chat/completions",
                headers={"Authorization": "Bearer x"},
                api="chat",
                model="m",
                timeout_s=5.0,
                library=library,
            )
            runner = InProcessRunner(target=target, plan=LoadPlan(), streams=3)
            await runner.start()
            try:
                opened = server.connections
                for client in runner._clients:  # what a stream's first measured request finds: an open connection
                    await preconnect(client, url=target.url, headers=target.headers)
                assert server.connections == opened
            finally:
                await runner.aclose()
            return opened, server.requests

    opened, requests = asyncio.run(scenario())
    assert opened == 3
    assert requests[:3] == ["GET /v1/models HTTP/1.1"] * 3


def test_preconnect_to_nothing_is_quiet() -> None:
    async def scenario() -> None:
        import aiohttp

        async with aiohttp.ClientSession() as client:
            await preconnect(client, url="http://127.0.0.1:9/v1/chat/completions", headers={}, timeout_s=1.0)

    asyncio.run(scenario())  # the warm-up or the first repeat reports a dead server, with its evidence
