"""Parsed, validated pieces of a scenario that the request source consumes."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loadkit.workload.distributions import Distribution


@dataclass(slots=True)
class PromptSpec:
    tokenizer: str = "approx"  # "approx" | "hf" | "server"
    tokenizer_path: str | None = None
    tokenize_url: str | None = None
    tokenize_format: str = "llamacpp"
    shape: str = "messages"  # request shape: "messages" (GenerationRequest.messages) | "prompt" (.prompt)
    exact_output: bool = True


@dataclass(slots=True)
class PartSpec:
    name: str
    weight: float
    label: str
    input: Distribution | None = None
    output: Distribution | None = None
    joint_in: object | None = None  # np.ndarray of trace input lengths (joint sampling)
    joint_out: object | None = None
    joint_clip_in: tuple[float | None, float | None] = (None, None)
    joint_clip_out: tuple[float | None, float | None] = (None, None)
    tools: list[dict[str, Any]] | None = None  # OpenAI `tools` sent with this part's requests
    tool_choice: Any = None
    # kind = "embeddings" | "rerank" | a plugin's (workload/kindparts.py KindSpec); None: chat.
    kind: Any = None

    @property
    def kind_name(self) -> str:
        return "chat" if self.kind is None else str(self.kind.kind)


@dataclass(slots=True)
class TraceSpec:
    format: str
    path: Path
    columns: tuple[str | None, str, str] = (None, "", "")
    speed: float = 1.0
    start_s: float | None = None
    end_s: float | None = None
    loop: bool = False
    as_sessions: bool = False
    block_tokens: int = 512
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    label: str = "trace"
    on_bad_row: str = "refuse"  # "refuse" | "skip" (skipped rows are counted in the report)
    order: str = "time"  # "time": rows sorted by timestamp | "file": file order kept
    warm_cache: bool = False  # Mooncake window: first send the prefixes seen before it (warmcache.py)
    warm_cache_s: float = 10.0  # the window's arrivals start this long after the warm-up
    # ServeGen reason_ratio: send each request's expected reasoning length as a header (reasoning.py)
    reasoning_hint: bool = True


@dataclass(slots=True)
class SystemPoolSpec:
    count: int
    tokens: Distribution
    popularity: str = "uniform"  # "uniform" | "zipf"
    zipf_s: float = 1.0


@dataclass(slots=True)
class ToolSpec:
    probability: float
    call_tokens: Distribution
    result_tokens: Distribution
    latency_s: Distribution
    format: str = "text"  # "text" | "openai" | "server"
    # format "server": the tool definitions sent with every request (OpenAI `tools`) and
    # `tool_choice`; the server decides when to call, and its streamed calls are answered.
    definitions: list[dict[str, Any]] | None = None
    tool_choice: Any = None


@dataclass(slots=True)
class SessionSpec:
    turns: Distribution
    user_tokens: Distribution
    output_tokens: Distribution
    think_time_s: Distribution
    count: int | None = None
    system: SystemPoolSpec | None = None
    tool: ToolSpec | None = None
    context_max_tokens: int | None = None
    context_policy: str = "stop"  # "stop" | "truncate"
    labels: dict[str, str] = field(
        default_factory=lambda: {"first": "turn1", "next": "turnN", "tool": "tool"}
    )
