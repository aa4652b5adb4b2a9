"""``python -m examples.supplier_catalog [--host 127.0.0.1] [--port 8002]``: serves the supplier catalog (MCP at
``/mcp``)."""

from __future__ import annotations

import argparse

import uvicorn

from examples.supplier_catalog.server import create_app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8002)
    args = parser.parse_args()
    uvicorn.run(create_app(), host=args.host, port=args.port)


if __name__ == "__main__":
    main()
