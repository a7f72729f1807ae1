"""The multi-host tests' hosts cannot be made: a clear skip, or a failure when CI requires them."""

from __future__ import annotations

import pytest

from tests.integration import netns


def skipped_then_failed(monkeypatch, not_required: str | None, skip: str, fail: str) -> None:
    """Making hosts is skipped (matching ``skip``) with LOADKIT_REQUIRE_NETNS at
    ``not_required`` (None: unset), and fails (matching ``fail``) with it at 1."""
    if not_required is None:
        monkeypatch.delenv("LOADKIT_REQUIRE_NETNS", raising=False)
    else:
        monkeypatch.setenv("LOADKIT_REQUIRE_NETNS", not_required)
    with pytest.raises(pytest.skip.Exception, match=skip):
        with netns.hosts("a"):
            pass
    monkeypatch.setenv("LOADKIT_REQUIRE_NETNS", "1")
    with pytest.raises(pytest.fail.Exception, match=fail):
        with netns.hosts("a"):
            pass


def test_a_missing_ip_is_a_skip_naming_it_or_a_failure_when_required(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no ip, no unshare
    skipped_then_failed(monkeypatch, None, "ip, unshare.* not found on PATH.*iproute2",
                        "LOADKIT_REQUIRE_NETNS is set.*ip, unshare")  # fmt: skip


def test_a_refused_namespace_fails_when_required(monkeypatch):
    monkeypatch.setattr(netns, "missing_tools", lambda: [])
    monkeypatch.setattr(
        netns, "ip", lambda *a: netns.subprocess.CompletedProcess(a, 1, "", "Operation not permitted")
    )
    skipped_then_failed(monkeypatch, "0", "refuses a network namespace.*not permitted",
                        "LOADKIT_REQUIRE_NETNS.*refuses")  # fmt: skip
