"""``agentmw stdio module:app``: the app's MCP endpoint over stdio, for desktop clients (``docs/stdio.md``).

The process claims stdin and stdout for the protocol before the app is imported, so anything the app prints
goes to stderr; each message then goes through the whole app in-process (``agentmw.mcp.stdio``).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from ..mcp.stdio import DRAIN_SECONDS, StdioWire, check_header, serve_stdio
from .serve import store_of
from .target import Target, resolve

__all__ = ["TOKEN_ENV", "add_parser", "identity_headers", "run"]

TOKEN_ENV = "AGENTMW_STDIO_TOKEN"
"""A bearer token for every request, from the environment (how desktop clients' configurations pass secrets)."""


def add_parser(commands: Any, target_help: str) -> None:
    """The ``stdio`` command, on the ``agentmw`` parser's subparsers."""
    stdio = commands.add_parser(
        "stdio",
        help="serve the app's MCP capabilities over stdio (Claude Desktop, VS Code, Cursor, the MCP Inspector)",
        description="Serve the app's MCP endpoint over stdio: newline-delimited JSON-RPC on stdin and stdout, "
        "logs on stderr. Each message runs through the whole app in-process (its middleware, dependencies and "
        "auth), with the identity given here.",
    )
    stdio.add_argument("target", help=target_help)
    stdio.add_argument(
        "--token",
        metavar="TOKEN",
        help=f"a bearer token sent as 'Authorization: Bearer TOKEN' on every request (default: ${TOKEN_ENV}; "
        "prefer the variable: a command line is visible to other users of the machine)",
    )
    stdio.add_argument(
        "-H",
        "--header",
        action="append",
        default=[],
        metavar="NAME: VALUE",
        help="a header sent on every request, such as 'Authorization: Bearer demo-token' (repeatable)",
    )
    stdio.add_argument(
        "--app-dir",
        metavar="DIR",
        help="the project's folder: the working directory, and where the target is imported from (desktop "
        "clients start servers in a folder of their own choosing)",
    )
    stdio.add_argument(
        "--url",
        default="http://127.0.0.1:8000",
        help="the scheme and host the requests name (what a token's audience is checked against; "
        "default http://127.0.0.1:8000)",
    )
    stdio.add_argument(
        "--store",
        metavar="URL",
        help="the state store for an agent that names none (sets AGENTMW_STORE; default memory://: one process "
        "serves one client); sqlite:///abs/path.db keeps executions and approvals across restarts",
    )
    stdio.add_argument(
        "--drain",
        type=float,
        default=DRAIN_SECONDS,
        metavar="SECONDS",
        help=f"after stdin ends, how long running requests may take to answer (default {DRAIN_SECONDS:g})",
    )
    stdio.add_argument(
        "--log-level", default="warning", choices=("critical", "error", "warning", "info", "debug")
    )


def identity_headers(
    headers: Sequence[str], token: str | None, environ: Mapping[str, str]
) -> tuple[dict[str, str], str]:
    """The headers every request carries, and where the credential came from (never the credential itself).

    ``--header 'Authorization: …'`` wins over ``--token``, which wins over ``$AGENTMW_STDIO_TOKEN``; giving
    both a header and ``--token`` is an error (ValueError), as is a header that is not ``Name: value`` and
    any header or token HTTP cannot carry (outside Latin-1, a line break or another control character)."""
    found: dict[str, str] = {}
    for value in headers:
        name, sep, content = value.partition(":")
        if not sep or not name.strip():
            raise ValueError(f"a header is 'Name: value', not {value.split(':')[0]!r}…")
        check_header(name.strip(), content.strip())
        found[name.strip().lower()] = content.strip()
    if "authorization" in found:
        if token:
            raise ValueError("give the credential once: --token, or --header 'Authorization: ...'")
        return found, "the Authorization header given with --header"
    for credential, source in ((token, "--token"), (environ.get(TOKEN_ENV), f"${TOKEN_ENV}")):
        credential = (credential or "").strip()
        if credential:
            try:
                check_header("authorization", credential)
            except ValueError as exc:  # say where it came from; the message never holds the token
                raise ValueError(f"the token from {source}: {exc}") from None
            found["authorization"] = f"Bearer {credential}"
            return found, source
    return found, "none (anonymous)"


def _logging(level: str) -> None:
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("agentmw stdio: %(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
    root.setLevel(level.upper())


def _tool_schema(target: Target) -> Any:
    tools = target.agent.tools

    def schema(name: str) -> Mapping[str, Any] | None:
        tool = tools.get(name)
        return tool.input_schema if tool is not None else None

    return schema


def run(args: argparse.Namespace) -> int:
    """Run ``agentmw stdio TARGET``; returns the exit status (0 at the end of stdin or on SIGTERM)."""
    try:
        headers, source = identity_headers(args.header, args.token, os.environ)
    except ValueError as exc:
        print(f"agentmw: {exc}", file=sys.stderr)
        return 2
    if args.drain < 0:
        print("agentmw: --drain must be 0 or more", file=sys.stderr)
        return 2
    try:
        check_header("host", urlsplit(args.url).netloc)
    except ValueError as exc:
        print(f"agentmw: --url {args.url!r}: {exc}", file=sys.stderr)
        return 2
    _logging(args.log_level)
    if args.app_dir:
        try:
            os.chdir(
                args.app_dir
            )  # the target is then imported from here (target.py puts the cwd on sys.path)
        except OSError as exc:
            print(f"agentmw: --app-dir {args.app_dir}: {exc.strerror}", file=sys.stderr)
            return 2
    if args.store:
        os.environ["AGENTMW_STORE"] = args.store
    os.environ.setdefault("AGENTMW_STORE", "memory://")  # one process, one client: nothing left behind
    try:
        wire = StdioWire.claim()  # before the import: whatever the app prints from now on goes to stderr
    except OSError as exc:
        print(f"agentmw: stdin and stdout must be open to serve over them: {exc.strerror}", file=sys.stderr)
        return 2
    try:
        target = resolve(args.target)
        for note in target.notes:
            print(f"agentmw: note: {note}", file=sys.stderr)
        agent = target.agent
        print(
            f"agentmw: serving {agent.name} ({len(agent.tools)} tools, {len(agent.prompts)} prompts) from "
            f"{target.spec} over stdio; MCP at {target.path(agent.mcp_path)}, store {store_of(target)}, "
            f"credential: {source}",
            file=sys.stderr,
        )
        return asyncio.run(
            serve_stdio(
                target.app,
                wire,
                path=target.path(agent.mcp_path),
                headers=headers,
                base_url=args.url,
                tool_schema=_tool_schema(target),
                drain_seconds=args.drain,
            )
        )
    finally:
        wire.restore()
