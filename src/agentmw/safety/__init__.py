"""The safety layer: one set of rules on the core pipeline, so that no face can skip them."""

from .framing import frame_text
from .gate import Approval, Approvals, GateSpec, human_gate
from .idempotency import IdempotencyCache
from .limits import Budgets, InFlightLimits
from .roots import RootedPath, RootViolation, resolve_in_roots

__all__ = [
    "Approval",
    "Approvals",
    "Budgets",
    "GateSpec",
    "IdempotencyCache",
    "InFlightLimits",
    "RootViolation",
    "RootedPath",
    "frame_text",
    "human_gate",
    "resolve_in_roots",
]
