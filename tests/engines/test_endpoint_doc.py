"""docs/engines.md's endpoint table lists every built-in (engine, api) with the request it sends."""

import re
from pathlib import Path

from loadkit.engines.base import AdapterOptions
from loadkit.engines.builtin import builtin_adapters
from loadkit.sim.families import FAMILIES
from loadkit.sim.protocols import find_route
from loadkit.types import GenerationRequest

DOC = Path(__file__).resolve().parents[2] / "docs" / "engines.md"
ROW = re.compile(
    r"^\| `([a-z.-]+)` \| `([a-z]+)` \| `(\w+) ([^`]+)` \| (\w+) \| `([a-z]+)` \|$", re.MULTILINE
)


def documented() -> dict[tuple[str, str], tuple[str, str, str]]:
    return {(m[1], m[2]): (m[3], m[4].replace("<model>", "M"), m[6]) for m in ROW.finditer(DOC.read_text())}


def test_every_builtin_endpoint_is_documented_with_its_request():
    rows = documented()
    for cls in builtin_adapters():
        for api in cls.apis:
            req = cls(AdapterOptions(model="M", api=api)).build_request(GenerationRequest(prompt="x"))
            assert rows.get((cls.name, api), ("?", "?"))[:2] == (req.method, req.path), (cls.name, api)
    assert len(rows) == sum(len(cls.apis) for cls in builtin_adapters())


def test_the_simulator_family_named_serves_that_endpoint():
    for (engine, api), (_, path, family) in documented().items():
        assert family in FAMILIES and find_route(family, path) is not None, (engine, api, family, path)


KIND_ROW = re.compile(r"^\| `([a-z.-]+)` \| `(embeddings|rerank)` \| `POST ([^`]+)` \|", re.MULTILINE)


def test_every_builtin_kind_is_documented_at_its_path():
    """docs/engines.md "Which engine serves what": one row per (engine, kind) an adapter serves."""
    rows = {(m[1], m[2]): m[3] for m in KIND_ROW.finditer(DOC.read_text())}
    served = {(cls.name, kind): path for cls in builtin_adapters() for kind, path in cls.kind_paths.items()}
    assert rows == served
