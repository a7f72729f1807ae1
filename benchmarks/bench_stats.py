"""Cost of loadkit's stats path: µs per request, µs per token, memory after 1M requests.

    python benchmarks/bench_stats.py            # full run (~1 min on 2 cores)
    python benchmarks/bench_stats.py --quick    # fewer records, for a smoke check
    python benchmarks/bench_stats.py --sections # with the built-in sections (stages, classes,
                                                # lengths, ...) fed as in a run: the whole path

Targets (issue): < 5 µs per request plus < 0.5 µs per token.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import time
import tracemalloc

from loadkit.records import RequestRecord
from loadkit.stats import Slo, StatsCollector

SLOS = (Slo("ttft_ms", 500.0), Slo("tpot_ms", 50.0), Slo("e2e_ms", 20_000.0))


def make_records(n: int, events: int, tokens_per_event: int = 1, seed: int = 1) -> list[RequestRecord]:
    """Realistic-looking records: jittered TTFT and ITL, a few labels and outcomes."""
    rng = random.Random(seed)
    base = time.perf_counter_ns()
    records = []
    for i in range(n):
        send = base + i * 1_000_000
        t = send + rng.randrange(20_000_000, 400_000_000)
        times = []
        for _ in range(events):
            times.append(t)
            t += rng.randrange(5_000_000, 60_000_000)
        records.append(
            RequestRecord(
                request_id=str(i),
                engine="sim",
                adapter="openai",
                label=f"l{i % 3}",
                outcome="ok" if i % 50 else "http_error:503",
                t_send_ns=send,
                event_t_ns=times,
                event_tokens=[tokens_per_event] * events,
                t_end_ns=times[-1] + 100_000,
                n_in=rng.randrange(100, 4000),
                n_out=events * tokens_per_event,
                n_out_source="usage",
                cached_tokens=rng.randrange(0, 100),
                stage="s1",
                user_class="Chat",
            )
        )  # fmt: skip  (read only by the sections)
    return records


def new_collector(sections: bool) -> StatsCollector:
    collector = StatsCollector(SLOS)
    if sections:
        from loadkit.stats.builtin import BuiltinSections

        BuiltinSections(collector).install()
        collector.reset()
    return collector


def per_record_us(records: list[RequestRecord], repeat: int = 5, sections: bool = False) -> float:
    """Best of ``repeat`` runs, in process CPU time: the machine is shared, wall time is noisy.

    Includes the final flush, so batched work is paid for in full.
    """
    best = float("inf")
    for _ in range(repeat):
        collector = new_collector(sections)
        gc.collect()
        start = time.process_time_ns()
        for record in records:
            collector.add(record)
        for group in collector.groups.values():
            group.flush()
        best = min(best, (time.process_time_ns() - start) / len(records) / 1000)
    return best


def memory_after(n: int) -> dict[str, float]:
    """Stats memory after ``n`` one-event records (records are recycled, not kept)."""
    template = make_records(1000, 4)
    tracemalloc.start()
    collector = StatsCollector(SLOS)
    for i in range(n):
        collector.add(template[i % 1000])
    current, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    report_start = time.perf_counter()
    collector.report()
    return {"records": n, "stats_mb": current / 2**20, "report_s": time.perf_counter() - report_start}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sections", action="store_true", help="feed the built-in sections too")
    args = parser.parse_args()
    n = 5_000 if args.quick else 50_000
    one = per_record_us(make_records(n, 1), sections=args.sections)
    few = per_record_us(make_records(n, 16), sections=args.sections)
    many_records = make_records(n // 50, 1000)
    many = per_record_us(many_records, sections=args.sections)
    coalesced = per_record_us(make_records(n // 50, 250, tokens_per_event=4), sections=args.sections)
    result = {
        "us_per_request_1_event": round(one, 3),
        "us_per_request_16_events": round(few, 3),
        "us_per_token_1000_events": round((many - one) / 1000, 4),
        "us_per_token_250_events_of_4": round((coalesced - one) / 1000, 4),
        "memory": memory_after(100_000 if args.quick else 1_000_000),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
