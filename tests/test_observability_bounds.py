"""What a client chooses never becomes a span name or a metric series as it is (observability/bounds.py): an
unknown tool's or method's name collapses to the method or ``_OTHER``, attribute values are cut at 256
characters, and a metric keeps at most 1,000 label sets. Over a real socket, in both MCP eras and on A2A and
AG-UI, with the OpenTelemetry SDK's in-memory exporter."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from agentmw.observability.bounds import MAX_ATTRIBUTE, MAX_SERIES, OTHER
from agentmw.observability.metrics import Counter, Histogram, Registry
from tests.conftest import serve
from tests.observability.app import Kit, build
from tests.test_auth_http_level import HANDSHAKE, MODERN, Mcp

HUGE = "x" * 20_000
HEADER_SIZED = "y" * 8_000  # the stateless era repeats the name in Mcp-Name: a header the server still reads


@pytest.fixture(scope="module")
def kit() -> Kit:
    return Kit()


@pytest.fixture(scope="module")
def url(kit: Kit) -> Iterator[str]:
    _, app = build(kit.telemetry)
    with serve(app) as found:
        yield found


def _longest(kit: Kit) -> tuple[int, int]:
    """The longest span name, and the longest attribute value, exported so far."""
    spans = kit.finished()
    names = max(len(span.name) for span in spans)
    values = max((len(str(v)) for span in spans for v in (span.attributes or {}).values()), default=0)
    return names, values


@pytest.mark.parametrize(("era", "name"), [(HANDSHAKE, HUGE), (MODERN, HEADER_SIZED)])
async def test_an_unknown_tools_name_is_not_a_span_name(kit: Kit, url: str, era: str, name: str) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        client = Mcp(http, url, era, None)
        assert await client.open() is None
        response = await client.call(name, {})
        known = await client.call("add", {"a": 1, "b": 2})
    assert response.status_code == (200 if era == HANDSHAKE else 400) and "Unknown tool" in response.text
    assert known.status_code == 200
    spans = kit.named("tools/call", 1)
    unknown = [
        s for s in spans if str((s.attributes or {}).get("gen_ai.tool.name", "")).startswith(name[:10])
    ]
    assert unknown, [s.name for s in kit.finished()]
    assert len(unknown[-1].attributes["gen_ai.tool.name"]) == MAX_ATTRIBUTE
    assert kit.named("tools/call add", 1)  # a tool the server serves keeps its name in the span's
    assert _longest(kit)[0] < 100 and _longest(kit)[1] <= MAX_ATTRIBUTE


async def test_an_unknown_mcp_method_and_a_huge_request_id_are_bounded(kit: Kit, url: str) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        client = Mcp(http, url, HANDSHAKE, None)
        assert await client.open() is None
        response = await http.post(
            f"{url}/mcp",
            headers=client._headers(HUGE),
            json={"jsonrpc": "2.0", "id": HUGE, "method": HUGE, "params": {}},
        )
    assert response.status_code == 200 and response.json()["error"]["code"] == -32601
    assert kit.named(OTHER, 1)
    assert _longest(kit)[0] < 100 and _longest(kit)[1] <= MAX_ATTRIBUTE


@pytest.mark.parametrize("binding", ["jsonrpc", "rest"])
async def test_a2a_methods_and_ids_are_bounded(kit: Kit, url: str, binding: str) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        if binding == "jsonrpc":
            response = await http.post(
                f"{url}/a2a",
                headers={"a2a-version": "1.0"},
                json={"jsonrpc": "2.0", "id": HUGE, "method": HUGE, "params": {}},
            )
            assert response.json()["error"]["code"] == -32601
            assert kit.named(OTHER, 1)
        else:
            response = await http.get(f"{url}/a2a/tasks/{HUGE[:4000]}", headers={"a2a-version": "1.0"})
            assert response.status_code == 404
    assert _longest(kit)[0] < 100 and _longest(kit)[1] <= MAX_ATTRIBUTE


async def test_agui_thread_and_run_ids_are_bounded(kit: Kit, url: str) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.post(
            f"{url}/agui/approve",
            headers={"accept": "text/event-stream"},
            json={
                "threadId": f"t-{uuid.uuid4()}-{HUGE[:900]}",
                "runId": f"r-{HUGE[:900]}",
                "state": {},
                "tools": [],
                "context": [],
                "forwardedProps": {},
                "messages": [{"id": "u", "role": "user", "content": "a pen"}],
            },
        )
    assert response.status_code == 200
    span = kit.named("invoke_agent approve", 1)[-1]
    assert len(span.attributes["agui.thread.id"]) == MAX_ATTRIBUTE
    assert len(span.attributes["agui.run.id"]) == MAX_ATTRIBUTE


# --- metrics ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("metric", [Counter("t", "test", ("code",)), Histogram("h", "test", ("code",))])
def test_a_metric_keeps_at_most_max_series_label_sets(metric: Any) -> None:
    record = metric.inc if isinstance(metric, Counter) else lambda labels: metric.observe(labels, 0.1)
    for index in range(MAX_SERIES * 3):
        record((f"code-{index}",))
    record(("z" * 20_000,))
    assert len(metric.values) == MAX_SERIES + 1
    assert (OTHER,) in metric.values
    assert max(len(key[0]) for key in metric.values) <= 128


async def test_the_prometheus_text_stays_bounded_and_parses() -> None:
    registry = Registry()
    counter = registry.add(Counter("agentmw_protocol_errors", "test", ("protocol", "code")))
    for index in range(5_000):
        counter.inc(("mcp", f"{index}-{HUGE[:200]}"))
    text = (await registry.exposition()).decode()
    families = list(text_string_to_metric_families(text))
    samples = [s for family in families for s in family.samples]
    assert len(samples) <= MAX_SERIES + 1
    assert sum(s.value for s in samples) == 5_000  # nothing lost: the rest is counted under _OTHER
