from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
# The shared real traces live beside the repository: /work/shared/data/traces for /work/main.
TRACES = Path(__file__).parents[2] / "../shared/data/traces"


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


def trace(relative: str) -> Path:
    path = TRACES / relative
    if not path.is_file():
        pytest.skip(f"real trace not present: {path}")
    return path
