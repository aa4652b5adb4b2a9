"""Apps for the CLI and test-client tests: a demo agent, a deliberately bad one, and ways of carrying them."""
