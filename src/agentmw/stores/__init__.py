"""Gone: the older task stores were removed before the first release (A2A tasks live in ``agentmw.state``;
``TaskRecord`` and ``RESTART_REASON`` in ``agentmw.lifecycle``).

What is left only re-exports those names for the modules that still import them from here
(``a2a/endpoint.py``, two test files); then this package is deleted.
"""
