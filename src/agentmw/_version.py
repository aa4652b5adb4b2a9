"""The version of agentmw, in a module of its own: what reports it (the tracer, ``agentmw --version``) needs
nothing else of the package, so importing it closes no circle through ``agentmw/__init__``."""

__all__ = ["__version__"]

__version__ = "0.1.0"
