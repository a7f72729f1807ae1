"""A ServeGen reasoning window's reason_ratio becomes each request's expected split (issue 34).

Before: the field was read and warned about as ignored; the requests carried no split and sent
no reasoning-length hint."""

from __future__ import annotations

import json

import numpy as np
import pytest

from loadkit.cli import main as loadkit_main
from loadkit.types import GenerationRequest
from loadkit.workload import ScenarioError, load_scenario
from loadkit.workload.paths import PACKAGE_DATA
from loadkit.workload.reasoning import apply_split, expected_split
from loadkit.workload.servegen import reason_ratios, synthesise
from loadkit.workload.tracereader import TraceReadError
from tests.workload.test_servegen_bounds import write_chunk

REASON14 = PACKAGE_DATA / "traces" / "servegen" / "reason-deepseek-r1" / "chunk-14-trace.csv"
ROWS = "".join(f"{600 * i},0.05,1.0,Gamma,1,1\n" for i in range(108))  # 0-64,800 s, 30 a window
DAY1 = "".join(f"{600 * i},0.05,1.0,Gamma,1,1\n" for i in range(36))  # the first dataset window only


def window(output: str, ratio: str | None) -> str:
    extra = "" if ratio is None else f', "reason_ratio": {ratio}'
    return f'{{"input_tokens": "{{10: 1.0}}", "output_tokens": "{output}"{extra}}}'


def requests(write_scenario, path, extra: str = "", name: str = "s.toml") -> list[GenerationRequest]:
    src = load_scenario(
        write_scenario(
            f'[arrival]\nmodel = "trace"\n[trace]\nformat = "servegen"\npath = "{path}"\n{extra}', name=name
        )
    ).request_source()
    out = []
    while (item := src.next_item()) is not None:
        assert isinstance(item, GenerationRequest)
        out.append(item)
    return out


def test_the_split_is_output_times_ratio_and_the_rest():
    assert expected_split(300, 0.8) == (240, 60)
    assert expected_split(7, 0.5) == (4, 3)  # round half to even: 3.5 -> 4
    assert expected_split(5, 1.0) == (5, 0) and expected_split(5, 0.0) == (0, 5)
    req = apply_split(GenerationRequest(max_tokens=100), 0.37, hint=True)
    assert (req.expected_reasoning_tokens, req.expected_answer_tokens, req.reasoning_hint) == (37, 63, True)
    plain = apply_split(
        GenerationRequest(max_tokens=100), float("nan"), hint=True
    )  # a window without a ratio
    assert plain.expected_reasoning_tokens is None and not plain.reasoning_hint


def test_each_request_carries_the_split_of_its_windows_ratio(tmp_path, write_scenario):
    # Window 0: a point mass (dict literal); 21,600: a bare number; 43,200: none given ("{}").
    dataset = {"0": window("{300: 1.0}", '"{0.25: 1.0}"'), "21600": window("{200: 1.0}", "0.8"),
               "43200": window("{100: 1.0}", '"{}"')}  # fmt: skip
    path = write_chunk(tmp_path, ROWS, dataset, n=5)
    reqs = requests(write_scenario, path)
    assert len(reqs) == 3 * 36 * 30
    split = {
        (r.max_tokens, r.expected_reasoning_tokens, r.expected_answer_tokens, r.reasoning_hint) for r in reqs
    }
    assert split == {(300, 75, 225, True), (200, 160, 40, True), (100, None, None, False)}
    # The clip applies first: the split is of what is asked.
    clipped = requests(
        write_scenario, path, "max_output_tokens = 40\nreasoning_hint = false\n", name="c.toml"
    )
    assert {(r.max_tokens, r.expected_reasoning_tokens, r.reasoning_hint) for r in clipped} == {
        (40, 10, False), (40, 32, False), (40, None, False)}  # fmt: skip


def test_a_distribution_is_drawn_per_request_and_lengths_do_not_move(tmp_path, write_scenario):
    dataset = {"0": window("{100: 0.5, 200: 0.5}", '"{0.2: 0.5, 0.6: 0.5}"')}
    path = write_chunk(tmp_path, DAY1, dataset, n=6)
    reqs = requests(write_scenario, path)
    shares = np.asarray([r.expected_reasoning_tokens / r.max_tokens for r in reqs])
    assert set(np.round(shares, 6)) == {0.2, 0.6}
    assert abs(shares.mean() - 0.4) < 0.06, shares.mean()  # 1,080 draws of a fair coin
    # The ratio draws have their own stream: the lengths are those of the file without them.
    (tmp_path / "bare").mkdir()
    bare = write_chunk(tmp_path / "bare", DAY1, {"0": window("{100: 0.5, 200: 0.5}", None)}, n=6)
    assert [r.max_tokens for r in reqs] == [
        r.max_tokens for r in requests(write_scenario, bare, name="b.toml")
    ]


def test_the_shipped_reasoning_sample_gives_each_window_its_own_share():
    t, _, n_out = synthesise(REASON14, 0, 43_200.0, 86_400.0)
    ratio = reason_ratios(REASON14, 0, t)
    assert ratio is not None and not np.isnan(ratio).any()
    early, late = t < 64_800, t >= 64_800
    # chunk-14's dataset: mean reason_ratio 0.751 (43,200 s window), 0.370 (64,800 s window)
    assert abs(ratio[early].mean() - 0.751) < 0.02 and abs(ratio[late].mean() - 0.370) < 0.02
    assert len(t) > 1000 and n_out.min() >= 1


def test_bad_ratios_and_a_hint_without_servegen_are_named(tmp_path, write_scenario):
    path = write_chunk(tmp_path, DAY1, {"0": window("{5: 1.0}", '"{1.5: 1.0}"')}, n=8)
    with pytest.raises(TraceReadError, match=r"chunk-8-dataset\.json: window 0: reason_ratio: expected ratios in "
                                             r"\[0, 1\] \(a share of the output\), got 1\.5"):  # fmt: skip
        synthesise(path, 0, None, None)
    other = write_chunk(tmp_path, DAY1, {"0": window("{5: 1.0}", '"{0.5: 0.7}"')}, n=9)
    with pytest.raises(
        ScenarioError, match=r"window 0: reason_ratio: expected probabilities >= 0 summing to 1"
    ):
        requests(write_scenario, other, name="o.toml")
    csv = tmp_path / "t.csv"
    csv.write_text("input,output\n10,5\n")
    with pytest.raises(ScenarioError, match=r"trace\.reasoning_hint: expected reasoning_hint only with format "
                                            r"'servegen'"):  # fmt: skip
        load_scenario(write_scenario(f'[trace]\nformat = "lengths"\npath = "{csv}"\nreasoning_hint = true\n',
                                     name="l.toml"))  # fmt: skip


def test_traces_inspect_gives_the_expected_share(capsys):
    assert loadkit_main(["traces", "inspect", str(REASON14), "--start-s", "43200", "--end-s", "64800"]) == 0
    text = capsys.readouterr().out
    assert "reasoning (reason_ratio): expected share 7" in text and "ratio mean 0.75" in text
    assert loadkit_main(["traces", "inspect", str(REASON14), "--json"]) == 0
    split = json.loads(capsys.readouterr().out)["reasoning"]
    assert split["requests_with_ratio"] > 3000 and 0.4 < split["expected_share"] < 0.7
