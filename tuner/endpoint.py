"""The server's HTTP address as every HTTP-speaking part of `tune` sees it (readiness, benchmark, gate)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import httpx

__all__ = ["Endpoint"]


@dataclass(frozen=True, kw_only=True)
class Endpoint:
    base_url: str
    model: str | None = None
    """Model id sent in requests; None until :meth:`resolve_model` asked ``/v1/models``."""
    api_key: str | None = None

    def url(self, path: str) -> str:
        return self.base_url.rstrip("/") + "/" + path.lstrip("/")

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def resolve_model(self, client: httpx.Client) -> Endpoint:
        """Fill in ``model`` from ``/v1/models`` (first id) unless the config named one."""
        if self.model:
            return self
        response = client.get(self.url("/v1/models"), headers=self.headers)
        response.raise_for_status()
        data = response.json().get("data") or []
        model = data[0]["id"] if data else "default"
        return replace(self, model=model)
