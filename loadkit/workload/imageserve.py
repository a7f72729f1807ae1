"""The images a workload sends by URL (``[images] transport = "url"``), and what was fetched.

The request carries ``http://host:port/img/<sha256>.<ext>`` instead of the image's bytes; the
engine fetches it from a small static server loadkit starts on the load-generating node
(loadkit/locust/imageserver.py, one per worker process). This module is the server's content
and its account, without any server: the workload registers each image it makes (by the
SHA-256 of its bytes, so the same picture is one path however often it is drawn), the server
looks paths up and counts every fetch, and the report shows the counts (a server that never
fetches is visible as images sent but none fetched).

One store per process (``STORE``): the sources of every target register into it, and the
server of that process serves it. An image stays registered for the run: a request may sit
in an engine's queue for a long time before its fetch, so nothing a request named is dropped.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

# The host written into URLs before the node's server has started (a source iterated outside
# a run, e.g. by `loadkit capacity`): the reserved .invalid domain never resolves, so such a
# URL is never fetched by mistake, and the name says what is missing.
UNSTARTED = "http://loadkit-image-server.invalid"


@dataclass(slots=True)
class ImageStore:
    images: dict[str, tuple[bytes, str]] = field(default_factory=dict)  # "<sha>.<ext>" → (bytes, mime)
    base: str = UNSTARTED  # http://host:port of this process's server, once started
    fetches: dict[str, int] = field(default_factory=dict)  # name → GETs answered 200
    bytes_served: int = 0
    misses: int = 0  # GETs of a path not in the store (404)
    sent: int = 0  # image parts written into requests (with repeats)
    names_sent: set[str] = field(default_factory=set)

    def register(self, data: bytes, ext: str, mime: str) -> str:
        """The image's path name under /img/ (its bytes' SHA-256 and extension)."""
        name = f"{hashlib.sha256(data).hexdigest()}.{ext}"
        self.images.setdefault(name, (data, mime))
        return name

    def url(self, name: str) -> str:
        """The URL a request carries for the image (counted as sent)."""
        self.sent += 1
        self.names_sent.add(name)
        return f"{self.base}/img/{name}"

    def get(self, name: str) -> tuple[bytes, str] | None:
        """A fetch of /img/<name>: its bytes and MIME type (counted), or None (a miss)."""
        hit = self.images.get(name)
        if hit is None:
            self.misses += 1
            return None
        self.fetches[name] = self.fetches.get(name, 0) + 1
        self.bytes_served += len(hit[0])
        return hit

    def account(self) -> dict[str, int]:
        """What was sent and fetched since the last reset (ImageStats.served, the report)."""
        fetched = set(self.fetches)
        return {
            "image_parts_sent": self.sent,
            "distinct_images_sent": len(self.names_sent),
            "fetches": sum(self.fetches.values()),
            "bytes_served": self.bytes_served,
            "distinct_images_fetched": len(fetched & self.names_sent),
            "never_fetched": len(self.names_sent - fetched),
            "misses": self.misses,
        }

    def reset_account(self) -> None:
        """A new test start: its counts start at 0 (the images stay: a pool is made once)."""
        self.fetches.clear()
        self.bytes_served = self.misses = self.sent = 0
        self.names_sent.clear()


STORE = ImageStore()
