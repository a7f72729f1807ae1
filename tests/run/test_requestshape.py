"""--extra-body, --header, --exact-output parsing, and dropping refused body fields."""

from __future__ import annotations

import argparse

import orjson
import pytest

from loadkit.run.requestshape import (
    DropFields,
    RequestOptionError,
    RequestShape,
    parse_exact_output,
    parse_extra_body,
    parse_headers,
    remove_path,
)
from loadkit.servers.targets import TargetSpec, build_target
from loadkit.types import GenerationRequest


def test_extra_body_is_a_json_object_or_a_clear_error():
    assert parse_extra_body('  {"temperature": 0, "stop": ["x"]} ') == {"temperature": 0, "stop": ["x"]}
    assert parse_extra_body("") == {}
    for text, says in (("{temperature: 0}", "not valid JSON"), ("[1, 2]", "must be a JSON object")):
        with pytest.raises(RequestOptionError) as err:
            parse_extra_body(text)
        assert str(err.value).startswith("--extra-body: ") and says in str(err.value)


def test_headers_from_the_command_line_and_from_the_web_form():
    assert parse_headers(["X-Route: blue", "Authorization: Bearer abc"]) == {"X-Route": "blue",
                                                                             "Authorization": "Bearer abc"}  # fmt: skip
    # The web UI's form: one string, or a list Locust cut at every comma.
    assert parse_headers("X-A: 1, X-B: a, b") == {"X-A": "1", "X-B": "a, b"}
    assert parse_headers(["X-A: 1", " X-B: a", " b"]) == {"X-A": "1", "X-B": "a, b"}
    assert parse_headers(None) == {} and parse_headers("") == {}


@pytest.mark.parametrize(
    ("value", "says"),
    [("no colon here", "without a colon"), ("Bad Name: x", "expected 'Name: value'"),
     ("Host: evil", "writes this header itself"), ("Content-Length: 5", "writes this header itself")],
)  # fmt: skip
def test_bad_headers_name_the_option_never_the_value(value, says):
    with pytest.raises(RequestOptionError) as err:
        parse_headers([value + "-s3cr3t"])
    assert str(err.value).startswith("--header") and says in str(err.value) and "s3cr3t" not in str(err.value)


def test_exact_output_from_flags_and_form():
    assert parse_exact_output(None) is None and parse_exact_output(False) is False
    assert (
        parse_exact_output("true") is True
        and parse_exact_output("false") is False
        and parse_exact_output("") is None
    )
    with pytest.raises(RequestOptionError):
        parse_exact_output("maybe")


def test_apply_merges_user_fields_over_loadkits_and_masks_headers():
    target = build_target(TargetSpec("t", "http://127.0.0.1:9", "vllm"), None, None)
    options = argparse.Namespace(extra_body='{"ignore_eos": false, "top_p": 0.5}', header=["X-Key: k1"])
    shape = RequestShape.from_options(options)
    shape.apply(target, [])
    http = target.adapter.build_request(GenerationRequest(prompt="x", max_tokens=4))
    body = orjson.loads(http.body)
    assert body["ignore_eos"] is False and body["top_p"] == 0.5 and body["min_tokens"] == 4
    assert http.headers["X-Key"] == "k1"
    assert shape.manifest() == {"extra_body": {"ignore_eos": False, "top_p": 0.5}, "headers": {"X-Key": "***"},
                                "exact_output": None}  # fmt: skip


def test_dropped_paths_leave_the_body_and_only_them():
    target = build_target(TargetSpec("t", "http://127.0.0.1:9", "vllm"), None, None)
    RequestShape().apply(target, ["ignore_eos", "stream_options.continuous_usage_stats", "not.there"])
    assert isinstance(target.adapter.build_request, DropFields)
    body = orjson.loads(target.adapter.build_request(GenerationRequest(prompt="x", max_tokens=4)).body)
    assert "ignore_eos" not in body and body["min_tokens"] == 4
    assert body["stream_options"] == {"include_usage": True}
    # Applying again (a new run's decision) replaces, never stacks.
    RequestShape().apply(target, ["min_tokens"])
    body = orjson.loads(target.adapter.build_request(GenerationRequest(prompt="x", max_tokens=4)).body)
    assert body["ignore_eos"] is True and "min_tokens" not in body


def test_remove_path():
    body = {"a": {"b": 1, "c": 2}, "d": 3}
    assert (
        remove_path(body, ["a", "b"])
        and not remove_path(body, ["a", "x"])
        and not remove_path(body, ["d", "e"])
    )
    assert body == {"a": {"c": 2}, "d": 3}
