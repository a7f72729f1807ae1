"""Images in simulated chat requests: read the content parts, charge their prompt tokens.

Each ``image_url`` part is a data URL or an ``http(s)://`` URL. A URL is fetched before the
request reaches the engine, as vLLM fetches it (``fetch_all``: a GET with a timeout, the
request's prefill starting after it; a failed fetch is an HTTP 400 naming the URL and the
reason); its bytes reach the parse through ``FETCHED``. The image's size is read
from the image's header (Pillow) and charged as Qwen2-VL charges it (loadkit/imagetokens.py,
docs/simulator.md "Images"). The image's tokens join the prompt after its text, with ids from
a digest of the image's bytes: the same image again is the same tokens, so prefix caching
treats it as vLLM's content-hashed multimodal cache does.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import concurrent.futures
import contextvars
import hashlib
import io
import urllib.error
import urllib.request
from typing import Any

from loadkit.imagetokens import image_tokens

_ID_BASE = 1 << 40  # image ids stay clear of the text tokenizer's ids
FETCH_TIMEOUT_S = 10.0  # vLLM's VLLM_IMAGE_FETCH_TIMEOUT default (5 s) doubled for a loaded host
MAX_FETCH_BYTES = 64 << 20  # a URL that streams forever must not fill the simulator's memory
# The bytes of the request's fetched image URLs, set around its parse (server.py): the parse
# stays synchronous and the families' parse signatures stay what they are.
FETCHED: contextvars.ContextVar[dict[str, bytes] | None] = contextvars.ContextVar("FETCHED", default=None)


class FetchError(Exception):
    """An image URL that could not be fetched: the request's 400, with vLLM's kind of message."""


def image_urls(body: Any) -> list[str]:
    """The http(s) image URLs of a chat body's content parts, in order, each once."""
    urls: list[str] = []
    messages = body.get("messages") if isinstance(body, dict) else None
    for m in messages if isinstance(messages, list) else ():
        content = m.get("content") if isinstance(m, dict) else None
        for part in content if isinstance(content, list) else ():
            obj = (
                part.get("image_url") if isinstance(part, dict) and part.get("type") == "image_url" else None
            )
            url = obj.get("url") if isinstance(obj, dict) else None
            if isinstance(url, str) and url.startswith(("http://", "https://")) and url not in urls:
                urls.append(url)
    return urls


def _get(url: str, timeout_s: float) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:  # noqa: S310 (http(s) only, above)
            data: bytes = resp.read(MAX_FETCH_BYTES + 1)
    except urllib.error.HTTPError as exc:
        raise FetchError(f"Failed to fetch image from {url}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise FetchError(f"Failed to fetch image from {url}: {reason}") from None
    if len(data) > MAX_FETCH_BYTES:
        raise FetchError(f"Failed to fetch image from {url}: larger than {MAX_FETCH_BYTES >> 20} MiB")
    return data


_POOL: concurrent.futures.ThreadPoolExecutor | None = None
FETCH_THREADS = 64  # fetches at once per simulator process (asyncio's default pool has cpus + 4)


async def fetch_all(urls: list[str], timeout_s: float = FETCH_TIMEOUT_S) -> dict[str, bytes]:
    """Every URL's bytes, fetched at once (threads of their own: urllib blocks, and asyncio's
    default pool of cpus + 4 threads would queue the fetches of a busy engine behind each
    other, a wait no real server adds); FetchError for the first that fails."""
    global _POOL
    if _POOL is None:
        _POOL = concurrent.futures.ThreadPoolExecutor(FETCH_THREADS, thread_name_prefix="sim-image-fetch")
    loop = asyncio.get_running_loop()
    got = await asyncio.gather(*(loop.run_in_executor(_POOL, _get, u, timeout_s) for u in urls))
    return dict(zip(urls, got, strict=True))


def image_parts(messages: Any) -> list[tuple[int, int, bytes]]:
    """(width, height, digest) of every image in the messages' content parts; ValueError names
    what is wrong. A request without image parts gives []."""
    out: list[tuple[int, int, bytes]] = []
    if not isinstance(messages, list):
        return out
    for m in messages:
        content = m.get("content") if isinstance(m, dict) else None
        if not isinstance(content, list):
            continue
        for part in content:
            if isinstance(part, dict) and part.get("type") == "image_url":
                out.append(_image(part.get("image_url")))
    return out


def _image(obj: Any) -> tuple[int, int, bytes]:
    url = obj.get("url") if isinstance(obj, dict) else None
    if not isinstance(url, str):
        raise ValueError("image_url must be an object with a url")
    fetched = FETCHED.get() or {}
    if url in fetched:
        data = fetched[url]
    elif not url.startswith("data:"):
        raise ValueError("image_url.url: expected a data URL (data:image/...;base64,...) or an http(s) URL")
    else:
        head, sep, payload = url.partition(",")
        if not sep or not head.endswith(";base64"):
            raise ValueError("image_url.url: expected a base64 data URL")
        try:
            data = base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("image_url.url: the data URL's base64 does not decode") from None
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as img:  # the header only
            width, height = img.size
    except (UnidentifiedImageError, OSError):
        raise ValueError("image_url.url: not an image Pillow can read") from None
    return width, height, hashlib.blake2b(data, digest_size=8).digest()


def image_token_ids(images: list[tuple[int, int, bytes]]) -> list[int]:
    """The prompt tokens of the images, in order: Qwen2-VL's count per image, ids by digest."""
    ids: list[int] = []
    for width, height, digest in images:
        base = int.from_bytes(digest, "big") % _ID_BASE
        ids.extend(_ID_BASE + (base + k) % _ID_BASE for k in range(image_tokens(width, height)))
    return ids
