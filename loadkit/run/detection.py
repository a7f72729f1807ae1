"""``--engine auto`` in a run: detect each target once, name it after what was found, and let
the report say what every probe saw.

Detection happens once per process and URL (a web UI session configures at every start) and is logged once. On a distributed run the master
detects and hands its findings to the workers in the run configuration (run/runconfig.py), so every
node uses the same engine and the same target name: the stats are keyed by that name.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from loadkit.client.httpstream import Endpoint
from loadkit.servers.targets import TargetSpec

log = logging.getLogger("loadkit")

AUTO_NAME = ""  # the name of a --host target with --engine auto until detection names it


@dataclass(slots=True)
class Detected:
    engine: str
    api: str | None
    explanation: str
    name: str  # what a target named by nothing else is called: the engine, else host:port
    probes: dict[str, Any]  # loadkit.servers.detect.probe_summary: what each probe saw

    def to_wire(self) -> dict[str, Any]:
        return {"engine": self.engine, "api": self.api, "explanation": self.explanation,
                "name": self.name, "probes": self.probes}  # fmt: skip

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> Detected:
        return cls(str(data["engine"]), data.get("api"), str(data.get("explanation", "")),
                   str(data["name"]), dict(data.get("probes") or {}))  # fmt: skip


def host_port(url: str) -> str:
    ep = Endpoint.parse(url)
    return f"{ep.host}:{ep.port}"


def detect(url: str, api_key: str | None, extra_headers: dict[str, str] | None = None) -> Detected:
    from loadkit.servers.detect import detect_engine, probe_summary

    # The probes carry what every request carries: the key, and --header.
    headers = {**({"Authorization": f"Bearer {api_key}"} if api_key else {}), **(extra_headers or {})} or None
    found = detect_engine(url, headers=headers)
    name = host_port(url) if found.fallback else found.engine
    return Detected(found.engine, found.api, found.explanation, name, probe_summary(found.probes))


class Detections:
    """This process's detections by URL, and which target used which in the current run."""

    def __init__(self) -> None:
        self.by_url: dict[str, Detected] = {}
        self.used: dict[str, tuple[str, Detected]] = {}  # target name → (url, detection), this configuration

    def begin(self, from_master: dict[str, Any]) -> None:
        """A new configuration: take what the master found (workers; StartPlan.detections),
        forget which target used what."""
        self.used = {}
        for url, data in from_master.items():
            self.by_url[url] = Detected.from_wire(data)

    def resolve(
        self, spec: TargetSpec, api_key: str | None, extra_headers: dict[str, str] | None = None
    ) -> None:
        """Give an ``auto`` target its engine (and api, and name when it has none)."""
        if spec.engine != "auto":
            return
        found = self.by_url.get(spec.url)
        if found is None:
            found = self.by_url[spec.url] = detect(spec.url, api_key, extra_headers)
            log.info("loadkit: target %s: --engine auto: %s", spec.name or found.name, found.explanation)
        spec.engine = found.engine
        if spec.api is None and found.api is not None:
            spec.api = found.api
        if spec.name == AUTO_NAME:
            spec.name = found.name
        self.used[spec.name] = (spec.url, found)

    def to_option(self) -> dict[str, Any]:
        """What the master hands its workers: the detections the current run uses."""
        return {url: found.to_wire() for url, found in self.used.values()}

    def manifest_entry(self, target_name: str) -> dict[str, Any] | None:
        if target_name not in self.used:
            return None
        found = self.used[target_name][1]
        return {"engine": found.engine, "api": found.api, "explanation": found.explanation,
                "probes": found.probes}  # fmt: skip
