"""Split a docstring into the two descriptions every capability carries.

The *contract* is written for a model: what the function does, its arguments and limits, when not to
use it. The *summary* is written for a scheduler: which business need it serves. A docstring may hold
both as sections::

    Search the asset catalog by free text.

    Summary:
        Finds purchasable IT assets; use before submitting a purchase request.

Everything outside ``Summary:`` is the contract (an explicit ``Contract:`` section wins when present).
Without a ``Summary:`` section the summary is the contract's first line. ``Args:`` entries become
parameter descriptions in the input schema and are left out of both descriptions.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field

__all__ = ["Descriptions", "parse_docstring"]

_SECTION = re.compile(r"^(Contract|Summary|Args|Arguments|Parameters|Returns|Raises|Example|Examples):\s*$")
_ARG = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


@dataclass(slots=True)
class Descriptions:
    contract: str = ""
    summary: str = ""
    params: dict[str, str] = field(default_factory=dict)


def parse_docstring(doc: str | None) -> Descriptions:
    text = inspect.cleandoc(doc or "")
    if not text:
        return Descriptions()
    sections: dict[str, list[str]] = {"": []}
    current = ""
    for line in text.splitlines():
        match = _SECTION.match(line.strip()) if not line.startswith((" ", "\t")) else None
        if match:
            current = match.group(1)
            if current in ("Arguments", "Parameters"):
                current = "Args"
            sections.setdefault(current, [])
            continue
        sections[current].append(line)

    def block(name: str) -> str:
        return inspect.cleandoc("\n".join(sections.get(name, []))).strip()

    params: dict[str, str] = {}
    last: str | None = None
    for raw in inspect.cleandoc("\n".join(sections.get("Args", []))).splitlines():
        match = _ARG.match(raw)
        if match and not raw.startswith((" ", "\t")):
            last = match.group(1).lstrip("*")
            params[last] = match.group(2).strip()
        elif last and raw.strip():
            params[last] = f"{params[last]} {raw.strip()}".strip()

    if "Contract" in sections:
        contract = block("Contract")
    else:
        parts = [block("")]
        for name in ("Returns", "Raises", "Example", "Examples"):
            if name in sections:
                parts.append(f"{name}:\n{block(name)}")
        contract = "\n\n".join(p for p in parts if p)
    summary = block("Summary") or (contract.splitlines()[0] if contract else "")
    return Descriptions(contract=contract, summary=summary, params=params)
