"""The MCP face: Streamable HTTP in the handshake era (2024-11-05 … 2025-11-25) and the stateless era
(2026-07-28), served on one endpoint and chosen per request (``endpoint.py``, built by the agent when first
served)."""

from .settings import McpSettings

__all__ = ["McpSettings"]
