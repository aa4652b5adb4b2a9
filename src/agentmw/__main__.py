"""``python -m agentmw``: the ``agentmw`` command without its console script (``python -m agentmw stdio app:app``)."""

import sys

from .cli import main

sys.exit(main())
