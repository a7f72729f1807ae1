"""Images in chat requests: the ``[images]`` table, the images themselves, and the content parts.

Each request of a ``[[parts]]`` workload carries, with ``probability``, ``count`` images of
``width`` × ``height`` pixels (or ``pixels``, square) as OpenAI content parts with data URLs.
Synthetic images are made with Pillow from (scenario seed, width, height, format, quality):
the same size is the same image, so it is encoded once and cached; every image is made while
the request is built, before its send is timed (docs/scenarios.md, "Images").
"""

from __future__ import annotations

import base64
import io
import math
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from loadkit.imagetokens import image_tokens, size_for_tokens
from loadkit.types import GenerationRequest
from loadkit.workload.distributions import Distribution, PathResolver, parse_distribution
from loadkit.workload.errors import Ctx, check_keys, get_int, get_number, get_str, get_table
from loadkit.workload.imageserve import STORE
from loadkit.workload.paths import expand

KEYS = ("probability", "count", "width", "height", "pixels", "format", "jpeg_share", "quality",
        "source", "folder", "transport", "pool", "url_host", "url_port")  # fmt: skip
MAX_POOL = 4096
FORMATS = ("png", "jpeg", "mix")
SOURCES = ("synthetic", "folder")
TRANSPORTS = ("data_url", "url")
MAX_SIDE = 8192  # a mistyped size must not ask for a gigapixel image
FOLDER_EXTS = {".png": "png", ".jpg": "jpeg", ".jpeg": "jpeg", ".webp": "webp", ".gif": "gif"}
MIME = {"png": "image/png", "jpeg": "image/jpeg", "webp": "image/webp", "gif": "image/gif"}
CACHE_BYTES = 256 << 20  # encoded data URLs kept; a size drawn again is not encoded again
_IMAGES = 0x1A6E  # the image draws' own stream: lengths and texts stay what they were


@dataclass(slots=True)
class ImageSpec:
    probability: float = 1.0
    count: Distribution | None = None
    width: Distribution | None = None
    height: Distribution | None = None
    pixels: Distribution | None = None
    format: str = "png"
    jpeg_share: float = 0.5
    quality: int = 85
    source: str = "synthetic"
    folder: Path | None = None
    transport: str = "data_url"
    # transport = "url": the host written into the URLs (the engine must reach it) and the
    # port of each process's image server (0: any free one); None: the node's own address
    # towards the target (loadkit/locust/imageserver.py).
    url_host: str | None = None
    url_port: int = 0
    # pool = N: N images (sizes and formats drawn from the distributions) made when the source
    # is built, before the test's load starts; each request picks among them. None: each image
    # is made when a request first draws its size (in the sending process, between requests).
    pool: int | None = None


def parse_images(ctx: Ctx, raw: Any, resolve: PathResolver, base: Path) -> ImageSpec:
    table = get_table(ctx, raw)
    check_keys(ctx, table, KEYS)
    spec = ImageSpec()
    if "probability" in table:
        spec.probability = get_number(ctx.at("probability"), table["probability"], low=0.0, high=1.0)
    spec.count = parse_distribution(ctx.at("count"), table.get("count", 1), resolve)
    spec.source = get_str(ctx.at("source"), table.get("source", "synthetic"), SOURCES)
    spec.transport = get_str(ctx.at("transport"), table.get("transport", "data_url"), TRANSPORTS)
    if "pool" in table:
        spec.pool = get_int(ctx.at("pool"), table["pool"], low=1, high=MAX_POOL)
    for key in ("url_host", "url_port"):
        if key in table and spec.transport != "url":
            raise ctx.at(key).error(f'expected {key} only with transport = "url"')
    if "url_host" in table:
        spec.url_host = get_str(ctx.at("url_host"), table["url_host"])
    if "url_port" in table:
        spec.url_port = get_int(ctx.at("url_port"), table["url_port"], low=0, high=65535)
    if spec.source == "folder":
        _parse_folder(ctx, table, base, spec)
        return spec
    if "folder" in table:
        raise ctx.at("folder").error('expected folder only with source = "folder"')
    _parse_sizes(ctx, table, resolve, spec)
    spec.format = get_str(ctx.at("format"), table.get("format", "png"), FORMATS)
    if "jpeg_share" in table:
        if spec.format != "mix":
            raise ctx.at("jpeg_share").error('expected jpeg_share only with format = "mix"')
        spec.jpeg_share = get_number(ctx.at("jpeg_share"), table["jpeg_share"], low=0.0, high=1.0)
    if "quality" in table:
        spec.quality = get_int(ctx.at("quality"), table["quality"], low=1, high=95)
    return spec


TRACE_KEYS = ("format", "quality", "transport", "url_host", "url_port")


def parse_trace_images(ctx: Ctx, raw: Any) -> ImageSpec:
    """[images] beside a ServeGen multimodal trace: how its images are encoded and sent; their
    count and size come from the trace (servegenmm.py), so those keys are refused by name."""
    table = get_table(ctx, raw)
    for key in table:
        if key not in TRACE_KEYS:
            raise ctx.at(key).error(
                f"expected only {', '.join(TRACE_KEYS)} with a servegen trace (its dataset windows "
                "give each request's image count and each image's tokens)"
            )
    spec = ImageSpec()
    spec.format = get_str(ctx.at("format"), table.get("format", "png"), ("png", "jpeg"))
    if "quality" in table:
        spec.quality = get_int(ctx.at("quality"), table["quality"], low=1, high=95)
    spec.transport = get_str(ctx.at("transport"), table.get("transport", "data_url"), TRANSPORTS)
    for key in ("url_host", "url_port"):
        if key in table and spec.transport != "url":
            raise ctx.at(key).error(f'expected {key} only with transport = "url"')
    if "url_host" in table:
        spec.url_host = get_str(ctx.at("url_host"), table["url_host"])
    if "url_port" in table:
        spec.url_port = get_int(ctx.at("url_port"), table["url_port"], low=0, high=65535)
    return spec


def _parse_sizes(ctx: Ctx, table: dict[str, Any], resolve: PathResolver, spec: ImageSpec) -> None:
    if "pixels" in table:
        if "width" in table or "height" in table:
            raise ctx.at("pixels").error("expected either pixels or width and height, not both")
        spec.pixels = parse_distribution(ctx.at("pixels"), table["pixels"], resolve)
        return
    for key in ("width", "height"):
        if key not in table:
            raise ctx.at(key).error("expected width and height (pixels, distributions), or pixels")
    spec.width = parse_distribution(ctx.at("width"), table["width"], resolve)
    spec.height = parse_distribution(ctx.at("height"), table["height"], resolve)


def _parse_folder(ctx: Ctx, table: dict[str, Any], base: Path, spec: ImageSpec) -> None:
    for key in ("width", "height", "pixels", "format", "jpeg_share", "quality"):
        if key in table:
            raise ctx.at(key).error(
                'expected no size or encoding with source = "folder" (its files are sent as they are)'
            )
    if "folder" not in table:
        raise ctx.at("folder").error('expected a folder of images for source = "folder"')
    raw_folder = get_str(ctx.at("folder"), table["folder"])
    folder = Path(expand(raw_folder))  # a directory: resolved as file paths are (workload/paths.py)
    if not folder.is_absolute():
        folder = base / folder
    if not folder.is_dir():
        raise ctx.at("folder").error(f"expected a directory, got {str(folder)!r}")
    if not folder_files(folder):
        raise ctx.at("folder").error(
            f"expected image files ({', '.join(sorted(FOLDER_EXTS))}) in {str(folder)!r}"
        )
    spec.folder = folder


def folder_files(folder: Path) -> list[Path]:
    """The folder's image files, sorted: the same folder gives the same draws on every worker."""
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in FOLDER_EXTS)


@dataclass(slots=True, frozen=True)
class Image:
    url: str  # the data URL sent ("" with transport = "url": the URL is the store's)
    width: int
    height: int
    nbytes: int  # encoded image bytes (before base64)
    name: str | None = None  # transport = "url": its path under /img/ (imageserve.py)


def synthetic_png_or_jpeg(seed: int, width: int, height: int, fmt: str, quality: int) -> bytes:
    """A deterministic picture: smooth colour fields (a seeded coarse grid, scaled up bilinearly)
    with seeded fine noise, so it neither compresses to nothing nor is pure noise."""
    from PIL import Image as PILImage

    rng = np.random.default_rng([seed & 0xFFFFFFFF, _IMAGES, width, height])
    coarse = rng.integers(
        0, 256, size=(max(1, math.ceil(height / 32)), max(1, math.ceil(width / 32)), 3), dtype=np.uint8
    )
    img = PILImage.fromarray(coarse, "RGB").resize((width, height), PILImage.Resampling.BILINEAR)
    pixels = np.asarray(img, dtype=np.int16) + rng.integers(-8, 9, size=(height, width, 3), dtype=np.int16)
    img = PILImage.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), "RGB")
    out = io.BytesIO()
    if fmt == "jpeg":
        img.save(out, "JPEG", quality=quality)
    else:
        img.save(out, "PNG", compress_level=1)  # fast: the cost is paid per new size
    return out.getvalue()


def data_url(data: bytes, fmt: str) -> str:
    return f"data:{MIME[fmt]};base64,{base64.b64encode(data).decode('ascii')}"


class ImageMaker:
    """Draws each request's images (seeded by the request's index) and keeps encoded ones."""

    def __init__(self, spec: ImageSpec, seed: int) -> None:
        self.spec, self.seed = spec, seed
        self._cache: OrderedDict[tuple[Any, ...], Image] = OrderedDict()
        self._cached_bytes = 0
        self._files = folder_files(spec.folder) if spec.folder is not None else []
        self.made = 0  # images encoded (cache misses)
        self.encode_ns = 0  # time spent making them, for the cost per MB
        self.pool: list[Image] | None = None
        if spec.pool is not None:  # made now, before any request: the same pool on every worker
            rng = np.random.default_rng([seed & 0xFFFFFFFF, _IMAGES, 1 << 40])
            self.pool = [self._one(rng) for _ in range(spec.pool)]

    def draw(self, i: int) -> list[Image]:
        """Request ``i``'s images (none when the probability says so)."""
        spec = self.spec
        rng = np.random.default_rng([self.seed & 0xFFFFFFFF, _IMAGES, i])
        if spec.probability < 1.0 and rng.random() >= spec.probability:
            return []
        assert spec.count is not None
        n = spec.count.sample_int(rng)
        if self.pool is not None:
            return [self.pool[int(k)] for k in rng.integers(len(self.pool), size=n)]
        return [self._one(rng) for _ in range(n)]

    def for_tokens(self, tokens: tuple[int, ...]) -> list[Image]:
        """Images that the model family charges ``tokens`` for, one per entry (a trace that gives
        image tokens, not pixels: ServeGen's mm-image; imagetokens.py size_for_tokens)."""
        fmt = "jpeg" if self.spec.format == "jpeg" else "png"
        return [self._get((fmt, *size_for_tokens(n))) for n in tokens]

    def _one(self, rng: np.random.Generator) -> Image:
        spec = self.spec
        if self._files:
            return self._get(("file", int(rng.integers(len(self._files)))))
        if spec.pixels is not None:
            side = round(math.sqrt(spec.pixels.sample(rng)))
            w = h = side
        else:
            assert spec.width is not None and spec.height is not None
            w, h = spec.width.sample_int(rng), spec.height.sample_int(rng)
        fmt = spec.format
        if fmt == "mix":
            fmt = "jpeg" if rng.random() < spec.jpeg_share else "png"
        return self._get((fmt, min(max(w, 1), MAX_SIDE), min(max(h, 1), MAX_SIDE)))

    def _get(self, key: tuple[Any, ...]) -> Image:
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit
        import time

        t0 = time.perf_counter_ns()
        image = self._read(key[1]) if key[0] == "file" else self._make(*key)
        self.encode_ns += time.perf_counter_ns() - t0
        self.made += 1
        self._cache[key] = image
        self._cached_bytes += len(image.url) or image.nbytes
        while self._cached_bytes > CACHE_BYTES and len(self._cache) > 1:
            _, old = self._cache.popitem(last=False)
            self._cached_bytes -= len(old.url) or old.nbytes
        return image

    def _image(self, data: bytes, fmt: str, w: int, h: int) -> Image:
        if self.spec.transport == "url":  # served by the node's image server (imageserve.py)
            ext = "jpg" if fmt == "jpeg" else fmt
            return Image("", w, h, len(data), STORE.register(data, ext, MIME[fmt]))
        return Image(data_url(data, fmt), w, h, len(data))

    def _make(self, fmt: str, w: int, h: int) -> Image:
        data = synthetic_png_or_jpeg(self.seed, w, h, fmt, self.spec.quality)
        return self._image(data, fmt, w, h)

    def _read(self, index: int) -> Image:
        from PIL import Image as PILImage

        path = self._files[index]
        data = path.read_bytes()
        with PILImage.open(io.BytesIO(data)) as img:  # the header only: the size
            w, h = img.size
        return self._image(data, FOLDER_EXTS[path.suffix.lower()], w, h)


def _url(image: Image) -> str:
    return image.url if image.name is None else STORE.url(image.name)


def attach(req: GenerationRequest, images: list[Image]) -> GenerationRequest:
    """The request's last user message as content parts: its text, then its images."""
    if not images or not req.messages:
        return req
    last = req.messages[-1]
    text = last.get("content") or ""
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
    parts += [{"type": "image_url", "image_url": {"url": _url(im)}} for im in images]
    req.messages = [*req.messages[:-1], {**last, "content": parts}]
    req.image_count = len(images)
    req.image_pixels = sum(im.width * im.height for im in images)
    req.image_tokens_expected = sum(image_tokens(im.width, im.height) for im in images)
    return req
