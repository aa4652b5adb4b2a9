"""``agentmw executions``: list, show, cancel, retry and resume the journaled executions in a store.

``agentmw executions list [--status S] [--limit N] [--cursor C]``   the executions, newest first
``agentmw executions show ID``                                      one, with its journal's steps
``agentmw executions cancel ID``                                    end it for good
``agentmw executions retry ID``                                     a dead letter: run it again
``agentmw executions resume ID``                                    a stuck running one: have a replica take it over

Each takes ``--store URL`` (default ``$AGENTMW_STORE``) and ``--json``. They read and write the store directly,
through ``agentmw.journal``'s public functions; no agent is imported, and a running server acts on what they
changed at its next orphan sweep (docs/cli.md, "executions").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit, urlunsplit

from ..errors import ConfigurationError
from ..journal import (
    ExecutionDetail,
    ExecutionInfo,
    RetryRefused,
    cancel_execution,
    list_executions,
    resume_now,
    retry,
    show_execution,
)
from ..state import State, open_state
from ..state.urls import check_store, parse_store_url

__all__ = ["FINISHED", "STATUSES", "add_parser", "info_json", "run"]

EXIT_REFUSED = 1  # the execution is not in a state that allows it (or the store cannot be read)
EXIT_USAGE = 2  # bad arguments, a store that cannot be opened, an unknown execution

FINISHED = ("completed", "failed", "canceled")
STATUSES = ("running", "parked", "dead", "finished", *FINISHED)


class _Refused(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def add_parser(commands: Any) -> None:
    """The ``executions`` command and its subcommands, on the ``agentmw`` parser's subparsers."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--store",
        metavar="URL",
        help="the agent's state store: sqlite:///path.db, redis://host:6379/0, postgresql://... "
        "(default: $AGENTMW_STORE)",
    )
    common.add_argument("--json", action="store_true", help="print JSON")
    executions = commands.add_parser(
        "executions", help="list, show, cancel, retry or resume the journaled executions in a store"
    )
    actions = executions.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", parents=[common], help="the executions, newest first")
    listing.add_argument(
        "--status",
        choices=STATUSES,
        help="only these: running, parked (waiting on an answer), dead (dead letters), finished "
        "(completed, failed or canceled), or one of those three",
    )
    listing.add_argument("--limit", type=int, default=50, help="at most this many (default 50)")
    listing.add_argument("--cursor", help="the next page, as a previous list printed it")
    for name, text in (
        ("show", "one execution, with its journal's steps"),
        ("cancel", "end an execution for good (a running one stops at its next step)"),
        ("retry", "run a dead letter again: the next orphan sweep of a replica takes it over"),
        ("resume", "have a running execution taken over at the next orphan sweep (a stuck holder)"),
    ):
        action = actions.add_parser(name, parents=[common], help=text)
        action.add_argument("id", help="the execution's id (an A2A task id, an AG-UI execution id)")


def run(args: argparse.Namespace) -> int:
    """Run ``agentmw executions ACTION``; returns the exit status."""
    url = args.store or os.environ.get("AGENTMW_STORE")
    try:
        state = _open(url)
    except _Refused as exc:
        return _fail(str(exc), exc.code, url)
    try:
        output = asyncio.run(_act(state, args, _shown(url or "")))
    except _Refused as exc:
        return _fail(str(exc), exc.code, url)
    sys.stdout.write(_printable(output, as_json=bool(getattr(args, "json", False))))
    return 0


_SECRET_PARAMS = frozenset({"password", "passwd", "pwd", "pass", "sslpassword", "secret", "token"})


def _secrets(url: str) -> list[str]:
    """What in ``url`` must never be printed: the password of its user part, and every query parameter that
    carries one (libpq's ``?password=``, redis-py's ``?password=``), found even in a URL that does not parse."""
    found: list[str] = []
    head = url.split("?", 1)[0].split("#", 1)[0]
    netloc = head.split("://", 1)[-1].split("/", 1)[0]
    if "@" in netloc:
        user = netloc.rpartition("@")[0]
        if ":" in user:
            found.append(user.split(":", 1)[1])
    if "?" in url:
        for key, value in parse_qsl(url.split("?", 1)[1].split("#", 1)[0], keep_blank_values=True):
            if key.lower() in _SECRET_PARAMS:
                found.append(value)
    return sorted({secret for secret in found if secret}, key=len, reverse=True)


def _scrubbed(message: str, url: str | None) -> str:
    """``message`` without any secret of ``url`` in it, in whatever form (raw or quoted) it was written."""
    for secret in _secrets(url or ""):
        for form in {secret, quote(secret, safe=""), repr(secret)[1:-1]}:
            message = message.replace(form, "***")
    return message


def _fail(message: str, code: int, url: str | None = None) -> int:
    print(f"agentmw: {_printable(_scrubbed(message, url), as_json=False)}", file=sys.stderr)
    return code


# C0 controls but newline and tab (a carriage return too), DEL and the C1 controls: an execution id (an AG-UI threadId), an answer or a
# step's value is a client's text, and its escape sequences must not reach the operator's terminal
_CONTROLS = [*range(0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0)]
_AS_TEXT = {code: f"\\x{code:02x}" for code in _CONTROLS}
_AS_JSON = {code: f"\\u{code:04x}" for code in range(0x7F, 0xA0)}  # json.dumps escapes the C0 ones itself


def _printable(text: str, *, as_json: bool) -> str:
    """``text`` with every control character a terminal would act on written as an escape instead."""
    return text.translate(_AS_JSON if as_json else _AS_TEXT)


def _open(url: str | None) -> State:
    if not url:
        raise _Refused(
            "give the store to read: --store URL (sqlite:///path/agentmw.db, redis://host:6379/0, "
            "postgresql://...), or set AGENTMW_STORE",
            EXIT_USAGE,
        )
    try:
        found = parse_store_url(url, label="--store")
        if found.kind == "memory":
            raise _Refused(
                "a memory:// store lives inside its server's process; the CLI cannot read it. Give the "
                "server's shared store (sqlite://, redis://, postgresql://)",
                EXIT_USAGE,
            )
        if found.kind == "sqlite" and not Path(found.path).is_file():
            raise _Refused(f"--store {url!r}: there is no SQLite store at {found.path}", EXIT_USAGE)
        check_store(url, label="--store")
        return open_state(url)
    except ConfigurationError as exc:
        raise _Refused(str(exc), EXIT_USAGE) from None
    except (TypeError, ValueError) as exc:  # an option the store's client refuses (rediss://...?foo=bar)
        raise _Refused(f"--store: the store's client refuses this URL: {exc}", EXIT_USAGE) from None


async def _act(state: State, args: argparse.Namespace, where: str) -> str:
    try:
        try:
            if args.action == "list":
                return await _list(state, args)
            if args.action == "show":
                return _show(await _detail(state, args.id, where), args.json)
            return await _change(state, args, where)
        except _Refused:
            raise
        except RetryRefused as exc:  # the journal says why this dead letter cannot be retried, and what to do
            raise _Refused(exc.message, EXIT_REFUSED) from None
        except ValueError as exc:  # not a store fault (StoreUnavailable is no ValueError): a bad id or cursor
            raise _Refused(f"refused: {exc}", EXIT_USAGE) from None
        except (ConfigurationError, ImportError, TypeError) as exc:  # TypeError: an option its client refuses
            raise _Refused(f"--store {where!r}: {exc}", EXIT_USAGE) from None
        except Exception as exc:  # noqa: BLE001 (a store down, refusing, or holding what it should not: one line)
            raise _Refused(
                f"the store {where!r} could not be used: {type(exc).__name__}: {exc}", EXIT_REFUSED
            ) from None
    finally:
        try:
            await state.close()
        except Exception:  # noqa: BLE001, S110 (closing a store that failed: nothing more to say)
            pass


# --- list ---------------------------------------------------------------------------------------------------


async def _list(state: State, args: argparse.Namespace) -> str:
    if args.limit < 1:
        raise _Refused("--limit must be at least 1", EXIT_USAGE)
    status: str | None = args.status
    cursor: str | None = args.cursor
    if status == "finished":
        if cursor is not None:
            raise _Refused("--cursor pages one status; --status finished lists the newest only", EXIT_USAGE)
        found: list[ExecutionInfo] = []
        for each in FINISHED:
            found.extend((await _page(state, each, args.limit, None))[0])
        found.sort(key=lambda info: info.updated_at, reverse=True)
        infos, following = found[: args.limit], None
    else:
        infos, following = await _page(state, status, args.limit, cursor)
    if args.json:
        return _dump({"executions": [info_json(i) for i in infos], "next": following})
    return _table(infos, following, args)


async def _page(
    state: State, status: str | None, limit: int, cursor: str | None
) -> tuple[list[ExecutionInfo], str | None]:
    """Up to ``limit`` executions of ``status``, reading as many pages of the store as that takes."""
    infos: list[ExecutionInfo] = []
    while len(infos) < limit:
        page, cursor = await list_executions(state, status=status, limit=limit - len(infos), cursor=cursor)
        infos.extend(page)
        if cursor is None:
            break
    return infos, cursor


def _table(infos: Sequence[ExecutionInfo], following: str | None, args: argparse.Namespace) -> str:
    if not infos:
        return f"no executions{f' with status {args.status}' if args.status else ''}\n"
    header = (
        "ID",
        "STATUS",
        "FUNCTION",
        "FACE",
        "STEPS",
        "TAKE-OVERS",
        "VERSION",
        "UPDATED",
        "HOLDER",
        "REASON",
    )
    rows = [
        (
            info.id,
            info.status,
            _function(info),
            info.face or "",
            str(info.steps),
            str(info.attempts),
            info.code_version or "",
            _when(info.updated_at),
            info.holder or "",
            _short(info.reason or "", 60),
        )
        for info in infos
    ]
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in (header, *rows)
    ]
    if following is not None:
        more = f" --status {args.status}" if args.status else ""
        lines.append(f"(more: agentmw executions list{more} --cursor {following})")
    return "\n".join(lines) + "\n"


# --- show ---------------------------------------------------------------------------------------------------


async def _detail(state: State, execution_id: str, where: str) -> ExecutionDetail:
    detail = await show_execution(state, execution_id)
    if detail is None:
        raise _Refused(f"no execution {execution_id!r} in the store {where!r}", EXIT_USAGE)
    return detail


def _show(detail: ExecutionDetail, as_json: bool) -> str:
    info = detail.info
    if as_json:
        return _dump(
            {
                "execution": info_json(info),
                "steps": detail.steps,
                "run": detail.run,
                "outcome": detail.outcome,
            }
        )
    fields = [
        ("status", info.status),
        ("function", _function(info) or "?"),
        ("face", info.face or ""),
        ("take-overs", str(info.attempts)),
        ("code version", info.code_version or "(none)"),
        ("steps", str(info.steps)),
        ("updated", _when(info.updated_at)),
        ("lease holder", info.holder or "(nobody)"),
    ]
    if info.reason:
        fields.append(("reason", info.reason))
    outcome = detail.outcome
    if outcome and (outcome.get("message") or "") != (info.reason or ""):
        fields.append(
            ("outcome", f"{outcome.get('status', '?')}: {_short(str(outcome.get('message') or ''), 200)}")
        )
    lines = [f"execution {info.id}"]
    lines += [f"  {name:<13} {value}" for name, value in fields]
    lines.append("steps:" if detail.steps else "steps: none recorded")
    for number, step in enumerate(detail.steps, 1):
        scope = f" (in {step['s']})" if step.get("s") else ""
        lines.append(f"  {number:>3}  {step.get('t', '?'):<5} {_key(step.get('k'))}{scope}  {_result(step)}")
    return "\n".join(lines) + "\n"


def _key(key: Any) -> str:
    return ", ".join(map(str, key)) if isinstance(key, list) else str(key)


def _result(step: Mapping[str, Any]) -> str:
    kind = step.get("t")
    tries = step.get("n")
    after = f" after {tries} attempts" if isinstance(tries, int) and tries > 1 else ""
    if kind == "ask":
        questions = step.get("q") or {}
        answers = step.get("a") or {}
        missing = [k for k in questions if k not in answers]
        return f"waiting for {', '.join(missing)}" if missing else "answered"
    if kind == "patch":
        return "patched"
    if "err" in step:
        err = step.get("err") or {}
        return f"failed{after}: {err.get('type', 'error')}"
    if kind == "call" and not step.get("ok"):
        return f"failed{after}: {_short(str(step.get('x') or ''), 60)}"
    return f"ok{after}: {_short(json.dumps(step.get('v'), ensure_ascii=False, default=str), 60)}"


# --- cancel, retry, resume ----------------------------------------------------------------------------------


async def _change(state: State, args: argparse.Namespace, where: str) -> str:
    detail = await _detail(state, args.id, where)
    status = detail.info.status
    action = args.action
    if action == "cancel":
        if status in FINISHED:
            raise _Refused(
                f"execution {args.id!r} already ended ({status}): there is nothing to cancel", EXIT_REFUSED
            )
        done = await cancel_execution(
            state, args.id, "The execution was canceled by an operator (agentmw executions cancel)."
        )
        text = "canceled: a replica running it stops at its next step"
    elif action == "retry":
        if status != "dead":
            hint = " (resume ID has a stuck running one taken over)" if status == "running" else ""
            raise _Refused(
                f"execution {args.id!r} is {status}, not a dead letter: only a dead letter can be retried{hint}",
                EXIT_REFUSED,
            )
        done = await retry(state, args.id)
        text = "back to running: the next orphan sweep of a replica that serves it takes it over"
    else:
        if status == "parked":
            raise _Refused(
                f"execution {args.id!r} is parked, waiting for an answer: it goes on when its question is "
                "answered, on any replica",
                EXIT_REFUSED,
            )
        if status not in ("running", "dead"):
            raise _Refused(
                f"execution {args.id!r} already ended ({status}): there is nothing to resume", EXIT_REFUSED
            )
        done = await resume_now(state, args.id)
        text = "its lease dropped: the next orphan sweep of a replica that serves it takes it over"
        if status == "dead":
            text = "back to running: the next orphan sweep of a replica that serves it takes it over"
    if not done:  # another writer moved it on between the read and the change
        raise _Refused(
            f"execution {args.id!r} changed meanwhile; look again: agentmw executions show {args.id}",
            EXIT_REFUSED,
        )
    after = await show_execution(state, args.id)
    now = after.info.status if after is not None else "?"
    if args.json:
        return _dump({"id": args.id, "action": action, "before": status, "status": now})
    return f"execution {args.id}: {text} (status {now})\n"


# --- formatting ---------------------------------------------------------------------------------------------


def info_json(info: ExecutionInfo) -> dict[str, Any]:
    """An execution as ``--json`` prints it."""
    return {
        "id": info.id,
        "status": info.status,
        "name": info.name,
        "kind": info.kind,
        "face": info.face,
        "steps": info.steps,
        "attempts": info.attempts,
        "codeVersion": info.code_version,
        "updatedAt": info.updated_at,
        "updated": _when(info.updated_at) or None,
        "holder": info.holder,
        "reason": info.reason,
        "version": info.version,
    }


def _function(info: ExecutionInfo) -> str:
    return " ".join(part for part in (info.kind, info.name) if part)


def _when(stamp: float) -> str:
    if not stamp:
        return ""
    return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _short(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _dump(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str) + "\n"


def _shown(url: str) -> str:
    """``url`` with its password hidden, for messages."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return _scrubbed(url, url)
    if not password:
        return _scrubbed(url, url)
    host = parts.netloc.rpartition("@")[2]
    return _scrubbed(urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}")), url)
