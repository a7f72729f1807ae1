"""A test plugin, loaded through a real entry point (see ``install``): engine ``flaky``, the
OpenAI adapter with a parser that raises ``ValueError`` (not ``MalformedEvent``) on the third
token event of every ``LOADKIT_FLAKY_EVERY``-th request (default 2) — a bug in a third-party
parser, with a message that carries numbers (so its distinct texts group by template)."""

from __future__ import annotations

import itertools
import os

from loadkit import hookimpl
from loadkit.engines.openai import OpenAIAdapter, OpenAIStreamParser

_requests = itertools.count(1)


class FlakyParser(OpenAIStreamParser):
    __slots__ = ("n", "events", "fails")

    def __init__(self, chat: bool, n: int, fails: bool) -> None:
        super().__init__(chat)
        self.n, self.events, self.fails = n, 0, fails

    def parse(self, data, event=None):
        te = super().parse(data, event)
        if te is not None and te.text:
            self.events += 1
            if self.fails and self.events == 3:
                raise ValueError(f"flaky parser cannot read chunk {self.events} of request {self.n} "
                                 f"({len(te.text)} chars)")  # fmt: skip
        return te


class FlakyAdapter(OpenAIAdapter):
    name = "flaky"
    description = "OpenAI-compatible, with a parser that raises on some requests (a test plugin)"

    def new_parser(self):
        n = next(_requests)
        return FlakyParser(self.api == "chat", n, n % int(os.environ.get("LOADKIT_FLAKY_EVERY", "2")) == 0)


@hookimpl
def loadkit_register_engines(register):
    register(FlakyAdapter)
