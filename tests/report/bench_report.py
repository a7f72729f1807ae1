"""Speed check (not a test): write_html and compare on a 100k-line raw log.

    python tests/report/bench_report.py [ROWS]

Target (issue): report.html in < 2 s for 100k raw-log lines.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from loadkit.report import write_html  # noqa: E402
from loadkit.report.compare import compare_runs  # noqa: E402
from tests.report.conftest import make_rows, write_run  # noqa: E402


def main() -> int:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    with tempfile.TemporaryDirectory() as tmp:
        half = rows // 2
        a = write_run(Path(tmp) / "a", {"x": make_rows("x", half, 1), "y": make_rows("y", rows - half, 2)})
        b = write_run(
            Path(tmp) / "b",
            {"x": make_rows("x", half, 3, ttft_scale=25.0), "y": make_rows("y", rows - half, 4)},
        )
        t0 = time.perf_counter()
        out = write_html(a)
        t1 = time.perf_counter()
        compare_runs([str(a), str(b)], rules=["ttft_ms.p99>+10%"])
        t2 = time.perf_counter()
        print(
            f"write_html: {rows} raw-log lines -> {out.stat().st_size / 1024:.0f} KiB in {t1 - t0:.2f} s (target < 2 s)"
        )
        print(f"compare (2 engines, bootstrap CIs): {t2 - t1:.2f} s")
        return 0 if t1 - t0 < 2.0 else 1


if __name__ == "__main__":
    sys.exit(main())
