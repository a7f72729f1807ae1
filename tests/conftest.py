"""Test phases. Some tests run Locust inside the pytest process; importing locust applies
gevent's monkey patching to the whole process, after which the in-thread simulator (asyncio in
a thread) cannot run. So the suite runs in two processes (scripts/test.sh):
LOADKIT_TEST_PHASE=main — everything else; LOADKIT_TEST_PHASE=locust — the in-process Locust
tests. Unset (a developer running one file), everything is collected.
"""

from __future__ import annotations

import os

import pytest

PHASE = os.environ.get("LOADKIT_TEST_PHASE", "all")
# Modules that import locust at import time (collection alone would patch the process).
IN_PROCESS_LOCUST_MODULES = ["locust/test_statslisteners.py", "webui/test_live.py", "locust/test_user_api.py"]

collect_ignore = IN_PROCESS_LOCUST_MODULES if PHASE == "main" else []


def _in_process_locust(item: pytest.Item) -> bool:
    path = str(item.path)
    return item.get_closest_marker("in_process_locust") is not None or any(
        path.endswith(m) for m in IN_PROCESS_LOCUST_MODULES
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if PHASE == "all":
        return
    keep, drop = [], []
    for item in items:
        wanted = _in_process_locust(item) == (PHASE == "locust")
        (keep if wanted else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
