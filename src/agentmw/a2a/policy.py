"""Where push notifications may go and what a push config may hold: the policy (``A2ASettings.push``) and the
checks a config passes when it is made. Light on purpose: the settings import it; the sender is ``push.py``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..egress import RESOLVE_TIMEOUT_SECONDS, Egress, EgressRefused, check_url
from .wire import INVALID_PARAMS, A2AError, new_id

if TYPE_CHECKING:
    import ssl

__all__ = ["PRINTABLE", "PushPolicy", "acheck_push_url", "check_push_url", "push_config", "with_config"]

MAX_URL_LENGTH = 2_048  # characters of a push config's url
MAX_ID_LENGTH = 256  # characters of a push config's id
MAX_SCHEME_LENGTH = 64  # characters of authentication.scheme


class PushPolicy:
    """Where pushes may go, how hard to try, and how many a task may ask for.

    Args:
        allow_hosts: host names (or ``*.suffix`` patterns) pushes may go to whatever they resolve to.
        allow_networks: CIDR networks (``"10.20.0.0/16"``) whose addresses pushes may go to.
        allow_private: allow private, loopback and link-local addresses everywhere (development only).
        public_hosts: allow any host whose addresses are all public; ``False`` makes the allowlist (hosts and
            networks) the only way.
        resolve_timeout_seconds: how long a push URL's name may take to resolve (at create, and at each
            attempt) before it is refused.
        max_configs_per_task: push configs one task may have; one more is ``-32602`` at create.
        max_token_length: characters of a config's ``token`` and of its ``authentication.credentials``.
        verify: how receivers' TLS certificates are checked: ``True`` (the system's CAs), or an
            ``ssl.SSLContext`` that trusts an internal CA. Checked against the URL's name, not the address.
    """

    def __init__(
        self,
        *,
        allow_hosts: Sequence[str] = (),
        allow_networks: Sequence[str] = (),
        allow_private: bool = False,
        public_hosts: bool = True,
        resolve_timeout_seconds: float = RESOLVE_TIMEOUT_SECONDS,
        max_configs_per_task: int = 10,
        max_token_length: int = 4_096,
        max_attempts: int = 5,
        first_delay: float = 0.5,
        max_delay: float = 8.0,
        total_seconds: float = 60.0,
        timeout_seconds: float = 10.0,
        lease_seconds: float = 6.0,
        signer: Any = None,
        verify: bool | ssl.SSLContext = True,
    ) -> None:
        self.allow_hosts = {h.lower() for h in allow_hosts}
        self.allow_networks = tuple(allow_networks)
        self.allow_private = allow_private
        self.public_hosts = public_hosts
        self.resolve_timeout_seconds = resolve_timeout_seconds
        self.max_configs_per_task = max_configs_per_task
        self.max_token_length = max_token_length
        self.max_attempts = max_attempts
        self.first_delay = first_delay
        self.max_delay = max_delay
        self.total_seconds = total_seconds
        self.timeout_seconds = timeout_seconds
        self.lease_seconds = (
            lease_seconds  # a task's one sender holds its lease this long, renewed every third
        )
        self.signer = (
            signer  # agentmw.auth.PushSigner: each push carries a JWT signed by the agent (docs/auth.md)
        )
        self.verify = verify
        Egress(allow_networks=self.allow_networks)  # a malformed network is a ValueError now, not at a create

    @property
    def egress(self) -> Egress:
        """The egress rule of these settings (built on use: the attributes may be changed after construction)."""
        return Egress(
            allow_hosts=self.allow_hosts,
            allow_networks=self.allow_networks,
            allow_private=self.allow_private,
            public_hosts=self.public_hosts,
            resolve_timeout_seconds=self.resolve_timeout_seconds,
        )


def check_push_url(url: Any, policy: PushPolicy) -> str:
    """The URL, if pushes may go there; -32602 otherwise. Resolves the name, blocking: on an event loop use
    :func:`acheck_push_url`.

    The rule is the shared egress policy (``agentmw.egress``), the one bridges use too."""
    try:
        return check_url(
            url,
            allow_hosts=policy.allow_hosts,
            allow_networks=policy.allow_networks,
            allow_private=policy.allow_private,
            public_hosts=policy.public_hosts,
            what="push notification",
        )
    except EgressRefused as exc:
        raise A2AError(INVALID_PARAMS, str(exc)) from exc


async def acheck_push_url(url: Any, policy: PushPolicy) -> str:
    """:func:`check_push_url` without blocking the loop: the name resolves on a resolver thread, within
    ``policy.resolve_timeout_seconds``."""
    if isinstance(url, str) and (len(url) > MAX_URL_LENGTH or not url.isascii()):
        raise A2AError(
            INVALID_PARAMS,
            f"push notification url must be ASCII (an IDNA host), at most {MAX_URL_LENGTH} characters",
            {"field": "url"},
        )
    try:
        return await policy.egress.acheck(url, "push notification")
    except EgressRefused as exc:
        raise A2AError(INVALID_PARAMS, str(exc), {"field": "url"}) from exc


_VISIBLE = re.compile(r"[\x21-\x7e]*")  # a header value with no spaces: visible ASCII
PRINTABLE = re.compile(r"[\x20-\x7e]*")  # visible ASCII and spaces (credentials may hold auth-params)
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # an HTTP token (RFC 9110), as an auth scheme is


def _header_value(value: Any, field: str, pattern: re.Pattern[str], limit: int) -> str:
    """``value``, if it can go in a header as it is: a string of ``pattern``'s characters, at most ``limit``."""
    if not isinstance(value, str):
        raise A2AError(INVALID_PARAMS, f"{field} must be a string", {"field": field})
    if len(value) > limit:
        raise A2AError(
            INVALID_PARAMS, f"{field} is {len(value)} characters, more than {limit}", {"field": field}
        )
    if not pattern.fullmatch(value):
        raise A2AError(
            INVALID_PARAMS, f"{field} must be visible ASCII: it is sent in an HTTP header", {"field": field}
        )
    return value


async def push_config(config: Any, task_id: str | None, policy: PushPolicy) -> dict[str, Any]:
    """A push config as kept: every field that reaches the receiver checked (the URL against the policy,
    resolved off the loop; the token, scheme and credentials as header values, bounded); -32602 otherwise."""
    if not isinstance(config, dict):
        raise A2AError(INVALID_PARAMS, "push notification config must be an object")
    config_id = config.get("id")
    if config_id is not None and not (isinstance(config_id, str) and len(config_id) <= MAX_ID_LENGTH):
        raise A2AError(
            INVALID_PARAMS, f"id must be a string of at most {MAX_ID_LENGTH} characters", {"field": "id"}
        )
    url = await acheck_push_url(config.get("url"), policy)
    out: dict[str, Any] = {"id": config_id or new_id(), "url": url}
    if task_id is not None:
        out["taskId"] = task_id
    if config.get("token") is not None:
        out["token"] = _header_value(config["token"], "token", _VISIBLE, policy.max_token_length)
    auth = config.get("authentication")
    if auth is not None:
        if not isinstance(auth, dict) or not isinstance(auth.get("scheme"), str):
            raise A2AError(INVALID_PARAMS, "authentication needs a 'scheme'", {"field": "authentication"})
        if not _TOKEN.fullmatch(auth["scheme"]) or len(auth["scheme"]) > MAX_SCHEME_LENGTH:
            raise A2AError(
                INVALID_PARAMS,
                f"authentication.scheme must be an HTTP token of at most {MAX_SCHEME_LENGTH} characters",
                {"field": "authentication.scheme"},
            )
        out["authentication"] = {"scheme": auth["scheme"]}
        if auth.get("credentials") is not None:
            out["authentication"]["credentials"] = _header_value(
                auth["credentials"], "authentication.credentials", PRINTABLE, policy.max_token_length
            )
    return out


def with_config(
    configs: Sequence[dict[str, Any]], config: dict[str, Any], policy: PushPolicy
) -> list[dict[str, Any]]:
    """A task's configs with ``config`` added (replacing one of the same id); -32602 past
    ``policy.max_configs_per_task``."""
    kept = [c for c in configs if c.get("id") != config["id"]]
    if len(kept) >= policy.max_configs_per_task:
        raise A2AError(
            INVALID_PARAMS,
            f"task {config.get('taskId', '')} has {len(kept)} push notification configs, "
            "the most it may have; delete one first",
            {"field": "taskPushNotificationConfig", "limit": policy.max_configs_per_task},
        )
    return [*kept, config]
