"""Left only until the tests import ``RESTART_REASON`` from ``agentmw.lifecycle`` (then deleted)."""

from ..lifecycle import RESTART_REASON

__all__ = ["RESTART_REASON"]
