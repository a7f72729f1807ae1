"""Reasoning in answer text: ``<think>`` tags split out by adapters whose server runs without a
reasoning parser (``--think-tags``). The marks they feed are loadkit/core/channels.py's.
"""

from __future__ import annotations

from loadkit.core.channels import ANSWER, REASONING

OPEN_TAG, CLOSE_TAG = "<think>", "</think>"


class ThinkTags:
    """Splits answer text at ``<think>`` / ``</think>`` (``--think-tags``), for servers run
    without a reasoning parser. A tag may be split across events: a tail that could begin one
    is held back until the next event decides it. The opening tag starts the reasoning run (its
    event counts there); the closing tag ends it, and the answer begins with the next text."""

    __slots__ = ("inside", "held", "opened_before")

    def __init__(self) -> None:
        self.inside = False
        self.held = ""
        self.opened_before = False  # the last opening tag began in an earlier event

    def split(self, text: str) -> list[tuple[int, str]]:
        """``text`` as (channel, text) pieces in order; (REASONING, "") marks an opening tag."""
        carried = len(self.held)
        s, self.held = self.held + text, ""
        out: list[tuple[int, str]] = []
        while s:
            tag = CLOSE_TAG if self.inside else OPEN_TAG
            i = s.find(tag)
            if i < 0:
                keep = _partial_tail(s, tag)
                if len(s) > keep:
                    out.append((REASONING if self.inside else ANSWER, s[: len(s) - keep]))
                self.held = s[len(s) - keep :]
                break
            if i:
                out.append((REASONING if self.inside else ANSWER, s[:i]))
            if not self.inside:
                self.opened_before = i < carried
                out.append((REASONING, ""))
            self.inside = not self.inside
            s = s[i + len(tag) :]
        return out


def _partial_tail(s: str, tag: str) -> int:
    """Length of the longest tail of ``s`` that is a proper prefix of ``tag``."""
    for n in range(min(len(tag) - 1, len(s)), 0, -1):
        if tag.startswith(s[-n:]):
            return n
    return 0
