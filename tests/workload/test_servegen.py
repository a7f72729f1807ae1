"""ServeGen: arrivals synthesised per window from rate, CV and family; lengths per dataset window."""

from __future__ import annotations

import numpy as np
import pytest

from loadkit.imagetokens import image_tokens, size_for_tokens
from loadkit.workload import ScenarioError, load_scenario
from loadkit.workload.paths import PACKAGE_DATA
from loadkit.workload.servegen import image_tokens_for, read_lengths, read_windows, synthesise, weibull_shape
from loadkit.workload.tracereader import TraceReadError

SAMPLE = PACKAGE_DATA / "traces" / "servegen" / "language-m-mid"
CHUNK0 = SAMPLE / "chunk-0-trace.csv"


def test_every_window_holds_the_files_rate_and_gamma_windows_its_cv():
    win = read_windows(str(CHUNK0))
    lo, hi = 206400.0, 212400.0  # ten Gamma windows at ~28 req/s, CV ~1.0-1.8
    t, n_in, n_out = synthesise(CHUNK0, 3, lo, hi)
    assert np.all(np.diff(t) >= 0) and t.min() >= lo and t.max() < hi
    for i in np.flatnonzero((win.start >= lo) & (win.start < hi)):
        w0, rate, cv = float(win.start[i]), float(win.rate[i]), float(win.cv[i])
        mine = t[(t >= w0) & (t < w0 + 600)]
        assert len(mine) / 600 == pytest.approx(rate, abs=1 / 600)  # count is rate × window, rounded
        gaps = np.diff(mine)
        assert gaps.std(ddof=1) / gaps.mean() == pytest.approx(cv, rel=0.12), (w0, cv)


def test_lengths_come_from_the_window_they_fall_in():
    tables = read_lengths(str(SAMPLE / "chunk-0-dataset.json"))
    t, n_in, n_out = synthesise(CHUNK0, 5, 206400, 207600)
    j = tables.at(206400)
    assert tables.starts[j] == 194400
    support_in, support_out = set(tables.inputs[j][0].tolist()), set(tables.outputs[j][0].tolist())
    assert set(n_in.tolist()) <= support_in and set(n_out.tolist()) <= support_out
    values, probs = tables.inputs[j]
    assert n_in.mean() == pytest.approx(float((values * probs).sum()), rel=0.05)


def test_same_seed_same_requests_other_seed_other_gaps():
    a = synthesise(CHUNK0, 1, 157200, 157800)
    b = synthesise(CHUNK0, 1, 157200, 157800)
    c = synthesise(CHUNK0, 2, 157200, 157800)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert len(a[0]) == len(c[0]) and not np.array_equal(a[0], c[0])


@pytest.mark.parametrize("cv", [0.5, 1.0, 2.3, 6.0])
def test_weibull_shape_gives_the_asked_cv(cv):
    k = weibull_shape(cv)
    draws = np.random.default_rng(0).weibull(k, 400_000)
    assert draws.std() / draws.mean() == pytest.approx(cv, rel=0.05 if cv < 3 else 0.2)


def test_scenario_replays_a_window_rebased(write_scenario):
    sc = load_scenario(
        write_scenario(
            f'[arrival]\nmodel = "trace"\n[trace]\nformat = "servegen"\n'
            f'path = "{CHUNK0}"\nstart_s = 157200\nend_s = 157800\nspeed = 2\n'
        )
    )
    src = sc.request_source()
    times = src.trace_arrival_times_s()
    assert len(times) == round(5.1433333 * 600) and 0 <= times[0] and times[-1] < 300
    first = src.next_item()
    assert first.label == "servegen" and first.n_in_target >= 1


def test_shipped_servegen_scenario_loads():
    src = load_scenario("servegen_language").request_source()
    assert len(src.trace_arrival_times_s()) == round(5.14333333 * 600) + round(3.29833333 * 600)


def test_shipped_servegen_reasoning_scenario_loads_with_a_split_per_request():
    src = load_scenario("servegen_reasoning").request_source()
    rates = (0.39833333333333336, 0.51166666666666671, 0.34833333333333333, 0.35166666666666668)
    assert len(src.trace_arrival_times_s()) == sum(round(r * 600) for r in rates)
    first = src.next_item()
    assert first is not None and first.expected_reasoning_tokens is not None and first.reasoning_hint
    assert first.expected_reasoning_tokens + first.expected_answer_tokens == first.max_tokens


def test_errors_name_file_and_line(tmp_path, write_scenario):
    bad = tmp_path / "chunk-9-trace.csv"
    bad.write_text("0,0,0,,0,0\n600,1.5,x,Gamma,1,1\n")
    (tmp_path / "chunk-9-dataset.json").write_text(
        '{"0": {"input_tokens": "{10: 1.0}", "output_tokens": "{2: 1.0}"}}'
    )
    with pytest.raises(
        TraceReadError, match=r"chunk-9-trace\.csv: line 2: expected cv as a non-negative number"
    ):
        read_windows(str(bad))
    bad.write_text("0,0,0,,0,0\n600,1.5,1.2,Lognormal,1,1\n")
    with pytest.raises(ScenarioError, match=r"line 2: expected the fitted distribution Gamma or Weibull"):
        load_scenario(write_scenario(f'[trace]\nformat = "servegen"\npath = "{bad}"\n'))
    other = tmp_path / "rates.csv"
    other.write_text("0,1,1,Gamma,1,1\n")
    with pytest.raises(ScenarioError, match=r"expected a ServeGen trace named chunk-N-trace\.csv"):
        load_scenario(write_scenario(f'[trace]\nformat = "servegen"\npath = "{other}"\n', name="o.toml"))


MM_OK = (
    '"text_tokens": "{40: 1.0}", "output_tokens": "{2: 1.0}", "audio_tokens": "{0: 1.0}", '
    '"video_tokens": "{0: 1.0}", "audio_count": "{0: 1.0}", "video_count": "{0: 1.0}"'
)


@pytest.mark.parametrize(
    ("window", "message"),
    [
        # Each image's tokens without the count: the missing field is named.
        (
            '{"image_tokens": "{576: 1.0}", "output_tokens": "{2: 1.0}"}',
            r"chunk-7-dataset\.json: window 0: image_count: expected the multimodal field 'image_count' "
            r"\(found 'image_tokens', 'output_tokens'\)",
        ),
        # A malformed count: file, window and field named.
        (
            '{"image_count": "{1: 0.5, 2: 0.4}", "image_tokens": "{576: 1.0}", ' + MM_OK + "}",
            r"chunk-7-dataset\.json: window 0: image_count: expected probabilities summing to 1, they sum to 0\.9",
        ),
        (
            '{"image_count": "{1: 1.0}", "image_tokens": "{-5: 1.0}", ' + MM_OK + "}",
            r"window 0: image_tokens: expected whole numbers >= 0 as values, got -5",
        ),
        (
            '{"image_count": "{1: 1.0}", "image_tokens": "[576]", ' + MM_OK + "}",
            r"window 0: image_tokens: expected a dict \{value: probability\}, got list",
        ),
        (
            '{"image_count": "{1: 1.0}", "image_tokens": "{0: 1.0}", ' + MM_OK + "}",
            r"window 0: field 'image_tokens': expected tokens > 0 for the images image_count asks for",
        ),
        # Audio asked for: refused rather than sent lighter than the trace.
        (
            '{"image_count": "{1: 1.0}", "image_tokens": "{576: 1.0}", '
            + MM_OK.replace('"audio_count": "{0: 1.0}"', '"audio_count": "{0: 0.5, 1: 0.5}"')
            + "}",
            r"window 0: field 'audio_count': asks for audio inputs, which loadkit does not send",
        ),
        # The text length is text_tokens in a multimodal window.
        (
            '{"input_tokens": "{10: 1.0}", "output_tokens": "{2: 1.0}", "image_count": "{1: 1.0}", '
            '"image_tokens": "{4: 1.0}"}',
            r"window 0: text_tokens: expected an object with 'text_tokens'",
        ),
        # Not multimodal, just missing: the keys it found are named.
        (
            '{"prompt_len": "{10: 1.0}", "output_tokens": "{2: 1.0}"}',
            r"expected an object with 'input_tokens' \(found 'prompt_len', 'output_tokens'\)",
        ),
    ],
)
def test_malformed_multimodal_datasets_name_file_window_and_field(tmp_path, window, message):
    (tmp_path / "chunk-7-dataset.json").write_text('{"0": ' + window + "}")
    with pytest.raises(TraceReadError, match=message):
        read_lengths(str(tmp_path / "chunk-7-dataset.json"))


def test_multimodal_windows_draw_image_counts_and_tokens_per_image(tmp_path):
    """ServeGen's own reading (construct.py): a count per request, then one tokens draw per image."""
    (tmp_path / "chunk-7-dataset.json").write_text(
        '{"0": {"image_count": "{1: 0.5, 3: 0.5}", "image_tokens": "{100: 0.5, 400: 0.5}", ' + MM_OK + "}}"
    )
    (tmp_path / "chunk-7-trace.csv").write_text("0,20,1.0,Gamma,1,1\n")
    trace = tmp_path / "chunk-7-trace.csv"
    t, n_in, _ = synthesise(trace, 1, None, None)
    images = image_tokens_for(trace, 1, t)
    assert images is not None and len(images) == len(t) == 12000 and set(n_in) == {40}
    counts = np.asarray([len(x) for x in images])
    assert set(counts) == {1, 3} and (counts == 3).mean() == pytest.approx(0.5, abs=0.02)
    tokens = np.asarray([n for x in images for n in x])
    assert set(tokens) == {100, 400} and (tokens == 400).mean() == pytest.approx(0.5, abs=0.02)
    assert image_tokens_for(trace, 1, t) == images  # a pure function of (file, seed, time)


@pytest.mark.parametrize("tokens", [*range(0, 300), 576, 1023, 1247, 1277, 1280, 1500])
def test_the_size_for_image_tokens_is_charged_those_tokens(tokens):
    """The inversion (imagetokens.py): exact for every count with a grid of <= 292 cells a side,
    at most 2 off for the rest (large primes); clamped to the family's [4, 1,280]."""
    w, h = size_for_tokens(tokens)
    want = min(max(tokens, 4), 1280)
    assert w % 28 == 0 and h % 28 == 0 and h <= w <= 8192
    assert abs(image_tokens(w, h) - want) <= (0 if want <= 292 else 2)


MM11 = PACKAGE_DATA / "traces" / "servegen" / "mm-image" / "chunk-11-trace.csv"


def test_shipped_servegen_mm_scenario_sends_its_images_as_content_parts():
    src = load_scenario("servegen_mm").request_source()
    first = src.next_item()
    assert first is not None and first.image_count and first.image_tokens_expected
    parts = first.messages[-1]["content"]
    assert parts[0]["type"] == "text" and len(parts) == 1 + first.image_count
    assert all(p["image_url"]["url"].startswith("data:image/png;base64,") for p in parts[1:])


@pytest.mark.parametrize(
    ("images", "message"),
    [
        ("count = 2\n", r"images\.count: expected only format, quality, transport, url_host, url_port"),
        ('format = "mix"\n', r"images\.format"),
        ("url_port = 9000\n", r'images\.url_port: expected url_port only with transport = "url"'),
    ],
)
def test_images_beside_a_servegen_trace_take_only_how_they_are_sent(write_scenario, images, message):
    text = (
        f'[trace]\nformat = "servegen"\npath = "{MM11}"\nstart_s = 55800\nend_s = 55900\n[images]\n{images}'
    )
    with pytest.raises(ScenarioError, match=message):
        load_scenario(write_scenario(text))


def test_images_beside_a_text_servegen_trace_are_refused(write_scenario):
    text = f'[trace]\nformat = "servegen"\npath = "{CHUNK0}"\nstart_s = 206400\nend_s = 206500\n[images]\n'
    src = load_scenario(write_scenario(text)).request_source()
    with pytest.raises(ScenarioError, match=r"images: expected a multimodal ServeGen dataset"):
        src.next_item()
