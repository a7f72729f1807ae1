"""Per-event cost of the OpenAI chunk parser (the hot path), per channel, and the per-request
cost of turning its channel marks into the record's figures.

    python benchmarks/bench_parser.py                       # full run (~20 s on 2 cores)
    python benchmarks/bench_parser.py --quick               # a smoke check
    git show <rev>:loadkit/engines/openai.py > /tmp/openai_before.py
    python benchmarks/bench_parser.py --baseline /tmp/openai_before.py   # before/after

``--baseline`` loads another version of loadkit/engines/openai.py and times its parser on the
same chunks, so a change to the plain-token path shows up as a before/after pair.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import time
from typing import Any

from loadkit.client.channels import apply_channels
from loadkit.engines.base import AdapterOptions
from loadkit.engines.openai import OpenAIStreamParser
from loadkit.records import RequestRecord

HEAD = '{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
CHUNKS = {
    "answer": HEAD + '"delta":{"content":" word"},"logprobs":null,"finish_reason":null}]}',
    "reasoning": HEAD + '"delta":{"reasoning_content":" word"},"logprobs":null,"finish_reason":null}]}',
    "tool": HEAD + '"delta":{"tool_calls":[{"index":0,"function":{"arguments":" word"}}]},"logprobs":null,'
    '"finish_reason":null}]}',
}


def load_parser_class(path: str | None) -> Any:
    if path is None:
        return OpenAIStreamParser
    spec = importlib.util.spec_from_file_location("openai_baseline", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.OpenAIStreamParser


def ns_per_event(cls: Any, data: str, events: int, repeats: int) -> float:
    """Best of ``repeats`` runs of ``events`` parses on a fresh parser each (bound as the timer does)."""
    best = float("inf")
    for _ in range(repeats):
        parser = cls(chat=True)
        if hasattr(parser, "bind_channels"):
            parser.bind_channels([], AdapterOptions())
        parse = parser.parse
        t0 = time.perf_counter_ns()
        for _ in range(events):
            parse(data)
        best = min(best, (time.perf_counter_ns() - t0) / events)
    return best


def ns_per_request_apply(events: int, requests: int) -> float:
    """apply_channels on a reasoning-then-answer record of ``events`` events."""
    parser = OpenAIStreamParser(chat=True)
    rec = RequestRecord("r", "e", "openai")
    marks = parser.bind_channels(rec.event_t_ns, AdapterOptions())
    for i in range(events):
        parser.parse(CHUNKS["reasoning" if i < events // 2 else "answer"])
        rec.event_t_ns.append(i)
        rec.event_tokens.append(1)
    t0 = time.perf_counter_ns()
    for _ in range(requests):
        rec.t_first_reasoning_ns = rec.t_first_answer_ns = None
        apply_channels(rec, marks)
    return (time.perf_counter_ns() - t0) / requests


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--baseline", help="another loadkit/engines/openai.py to time on the same chunks")
    args = ap.parse_args()
    events, repeats = (20_000, 3) if args.quick else (200_000, 7)
    out: dict[str, Any] = {"events_per_run": events, "repeats": repeats}
    versions = {"ns_per_event": OpenAIStreamParser}
    if args.baseline:
        versions["baseline_ns_per_event"] = load_parser_class(args.baseline)
    best: dict[str, dict[str, float]] = {key: {} for key in versions}
    # Rounds alternate the versions, so load from other processes hits both alike; best of all.
    for _ in range(repeats):
        for key, cls in versions.items():
            for name, data in CHUNKS.items():
                value = ns_per_event(cls, data, events, 1)
                best[key][name] = min(best[key].get(name, value), value)
    for key, values in best.items():
        out[key] = {name: round(v, 1) for name, v in values.items()}
    out["apply_channels_us_per_request_1000_events"] = round(
        ns_per_request_apply(1000, 2000 if args.quick else 20000) / 1000, 2
    )
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
