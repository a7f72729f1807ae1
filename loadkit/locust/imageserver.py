"""The static server of ``[images] transport = "url"``: the engine fetches the images from here.

One per load-generating process (each worker its own, on its own port unless ``url_port`` fixes
one), started at test start once the targets are known and stopped at test stop. It serves
``GET /img/<sha256>.<ext>`` from the process's image store (loadkit/workload/imageserve.py),
which counts every fetch for the report. It runs in the process's gevent hub
(``gevent.pywsgi``): a fetch is served between the users' greenlets like any other socket,
with no thread contending for the GIL with the measuring code.

The host written into the URLs must be one the engine can reach. By default it is this node's
own address on the route to the first target (the source address the kernel picks for it:
127.0.0.1 for a target on loopback, the node's LAN address for one across the network), and
the server binds only that address. ``url_host`` names another (a NAT'd or containerised
engine may need the host's public name); the server then binds all addresses.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterable
from typing import Any

from loadkit.run.errors import ConfigError
from loadkit.workload.imageserve import STORE

log = logging.getLogger("loadkit")


def _app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    path = str(environ.get("PATH_INFO") or "")
    method = environ.get("REQUEST_METHOD")
    hit = STORE.get(path[len("/img/") :]) if path.startswith("/img/") and method in ("GET", "HEAD") else None
    if hit is None:
        start_response("404 Not Found", [("Content-Type", "text/plain"), ("Content-Length", "9")])
        return [b"not found"]
    data, mime = hit
    start_response("200 OK", [("Content-Type", mime), ("Content-Length", str(len(data)))])
    return [] if method == "HEAD" else [data]


def route_address(host: str, port: int) -> str:
    """This node's source address towards host:port (a UDP connect sends nothing)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        s.connect((host, port or 80))
        return str(s.getsockname()[0])


class ImageServer:
    def __init__(self, spec: Any, target_host: str, target_port: int) -> None:
        from gevent.pywsgi import WSGIServer

        advertised = spec.url_host or route_address(target_host, target_port)
        bind = advertised if spec.url_host is None else ""
        try:
            self.server = WSGIServer((bind, spec.url_port), _app, log=None, error_log=None)
            self.server.start()
        except OSError as exc:
            raise ConfigError(
                f'[images] transport = "url": cannot start the image server on '
                f"{bind or '*'}:{spec.url_port}: {exc.strerror or exc}"
            ) from None
        port = self.server.server_port
        shown = f"[{advertised}]" if ":" in advertised else advertised
        self.base = f"http://{shown}:{port}"
        log.info("loadkit: image server for transport url at %s (bound %s:%s)", self.base, bind or "*", port)

    def stop(self) -> None:
        self.server.stop(timeout=1)


def url_transport(workloads: Iterable[Any]) -> list[Any]:
    """The [images] specs of the workloads that send images by URL."""
    specs = [getattr(w.scenario, "images", None) for w in workloads]
    return [s for s in specs if s is not None and s.transport == "url"]


def start_for(
    workloads: Iterable[Any], targets: list[Any], running: ImageServer | None
) -> ImageServer | None:
    """This start's image server (the one of an earlier start is stopped first), or None when no
    scenario sends images by URL. The store's counts start over; its images stay."""
    if running is not None:
        running.stop()
    specs = url_transport(workloads)
    STORE.reset_account()
    if not specs or not targets:
        return None
    ep = targets[0].endpoint
    server = ImageServer(specs[0], ep.host, ep.port)
    STORE.base = server.base
    return server
