"""Hosts on this machine for the multi-host tests: one network namespace per host, joined by
veth pairs to a bridge in a namespace of its own, each on a 10.77.0.0/24 address. Nothing is
routed out: a host reaches the other hosts and its own loopback only. A process started on a
host (``Hosts.prefix``) also gets its own mount and UTS namespaces: its own hostname, and
directories bound over paths so that it sees its own report directory where the master has its.
Everything is removed on exit, failure included; created only as root (``ip netns add``).

Without ``ip`` (iproute2), ``unshare``/``mount`` (util-linux), or a machine that refuses a network
namespace, the test is skipped with the reason; with ``LOADKIT_REQUIRE_NETNS=1`` (scripts/test.sh
sets it, as CI runs it) it fails instead."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest

SUBNET = "10.77.0"


def required() -> bool:
    """True when hosts that cannot be made must fail the test rather than skip it."""
    return os.environ.get("LOADKIT_REQUIRE_NETNS", "") not in ("", "0", "false", "no")


def unavailable(reason: str) -> None:
    """Skip the test for ``reason``, or fail it when LOADKIT_REQUIRE_NETNS is set."""
    if required():
        pytest.fail(f"LOADKIT_REQUIRE_NETNS is set but the multi-host test cannot run: {reason}")
    pytest.skip(reason)


def missing_tools() -> list[str]:
    return [tool for tool in ("ip", "unshare", "mount", "hostname") if shutil.which(tool) is None]


def ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=False)


def _must(*args: str) -> None:
    done = ip(*args)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


@dataclass
class Hosts:
    tag: str
    addresses: dict[str, str] = field(default_factory=dict)  # host name -> its address

    def ns(self, host: str) -> str:
        return f"{self.tag}-{host}"

    def block(self, host: str, other: str, blocked: bool) -> None:
        """Drop what ``host`` sends to ``other`` (a blackhole route), or stop dropping it."""
        _must(
            "-n",
            self.ns(host),
            "route",
            "add" if blocked else "del",
            "blackhole",
            f"{self.addresses[other]}/32",
        )

    def reset(self, host: str, other: str) -> None:
        """Reset ``host``'s TCP connections to ``other`` (``ss -K``): what their kernel buffers
        hold is dropped, as when a machine goes down, instead of sent once the way is clear."""
        done = subprocess.run(["ip", "netns", "exec", self.ns(host), "ss", "-K", "dst", self.addresses[other]],
                              capture_output=True, text=True, check=False)  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"ss -K: {done.stderr.strip()}")

    def prefix(self, host: str, binds: tuple[tuple[str, str], ...] = ()) -> list[str]:
        """Argv prefix running a command on ``host``: its network namespace, a mount namespace
        of its own with ``binds`` (source, target) bound, and its own hostname."""
        script = " && ".join(
            [f"hostname {shlex.quote(host)}",
             *(f"mount --bind {shlex.quote(src)} {shlex.quote(dst)}" for src, dst in binds),
             'exec "$@"'])  # fmt: skip
        return ["ip", "netns", "exec", self.ns(host), "unshare", "--mount", "--uts", "--propagation", "private",
                "sh", "-c", script, "sh"]  # fmt: skip


@contextmanager
def hosts(*names: str) -> Iterator[Hosts]:
    """Namespaces for ``names`` (address .1, .2, ... in that order) and the switch; skipped (or
    failed, LOADKIT_REQUIRE_NETNS) when a tool is missing or this machine refuses a network
    namespace (the error quoted)."""
    missing = missing_tools()
    if missing:
        unavailable(f"{', '.join(missing)} not found on PATH (Debian: apt-get install iproute2 util-linux)")
    made = Hosts(f"lk{os.getpid() % 100000}")
    switch = made.ns("sw")
    probe = ip("netns", "add", switch)
    if probe.returncode != 0:
        unavailable(f"this machine refuses a network namespace (ip netns add): {probe.stderr.strip()}")
    created = [switch]
    try:
        _must("-n", switch, "link", "add", "br0", "type", "bridge")
        _must("-n", switch, "link", "set", "br0", "up")
        for n, name in enumerate(names, start=1):
            ns = made.ns(name)
            _must("netns", "add", ns)
            created.append(ns)
            port = f"p{n}"
            _must("-n", switch, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _must("-n", switch, "link", "set", port, "master", "br0", "up")
            address = f"{SUBNET}.{n}"
            _must("-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
            _must("-n", ns, "link", "set", "eth0", "up")
            _must("-n", ns, "link", "set", "lo", "up")
            made.addresses[name] = address
        yield made
    finally:
        for ns in reversed(created):
            ip("netns", "del", ns)
