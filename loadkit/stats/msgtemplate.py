"""An error message's template: the text with what differs from one request to the next masked,
so messages that say the same thing are counted as one.

Servers put numbers and ids into their errors ("maximum context length is 8192 tokens.
However, you requested 10914 tokens", "request 5f0c… failed"); counted by exact text, every
such message was a row of its own with a count of 1. Masked, in this order:

- UUIDs, hex ids of 8 or more characters with a digit in them, ``0x…`` values, and long
  letter-and-digit ids (16 or more) → ``<id>``;
- a quoted token with no space and a digit in it (``'req_8f3a2'``, ``"model-7b"``) → its quotes
  around ``<id>``;
- every other run of digits (with its decimal or thousands parts) → ``<n>``.

Words stay as they are: ``{'min_tokens', 'ignore_eos'}`` keeps its field names.
"""

from __future__ import annotations

import re

_ALNUM = "0-9A-Za-z"
_UUID = re.compile(r"(?<![0-9A-Za-z])[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}(?![0-9A-Za-z])")
_IDS = re.compile(
    rf"(?<![{_ALNUM}])(?:0[xX][0-9a-fA-F]+"
    rf"|(?=[0-9a-fA-F]*[0-9])(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{{8,}}"
    rf"|(?=[{_ALNUM}]*[0-9])(?=[{_ALNUM}]*[A-Za-z])[{_ALNUM}]{{16,}})(?![{_ALNUM}])"
)
_QUOTED = re.compile(r"""(['"`])(?=[^'"`\s]*[0-9])[^'"`\s]+\1""")
_NUMBER = re.compile(r"[0-9]+(?:[.,][0-9]+)*")

CACHE_SIZE = 1024  # distinct texts remembered; most failures repeat one text exactly
_cache: dict[str, str] = {}


def template_of(message: str) -> str:
    """``message`` with numbers and ids masked (see the module docstring)."""
    found = _cache.get(message)
    if found is not None:
        return found
    text = _UUID.sub("<id>", message)
    text = _IDS.sub("<id>", text)
    text = _QUOTED.sub(r"\1<id>\1", text)
    text = _NUMBER.sub("<n>", text)
    if len(_cache) >= CACHE_SIZE:
        _cache.clear()
    _cache[message] = text
    return text
