"""What the task model reads of the agent that serves its tasks: a narrow Protocol, so nothing here imports
``Agent`` (``agentmw.Agent`` is one)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ..context import Services

if TYPE_CHECKING:
    from ..safety.limits import Budgets
    from ..settings import Limits, Timing
    from ..state import State

__all__ = ["TaskHost"]


@runtime_checkable
class TaskHost(Services, Protocol):
    """The core's services (``context.Services``: capabilities, access, hooks), plus the shared state the
    tasks and their journals live in, and the limits, timings and byte budgets that bound them."""

    @property
    def state(self) -> State: ...
    @property
    def limits(self) -> Limits: ...
    @property
    def timing(self) -> Timing: ...
    @property
    def budgets(self) -> Budgets: ...
