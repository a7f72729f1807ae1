"""The built-in engine detector: ordered rules over what a server answered on its info paths.

Order matters: the most specific fingerprints first, generic ones (``/version``, the
``owned_by`` of ``/v1/models``) last, the OpenAI fallback after everything. Each rule returns
the evidence it matched, so ``--engine auto`` can say what it found and why.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Probes = dict[str, dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Match:
    engine: str
    api: str | None
    evidence: str


def ok_json(probes: Probes, path: str) -> Any:
    """The JSON body of a 200 answer on ``path``, else None."""
    probe = probes.get(path)
    if not probe or probe.get("status") != 200:
        return None
    return probe.get("json")


def _has_keys(probes: Probes, path: str, keys: tuple[str, ...]) -> str | None:
    body = ok_json(probes, path)
    if isinstance(body, dict):
        found = [k for k in keys if k in body]
        if found:
            return f"GET {path} answered with {', '.join(repr(k) for k in found)}"
    return None


def _owned_by(owner: str) -> Callable[[Probes], str | None]:
    def rule(probes: Probes) -> str | None:
        body = ok_json(probes, "/v1/models")
        data = body.get("data") if isinstance(body, dict) else None
        if isinstance(data, list) and any(isinstance(m, dict) and m.get("owned_by") == owner for m in data):
            return f'GET /v1/models lists a model owned_by "{owner}"'
        return None

    return rule


def _server_header(name: str) -> Callable[[Probes], str | None]:
    def rule(probes: Probes) -> str | None:
        for path, probe in probes.items():
            if name in str(probe.get("headers", {}).get("server", "")).lower():
                return f"GET {path} answered with header Server: {probe['headers']['server']}"
        return None

    return rule


def _triton(probes: Probes) -> str | None:
    body = ok_json(probes, "/v2")
    if isinstance(body, dict) and body.get("name") == "triton":
        return f"GET /v2 answered by Triton {body.get('version', '')}".rstrip()
    return None


def _version_only(probes: Probes) -> str | None:
    body = ok_json(probes, "/version")
    if isinstance(body, dict) and isinstance(body.get("version"), str):
        return f'GET /version answered {{"version": "{body["version"]}"}}'
    return None


RULES: list[tuple[str, str | None, Callable[[Probes], str | None]]] = [
    (
        "ollama",
        None,
        lambda p: _has_keys(p, "/api/version", ("version",)) or _has_keys(p, "/api/tags", ("models",)),
    ),
    (
        "llamacpp",
        None,
        lambda p: _has_keys(p, "/props", ("default_generation_settings", "total_slots", "build_info")),
    ),
    ("llamacpp", None, _server_header("llama.cpp")),
    ("sglang", None, lambda p: _has_keys(p, "/get_model_info", ("model_path",))),
    ("sglang", None, lambda p: _has_keys(p, "/get_server_info", ("version", "server_args", "tp_size"))),
    ("sglang", None, lambda p: _has_keys(p, "/server_info", ("version", "server_args", "tp_size"))),
    ("tgi", None, lambda p: _has_keys(p, "/info", ("model_id",))),
    ("tensorrt-llm", "triton", _triton),
    ("tensorrt-llm", None, _owned_by("tensorrt_llm")),
    ("sglang", None, _owned_by("sglang")),
    ("llamacpp", None, _owned_by("llamacpp")),
    ("vllm", None, _owned_by("vllm")),
    ("vllm", None, _version_only),
]


def match_rules(probes: Probes) -> Match | None:
    """The first rule that matches, with its evidence; None when no engine is recognised."""
    for engine, api, rule in RULES:
        evidence = rule(probes)
        if evidence:
            return Match(engine, api, evidence)
    return None
