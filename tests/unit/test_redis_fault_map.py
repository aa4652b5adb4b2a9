"""Which redis-py failures are the store's transient faults (StoreUnavailable) and which are raised as they are."""

from __future__ import annotations

from agentmw.errors import StoreUnavailable
from agentmw.state.redis import _fault


def test_a_subscribe_racing_the_bus_reader_on_a_reconnecting_connection_is_transient() -> None:
    # seen in the fault check while Redis restarted: redis-py reconnects the bus connection for a subscribe
    # while the bus reader waits on it, and asyncio's StreamReader refuses a second reader
    raced = RuntimeError("readuntil() called while another coroutine is already waiting for incoming data")
    fault = _fault(raced)
    assert isinstance(fault, StoreUnavailable) and "reconnecting" in fault.message


def test_other_runtime_errors_are_not_store_faults() -> None:
    assert _fault(RuntimeError("Event loop is closed")) is None
    assert _fault(ValueError("bad reply")) is None
