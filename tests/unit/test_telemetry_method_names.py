"""Telemetry names a span only after a method a face serves; it lists those names itself (a cross-cutting module
never imports a face), so they are checked here against the faces' own tables."""

from agentmw.a2a.params import OPERATION_OF_METHOD
from agentmw.mcp.methods import HANDLERS
from agentmw.observability import telemetry


def test_the_mcp_method_names_are_the_ones_the_mcp_face_dispatches() -> None:
    assert telemetry._MCP_METHODS == frozenset(HANDLERS)


def test_the_a2a_method_names_are_the_ones_the_a2a_face_serves() -> None:
    assert telemetry._A2A_V10 == dict(OPERATION_OF_METHOD)
    assert {*OPERATION_OF_METHOD, *OPERATION_OF_METHOD.values()} <= telemetry._A2A_METHODS
