"""Sections: the views of the records beside the engine stats (stages, sessions, lengths, user
classes, delivered load, tenants), each one part of the one collector.

A section is registered once with ``StatsCollector.register_section``; from then on the
collector feeds it every measured record, resets it with the rest, ships its state to the
master inside the same cumulative, versioned snapshot as the engine stats (so epochs, the
final-snapshot handshake and lost-worker accounting apply to it unchanged: a lost worker's
last snapshot keeps counting) and merges every node's state when the report is built.

A section's state is any object with ``merge(other)`` and ``to_wire()``; ``decode`` turns the
wire form back into one. A state whose wire form only grows may also have ``delta_to_wire()``
(a worker's periodic snapshots send that) and, decoded, ``continued(previous)``: the worker's
running state once it is applied to the one before (delivered.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from loadkit.records import RequestRecord
from loadkit.stats.turns import give_way


class SectionState(Protocol):
    def merge(self, other: Any) -> None: ...

    def to_wire(self) -> Any: ...


@dataclass(frozen=True)
class Section:
    """How the collector keeps one view; see the module docstring."""

    name: str
    new: Callable[[], Any]  # an empty state, with the collector's current settings (SLOs)
    decode: Callable[[Any], Any]  # a node's wire form back into a state
    # Per measured record; None: fed by its owner (e.g. sessions as they end).
    add: Callable[[Any, RequestRecord], None] | None = None
    warmup: bool = False  # also takes warm-up records (the stage table shows the warm-up)
    # The report's top-level section from the state merged over every node; None: no section
    # of its own (another section's report reads it).
    report: Callable[[Any], Any] | None = None


def encode_sections(states: dict[str, Any], delta: bool = False) -> dict[str, Any]:
    """Every state's wire form; ``delta`` (a periodic snapshot): ``delta_to_wire`` where a
    state has one."""
    return {
        name: state.delta_to_wire() if delta and hasattr(state, "delta_to_wire") else state.to_wire()
        for name, state in states.items()
    }


def continue_sections(new: dict[str, Any], previous: dict[str, Any]) -> None:
    """Master side: each decoded state with ``continued`` applied to the worker's state before."""
    for name, state in new.items():
        continued = getattr(state, "continued", None)
        if continued is not None:
            new[name] = continued(previous.get(name))


def decode_sections(wire: dict[str, Any], sections: dict[str, Section]) -> dict[str, Any]:
    """A node's section states; a section this node does not know is left out (older or
    newer peer), a malformed one raises (the snapshot is rejected as a whole)."""
    return {name: sections[name].decode(data) for name, data in wire.items() if name in sections}


def merged(section: Section, states: list[Any]) -> Any:
    """``section``'s state summed over ``states`` (one per node; None: the node had none)."""
    out = section.new()
    for state in states:
        if state is not None:
            out.merge(state)
            give_way()
    return out
