"""`loadkit run --sim`: the values it takes, the profile each simulator gets, and when
`loadkit run` starts one for the scenario by itself (loadkit/cli/simspec.py)."""

from __future__ import annotations

import pytest

from loadkit.cli.simspec import SimSpec, parse_sim, plan
from loadkit.errors import UserError


@pytest.fixture(autouse=True)
def no_target_env(monkeypatch):
    for name in ("LOCUST_HOST", "LOADKIT_TARGET", "LOADKIT_TARGETS", "LOADKIT_SCENARIO"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    ("value", "spec"),
    [
        ("a=fast", SimSpec("a", "fast", 0)),
        ("fast", SimSpec("fast", None, 0)),
        ("a=fast,port=8001", SimSpec("a", "fast", 8001)),
        ("a,port=8001", SimSpec("a", None, 8001)),
        (" a = big , port = 0 ", SimSpec("a", "big", 0)),
    ],
)
def test_a_sim_value_takes_a_name_a_profile_and_a_port(value, spec):
    assert parse_sim(value) == spec


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("=fast", "--sim '=fast': expected NAME[=PROFILE][,port=PORT]"),
        ("a=huge", "--sim 'a=huge': unknown profile 'huge' (choose from default, fast, big, long)"),
        ("a=fast:8001", "--sim 'a=fast:8001': unknown profile 'fast:8001'"),
        ("a=fast,prot=8001", "--sim 'a=fast,prot=8001': unknown part 'prot=8001'; allowed keys: port"),
        (
            "a=fast,port=http",
            "--sim 'a=fast,port=http': port: expected an integer 0-65535 (0 = any free port), got 'http'",
        ),
        ("a=fast,port=70000", "--sim 'a=fast,port=70000': port: expected an integer 0-65535"),
    ],
)
def test_a_bad_sim_value_is_refused_naming_it(value, says):
    with pytest.raises(UserError) as info:
        parse_sim(value)
    assert str(info.value).startswith(says)


def profiles(sims: list[SimSpec]) -> list[tuple[str, str | None, int]]:
    return [(s.name, s.profile, s.port) for s in sims]


def test_each_simulator_gets_the_profile_asked_else_the_scenario_s():
    long_scenario = ["--scenario", "mooncake_replay"]
    sims, notes = plan([parse_sim("a,port=8001"), parse_sim("fast"), parse_sim("b=default")], long_scenario)
    assert profiles(sims) == [("a", "long", 8001), ("fast", "fast", 0), ("b", "default", 0)]
    assert notes == [
        "simulator 'fast' has profile 'fast' (context 8192); scenario 'mooncake-replay' names profile 'long' "
        "(context 131072) in [sim]: requests longer than 8192 tokens will get the engine's 400",
        "simulator 'b' has profile 'default' (context 8192); scenario 'mooncake-replay' names profile 'long' "
        "(context 131072) in [sim]: requests longer than 8192 tokens will get the engine's 400",
    ]
    sims, notes = plan([parse_sim("a")], ["--scenario=uneven_chat"])  # names no profile: the default
    assert profiles(sims) == [("a", "default", 0)] and notes == []


def test_without_sim_or_target_the_scenario_s_simulator_is_started(monkeypatch):
    sims, notes = plan([], ["--scenario", "mooncake_replay", "-t", "3s"])
    assert profiles(sims) == [("sim", "long", 0)]
    assert notes == [
        "no --sim, --host or --target given: starting simulator 'sim' for scenario 'mooncake-replay'"
    ]
    assert profiles(plan([], [])[0]) == [("sim", "default", 0)]  # the default scenario, uneven_chat
    # A target anywhere, a worker (its master gives the targets), or a scenario naming its own: none.
    for rest in (["--host", "http://127.0.0.1:8000"], ["-H", "http://h:1"], ["--target=a=http://h:1"],
                 ["--worker"], ["--scenario", "real_server"]):  # fmt: skip
        assert plan([], rest) == ([], []), rest
    monkeypatch.setenv("LOCUST_HOST", "http://127.0.0.1:8000")
    assert plan([], ["--scenario", "mooncake_replay"]) == ([], [])
    # A scenario that does not load: Locust's start says why; no simulator is guessed for it.
    assert plan([], ["--scenario", "no/such.toml"]) == ([], [])


def test_a_host_in_a_locust_config_file_is_a_target_too(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.locust.conf of the machine's
    assert profiles(plan([], ["--scenario", "uneven_chat"])[0]) == [("sim", "default", 0)]
    (tmp_path / "locust.conf").write_text("headless = true\nhost = http://127.0.0.1:8000\n")
    assert plan([], ["--scenario", "uneven_chat"]) == ([], [])
    (tmp_path / "locust.conf").unlink()
    (tmp_path / "pyproject.toml").write_text('[tool.locust]\ntarget = ["a=http://127.0.0.1:8000"]\n')
    assert plan([], ["--scenario", "uneven_chat"]) == ([], [])
    (tmp_path / "pyproject.toml").unlink()
    (tmp_path / "mine.conf").write_text("host = http://h:1\n")
    assert plan([], ["--config", "mine.conf", "--scenario", "uneven_chat"]) == ([], [])
