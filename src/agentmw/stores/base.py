"""Left only until ``a2a/endpoint.py`` imports ``TERMINAL`` from ``agentmw.lifecycle`` (then deleted)."""

from ..lifecycle import TERMINAL

__all__ = ["TERMINAL"]
