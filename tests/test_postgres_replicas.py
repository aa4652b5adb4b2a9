"""The replica, kill and restart checks of Redis, on Postgres (issue 25): the same checks, run again on a store of
``postgresql://`` on a real PostgreSQL server the fixtures start (tests/state/_postgres.py).

- three replicas of the example app (separate ``uvicorn`` processes) behind nginx's round robin, sharing one
  database: the checks of ``tests/test_scale_out.py`` (every official client, ``kill -9`` of a replica while 20
  tasks run, a parked task and an AG-UI interrupt resumed after a restart);
- several A2A replicas and journal replicas in one process, each with its own store instance on one schema:
  the tests of ``tests/test_a2a_replicas.py`` and ``tests/test_journal_replicas.py``, with their backend fixture
  given a Postgres URL.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from agentmw.state import State
from agentmw.state.postgres import PostgresState
from tests import replicas as harness
from tests import test_a2a_replicas as a2a
from tests import test_journal_replicas as journal
from tests import test_scale_out as scale
from tests.replicas import Cluster

pytestmark = pytest.mark.timeout(300)

postgres_server = harness.postgres_server
postgres_url = harness.postgres_url
postgres_cluster = harness.postgres_cluster
single_postgres_replica = harness.single_postgres_replica
replicas = a2a.replicas  # the A2A replicas fixture, on the backend below


# --- three processes behind nginx ---------------------------------------------------------------------


async def test_nginx_spreads_requests_round_robin_without_stickiness(postgres_cluster: Cluster) -> None:
    await scale.test_nginx_spreads_requests_round_robin_without_stickiness(postgres_cluster)


async def test_a2a_send_then_get_task_on_another_replica(postgres_cluster: Cluster) -> None:
    await scale.test_a2a_send_then_get_task_on_another_replica(postgres_cluster)


async def test_a2a_parked_task_read_on_other_replicas_stays_parked(postgres_cluster: Cluster) -> None:
    await scale.test_a2a_parked_task_read_on_other_replicas_stays_parked(postgres_cluster)


async def test_mcp_stateless_gated_call_needs_no_configured_secret(postgres_cluster: Cluster) -> None:
    await scale.test_mcp_stateless_gated_call_needs_no_configured_secret(postgres_cluster)


async def test_mcp_handshake_200_calls_through_the_proxy(postgres_cluster: Cluster) -> None:
    await scale.test_mcp_handshake_200_calls_through_the_proxy(postgres_cluster)


async def test_mcp_list_change_reaches_a_get_stream_on_another_replica(postgres_cluster: Cluster) -> None:
    await scale.test_mcp_list_change_reaches_a_get_stream_on_another_replica(postgres_cluster)


async def test_a2a_follow_up_on_another_replica_subscribe_on_a_third_push_once_in_order(
    postgres_cluster: Cluster,
) -> None:
    await scale.test_a2a_follow_up_on_another_replica_subscribe_on_a_third_push_once_in_order(
        postgres_cluster
    )


async def test_agui_interrupt_resume_and_reconnect_through_the_proxy(postgres_cluster: Cluster) -> None:
    await scale.test_agui_interrupt_resume_and_reconnect_through_the_proxy(postgres_cluster)


async def test_kill_9_of_a_replica_while_20_tasks_run(postgres_cluster: Cluster, postgres_url: str) -> None:
    await scale.test_kill_9_of_a_replica_while_20_tasks_run(postgres_cluster)
    schema = postgres_cluster.store.partition("?schema=")[2]  # type: ignore[union-attr]
    conn = await asyncpg.connect(postgres_url)
    try:  # the replicas really kept their tasks and journals in Postgres
        namespaces = {
            r[0] for r in await conn.fetch(f"SELECT DISTINCT ns FROM {schema}.records WHERE version > 0")
        }
    finally:
        await conn.close()
    assert {"a2a.tasks", "journal"} <= namespaces, namespaces


async def test_a2a_parked_task_resumes_after_a_restart(single_postgres_replica: Cluster) -> None:
    await scale.test_a2a_parked_task_resumes_after_a_restart(single_postgres_replica)


async def test_agui_interrupt_resumes_after_a_restart(single_postgres_replica: Cluster) -> None:
    await scale.test_agui_interrupt_resumes_after_a_restart(single_postgres_replica)


# --- replicas in one process, each its own store instance ------------------------------------------------


@pytest.fixture
def backend(postgres_url: str) -> str:
    """The shared backend of the A2A replica tests: a schema of its own on the real server."""
    return f"{postgres_url}?schema=a2a{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def stores(postgres_url: str) -> AsyncIterator[tuple[State, State]]:
    """The journal replica tests' two connections to one store: one per replica."""
    name = f"j{uuid.uuid4().hex[:12]}"
    made = [PostgresState(postgres_url, schema=name), PostgresState(postgres_url, schema=name)]
    yield made[0], made[1]
    for store in made:
        await store.close()


test_send_on_a_then_get_and_list_on_b = a2a.test_send_on_a_then_get_and_list_on_b
test_subscribe_on_c_to_a_task_streaming_on_a = a2a.test_subscribe_on_c_to_a_task_streaming_on_a
test_cancel_on_b_reaches_the_coroutine_on_a = a2a.test_cancel_on_b_reaches_the_coroutine_on_a
test_a_follow_up_on_another_replica_fails_cleanly_once_the_journal_is_gone = (
    a2a.test_a_follow_up_on_another_replica_fails_cleanly_once_the_journal_is_gone
)
test_a_task_waiting_for_arguments_continues_on_any_replica = (
    a2a.test_a_task_waiting_for_arguments_continues_on_any_replica
)
test_pushes_are_delivered_once_and_in_order_by_one_replica = (
    a2a.test_pushes_are_delivered_once_and_in_order_by_one_replica
)
test_a_push_sender_that_dies_is_taken_over_from_the_last_delivered_event = (
    a2a.test_a_push_sender_that_dies_is_taken_over_from_the_last_delivered_event
)
test_a_follow_up_on_b_resumes_a_task_parked_on_a = a2a.test_a_follow_up_on_b_resumes_a_task_parked_on_a
test_a_parked_task_resumes_after_a_restart = a2a.test_a_parked_task_resumes_after_a_restart
test_a_killed_replicas_running_task_is_taken_over_and_completes_once = (
    a2a.test_a_killed_replicas_running_task_is_taken_over_and_completes_once
)
test_a_question_asked_on_a_is_answered_on_b = journal.test_a_question_asked_on_a_is_answered_on_b
test_a_run_whose_replica_dies_is_taken_over = journal.test_a_run_whose_replica_dies_is_taken_over
test_an_orphan_is_found_by_any_replica = journal.test_an_orphan_is_found_by_any_replica
