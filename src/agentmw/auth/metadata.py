"""An authorization server's metadata (RFC 8414, or OpenID Connect discovery), fetched when first needed and kept.

``JWTVerifier`` reads its ``jwks_uri`` there; the A2A card its ``authorization_endpoint`` and
``token_endpoint`` (the ``oauth2`` scheme's ``flows``). One document per issuer, shared by both when the
verifier's issuer is the resource's first authorization server.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any
from urllib.parse import urlsplit

__all__ = ["AuthorizationServerMetadata", "get_json", "metadata_urls"]

logger = logging.getLogger("agentmw")


async def get_json(http: Any, url: str, timeout: float) -> Any:
    """GET ``url`` (no redirects) and decode its JSON; raises for a transport error or a non-2xx answer."""
    import httpx

    if http is not None:
        response = await http.get(url, timeout=timeout)
    else:
        async with httpx.AsyncClient(timeout=timeout, follow_redirects=False) as client:
            response = await client.get(url)
    response.raise_for_status()
    return response.json()


def metadata_urls(issuer: str) -> list[str]:
    """Where an issuer's metadata may be, in the order asked: RFC 8414 section 3.1 (the well-known name between
    the host and the issuer's path), the name appended to the issuer (what many servers with a path publish),
    then OpenID Connect discovery. Without a path the first two are one URL."""
    base = issuer.rstrip("/")
    parts = urlsplit(base)
    origin = f"{parts.scheme}://{parts.netloc}"
    urls = [
        f"{origin}/.well-known/oauth-authorization-server{parts.path}",
        f"{base}/.well-known/oauth-authorization-server",
        f"{base}/.well-known/openid-configuration",
    ]
    return list(dict.fromkeys(urls))


class AuthorizationServerMetadata:
    """The metadata document of ``issuer``, fetched once and kept for ``ttl`` seconds (a failed refresh keeps the
    document it had). A failure is remembered for ``retry_seconds``: meanwhile :meth:`document` raises at once,
    so an outage does not turn every request into a fetch. Requests arriving during a fetch wait for it."""

    def __init__(
        self,
        issuer: str,
        *,
        http: Any = None,
        timeout: float = 5.0,
        retry_seconds: float = 30.0,
        ttl: float = 3600.0,
    ) -> None:
        self.issuer = issuer
        self.http = http
        self.timeout = timeout
        self.retry_seconds = retry_seconds
        self.ttl = ttl
        self.url = metadata_urls(issuer)[0]  # the one that answered, once one has
        self._document: dict[str, Any] | None = None
        self._fetched = float("-inf")
        self._failed = float("-inf")
        self._lock = asyncio.Lock()
        self.fetches = 0

    def _fresh(self) -> bool:
        return self._document is not None and time.monotonic() - self._fetched < self.ttl

    async def document(self) -> dict[str, Any]:
        """The metadata; raises ``LookupError`` when it cannot be had (now, or within ``retry_seconds`` of a
        failure) and none was fetched before."""
        if self._fresh():
            return self._document  # type: ignore[return-value]
        async with self._lock:
            if not self._fresh() and time.monotonic() - self._failed >= self.retry_seconds:
                await self._fetch()
        if self._document is None:
            raise LookupError(f"the metadata of the authorization server {self.issuer} cannot be fetched")
        return self._document

    async def _fetch(self) -> None:
        self.fetches += 1
        last: Exception | None = None
        for url in metadata_urls(self.issuer):
            try:
                found = await get_json(self.http, url, self.timeout)
            except Exception as exc:  # noqa: BLE001  (a missing document: try the next well-known name)
                last = exc
                continue
            if isinstance(found, dict):
                self._document, self._fetched, self.url = found, time.monotonic(), url
                return
        self._failed = time.monotonic()
        logger.warning(
            "could not fetch the metadata of the authorization server %s (%s); next attempt in %g s%s",
            self.issuer,
            last,
            self.retry_seconds,
            "; keeping the document fetched before" if self._document is not None else "",
        )
