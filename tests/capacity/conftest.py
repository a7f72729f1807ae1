from __future__ import annotations

from pathlib import Path

import pytest

from loadkit.workload.paths import PACKAGE_DATA

FIXTURES = Path(__file__).parent / "fixtures"
# The real traces shipped inside the package (loadkit/data/traces).
TRACES = PACKAGE_DATA / "traces"


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


def trace(relative: str) -> Path:
    path = TRACES / relative
    assert path.is_file(), f"shipped trace missing from the package: {path}"
    return path
