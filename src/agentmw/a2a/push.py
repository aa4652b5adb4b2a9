"""Push notifications: each task event POSTed to the task's configured webhooks, in order, with retries.

Delivery never changes a task: a receiver that is down only costs retries. Per task, events go out in
the order they happened, from the task's event log, by one sender in the whole deployment (a lease in the
state; another replica takes over from the last delivered id when its holder dies). Attempts back off
exponentially with jitter, capped in count and in total time. Targets on private, loopback and link-local
addresses are refused unless allowed explicitly (SSRF): the URL's name is resolved off the loop when the
config is made and again at every attempt, and the request goes to an address that check allowed (so a name
that changes its answer in between, DNS rebinding, cannot move it). A config's parts that become headers are
checked when it is made; one that still fails (a config stored by an older version) fails alone. Needs
``httpx`` (the ``a2a`` extra), imported on first delivery.
"""

from __future__ import annotations

import asyncio
import logging
import random
from typing import Any

from .._transport import dumps
from ..egress import EgressRefused, Target
from ..state import Conflict
from .policy import PRINTABLE, PushPolicy, acheck_push_url, check_push_url, push_config, with_config
from .registry import EVENTS, LEASES, PUSH, is_final

__all__ = ["PushPolicy", "PushSender", "acheck_push_url", "check_push_url", "push_config", "with_config"]

logger = logging.getLogger("agentmw")

_WORKER_IDLE_SECONDS = 60.0


class PushSender:
    """Sends each task's logged events to its push configs: one sender per task in the whole deployment.

    The sender of a task holds a lease on it (``a2a.lease``, ``push:<task id>``: ``set_if_absent``, renewed
    every third of ``PushPolicy.lease_seconds``), reads the task's event log from the last id delivered,
    and records each delivered id in the task's push record (``a2a.push``). Any replica may take the role:
    the one that runs the task, one where a config was created, or one that finds a task whose sender is gone
    (its lease expired) with events still to send; that one goes on from the last recorded id. A replica
    that dies between a delivery and its record sends that one event again (at least once, at a crash).
    """

    def __init__(self, state: Any, policy: PushPolicy, replica: str = "") -> None:
        self.state = state
        self.policy = policy
        self.replica = replica
        self.registry: Any = None  # the TaskRegistry: lost tasks are failed through it
        self.agent: Any = None  # the agent, whose telemetry traces each push (docs/observability.md)
        self.workers: dict[str, asyncio.Task[None]] = {}
        self.delivered = 0
        self.failed = 0
        self._client: Any = None
        self._sweeper: asyncio.Task[None] | None = None
        self._closed = False

    def watch(self, task_id: str) -> None:
        """Send the task's pushes from this process, unless another process (or this one) already does."""
        if self._closed or task_id in self.workers:
            return
        loop = asyncio.get_running_loop()
        self.workers[task_id] = loop.create_task(self._work(task_id), name=f"a2a-push-{task_id}")
        if self._sweeper is None or self._sweeper.done():
            self._sweeper = loop.create_task(self._sweep(), name="a2a-push-sweeper")

    async def _work(self, task_id: str) -> None:
        lease = f"push:{task_id}"
        ttl = self.policy.lease_seconds
        held = False
        keeper: asyncio.Task[None] | None = None
        try:
            if not await self.state.set_if_absent(LEASES, lease, {"owner": self.replica}, ttl):
                return  # another process sends this task's pushes
            held = True
            keeper = asyncio.create_task(
                self._keep(lease, asyncio.current_task()), name=f"a2a-push-lease-{task_id}"
            )
            found = await self.state.get(PUSH, task_id)
            after = int(found.value.get("delivered", 0)) if found else 0
            loop = asyncio.get_running_loop()
            idle_since = loop.time()
            while True:
                entries = await self.state.read(EVENTS, task_id, after, 100, block=min(1.0, ttl / 3))
                if not entries:
                    if loop.time() - idle_since > _WORKER_IDLE_SECONDS:
                        return  # an idle sender ends; the next event (or the sweeper) starts another
                    continue
                idle_since = loop.time()
                found = await self.state.get(PUSH, task_id)
                configs = list(found.value.get("configs", [])) if found else []
                for event_id, event in entries:
                    for config in configs:
                        await self._deliver(config, event)
                    after = event_id
                    final = is_final(event)
                    await self._record(task_id, after, final)
                    if final:
                        return
        except asyncio.CancelledError:
            if self._closed or keeper is None or not keeper.done():
                raise
            held = False  # the lease was lost: another process goes on from the last recorded id
        except Exception:
            logger.exception("A2A push sender of task %s failed", task_id)
        finally:
            if keeper is not None:
                keeper.cancel()
            if self.workers.get(task_id) is asyncio.current_task():
                del self.workers[task_id]
            if held and not self._closed:
                try:
                    await self.state.release(LEASES, lease, self.replica)
                except Exception:
                    logger.exception("A2A push sender of task %s could not release its lease", task_id)

    async def _keep(self, lease: str, worker: asyncio.Task[Any] | None) -> None:
        """Renew the sender's lease while it works (a delivery may retry for longer than the lease); stop
        the worker when the lease is lost."""
        ttl = self.policy.lease_seconds
        while True:
            await asyncio.sleep(ttl / 3)
            try:
                kept = await self.state.renew(LEASES, lease, self.replica, ttl)
            except Exception:
                logger.exception("A2A push lease %s could not be renewed", lease)
                continue
            if not kept:
                logger.warning("A2A push lease %s was lost; another replica takes over", lease)
                if worker is not None:
                    worker.cancel()
                return

    async def _record(self, task_id: str, delivered: int, final: bool) -> None:
        while True:
            found = await self.state.get(PUSH, task_id)
            value, version = (dict(found.value), found.version) if found else ({"configs": []}, 0)
            value["delivered"] = max(int(value.get("delivered", 0)), delivered)
            value["done"] = final
            try:
                await self.state.put(PUSH, task_id, value, expected_version=version)
                return
            except Conflict:
                continue

    async def _sweep(self) -> None:
        """Take over the tasks whose sender is gone: events after the last delivered one, and no lease."""
        period = max(0.05, self.policy.lease_seconds / 2)
        while not self._closed:
            await asyncio.sleep(period)
            try:
                cursor = None
                while True:
                    page = await self.state.scan(PUSH, where={"done": False}, limit=200, cursor=cursor)
                    for item in page.items:
                        task_id = item.key
                        if task_id in self.workers:
                            continue
                        if await self.state.get_key(LEASES, f"push:{task_id}") is not None:
                            continue
                        after = int(item.value.get("delivered", 0))
                        if await self.state.read(EVENTS, task_id, after, 1):
                            self.watch(task_id)
                        elif self.registry is not None:
                            await self.registry.load(task_id)  # a task whose holder is gone is failed
                    if page.next is None:
                        break
                    cursor = page.next
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("A2A push sweeper failed; trying again")

    async def _deliver(self, config: dict[str, Any], event: dict[str, Any]) -> None:
        """One event to one config, tried as the policy says. Never raises (but a cancel): a config that
        cannot be sent to fails alone, and the sender goes on, so no event is sent twice to the others."""
        try:
            telemetry = self.agent.telemetry if self.agent is not None else None
            if telemetry is None:
                await self._send(config, event, None)
                return
            with telemetry.pushing(
                config.get("taskId"), config["url"]
            ) as trace_headers:  # traceparent: the task's
                await self._send(config, event, trace_headers)
        except Exception as exc:  # noqa: BLE001  (a config an older version stored unchecked, a failing signer, ...)
            self.failed += 1
            logger.warning(
                "could not push an event of task %s to config %r: %s: %s",
                config.get("taskId"),
                config.get("id"),
                type(exc).__name__,
                exc,
            )

    def _headers(self, config: dict[str, Any], trace_headers: dict[str, str] | None) -> dict[str, str]:
        headers = {"content-type": "application/json"}
        auth = config.get("authentication") or {}
        if auth.get("scheme"):
            headers["authorization"] = f"{auth['scheme']} {auth.get('credentials', '')}".strip()
        if config.get("token"):
            headers["x-a2a-notification-token"] = config["token"]
        if trace_headers:
            headers.update(trace_headers)
        for name, value in headers.items():  # checked at create; a stored config may predate that
            if not PRINTABLE.fullmatch(value):
                raise ValueError(f"the {name} header is not visible ASCII")
        return headers

    async def _post(self, target: Target, headers: dict[str, str], body: bytes) -> Any:
        """POST to an address the policy checked (``target.addresses``), never to what the name resolves to
        by then: the URL's host becomes that address, with the name kept in ``Host`` and as the TLS server
        name (so the certificate is checked against the name)."""
        import httpx

        if not target.addresses:  # allowed by name: connect to it as usual
            return await self._client.post(target.url, content=body, headers=headers)
        url = httpx.URL(target.url)
        if url.host != target.host:
            raise EgressRefused(f"push notification url {target.url!r} names its host ambiguously")
        pinned = {**headers, "host": url.netloc.decode("ascii")}
        extensions: dict[str, Any] = {}
        if url.scheme == "https":
            extensions["sni_hostname"] = target.host
            # connections are pooled by address: one made (and verified) for another name is not reused
            pinned["connection"] = "close"
        failure: Exception | None = None
        for address in target.addresses:
            try:
                return await self._client.post(
                    url.copy_with(host=address), content=body, headers=pinned, extensions=extensions
                )
            except httpx.ConnectError as exc:  # the next address the check allowed, as a client would
                failure = exc
        assert failure is not None
        raise failure

    async def _send(
        self, config: dict[str, Any], event: dict[str, Any], trace_headers: dict[str, str] | None
    ) -> None:
        import httpx  # the a2a extra, imported on first delivery

        if (
            self._client is None
        ):  # trust_env=False: no proxy from the environment, which would connect elsewhere
            self._client = httpx.AsyncClient(
                timeout=self.policy.timeout_seconds,
                follow_redirects=False,
                trust_env=False,
                verify=self.policy.verify,
            )
        headers = self._headers(config, trace_headers)
        body = dumps(event)
        if self.policy.signer is not None:  # the JWT vouches for these exact bytes (request_body_sha256)
            # the key lives in the agent's state, where /.well-known/jwks.json reads it (not A2ASettings.store's)
            key_state = self.agent.state if self.agent is not None else self.state
            signed = await self.policy.signer.sign(
                key_state,
                url=config["url"],
                task_id=config.get("taskId"),
                body=body,
                issuer=self.agent.name if self.agent else "agentmw",
            )
            headers.setdefault("authorization", f"Bearer {signed}")
        egress = self.policy.egress
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.policy.total_seconds
        delay = self.policy.first_delay
        for attempt in range(1, self.policy.max_attempts + 1):
            try:
                # checked again at each attempt, and sent to the addresses this check allowed (DNS rebinding)
                target = await egress.resolve(config["url"], "push notification")
                response = await self._post(target, headers, body)
                if response.status_code < 300:
                    self.delivered += 1
                    return
                if 400 <= response.status_code < 500 and response.status_code not in (408, 425, 429):
                    break  # the receiver refuses this event; repeating it will not help
            except (httpx.HTTPError, EgressRefused) as exc:
                logger.info("push to %s failed (attempt %d): %s", config["url"], attempt, exc)
            pause = min(delay, self.policy.max_delay) * random.uniform(0.5, 1.5)
            if attempt == self.policy.max_attempts or loop.time() + pause > deadline:
                break
            await asyncio.sleep(pause)
            delay *= 2
        self.failed += 1
        logger.warning("gave up pushing an event of task %s to %s", config.get("taskId"), config["url"])

    async def close(self) -> None:
        self._closed = True
        tasks = [*self.workers.values(), *([self._sweeper] if self._sweeper is not None else [])]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if self._client is not None:
            await self._client.aclose()
