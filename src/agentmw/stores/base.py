"""Left only until ``a2a/endpoint.py`` and the tests import these from ``agentmw.lifecycle`` (then deleted)."""

from ..lifecycle import INTERRUPTED, TERMINAL, TaskRecord

__all__ = ["INTERRUPTED", "TERMINAL", "TaskRecord"]
