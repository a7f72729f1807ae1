"""A loopback port for a process a test starts (web UI, Locust master, simulator)."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port that was free a moment ago on 127.0.0.1 (the OS picks it; another process may
    still take it before the test binds it, which on loopback is rare enough to ignore)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
