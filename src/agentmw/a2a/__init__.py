"""The A2A face: an agent card, the JSON-RPC and HTTP+JSON bindings of A2A 1.0, and 0.3 compatibility."""

from .auth import PushSigner
from .policy import PushPolicy
from .settings import A2ASettings

__all__ = ["A2ASettings", "PushPolicy", "PushSigner"]
