"""Gone: the older task stores were removed before the first release (A2A tasks live in ``agentmw.state``;
``TaskRecord`` and ``RESTART_REASON`` in ``agentmw.lifecycle``).

Only ``agentmw.stores.base.TERMINAL`` is left, for ``a2a/endpoint.py`` until it imports it from
``agentmw.lifecycle``; then this package is deleted.
"""
