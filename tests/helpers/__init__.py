"""Set-ups that several test files share: the raw MCP handshake, the A2A SDK's client and messages, a uvicorn
server in a thread. Waiting helpers are in ``tests/waiting.py``."""
