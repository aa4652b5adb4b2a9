"""Real remote peers for the bridge tests: an A2A agent on a2a-sdk's server classes and MCP servers on the official
``mcp`` SDK, each served by its own ``uvicorn`` process (tests/bridges/conftest.py starts them)."""
