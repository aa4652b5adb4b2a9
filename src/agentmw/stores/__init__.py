"""Where tasks and push configurations live: in memory for tests, SQLite as the embedded default."""

from .base import TaskRecord, TaskStore
from .memory import MemoryStore
from .sqlite import SQLiteStore

__all__ = ["MemoryStore", "SQLiteStore", "TaskRecord", "TaskStore"]
