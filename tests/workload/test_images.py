"""[images] in a scenario (workload/images.py): parsing, deterministic seeded images, the
content parts each request carries, and the refusals."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import pytest
from PIL import Image

from loadkit.imagetokens import image_tokens
from loadkit.workload.errors import Ctx, ScenarioError
from loadkit.workload.images import ImageMaker, parse_images, synthetic_png_or_jpeg
from loadkit.workload.scenario import parse_scenario

BASE = {"schema": "loadkit.scenario/1", "name": "t", "seed": 3, "max_requests": 12,
        "parts": [{"name": "p", "input": 30, "output": 4}]}  # fmt: skip


def scenario(images: dict, tmp_path: Path, **top: object):
    return parse_scenario({**BASE, **top, "images": images}, tmp_path / "s.toml")


def requests(sc) -> list:
    src = sc.request_source()
    out = []
    while (item := src.next_item()) is not None:
        out.append(item)
    return out


def decoded(url: str) -> Image.Image:
    head, _, payload = url.partition(",")
    assert head in ("data:image/png;base64", "data:image/jpeg;base64")
    return Image.open(io.BytesIO(base64.b64decode(payload)))


def test_synthetic_images_are_deterministic_and_of_the_asked_size_and_format():
    a = synthetic_png_or_jpeg(5, 320, 200, "png", 85)
    assert a == synthetic_png_or_jpeg(5, 320, 200, "png", 85)
    assert a != synthetic_png_or_jpeg(6, 320, 200, "png", 85)
    img = Image.open(io.BytesIO(a))
    assert (img.format, img.size) == ("PNG", (320, 200))
    jpeg = Image.open(io.BytesIO(synthetic_png_or_jpeg(5, 320, 200, "jpeg", 70)))
    assert (jpeg.format, jpeg.size) == ("JPEG", (320, 200))


def test_each_request_carries_its_images_as_content_parts(tmp_path):
    sc = scenario({"count": {"dist": "uniform", "low": 1, "high": 3}, "width": 300,
                   "height": {"dist": "uniform", "low": 100, "high": 500}, "format": "mix"}, tmp_path)  # fmt: skip
    reqs = requests(sc)
    formats = set()
    for req in reqs:
        parts = req.messages[-1]["content"]
        assert parts[0]["type"] == "text" and len(parts[0]["text"]) > 0
        images = [decoded(p["image_url"]["url"]) for p in parts[1:]]
        assert all(p["type"] == "image_url" for p in parts[1:])
        assert 1 <= len(images) == req.image_count <= 3
        assert req.image_pixels == sum(im.size[0] * im.size[1] for im in images)
        assert req.image_tokens_expected == sum(image_tokens(*im.size) for im in images)
        assert all(im.size[0] == 300 for im in images)
        formats |= {im.format for im in images}
    assert formats == {"PNG", "JPEG"}
    again = requests(scenario(sc.raw["images"], tmp_path))  # same seed: the same requests
    assert [r.messages for r in again] == [r.messages for r in reqs]


def test_probability_leaves_some_requests_text_only_and_lengths_unchanged(tmp_path):
    with_images = requests(scenario({"probability": 0.5, "pixels": 40_000}, tmp_path))
    plain = requests(parse_scenario(dict(BASE), tmp_path / "s.toml"))
    counts = [r.image_count for r in with_images]
    assert 0 < counts.count(0) < len(counts)
    assert {r.image_pixels for r in with_images if r.image_count} == {200 * 200}
    for a, b in zip(with_images, plain, strict=True):  # images draw from their own stream
        text = a.messages[-1]["content"]
        assert (text if isinstance(text, str) else text[0]["text"]) == b.messages[-1]["content"]
        assert a.max_tokens == b.max_tokens


def test_a_size_drawn_again_is_encoded_once():
    spec = parse_images(Ctx("f"), {"count": 2, "width": 64, "height": 64}, lambda c, p: Path(p), Path("."))
    maker = ImageMaker(spec, seed=1)
    first = [maker.draw(i) for i in range(5)]
    assert maker.made == 1 and all(im == first[0][0] for batch in first for im in batch)


def test_images_from_a_folder(tmp_path):
    folder = tmp_path / "imgs"
    folder.mkdir()
    for i, size in enumerate(((40, 30), (50, 60))):
        Image.new("RGB", size, (i * 90, 20, 200)).save(folder / f"{i}.png")
    (folder / "notes.txt").write_text("not an image")
    reqs = requests(scenario({"source": "folder", "folder": "imgs", "count": 2}, tmp_path))
    sizes = {decoded(p["image_url"]["url"]).size for r in reqs for p in r.messages[-1]["content"][1:]}
    assert sizes == {(40, 30), (50, 60)}


@pytest.mark.parametrize(
    ("images", "top", "message"),
    [
        ({"width": 10}, {}, "images.height: expected width and height"),
        ({"pixels": 10, "width": 5}, {}, "images.pixels: expected either pixels or width and height"),
        ({"pixels": 10, "format": "gif"}, {}, "images.format"),
        ({"pixels": 10, "quality": 100}, {}, "images.quality"),
        ({"pixels": 10, "jpeg_share": 0.5}, {}, 'jpeg_share only with format = "mix"'),
        ({"source": "folder", "folder": "nowhere"}, {}, "images.folder"),
        ({"pixels": 10, "transport": "ftp"}, {}, "images.transport"),
        (
            {"pixels": 10, "url_port": 8000},
            {},
            'images.url_port: expected url_port only with transport = "url"',
        ),
        ({"pixels": 10, "transport": "url", "url_port": 70000}, {}, "images.url_port"),
        ({"pixels": 10, "colour": 1}, {}, "images.colour: unknown key"),
        ({"pixels": 10}, {"prompt": {"shape": "prompt"}}, 'images: expected prompt.shape = "messages"'),
    ],
)
def test_bad_image_tables_are_refused_naming_the_key(tmp_path, images, top, message):
    with pytest.raises(ScenarioError, match=message.replace("(", r"\(").replace(".", r"\.")):
        scenario(images, tmp_path, **top)


def test_images_with_a_session_workload_are_refused(tmp_path):
    raw = {k: v for k, v in BASE.items() if k != "parts"}
    raw["sessions"] = {"turns": 2, "user_tokens": 10, "output_tokens": 4, "think_time_s": 0}
    with pytest.raises(ScenarioError, match=r"images: expected \[images\] with \[\[parts\]\]"):
        parse_scenario({**raw, "images": {"pixels": 10}}, tmp_path / "s.toml")


def test_a_pool_is_made_up_front_and_requests_pick_from_it(tmp_path):
    sc = scenario({"count": 2, "width": {"dist": "uniform", "low": 40, "high": 400}, "height": 50,
                   "format": "jpeg", "pool": 3}, tmp_path)  # fmt: skip
    src = sc.request_source()
    assert src.images is not None and src.images.made <= 3 and len(src.images.pool) == 3
    made = src.images.made
    urls = set()
    while (req := src.next_item()) is not None:
        urls |= {p["image_url"]["url"] for p in req.messages[-1]["content"][1:]}
    assert src.images.made == made  # nothing made while requests were drawn
    assert urls <= {im.url for im in src.images.pool} and len(urls) >= 2
    with pytest.raises(ScenarioError, match="images.pool"):
        scenario({"pixels": 10, "pool": 0}, tmp_path)


def test_scenarios_show_names_each_requests_images(tmp_path, capsys):
    from loadkit.cli import main as loadkit_main

    path = tmp_path / "v.toml"
    path.write_text('schema = "loadkit.scenario/1"\nname = "v"\nseed = 1\nmax_requests = 2\n'
                    '[[parts]]\nname = "p"\ninput = 10\noutput = 2\n[images]\ncount = 2\npixels = 10000\n')  # fmt: skip
    assert loadkit_main(["scenarios", "show", str(path), "-n", "2"]) == 0
    out = capsys.readouterr().out
    assert out.count(f"images=2 pixels=20000 image_tokens~{2 * image_tokens(100, 100)}") == 2


def test_url_transport_names_each_image_by_its_hash_and_counts_what_it_sent(tmp_path):
    """transport = "url": the request carries the store's URL; the same picture is one path."""
    import hashlib

    from loadkit.workload.imageserve import STORE

    STORE.reset_account()
    reqs = requests(scenario({"count": 2, "width": 64, "height": 48, "transport": "url"}, tmp_path))
    urls = [p["image_url"]["url"] for r in reqs for p in r.messages[-1]["content"][1:]]
    assert urls and all(u.startswith("http://loadkit-image-server.invalid/img/") for u in urls)
    assert len(set(urls)) == 1  # one size, one format: one picture
    name = urls[0].rsplit("/", 1)[1]
    data, mime = STORE.images[name]
    assert name == hashlib.sha256(data).hexdigest() + ".png" and mime == "image/png"
    assert STORE.get(name) == (data, mime) and STORE.get("nope.png") is None
    account = STORE.account()
    assert account["image_parts_sent"] == len(urls) and account["distinct_images_sent"] == 1
    assert account["fetches"] == 1 and account["bytes_served"] == len(data) and account["misses"] == 1
    assert account["never_fetched"] == 0
