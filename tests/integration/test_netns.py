"""The multi-host tests' hosts cannot be made: a clear skip, or a failure when CI requires them."""

from __future__ import annotations

import pytest

from tests.integration import netns


def test_a_missing_ip_is_a_skip_naming_it_or_a_failure_when_required(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no ip, no unshare
    monkeypatch.delenv("LOADKIT_REQUIRE_NETNS", raising=False)
    with pytest.raises(pytest.skip.Exception, match="ip, unshare.* not found on PATH.*iproute2"):
        with netns.hosts("a"):
            pass
    monkeypatch.setenv("LOADKIT_REQUIRE_NETNS", "1")
    with pytest.raises(pytest.fail.Exception, match="LOADKIT_REQUIRE_NETNS is set.*ip, unshare"):
        with netns.hosts("a"):
            pass


def test_a_refused_namespace_fails_when_required(monkeypatch):
    monkeypatch.setattr(netns, "missing_tools", lambda: [])
    monkeypatch.setattr(
        netns, "ip", lambda *a: netns.subprocess.CompletedProcess(a, 1, "", "Operation not permitted")
    )
    monkeypatch.setenv("LOADKIT_REQUIRE_NETNS", "0")
    with pytest.raises(pytest.skip.Exception, match="refuses a network namespace.*not permitted"):
        with netns.hosts("a"):
            pass
    monkeypatch.setenv("LOADKIT_REQUIRE_NETNS", "1")
    with pytest.raises(pytest.fail.Exception, match="LOADKIT_REQUIRE_NETNS.*refuses"):
        with netns.hosts("a"):
            pass
