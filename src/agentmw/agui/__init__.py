"""The AG-UI face: each skill served as an AG-UI agent, its runs streamed as events (``endpoint.py``, built by
the agent when first served)."""

from .settings import AguiSettings

__all__ = ["AguiSettings"]
