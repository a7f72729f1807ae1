"""The oracle can fail: a real run's report.json (kept gzipped in data/tenants_run: 49 requests of
two tenants with their own Poisson arrivals against ``--sim a=fast``, SLO ttft_ms=300; the
scenario beside it) verifies, and each deliberately wrong figure makes ``loadkit verify`` exit
1 naming that figure. Fast: no run, the files are read in-process."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from loadkit.verify.cli import main

DATA = Path(__file__).resolve().parent / "data" / "tenants_run"
# 57 requests of one process, open_poisson.toml (Poisson 20/s) against --profile fast for 3 s:
# its delivered row has a fit test (ks vs exponential at 6 ms, 56 gaps).
POISSON = DATA.parent / "poisson_run"
ENGINE = "a"


def _copy(tmp_path: Path, change: Callable[[dict[str, Any]], None] | None = None, data: Path = DATA) -> Path:
    out = tmp_path / "run"
    out.mkdir()
    doc = json.loads(gzip.decompress((data / "report.json.gz").read_bytes()))
    if change is not None:
        change(doc)
    (out / "report.json").write_text(json.dumps(doc))
    (out / "requests.jsonl").write_bytes(gzip.decompress((data / "requests.jsonl.gz").read_bytes()))
    return out


def test_the_real_run_verifies(tmp_path, capsys):
    assert main([str(_copy(tmp_path))]) == 0
    out = capsys.readouterr().out
    assert "checked tenants: " in out and "checked delivered: " in out and "DISAGREES" not in out


def _stage(doc: dict[str, Any]) -> dict[str, Any]:
    (row,) = doc["delivered"]["by_target"][ENGINE]["stages"].values()
    return row


def _gold(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["tenants"]["by_target"][ENGINE]["tenants"]["gold"]


def _times(d: dict[str, Any], key: str, factor: float) -> None:
    d[key] *= factor


def _bucket(doc: dict[str, Any], label: str) -> dict[str, Any]:
    rows = doc["lengths"]["by_target"][ENGINE]["by_input_tokens"]
    return next(row for row in rows if row["bucket"] == label)


TAMPERED = {
    "lengths / a / by_input_tokens 1k–4k / ttft_ms.p90": lambda doc: _times(
        _bucket(doc, "1k–4k")["ttft_ms"], "p90", 1.01
    ),
    "lengths / a / by_input_tokens <256 / e2e_ms.p50": lambda doc: _times(
        _bucket(doc, "<256")["e2e_ms"], "p50", 1.01
    ),
    "lengths / a / by_input_tokens <256 / requests": lambda doc: _bucket(doc, "<256").update(requests=20),
    "lengths / a / by_input_tokens 1k–4k / ok": lambda doc: _bucket(doc, "1k–4k").update(ok=29),
    "lengths / a / by_input_tokens buckets": lambda doc: _bucket(doc, "1k–4k").update(bucket="256–1k"),
    "delivered / a / tenants / realised.rate": lambda doc: _times(_stage(doc)["realised"], "rate", 1.001),
    "delivered / a / tenants / realised.cv": lambda doc: _times(_stage(doc)["realised"], "cv", 1.001),
    "delivered / a / tenants / arrivals": lambda doc: _times(_stage(doc), "arrivals", 2),
    "delivered / a / tenants / concurrency.peak": lambda doc: _times(_stage(doc)["concurrency"], "peak", 2),
    "delivered / a / tenants / concurrency.mean": lambda doc: _times(
        _stage(doc)["concurrency"], "mean", 1.001
    ),
    "delivered / a / tenants / rate_error": lambda doc: _stage(doc).update(rate_error=0.5),
    "delivered / a / lengths.input_tokens.realised_mean": lambda doc: _times(
        doc["delivered"]["by_target"][ENGINE]["lengths"]["input_tokens"], "realised_mean", 1.01
    ),
    "tenants / a / gold / requests": lambda doc: _times(_gold(doc), "requests", 2),
    "tenants / a / gold / good": lambda doc: _gold(doc).update(good=_gold(doc)["good"] - 1),
    "tenants / a / gold / demand_per_s": lambda doc: _times(_gold(doc), "demand_per_s", 1.001),
    "tenants / a / gold / ttft_ms_p50": lambda doc: _times(_gold(doc), "ttft_ms_p50", 1.01),
    "tenants / a / gold / part long / ttft_ms.p90": lambda doc: _times(
        _gold(doc)["parts"]["long"]["ttft_ms"], "p90", 1.01
    ),
    "tenants / a / window_s": lambda doc: _times(doc["tenants"]["by_target"][ENGINE], "window_s", 1.001),
    "tenants / a / jain_fairness": lambda doc: doc["tenants"]["by_target"][ENGINE].update(jain_fairness=0.5),
    "timeseries / a / Σ ok": lambda doc: doc["engines"][ENGINE]["timeseries"]["ok"].append(1),
    "engines / a / server_breakdown.requests_not_reported": lambda doc: _times(
        doc["engines"][ENGINE]["server_breakdown"], "requests_not_reported", 2
    ),
}


@pytest.mark.parametrize("figure", sorted(TAMPERED))
def test_a_wrong_figure_is_named(tmp_path, capsys, figure):
    assert main(["-q", str(_copy(tmp_path, TAMPERED[figure]))]) == 1
    out = capsys.readouterr().out
    assert f"DISAGREES {figure}" in out, out


def _fit(doc: dict[str, Any]) -> dict[str, Any]:
    (row,) = doc["delivered"]["by_target"]["openai"]["stages"].values()
    return dict(row["fit"])


def _set_fit(doc: dict[str, Any], **changes: Any) -> None:
    (row,) = doc["delivered"]["by_target"]["openai"]["stages"].values()
    row["fit"].update(changes)


FIT = {
    "fit.statistic": lambda doc: _set_fit(doc, statistic=_fit(doc)["statistic"] * 1.01),
    "fit.p_value": lambda doc: _set_fit(doc, p_value=_fit(doc)["p_value"] - 0.01),
    "fit.consistent (as asked)": lambda doc: _set_fit(doc, consistent=False),
    "fit.resolution_ms": lambda doc: _set_fit(doc, resolution_ms=1.0),
    "fit.gaps": lambda doc: _set_fit(doc, gaps=_fit(doc)["gaps"] + 1),
    "fit.test": lambda doc: _set_fit(doc, test="ks vs gamma"),
}


def test_the_poisson_run_verifies_with_its_fit(tmp_path, capsys):
    assert main([str(_copy(tmp_path, data=POISSON))]) == 0
    out = capsys.readouterr().out
    assert "DISAGREES" not in out and "fit" not in out, out  # nothing of the fit said unchecked


@pytest.mark.parametrize("figure", sorted(FIT))
def test_a_wrong_fit_is_named(tmp_path, capsys, figure):
    assert main(["-q", str(_copy(tmp_path, FIT[figure], POISSON))]) == 1
    out = capsys.readouterr().out
    assert f"DISAGREES delivered / openai / main / {figure}: report" in out, out
