"""The A2A face: an agent card, the JSON-RPC and HTTP+JSON bindings of A2A 1.0, and 0.3 compatibility."""

from typing import TYPE_CHECKING, Any

from .settings import A2ASettings

if TYPE_CHECKING:
    from .push import PushPolicy

__all__ = ["A2ASettings", "PushPolicy"]


def __getattr__(name: str) -> Any:
    if name == "PushPolicy":  # imported on use: it brings the network modules with it
        from .push import PushPolicy

        return PushPolicy
    raise AttributeError(name)
