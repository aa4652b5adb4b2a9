"""The task model every face shares: records in the shared state, their coroutines, cancels across replicas,
journaled resumes and take-overs. A2A tasks and MCP tasks are both made of these parts (docs/durability.md);
the faces only say how a task looks on their wire.
"""

from .manager import TaskError, TaskManager
from .registry import Cadence, LiveTask, Spaces, TaskRegistry
from .runner import TaskRunner

__all__ = ["Cadence", "LiveTask", "Spaces", "TaskError", "TaskManager", "TaskRegistry", "TaskRunner"]
