"""``--processes`` without a master port: a free one instead of Locust's fixed 5557.

Locust's ``--processes N`` forks N workers that connect to ``--master-port`` (default 5557)
while the master binds ``--master-bind-port`` (default 5557). With that port taken — a second
``--processes`` run on the machine, anything else on 5557 — the master fails to bind with a
traceback, and its already-forked workers join the *other* run's master, which then counts
them as its own (seen: 6 workers on a ``--processes 2`` run, two of them from the failed run).
So when ``--processes`` is given on the command line (or ``LOCUST_PROCESSES``) for a local
master, and neither port is, both default to one port that is free now. Any port given
explicitly (command line, environment, config file) still wins, as before; ``--worker
--processes`` (workers for a remote master) is left alone. docs/distributed.md.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping, Sequence
from typing import Any

PORT_FLAGS = ("--master-port", "--master-bind-port")
PORT_ENV = ("LOCUST_MASTER_PORT", "LOCUST_MASTER_BIND_PORT")


def _given(argv: Sequence[str], flags: tuple[str, ...]) -> bool:
    return any(a in flags or a.startswith(tuple(f + "=" for f in flags)) for a in argv)


def wants_free_port(argv: Sequence[str], environ: Mapping[str, str]) -> bool:
    """A local ``--processes`` run whose master port nobody chose."""
    processes = _given(argv, ("--processes",)) or bool(environ.get("LOCUST_PROCESSES"))
    worker = _given(argv, ("--worker",)) or environ.get("LOCUST_MODE_WORKER", "").lower() in ("1", "true")
    chosen = _given(argv, PORT_FLAGS) or any(environ.get(v) for v in PORT_ENV)
    return processes and not worker and not chosen


def free_port() -> int:
    """A TCP port free on every interface now (the master binds ``*``)."""
    with socket.socket() as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def default_master_port(
    parser: Any, argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None
) -> int | None:
    """Set both master ports' defaults to a free port when ``wants_free_port``; the port, or None."""
    import sys

    if not wants_free_port(
        sys.argv[1:] if argv is None else argv, os.environ if environ is None else environ
    ):
        return None
    port = free_port()
    parser.set_defaults(master_port=port, master_bind_port=port)
    return port
