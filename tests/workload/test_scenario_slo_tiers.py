"""[[slo_tiers]] and the targets' cost keys in a scenario: read, and bad ones named by file and key."""

from __future__ import annotations

import pytest

from loadkit.workload.scenario import load_scenario

HEAD = 'schema = "loadkit.scenario/1"\nname = "t"\nseed = 1\n'


def write(tmp_path, body):
    path = tmp_path / "s.toml"
    path.write_text(HEAD + body)
    return path


def test_tiers_and_target_prices_are_read(tmp_path):
    sc = load_scenario(
        write(
            tmp_path,
            """
[[targets]]
name = "a"
url = "http://127.0.0.1:1"
gpu_hour_cost = 2.5
gpus = 8

[[slo_tiers]]
name = "tight"
ttft_ms = 200
tpot_ms = 30

[[slo_tiers]]
name = "loose"
e2e_ms = 5000

[[parts]]
name = "p"
input = { dist = "fixed", value = 8 }
output = { dist = "fixed", value = 8 }
""",
        )
    )
    assert sc.slo_tiers == [{"name": "tight", "slos": {"ttft_ms": 200, "tpot_ms": 30}},
                            {"name": "loose", "slos": {"e2e_ms": 5000}}]  # fmt: skip
    assert (sc.targets[0]["gpu_hour_cost"], sc.targets[0]["gpus"]) == (2.5, 8)


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ('[[slo_tiers]]\nname = "a"\nttft = 1\n', "slo_tiers[0]"),
        ('[[slo_tiers]]\nname = "a"\nttft_ms = -1\n', "slo_tiers[0].ttft_ms"),
        ("[[slo_tiers]]\nttft_ms = 1\n", "slo_tiers[0]"),
        ('[[slo_tiers]]\nname = "a"\n', "names no SLO key"),
        (
            '[[slo_tiers]]\nname = "a"\nttft_ms = 1\n[[slo_tiers]]\nname = "a"\ne2e_ms = 1\n',
            "slo_tiers[1].name",
        ),
        ('[[targets]]\nname = "a"\nurl = "http://h:1"\ngpus = 0\n', "targets[0].gpus"),
    ],
)
def test_bad_tiers_name_the_file_and_key(tmp_path, body, where):
    with pytest.raises(Exception) as exc:
        load_scenario(write(tmp_path, body))
    text = str(exc.value)
    assert "s.toml" in text and where in text, text
