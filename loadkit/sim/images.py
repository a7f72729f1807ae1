"""Images in simulated chat requests: read the content parts, charge their prompt tokens.

Each ``image_url`` part must be a data URL (the simulator fetches nothing). Its size is read
from the image's header (Pillow) and charged as Qwen2-VL charges it (loadkit/imagetokens.py,
docs/simulator.md "Images"). The image's tokens join the prompt after its text, with ids from
a digest of the image's bytes: the same image again is the same tokens, so prefix caching
treats it as vLLM's content-hashed multimodal cache does.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
from typing import Any

from loadkit.imagetokens import image_tokens

_ID_BASE = 1 << 40  # image ids stay clear of the text tokenizer's ids


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
    if not url.startswith("data:"):
        raise ValueError("image_url.url: the simulator takes data URLs only (data:image/...;base64,...)")
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
