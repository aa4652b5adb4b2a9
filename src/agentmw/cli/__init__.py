"""The ``agentmw`` command: inspect, lint, call and serve an agent (``docs/cli.md``).

``agentmw inspect module:app [--json]``      what each protocol shows for each capability
``agentmw lint module:app [--json]``         the safety and usability rules; exit 1 on an error
``agentmw call module:app NAME '{...}'``     run one capability in-process, through the real pipeline
``agentmw serve module:app [--workers N]``   uvicorn
``agentmw stdio module:app [--token T]``     the MCP endpoint over stdio, for desktop clients (docs/stdio.md)
``agentmw executions list|show|cancel|retry|resume [ID] --store URL``   the journaled executions in a store
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Sequence

from .._version import __version__
from . import executions
from . import stdio as stdio_command
from .call import call
from .lint import Finding, baseline_names, lint_agent, lint_skill_package
from .progress import Progress
from .report import build_report, render_text
from .serve import serve, store_of
from .target import Target, TargetError, resolve

__all__ = ["EXIT_FINDINGS", "EXIT_USAGE", "main"]

EXIT_FINDINGS = 1  # lint found an error (or a warning, with --strict); call: the capability failed
EXIT_USAGE = 2  # bad arguments, or a target that cannot be imported or carries no agent


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentmw",
        description="Inspect, lint, call and serve an agentmw agent; see and act on its executions.",
    )
    parser.add_argument("--version", action="version", version=f"agentmw {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    target_help = (
        "module:attr naming an Agent, a FastAPI/Starlette app with AgentMiddleware, or a factory "
        "returning one (docs/cli.md)"
    )

    inspect = commands.add_parser("inspect", help="each capability and what MCP, A2A and AG-UI show for it")
    inspect.add_argument("target", help=target_help)
    inspect.add_argument("--json", action="store_true", help="print a JSON document")

    lint = commands.add_parser("lint", help="check the rules that make capabilities safe and usable")
    lint.add_argument("target", nargs="?", help=target_help + "; may be left out with --skill-package")
    lint.add_argument("--json", action="store_true", help="print the findings as JSON")
    lint.add_argument("--strict", action="store_true", help="exit non-zero on warnings too")
    lint.add_argument(
        "--ignore",
        action="append",
        default=[],
        metavar="CODE[:NAME]",
        help="skip a rule, everywhere or for one capability (repeatable): AMW007, AMW005:read_policy",
    )
    lint.add_argument(
        "--baseline",
        metavar="FILE",
        help="an earlier `agentmw inspect --json`: names it holds that are gone are errors (AMW009)",
    )
    lint.add_argument(
        "--skill-package",
        action="append",
        default=[],
        metavar="PATH",
        help="also lint a skill package folder, or a folder of them, as it would be served (repeatable)",
    )

    call = commands.add_parser("call", help="run one capability in-process through the real pipeline")
    call.add_argument("target", help=target_help)
    call.add_argument("name", help="a tool, prompt, resource URI or skill name")
    call.add_argument(
        "arguments",
        nargs="?",
        default="{}",
        help="JSON arguments (an object; a JSON string is sent as text on A2A and AG-UI)",
    )
    call.add_argument(
        "--protocol",
        choices=("mcp", "a2a", "agui"),
        help="the face to call through (default: mcp for tools, prompts and resources, a2a for skills)",
    )
    call.add_argument(
        "-H",
        "--header",
        action="append",
        default=[],
        metavar="NAME: VALUE",
        help="a request header, such as 'Authorization: Bearer demo-token' (repeatable)",
    )
    call.add_argument("--events", action="store_true", help="agui: print every event of the run")

    serve = commands.add_parser("serve", help="serve the app with uvicorn")
    serve.add_argument("target", help=target_help)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument(
        "--workers",
        type=int,
        default=1,
        help="worker processes; they share the agent's store ($AGENTMW_STORE, default sqlite)",
    )
    serve.add_argument(
        "--store",
        metavar="URL",
        help="the state store for an agent that names none (sets AGENTMW_STORE): sqlite:///path, redis://...",
    )
    serve.add_argument(
        "--log-level", default="info", choices=("critical", "error", "warning", "info", "debug")
    )
    stdio_command.add_parser(commands, target_help)
    executions.add_parser(commands)
    return parser


def _fail(message: str) -> int:
    print(f"agentmw: {message}", file=sys.stderr)
    return EXIT_USAGE


def _resolve(spec: str) -> Target:
    with Progress(f"importing {spec}"):
        target = resolve(spec)
    for note in target.notes:
        print(f"agentmw: note: {note}", file=sys.stderr)
    return target


def _inspect(args: argparse.Namespace) -> int:
    report = asyncio.run(build_report(_resolve(args.target)))
    sys.stdout.write(
        json.dumps(report, indent=2, ensure_ascii=False) + "\n" if args.json else render_text(report)
    )
    return 0


def _lint(args: argparse.Namespace) -> int:
    if args.target is None and not args.skill_package:
        return _fail("lint needs a target (module:app), or --skill-package PATH")
    findings: list[Finding] = []
    for path in args.skill_package:
        try:
            findings += lint_skill_package(path)
        except ValueError as exc:
            return _fail(f"--skill-package: {exc}")
    target = _resolve(args.target) if args.target is not None else None
    baseline = None
    if args.baseline:
        try:
            with open(args.baseline, encoding="utf-8") as file:
                baseline = baseline_names(file.read())
        except (OSError, ValueError) as exc:
            return _fail(f"cannot read the baseline {args.baseline}: {exc}")
    if target is not None:
        findings = lint_agent(target.agent, host=target.host, baseline=baseline) + findings
    ignored = set(args.ignore)
    findings = [f for f in findings if f.code not in ignored and f"{f.code}:{f.name}" not in ignored]
    errors = sum(f.level == "error" for f in findings)
    warnings = len(findings) - errors
    if args.json:
        print(
            json.dumps(
                {
                    "target": target.spec if target is not None else None,
                    "errors": errors,
                    "warnings": warnings,
                    "findings": [f.to_dict() for f in findings],
                },
                indent=2,
                ensure_ascii=False,
            )
        )
    else:
        for finding in findings:
            print(finding.line())
        linted = [f"{target.agent.name} ({target.spec})"] if target is not None else []
        linted += args.skill_package
        print(
            f"{errors} error{'s' * (errors != 1)}, {warnings} warning{'s' * (warnings != 1)} "
            f"in {', '.join(linted)}"
        )
    return EXIT_FINDINGS if errors or (args.strict and warnings) else 0


def _headers(values: Sequence[str]) -> dict[str, str]:
    headers = {}
    for value in values:
        name, sep, content = value.partition(":")
        if not sep or not name.strip():
            raise ValueError(f"a header is 'Name: value', not {value!r}")
        headers[name.strip().lower()] = content.strip()
    return headers


def _call(args: argparse.Namespace) -> int:
    try:
        arguments = json.loads(args.arguments)
        headers = _headers(args.header)
    except ValueError as exc:
        return _fail(f"arguments: {exc}")
    os.environ.setdefault(
        "AGENTMW_STORE", "memory://"
    )  # a one-off call shares nothing: no agentmw.db left behind
    target = _resolve(args.target)
    with Progress(f"calling {args.name}") as progress:
        try:
            result = asyncio.run(
                call(
                    target,
                    args.name,
                    arguments,
                    protocol=args.protocol,
                    headers=headers,
                    events=args.events,
                    progress=progress,
                )
            )
        except (LookupError, ValueError) as exc:
            return _fail(str(exc))
    print(json.dumps(result.output, indent=2, ensure_ascii=False))
    return result.exit_code


def _serve(args: argparse.Namespace) -> int:
    try:
        import uvicorn  # noqa: F401
    except ImportError:
        return _fail("serving needs uvicorn: pip install 'agentmw[serve]'")
    if args.workers < 1:
        return _fail("--workers must be at least 1")
    if args.store:
        os.environ["AGENTMW_STORE"] = args.store
    target = _resolve(args.target)
    store = store_of(target)
    if args.workers > 1 and ("memory" in store.lower()):
        return _fail(
            f"{args.workers} workers with the {store} store would each keep their own tasks, sessions and "
            "runs: give a shared one (--store sqlite://agentmw.db, or redis://host:6379/0)"
        )
    agent = target.agent
    base = f"http://{args.host}:{args.port}"
    print(
        f"agentmw: serving {agent.name} ({len(agent.tools)} tools, {len(agent.skills)} skills) from {target.spec}, "
        f"store {store}, {args.workers} worker{'s' * (args.workers != 1)}\n"
        f"  MCP   {base}{target.path(agent.mcp_path)}\n"
        f"  A2A   {base}{target.path('/.well-known/agent-card.json')}\n"
        f"  AG-UI {base}{target.path(agent.agui_path)}/<skill>",
        file=sys.stderr,
    )
    serve(target, host=args.host, port=args.port, workers=args.workers, log_level=args.log_level)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """The console script: ``agentmw COMMAND ...``; returns the exit status."""
    args = _parser().parse_args(argv)
    handler = {
        "inspect": _inspect,
        "lint": _lint,
        "call": _call,
        "serve": _serve,
        "stdio": stdio_command.run,
        "executions": executions.run,
    }[args.command]
    if args.command in ("inspect", "lint"):
        os.environ.setdefault("AGENTMW_STORE", "memory://")  # they read the registry; nothing is stored
    try:
        return handler(args)
    except TargetError as exc:
        return _fail(str(exc))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
