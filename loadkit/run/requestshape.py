"""What the user adds to every request, and what pre-flight took away.

``--extra-body`` (a JSON object merged into every body), ``--header 'Name: value'``
(repeatable; values are secrets, like the API key), ``--exact-output / --no-exact-output``
(overrides the scenario's ``[prompt] exact_output``), and the body fields pre-flight found a
target refuses. The options cross the master→worker wire as plain text, and every node parses
them itself; pre-flight's decision crosses in the run configuration (run/runconfig.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from loadkit.core.adapter import EngineAdapter
from loadkit.errors import UserError
from loadkit.servers.targets import Target
from loadkit.types import GenerationRequest, HttpRequest

MASK = "***"
# RFC 9110 token characters; headers the connection code writes itself cannot be given.
_HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")
_OWNED_HEADERS = ("host", "content-length", "transfer-encoding", "connection")


class RequestOptionError(ValueError, UserError):
    """--extra-body / --header / --exact-output given a value that cannot be used."""


@dataclass(frozen=True, slots=True)
class RequestShape:
    """The parsed request options of one run (the same on every node)."""

    extra_body: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    exact_output: bool | None = None  # None: the scenario decides

    @classmethod
    def from_options(cls, options: Any) -> RequestShape:
        return cls(
            parse_extra_body(getattr(options, "extra_body", "") or ""),
            parse_headers(getattr(options, "header", None)),
            parse_exact_output(getattr(options, "exact_output", None)),
        )

    def apply(self, target: Target, drop: list[str]) -> None:
        """Give the target's adapter the extra body and headers, and drop what pre-flight said.
        Adapters merge ``options.extra_body`` after their own fields, so the user's wins."""
        options = target.adapter.options
        options.extra_body = {**options.extra_body, **self.extra_body}
        options.extra_headers = {**options.extra_headers, **self.headers}
        if drop:
            drop_fields(target.adapter, drop)

    def manifest(self) -> dict[str, Any]:
        """For report.json: the body as given, header names with their values masked."""
        return {
            "extra_body": self.extra_body or None,
            "headers": {name: MASK for name in self.headers} or None,
            "exact_output": self.exact_output,
        }


def parse_extra_body(text: str) -> dict[str, Any]:
    if not text.strip():
        return {}
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise RequestOptionError(f"--extra-body: not valid JSON ({exc}): {text[:80]!r}") from None
    if not isinstance(value, dict):
        raise RequestOptionError(f"--extra-body: must be a JSON object ({{...}}), got {type(value).__name__}")
    return value


def parse_headers(given: Any) -> dict[str, str]:
    """``--header`` values: a list (command line, env) or one string (the web UI's form), each
    ``Name: value``. Locust's form splits list values at every comma, so a piece without a
    colon is the rest of the previous value."""
    if not given:
        return {}
    if isinstance(given, str):  # several headers in one string: split before each "Name:"
        items = re.split(r",\s*(?=[A-Za-z0-9!#$%&'*+.^_`|~-]+\s*:)", given)
    else:
        items = [str(g) for g in given]
    lines: list[str] = []
    for item in items:
        if lines and ":" not in item:
            lines[-1] += "," + item
        else:
            lines.append(item)
    return dict(parse_header(line) for line in lines if line.strip())


def parse_header(line: str) -> tuple[str, str]:
    name, sep, value = line.partition(":")
    name, value = name.strip(), value.strip()
    # The value is never echoed: it may be a credential.
    if not sep:  # all of it might be the secret: say nothing of it
        raise RequestOptionError("--header: expected 'Name: value', got a value without a colon")
    if not _HEADER_NAME.match(name):
        raise RequestOptionError(f"--header {name[:40]!r}: expected 'Name: value' with a valid header name")
    if "\r" in value or "\n" in value:
        raise RequestOptionError(f"--header {name!r}: the value must not contain a line break")
    if name.lower() in _OWNED_HEADERS:
        raise RequestOptionError(f"--header {name!r}: loadkit writes this header itself")
    return name, value


def parse_exact_output(value: Any) -> bool | None:
    """True / False from the command line; "true" / "false" / "" from the web UI's form."""
    if value is None or isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("", "none", "scenario"):
        return None
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise RequestOptionError(
        f"--exact-output: {value!r}: expected true, false, or empty (the scenario decides)"
    )


class DropFields:
    """An adapter's build_request, minus body fields the server refuses (dotted paths).

    Only targets whose server refused a field pay for it: one JSON decode and encode per
    request, never per event."""

    __slots__ = ("build", "paths")

    def __init__(self, build: Any, paths: list[str]) -> None:
        self.build = build
        self.paths = [p.split(".") for p in paths]

    def __call__(self, request: GenerationRequest) -> HttpRequest:
        http: HttpRequest = self.build(request)
        try:
            body = orjson.loads(http.body or b"")
        except orjson.JSONDecodeError:
            return http  # not a JSON body: nothing of ours to drop
        if isinstance(body, dict):
            for path in self.paths:
                remove_path(body, path)
            http.body = orjson.dumps(body)
        return http


def drop_fields(adapter: EngineAdapter, paths: list[str]) -> None:
    """Replace this adapter instance's build_request by one that drops ``paths``."""
    build = adapter.build_request
    if isinstance(build, DropFields):
        build = build.build
    adapter.build_request = DropFields(build, paths)  # type: ignore[method-assign]


def remove_path(body: dict[str, Any], path: list[str]) -> bool:
    """Delete body[a][b]... for path [a, b, ...]; True if it was there."""
    node: Any = body
    for key in path[:-1]:
        node = node.get(key) if isinstance(node, dict) else None
    if isinstance(node, dict) and path[-1] in node:
        del node[path[-1]]
        return True
    return False
