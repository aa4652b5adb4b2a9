"""agentmw: serve the functions of an existing FastAPI or Starlette app as MCP tools, resources and prompts,
A2A skills and AG-UI runs, with safety applied on the way.

The public packages are this one, :mod:`agentmw.a2a` (its push policy and signer), :mod:`agentmw.auth`,
:mod:`agentmw.state`, :mod:`agentmw.testing`, :mod:`agentmw.bridges` and :mod:`agentmw.observability`; each
says what it exports in ``__all__`` (``tests/test_public_api.py`` keeps a snapshot of it). Everything else is
internal."""

from . import a2ui
from ._version import __version__ as __version__
from .a2a.settings import A2ASettings
from .agent import Agent
from .agui.settings import AguiSettings
from .apps import UI, ui_resource
from .capability import Capability
from .content import Audio, EmbeddedResource, Image, PromptMessage, ResourceLink, Text
from .context import Answer, Ask, ClientCapabilityMissing, Context, ListRoots, Root, Sample, Sampled
from .decorators import prompt, resource, skill, tool
from .errors import NeedsInput, Permanent, RegistrationError, Rejected, Retryable, StoreUnavailable
from .mcp.settings import McpSettings
from .messages import Artifact, Data, File, Message
from .middleware import AgentMiddleware
from .outcomes import Outcome
from .retries import RetryPolicy, StepFailed
from .safety.gate import human_gate
from .selection import RouteSelection
from .settings import Limits, Timing
from .skill_packages import SkillPackage, SkillPackageError

__all__ = [
    "UI",
    "A2ASettings",
    "Agent",
    "AgentMiddleware",
    "AguiSettings",
    "Answer",
    "Artifact",
    "Ask",
    "Audio",
    "Capability",
    "ClientCapabilityMissing",
    "Context",
    "Data",
    "EmbeddedResource",
    "File",
    "Image",
    "Limits",
    "ListRoots",
    "McpSettings",
    "Message",
    "NeedsInput",
    "Outcome",
    "Permanent",
    "PromptMessage",
    "RegistrationError",
    "Rejected",
    "ResourceLink",
    "RetryPolicy",
    "Retryable",
    "Root",
    "RouteSelection",
    "Sample",
    "Sampled",
    "SkillPackage",
    "SkillPackageError",
    "StepFailed",
    "StoreUnavailable",
    "Text",
    "Timing",
    "a2ui",
    "human_gate",
    "prompt",
    "resource",
    "skill",
    "tool",
    "ui_resource",
]
