"""``python -m agentmw.cli``: the ``agentmw`` command without its console script."""

import sys

from . import main

sys.exit(main())
