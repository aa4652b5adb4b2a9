"""``python -m examples.legal_review [--host 127.0.0.1] [--port 8001]``: serves the legal review agent."""

from __future__ import annotations

import argparse

import uvicorn

from examples.legal_review.agent import create_app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument(
        "--url", help="the URL clients reach it at, as its card says (default: http://HOST:PORT)"
    )
    args = parser.parse_args()
    uvicorn.run(create_app(args.url or f"http://{args.host}:{args.port}"), host=args.host, port=args.port)


if __name__ == "__main__":
    main()
