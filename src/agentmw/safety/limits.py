"""In-flight caps: a full agent or capability rejects at once with a retryable error, it never queues."""

from __future__ import annotations

__all__ = ["Limits"]


class Limits:
    def __init__(self, global_cap: int | None) -> None:
        self.global_cap = global_cap
        self.total = 0
        self.per_capability: dict[str, int] = {}
        self.rejected = 0

    def acquire(self, name: str, cap: int | None) -> str | None:
        """None when a slot was taken; otherwise why not (and nothing was taken)."""
        if self.global_cap is not None and self.total >= self.global_cap:
            self.rejected += 1
            return f"the agent is at its limit of {self.global_cap} calls in flight"
        current = self.per_capability.get(name, 0)
        if cap is not None and current >= cap:
            self.rejected += 1
            return f"{name} is at its limit of {cap} calls in flight"
        self.total += 1
        self.per_capability[name] = current + 1
        return None

    def release(self, name: str) -> None:
        self.total -= 1
        self.per_capability[name] -= 1
