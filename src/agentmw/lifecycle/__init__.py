"""The lifecycle engine: the durable mechanisms every long-lived piece of work shares (A2A and MCP tasks,
AG-UI runs, MCP sessions), written once.

- states and their moves, as data (:mod:`.states`: :class:`TaskState`, :data:`TRANSITIONS`);
- versioned records with compare-and-set (:class:`Records`, :class:`TaskRecord`) and their write-behind
  (:class:`WriteBehind`, and for task records :class:`Commits` of :class:`Handle`);
- leases with a heartbeat, the orphan sweep and take-over (:class:`Heartbeat`, :class:`Leases`,
  :class:`Sweeper`);
- append-only event logs and their followers across replicas (:class:`EventLog`, :class:`Followers`);
- the bus and cancellation over it (:class:`BusListener`, :class:`Canceller`, :func:`tell`);
- byte and count budgets (:func:`limit`, :data:`HandleTable`).

It knows no protocol: a face maps :class:`TaskState` to its own words. It imports only the foundations
(``agentmw.state``, ``agentmw._bounded``).
"""

from .background import Background
from .budgets import HandleTable, limit
from .bus import BusListener, publish
from .cadence import Cadence
from .cancel import LEFT_FOR_ANOTHER, Canceller, Watch, left_for_another, tell
from .commits import Commits, Handle
from .events import EventLog, Followers, LogWriter, Numbered, Queue
from .leases import Heartbeat, Leases, Sweeper, every, keep
from .records import RESTART_REASON, Records, TaskRecord, retry
from .spaces import Spaces
from .states import INTERRUPTED, RUNNING, SETTLED, TERMINAL, TRANSITIONS, TaskState, allowed
from .writer import WriteBehind

__all__ = [
    "INTERRUPTED",
    "LEFT_FOR_ANOTHER",
    "RESTART_REASON",
    "RUNNING",
    "SETTLED",
    "TERMINAL",
    "TRANSITIONS",
    "Background",
    "BusListener",
    "Cadence",
    "Canceller",
    "Commits",
    "EventLog",
    "Followers",
    "Handle",
    "HandleTable",
    "Heartbeat",
    "Leases",
    "LogWriter",
    "Numbered",
    "Queue",
    "Records",
    "Spaces",
    "Sweeper",
    "TaskRecord",
    "TaskState",
    "Watch",
    "WriteBehind",
    "allowed",
    "every",
    "keep",
    "left_for_another",
    "limit",
    "publish",
    "retry",
    "tell",
]
