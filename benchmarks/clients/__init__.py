"""Standalone load clients driven by benchmarks/bench_client.py, one process each."""
