"""Simulator settings: the cost-model profile, the named profiles, and their validation.

Every constant of the step model lives in :class:`Profile` so that each one is a documented
CLI option (``--decode-base-ms 7`` sets ``decode_base_ms``). Units are in the field names.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from loadkit.errors import UserError
from loadkit.simprofiles import PROFILE_NAMES


class ConfigError(ValueError, UserError):
    """An impossible simulator option; the message names the option and the rule."""


@dataclass(frozen=True, slots=True)
class Profile:
    """Constants of the step-level engine model (see docs/simulator.md for the formulas)."""

    name: str = "default"
    model: str = "sim-8b"
    # Decode step: weights are read once per step (base), plus per-sequence work, plus the
    # KV cache read of every running sequence (memory-bound).
    decode_base_ms: float = 7.0
    decode_per_seq_ms: float = 0.03
    kv_read_ms_per_1k_tokens: float = 0.065
    # Prefill is compute-bound: time per uncached prompt token.
    prefill_us_per_token: float = 60.0
    # Scheduler limits (vLLM names): running sequences and tokens per step.
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    chunked_prefill: bool = True
    max_model_len: int = 8192
    # Paged KV cache: num_blocks wins; else kv_memory_gb / kv_bytes_per_token sizes the pool.
    block_size: int = 16
    num_blocks: int | None = None
    kv_memory_gb: float = 40.0
    kv_bytes_per_token: int = 131072
    prefix_caching: bool = True
    # Without ignore_eos / min_tokens, a request stops at a seeded "EOS": output length is
    # geometric with this mean (0 = never stop early). The fast profile never stops early.
    eos_mean_tokens: float = 512.0
    # Tokens per stream event: 1 = one event per token; K > 1 = each decode step yields 1..K
    # tokens in one event (speculative decoding), drawn from the seeded generator.
    spec_tokens: int = 1
    default_max_tokens: int = 256
    # Output path: the events of one step leave this far apart (detokenize, serialize,
    # write), while the next step runs. 0 = all at the step end, as fast as the CPU allows.
    output_us_per_event: float = 15.0
    # vLLM's --scheduling-policy: "fcfs", or "priority" (lower request `priority` first, then
    # arrival; preemption evicts the lowest-priority running sequence).
    scheduling_policy: str = "fcfs"
    # Read the priority from this request header instead of the body (as a gateway in front of
    # the engine passes it on); "" = the body's field.
    priority_header: str = ""
    # Reasoning: each reply thinks for a per-request number of tokens before its answer, drawn
    # from reasoning_dist ("fixed", "uniform" over 0..2*mean, "geometric") with this mean
    # (0 = no reasoning), capped at one token short of the output; sent in each protocol's own
    # field ("parser") or as <think> tags in the text ("tags": a server without a reasoning parser).
    reasoning_mean_tokens: float = 0.0
    reasoning_dist: str = "geometric"
    reasoning_format: str = "parser"
    # Embeddings: the length of each vector answered (small deterministic floats: the answer's
    # size on the wire, not its meaning, is what a load test sees).
    embedding_dim: int = 64

    def pool_blocks(self) -> int:
        """Number of KV blocks in the pool."""
        if self.num_blocks is not None:
            return self.num_blocks
        tokens = int(self.kv_memory_gb * (1 << 30) // self.kv_bytes_per_token)
        return tokens // self.block_size

    def replace(self, **changes: Any) -> Profile:
        return validate(dataclasses.replace(self, **changes))


PROFILE_HELP: dict[str, str] = {
    "model": "model name the engine reports (models list, chunks without a model field)",
    "decode_base_ms": "fixed time of every step: reading the weights once (ms)",
    "decode_per_seq_ms": "extra step time per decoding sequence (ms)",
    "kv_read_ms_per_1k_tokens": "extra step time per 1000 KV tokens read by decoding sequences (ms)",
    "prefill_us_per_token": "step time per uncached prompt token computed in the step (us)",
    "max_num_seqs": "cap on running sequences; the rest wait in FCFS order",
    "max_num_batched_tokens": "token budget of one step (decode tokens + prefill chunk)",
    "chunked_prefill": "split long prompts over steps within the token budget",
    "max_model_len": "context length: prompt + max_tokens above it gets the engine's 400",
    "block_size": "tokens per KV block",
    "num_blocks": "KV blocks in the pool (default: kv_memory_gb / kv_bytes_per_token / block_size)",
    "kv_memory_gb": "KV pool size in GiB when num_blocks is not set",
    "kv_bytes_per_token": "KV bytes per token (2 x layers x kv_heads x head_dim x dtype bytes)",
    "prefix_caching": "reuse cached full blocks of earlier prompts and answers",
    "eos_mean_tokens": "mean output length before a seeded EOS when a request allows one (0 = never)",
    "spec_tokens": "tokens per decode step and event, drawn 1..K (speculative decoding)",
    "default_max_tokens": "max_tokens when the request gives none",
    "output_us_per_event": "spacing of a step's events on the wire, written while the next step runs "
    "(us; 0 = all at the step end)",
    "scheduling_policy": "fcfs, or priority: the request body's `priority` (lower first), as vLLM's "
    "--scheduling-policy priority",
    "priority_header": "read the priority from this request header (an integer) instead of the body's "
    "field, as a gateway passes it on",
    "reasoning_mean_tokens": "mean reasoning tokens before each answer (0 = no reasoning)",
    "reasoning_dist": "reasoning-token distribution: fixed, uniform (0..2 x mean) or geometric",
    "reasoning_format": "parser: reasoning in the protocol's field (reasoning_content, thinking); "
    "tags: <think>...</think> in the answer text",
    "embedding_dim": "length of each embedding vector answered (deterministic floats)",
}

PROFILES: dict[str, Profile] = {
    # An ~8B model on one 80 GB GPU: ~7 ms decode steps, ~60 us per prompt token.
    "default": Profile(),
    # Quick tests and demos: short steps, almost free prefill, no early EOS.
    "fast": Profile(
        name="fast",
        model="sim-fast",
        decode_base_ms=5.0,
        decode_per_seq_ms=0.005,
        kv_read_ms_per_1k_tokens=0.01,
        prefill_us_per_token=2.0,
        num_blocks=65536,
        eos_mean_tokens=0.0,
    ),
    # A ~70B model on one GPU slice: slow steps and prefill, a small KV pool.
    "big": Profile(
        name="big",
        model="sim-70b",
        decode_base_ms=28.0,
        decode_per_seq_ms=0.12,
        kv_read_ms_per_1k_tokens=0.33,
        prefill_us_per_token=280.0,
        max_num_seqs=128,
        max_model_len=8192,
        kv_memory_gb=20.0,
        kv_bytes_per_token=327680,
    ),
    # The default 8B model with a 128k context (its costs and KV pool): for the shipped
    # long-context scenarios (Mooncake's prompts reach ~127k tokens, agents' histories 16k),
    # which name it in their [sim] table; `loadkit run` starts it for them.
    "long": Profile(name="long", model="sim-8b-128k", max_model_len=131072),
}

if tuple(PROFILES) != PROFILE_NAMES:  # the names the scenario parser accepts (loadkit/simprofiles.py)
    raise AssertionError(f"PROFILES {tuple(PROFILES)} != loadkit.simprofiles.PROFILE_NAMES {PROFILE_NAMES}")

_POSITIVE = ("block_size", "max_num_seqs", "max_num_batched_tokens", "max_model_len", "spec_tokens",
             "embedding_dim")  # fmt: skip
_NON_NEGATIVE = (
    "decode_base_ms",
    "decode_per_seq_ms",
    "kv_read_ms_per_1k_tokens",
    "prefill_us_per_token",
    "kv_memory_gb",
    "eos_mean_tokens",
    "default_max_tokens",
    "output_us_per_event",
    "reasoning_mean_tokens",
)


def validate(profile: Profile) -> Profile:
    """Return the profile unchanged, or raise ConfigError naming the impossible option."""
    for name in _POSITIVE:
        if getattr(profile, name) < 1:
            raise ConfigError(f"--{_opt(name)} must be >= 1 (got {getattr(profile, name)})")
    for name in _NON_NEGATIVE:
        value = getattr(profile, name)
        if not value >= 0:  # also catches NaN
            raise ConfigError(f"--{_opt(name)} must be >= 0 (got {value})")
    if profile.kv_bytes_per_token < 1:
        raise ConfigError(f"--kv-bytes-per-token must be >= 1 (got {profile.kv_bytes_per_token})")
    if profile.num_blocks is not None and profile.num_blocks < 1:
        raise ConfigError(f"--num-blocks must be >= 1 (got {profile.num_blocks})")
    if profile.pool_blocks() < 1:
        raise ConfigError("the KV pool holds no block: raise --kv-memory-gb or set --num-blocks")
    if profile.reasoning_dist not in ("fixed", "uniform", "geometric"):
        raise ConfigError(
            f"--reasoning-dist must be fixed, uniform or geometric (got {profile.reasoning_dist!r})"
        )
    if profile.reasoning_format not in ("parser", "tags"):
        raise ConfigError(f"--reasoning-format must be parser or tags (got {profile.reasoning_format!r})")
    if profile.scheduling_policy not in ("fcfs", "priority"):
        raise ConfigError(f"--scheduling-policy must be fcfs or priority (got {profile.scheduling_policy!r})")
    if profile.priority_header != profile.priority_header.strip():
        raise ConfigError(f"--priority-header: expected a header name, got {profile.priority_header!r}")
    return profile


def _opt(name: str) -> str:
    return name.replace("_", "-")


def profile_fields() -> list[dataclasses.Field[Any]]:
    """The tunable fields (all but the name), in declaration order, for the CLI."""
    return [f for f in dataclasses.fields(Profile) if f.name != "name"]


def get_profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ConfigError(f"unknown profile {name!r} (choose from {', '.join(PROFILES)})") from None
