"""Keep secrets out of every report: values of secret-looking keys, argv and strings are masked.

A manifest carries the run's argv and options, which may hold an API key; the report is made
to be shared, so anything that looks like a credential is replaced by ``***`` before rendering.
"""

from __future__ import annotations

import re
from typing import Any

MASK = "***"
# "token" alone or as a suffix (hf_token, access_token) is a secret; "max_tokens" is not.
_SECRET_KEY = re.compile(r"(api[_-]?key|authori[sz]ation|password|passwd|secret|cookie|credential"
                         r"|bearer|(^|[_\-.])token$|^token$|private[_-]?key)", re.I)  # fmt: skip
_SECRET_TEXT = (
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]+"), r"\1 " + MASK),
    (re.compile(r"\bsk-[A-Za-z0-9_-]{6,}"), MASK),
    (re.compile(r"\bhf_[A-Za-z0-9]{6,}"), MASK),
    (
        re.compile(r"(?i)((?:api[_-]?key|authorization|password|token|secret)\s*[=:]\s*)[^\s&,;]+"),
        r"\1" + MASK,
    ),
    (re.compile(r"(://[^/\s:@]+:)[^/\s@]+@"), r"\1" + MASK + "@"),
)


def is_secret_key(key: str) -> bool:
    return bool(_SECRET_KEY.search(str(key)))


def redact_text(text: str) -> str:
    for pattern, repl in _SECRET_TEXT:
        text = pattern.sub(repl, text)
    return text


def redact_argv(argv: list[Any]) -> list[str]:
    """Mask the value after a secret-looking flag (``--api-key X``) and in ``--api-key=X``."""
    out: list[str] = []
    hide_next = False
    for arg in map(str, argv):
        if hide_next:
            out.append(MASK)
            hide_next = False
            continue
        flag, eq, _ = arg.partition("=")
        if flag.startswith("-") and (
            is_secret_key(flag.lstrip("-")) or flag.lstrip("-").lower() in ("header", "h")
        ):
            if eq:
                out.append(f"{flag}={MASK}")
            else:
                out.append(arg)
                hide_next = True
            continue
        out.append(redact_text(arg))
    return out


def redact(value: Any, key: str = "") -> Any:
    """A copy of ``value`` with secrets masked, recursively through dicts and lists."""
    if key and is_secret_key(key) and value is not None:
        return MASK
    if isinstance(value, dict):
        return {k: redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        if key == "argv":
            return redact_argv(list(value))
        return [redact(v) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value
