"""Moved to :mod:`agentmw.a2a.auth` (A2A-specific auth lives in the A2A face). Kept only while ``auth/access``
(``Access.card``) still decorates the A2A card itself: that is auth importing the A2A face, against the layers;
it goes when the card's security is added by the face (``a2a/card.py``)."""

from ..a2a.auth import security_schemes, skill_requirements

__all__ = ["security_schemes", "skill_requirements"]
