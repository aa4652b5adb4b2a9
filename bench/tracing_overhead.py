"""What observability costs MCP ``tools/call``: off, with the OpenTelemetry SDK and a no-op exporter, and
against a baseline tree, in interleaved rounds.

Each variant runs in its own interpreter (so one variant's imports and SDK cannot touch another's), serving
``bench/mcp_tools_call.py``'s agent in the stateless era through ASGI in-process, and reports the CPU time per
call of its best batch (``time.process_time``: on a shared machine wall time measures the neighbours). Rounds
alternate the variants, and the table gives each one's median over the rounds.

    python bench/tracing_overhead.py --rounds 7 [--baseline-src DIR]

Variants: ``off`` (no telemetry: what every agent that does not ask for it pays), ``hooks`` (one empty hook),
``metrics`` (``Telemetry(traces=False)``: metrics and logs), ``sdk`` (``Telemetry`` with the SDK's
``TracerProvider``, every span sampled and handed to a ``SimpleSpanProcessor`` whose exporter drops it), and,
with ``--baseline-src``, ``baseline``: the same ``off`` agent imported from another checkout's ``src`` (the
code before this change).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"

CHILD = r"""
import asyncio, json, logging, sys, time
sys.path[:0] = [BENCH]
from _driver import Driver, best_rate
from mcp_tools_call import MODERN, add, call_body, prepare
from starlette.applications import Starlette
from agentmw import Agent, AgentMiddleware

def app_for(variant):
    logging.getLogger("agentmw.invocations").setLevel(logging.WARNING)  # a production level: INFO is not kept
    settings = {}
    if variant in ("metrics", "sdk"):
        from agentmw.observability import Telemetry
        if variant == "sdk":
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
            class Drop(SpanExporter):
                def export(self, spans):
                    return SpanExportResult.SUCCESS
            provider = TracerProvider()
            provider.add_span_processor(SimpleSpanProcessor(Drop()))
            settings["telemetry"] = Telemetry(tracer_provider=provider)
        else:
            settings["telemetry"] = Telemetry(traces=False)
    agent = Agent("bench", store="memory://", **settings)
    agent.tool(add)
    if variant == "hooks":
        from agentmw.observability import Hook
        class Nothing(Hook):
            def before(self, invocation):
                return None
        agent.use(Nothing())
    app = Starlette()
    app.add_middleware(AgentMiddleware, agent=agent)
    return app

async def main(variant, n, batches):
    driver = Driver(app_for(variant))
    headers = await prepare(driver, MODERN)
    status, _, body = await driver.post(call_body(1, True), headers)
    assert status == 200 and b'"structuredContent":{"result":3}' in body.replace(b" ", b""), body
    bodies = [call_body(i, True) for i in range(n)]
    await best_rate(driver, [bodies[:500]], headers)  # warm-up
    best = None
    # CPU time, not wall time: what the server spends, whatever else the machine runs
    for _ in range(batches):
        start = time.process_time()
        for body in bodies:
            await driver.post(body, headers)
        spent = (time.process_time() - start) / n
        best = spent if best is None else min(best, spent)
    print(json.dumps(best * 1e6))

asyncio.run(main(VARIANT, N, BATCHES))
"""


def run(variant: str, src: Path, n: int, batches: int) -> float:
    code = (
        CHILD.replace("BENCH", repr(str(HERE)))
        .replace("VARIANT", repr(variant))
        .replace("N, BATCHES", f"{n}, {batches}")
    )
    env = {**os.environ, "PYTHONPATH": str(src), "AGENTMW_STORE": "memory://"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--batches", type=int, default=3)
    parser.add_argument("--baseline-src", type=Path, help="another checkout's src directory: the code before")
    parser.add_argument("--variants", default="off,hooks,metrics,sdk")
    args = parser.parse_args()
    variants = args.variants.split(",")
    sources = {v: SRC for v in variants}
    if args.baseline_src is not None:
        variants.insert(0, "baseline")
        sources["baseline"] = args.baseline_src
    rates: dict[str, list[float]] = {v: [] for v in variants}
    for index in range(args.rounds):
        order = variants if index % 2 == 0 else variants[::-1]  # neither end of a round is always first
        for variant in order:
            rates[variant].append(
                run("off" if variant == "baseline" else variant, sources[variant], args.calls, args.batches)
            )
        print(
            f"round {index + 1}: " + json.dumps({v: round(r[-1], 1) for v, r in rates.items()}),
            file=sys.stderr,
        )
    reference = statistics.median(rates["baseline" if "baseline" in rates else "off"])
    print(
        f"MCP `tools/call` (stateless era), in-process ASGI, CPU time per call: {args.calls} calls, best of "
        f"{args.batches} batches per round, median of {args.rounds} interleaved rounds\n"
    )
    print(
        "| variant | µs per call (median) | range | calls/s per core | vs. "
        + ("baseline" if "baseline" in rates else "off")
        + " |"
    )
    print("|---|---:|---:|---:|---:|")
    for variant, values in rates.items():
        median = statistics.median(values)
        print(
            f"| {variant} | {median:.1f} | {min(values):.1f}–{max(values):.1f} | {1e6 / median:,.0f} | "
            f"{(median / reference - 1) * 100:+.1f}% |"
        )


if __name__ == "__main__":
    main()
