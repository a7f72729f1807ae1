"""Scenario validation: shipped files validate; invalid ones are refused with file, key path, expectation."""

from __future__ import annotations

import pytest

from loadkit.cli import main as loadkit_main
from loadkit.workload import SCHEMA, ScenarioError, load_scenario
from loadkit.workload.shipped import shipped_scenarios

SCENARIOS = list(shipped_scenarios().values())
PART = '[[parts]]\nname = "p"\ninput = 10\noutput = 5\n'


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.name)
def test_every_shipped_scenario_validates_and_yields_items(path):
    sc = load_scenario(path)
    assert sc.raw["schema"] == SCHEMA and len(sc.sha256) == 64
    item = sc.request_source().next_item()
    assert item is not None


def test_required_kinds_are_shipped():
    names = {p.stem for p in SCENARIOS}
    assert {
        "uneven_chat",
        "long_context_summarisation",
        "code_completion",
        "agent-multiturn",
        "azure_conversation_replay",
        "mooncake_replay",
    } <= names


def test_exposed_fields(write_scenario):
    path = write_scenario(
        """
        duration_s = 30
        max_requests = 100
        [[targets]]
        name = "sim"
        url = "http://127.0.0.1:8000"
        engine = "openai"
        model = "m"
        [slos]
        ttft_ms = 500
        tpot_ms = 50
        [arrival]
        model = "gamma"
        rate = 5.0
        cv = 2.0
        stages = [ { duration_s = 10, rate = 1.0 }, { duration_s = 20, rate = 4.0, cv = 1.0 } ]
    """
        + PART
    )
    sc = load_scenario(path)
    assert sc.name == "t" and sc.seed == 1 and sc.duration_s == 30 and sc.max_requests == 100
    assert sc.targets == [
        {"name": "sim", "url": "http://127.0.0.1:8000", "engine": "openai", "api": "chat", "model": "m"}
    ]
    assert sc.slos == {"ttft_ms": 500, "tpot_ms": 50}
    assert sc.arrival == {
        "model": "gamma",
        "rate": 5.0,
        "cv": 2.0,
        "stages": [{"duration_s": 10, "rate": 1.0, "cv": 2.0}, {"duration_s": 20, "rate": 4.0, "cv": 1.0}],
    }


@pytest.mark.parametrize(
    "body, where, expected",
    [
        ("seed = 1\n" + PART, "name", "required key is missing"),
        ('name = "t"\nseed = "x"\n' + PART, "seed", "expected an integer"),
        ('name = "t"\nseed = 1\nsed = 2\n' + PART, "sed", "did you mean 'seed'"),
        ('name = "t"\nseed = 1\n', "(top level)", "expected exactly one of"),
        (
            'name = "t"\nseed = 1\n[[parts]]\nname = "p"\ninput = { dist = "lognormal", mean = -1, std = 1 }\noutput = 1\n',
            "parts[0].input.mean",
            "expected a number >= 1e-06",
        ),
        (
            'name = "t"\nseed = 1\n[[parts]]\nname = "p"\ninput = { dist = "gama", mean = 1 }\noutput = 1\n',
            "parts[0].input.dist",
            "expected one of",
        ),
        (
            'name = "t"\nseed = 1\n[[parts]]\nname = "p"\ninput = { dist = "uniform", low = 5, hihg = 9 }\noutput = 1\n',
            "parts[0].input.hihg",
            "did you mean 'high'",
        ),
        (
            'name = "t"\nseed = 1\n[arrival]\nmodel = "poisson"\n' + PART,
            "arrival.rate",
            "required key is missing",
        ),
        ('name = "t"\nseed = 1\n[arrival]\nmodel = "trace"\n' + PART, "arrival.model", "expected a [trace]"),
        (
            'name = "t"\nseed = 1\n[[targets]]\nname = "a"\nurl = "127.0.0.1:80"\n' + PART,
            "targets[0].url",
            "expected an http://",
        ),
        (
            'name = "t"\nseed = 1\n[trace]\nformat = "azure"\npath = "nope.csv"\n',
            "trace.path",
            "expected an existing file",
        ),
        (
            'name = "t"\nseed = 1\n[sessions]\nturns = 3\nuser_tokens = 5\n',
            "sessions.output_tokens",
            "missing",
        ),
        (
            'name = "t"\nseed = 1\n[sessions]\nturns = 3\nuser_tokens = 5\noutput_tokens = 5\n'
            'context = { max_tokens = 100, policy = "drop" }\n',
            "sessions.context.policy",
            "expected one of",
        ),
    ],
)
def test_invalid_files_name_file_key_and_expectation(write_scenario, body, where, expected):
    path = write_scenario('schema = "loadkit.scenario/1"\n' + body, header=False)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    message = str(info.value)
    assert message.startswith(f"{path}: {where}: "), message
    assert expected in message and "\n" not in message


def test_wrong_schema_and_bad_toml(write_scenario):
    path = write_scenario('schema = "loadkit.scenario/2"\nname = "t"\nseed = 1\n' + PART, header=False)
    with pytest.raises(ScenarioError, match=r"schema: expected 'loadkit.scenario/1'"):
        load_scenario(path)
    path = write_scenario("schema = [", name="bad.toml", header=False)
    with pytest.raises(ScenarioError, match=r"bad.toml: \(top level\): expected valid UTF-8 TOML"):
        load_scenario(path)
    with pytest.raises(ScenarioError, match="cannot read file"):
        load_scenario(path.parent / "missing.toml")


def test_relative_trace_path_resolves_against_the_scenario_dir(write_scenario, tmp_path):
    (tmp_path / "lens.csv").write_text("a,b\n10,2\n20,3\n")
    path = write_scenario(
        '[trace]\nformat = "lengths"\npath = "lens.csv"\ninput_column = "a"\noutput_column = "b"\n'
    )
    source = load_scenario(path).request_source()
    assert [(r.n_in_target, r.max_tokens) for r in iter(source.next_item, None)] == [(10, 2), (20, 3)]


def test_cli_validate_exit_codes(write_scenario, capsys):
    good = write_scenario(PART, name="good.toml")
    bad = write_scenario("sed = 1\n" + PART, name="bad.toml")
    assert loadkit_main(["scenarios", "validate", str(good)]) == 0
    assert loadkit_main(["scenarios", "validate", str(good), str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad.toml: sed: unknown key (did you mean 'seed'?)" in err[0]


def test_cli_show_prints_lengths(write_scenario, capsys):
    path = write_scenario("max_requests = 2\n" + PART)
    assert loadkit_main(["scenarios", "show", str(path), "-n", "5"]) == 0
    out = capsys.readouterr().out
    assert out.count("n_in=10 max_tokens=5") == 2 and "(workload exhausted)" in out


def test_cli_show_bad_file_is_one_line(write_scenario, capsys):
    path = write_scenario("sed = 1\n" + PART)
    assert loadkit_main(["scenarios", "show", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_lengths_asked_echoes_the_file(write_scenario):
    sc = load_scenario(
        write_scenario('[[parts]]\nname = "p"\ninput = { dist = "uniform", low = 1, high = 9 }\noutput = 5\n')
    )
    assert sc.lengths_asked == {
        "parts": {"p": {"input": {"dist": "uniform", "low": 1, "high": 9}, "output": 5}}
    }
    sc = load_scenario(
        write_scenario(
            "[sessions]\nturns = 2\nuser_tokens = 5\noutput_tokens = 4\nlabels = {}\n", name="s2.toml"
        )
    )
    assert sc.lengths_asked == {"sessions": {"turns": 2, "user_tokens": 5, "output_tokens": 4}}


def test_prompt_shape_and_its_deprecated_old_name(write_scenario, caplog):
    def load(prompt: str, name: str = "s.toml"):
        return load_scenario(write_scenario(prompt + PART, name=name))

    assert load('[prompt]\nshape = "prompt"\n').prompt.shape == "prompt"
    assert load("[prompt]\n").prompt.shape == "messages"
    assert not caplog.records  # the new key: no message
    for old, new in (("completions", "prompt"), ("chat", "messages")):
        caplog.clear()
        assert load(f'[prompt]\napi = "{old}"\n', name=f"{old}.toml").prompt.shape == new
        (msg,) = [r.getMessage() for r in caplog.records]
        assert f"{old}.toml: prompt.api is deprecated" in msg and f'prompt.shape = "{new}"' in msg
    caplog.clear()
    load('[prompt]\napi = "chat"\n', name="chat.toml")
    assert not caplog.records  # once per file
    with pytest.raises(ScenarioError, match=r"prompt.api: give prompt.shape only"):
        load('[prompt]\napi = "chat"\nshape = "messages"\n')
    with pytest.raises(ScenarioError, match=r"prompt.shape"):
        load('[prompt]\nshape = "chat"\n')


def test_parts_send_tools_and_tool_choice(write_scenario):
    from loadkit.workload import load_scenario

    path = write_scenario("""
        [[parts]]
        name = "agent"
        input = { dist = "fixed", value = 20 }
        output = { dist = "fixed", value = 8 }
        tools = [{ type = "function", function = { name = "lookup", parameters = { type = "object" } } }]
        tool_choice = "required"

        [[parts]]
        name = "plain"
        input = { dist = "fixed", value = 20 }
        output = { dist = "fixed", value = 8 }
    """)
    src = load_scenario(path).request_source()
    reqs = [src.next_item() for _ in range(40)]
    agent = [r for r in reqs if r.label == "agent"]
    plain = [r for r in reqs if r.label == "plain"]
    assert agent and plain
    assert all(r.extra_body["tools"][0]["function"]["name"] == "lookup" for r in agent)
    assert all(r.extra_body["tool_choice"] == "required" for r in agent)
    assert all("tools" not in r.extra_body for r in plain)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ('tools = [{ type = "function" }]', "parts\\[0\\].tools: must be a non-empty list"),
        ('tool_choice = "auto"', "tool_choice: needs tools"),
        ('tools = [{ function = { name = "f" } }]\ntool_choice = "sometimes"', 'must be "auto"'),
    ],
)
def test_bad_part_tools_name_the_key(write_scenario, extra, message):
    from loadkit.workload import load_scenario
    from loadkit.workload.errors import ScenarioError

    path = write_scenario('[[parts]]\nname = "a"\ninput = 5\noutput = 5\n' + extra + "\n")
    with pytest.raises(ScenarioError, match=message):
        load_scenario(path)


def test_a_targets_gpu_metrics_url(write_scenario):
    body = '[[targets]]\nname = "v"\nurl = "http://127.0.0.1:8000"\ngpu_metrics = "http://10.0.3.17:9400/metrics"\n'
    sc = load_scenario(write_scenario(body + PART))
    assert sc.targets[0]["gpu_metrics"] == "http://10.0.3.17:9400/metrics"
    bad = write_scenario(
        '[[targets]]\nname = "v"\nurl = "http://127.0.0.1:8000"\ngpu_metrics = 9400\n' + PART
    )
    with pytest.raises(ScenarioError, match=r"targets\[0\]\.gpu_metrics: "):
        load_scenario(bad)
