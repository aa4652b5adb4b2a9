"""Push notifications: each task event POSTed to the task's configured webhooks, in order, with retries.

Delivery never changes a task: a receiver that is down only costs retries. Per task, events go out in
the order they happened (one sender per task); attempts back off exponentially with jitter, capped in
count and in total time. Targets on private, loopback and link-local addresses are refused unless
allowed explicitly (SSRF). Needs ``httpx`` (the ``a2a`` extra), imported on first delivery.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import random
import socket
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from .wire import INVALID_PARAMS, A2AError

if TYPE_CHECKING:
    from ..stores.base import TaskStore

__all__ = ["PushPolicy", "PushSender", "check_push_url"]

logger = logging.getLogger("agentmw")


class PushPolicy:
    """Where pushes may go, and how hard to try."""

    def __init__(self, *, allow_hosts: Sequence[str] = (), allow_private: bool = False, max_attempts: int = 5,
                 first_delay: float = 0.5, max_delay: float = 8.0, total_seconds: float = 60.0,
                 timeout_seconds: float = 10.0) -> None:
        self.allow_hosts = {h.lower() for h in allow_hosts}
        self.allow_private = allow_private
        self.max_attempts = max_attempts
        self.first_delay = first_delay
        self.max_delay = max_delay
        self.total_seconds = total_seconds
        self.timeout_seconds = timeout_seconds


def _private(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    return ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_reserved or ip.is_multicast or \
        ip.is_unspecified


def check_push_url(url: Any, policy: PushPolicy) -> str:
    """The URL, if pushes may go there; -32602 otherwise. Names are resolved, so DNS cannot smuggle."""
    if not isinstance(url, str):
        raise A2AError(INVALID_PARAMS, "push notification url must be a string")
    try:  # urlsplit and .port raise ValueError for a malformed IPv6 literal or port
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise A2AError(INVALID_PARAMS, f"push notification url is malformed: {exc}") from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise A2AError(INVALID_PARAMS, "push notification url must be an absolute http(s) URL")
    host = parts.hostname.lower()
    if host in policy.allow_hosts or policy.allow_private:
        return url
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, port or 443, proto=socket.IPPROTO_TCP)}
    except socket.gaierror as exc:
        raise A2AError(INVALID_PARAMS, f"push notification host {host!r} does not resolve") from exc
    if any(_private(a.split("%")[0]) for a in addresses):
        raise A2AError(INVALID_PARAMS, f"push notification url {url!r} points to a private, loopback or "
                                       "link-local address; allow it explicitly to use it")
    return url


_WORKER_IDLE_SECONDS = 60.0


class PushSender:
    def __init__(self, store: TaskStore, policy: PushPolicy) -> None:
        self.store = store
        self.policy = policy
        self.watched: set[str] = set()  # tasks with at least one config: no store lookup per event otherwise
        self.queues: dict[str, asyncio.Queue[dict[str, Any] | None]] = {}
        self.workers: dict[str, asyncio.Task[None]] = {}
        self.delivered = 0
        self.failed = 0
        self._client: Any = None

    def watch(self, task_id: str) -> None:
        self.watched.add(task_id)

    async def enqueue(self, task_id: str, event: dict[str, Any]) -> None:
        if task_id not in self.watched:
            return
        queue = self.queues.get(task_id)
        if queue is None:
            queue = self.queues[task_id] = asyncio.Queue()
            self.workers[task_id] = asyncio.create_task(self._work(task_id, queue), name=f"a2a-push-{task_id}")
        queue.put_nowait(event)

    def task_ended(self, task_id: str) -> None:
        self.watched.discard(task_id)
        queue = self.queues.get(task_id)
        if queue is not None:
            queue.put_nowait(None)

    async def _work(self, task_id: str, queue: asyncio.Queue[dict[str, Any] | None]) -> None:
        try:
            while True:
                try:  # an idle worker ends (the next event starts another): no coroutine per waiting task
                    event = await asyncio.wait_for(queue.get(), _WORKER_IDLE_SECONDS)
                except TimeoutError:
                    return
                if event is None:
                    return
                for config in await self.store.list_push(task_id):
                    await self._deliver(config, event)
        finally:
            self.queues.pop(task_id, None)
            self.workers.pop(task_id, None)

    async def _deliver(self, config: dict[str, Any], event: dict[str, Any]) -> None:
        import httpx

        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self.policy.timeout_seconds, follow_redirects=False)
        headers = {"content-type": "application/json"}
        auth = config.get("authentication") or {}
        if auth.get("scheme"):
            headers["authorization"] = f"{auth['scheme']} {auth.get('credentials', '')}".strip()
        if config.get("token"):
            headers["x-a2a-notification-token"] = config["token"]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.policy.total_seconds
        delay = self.policy.first_delay
        for attempt in range(1, self.policy.max_attempts + 1):
            try:
                response = await self._client.post(config["url"], json=event, headers=headers)
                if response.status_code < 300:
                    self.delivered += 1
                    return
                if 400 <= response.status_code < 500 and response.status_code not in (408, 425, 429):
                    break  # the receiver refuses this event; repeating it will not help
            except httpx.HTTPError as exc:
                logger.info("push to %s failed (attempt %d): %s", config["url"], attempt, exc)
            pause = min(delay, self.policy.max_delay) * random.uniform(0.5, 1.5)
            if attempt == self.policy.max_attempts or loop.time() + pause > deadline:
                break
            await asyncio.sleep(pause)
            delay *= 2
        self.failed += 1
        logger.warning("gave up pushing an event of task %s to %s", config.get("taskId"), config["url"])

    async def close(self) -> None:
        for worker in list(self.workers.values()):
            worker.cancel()
        if self._client is not None:
            await self._client.aclose()
