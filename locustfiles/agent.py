"""A tool-calling agent: what it sends next depends on what the model replied.

    locust -f locustfiles/agent.py --headless -u 8 -t 2m --host http://127.0.0.1:8000 --engine vllm \
        --report-dir reports/agent --raw-log --session-header X-Session-ID

Each task is one agent episode, a multi-turn session (``self.session``): the agent states a
goal; while the reply asks for a tool, the agent runs the tool here, in Python, and sends its
result back; a reply that asks for no tool is the final answer. The tools cost different
amounts of context — ``search`` returns a long passage, ``calculator`` a number, and
``models`` really calls the server's ``/v1/models`` through Locust's HTTP client — so how
long the prompts grow, and how many turns an episode takes, depend on the replies. Turns
are labelled by what preceded them (``agent:turn1``, ``agent:after_search``, ...), so the
report shows TTFT after each kind of tool result apart.

A model that follows the system prompt answers ``CALL tool(argument)`` or ``FINAL: ...``.
The simulator answers pseudo-words; for it, the first word of the reply picks the action
(``decide``), so every branch runs against ``loadkit sim`` as it would against a model.
"""

import random
import re
import zlib

from locust import between, task

from loadkit import LLMUser

SYSTEM = ("You are an agent with tools: search(query), calculator(expression), models(). To use one, reply "
          "exactly `CALL tool(argument)`. When you can answer, reply `FINAL: <answer>`.")  # fmt: skip
GOALS = ("Find the population of Lyon and double it.", "Which model is served here, and how big is its context?",
         "Summarise recent news about tide power.", "What is 17% of 2,340?")  # fmt: skip
ACTIONS = ("search", "calculator", "models", None)  # None: the final answer
CALL = re.compile(r"CALL\s+(search|calculator|models)\((.*?)\)")
MAX_STEPS = 6


def decide(reply: str) -> tuple[str, str] | None:
    """The tool call a reply asks for, or None for a final answer (see the module docstring)."""
    if "FINAL:" in reply:
        return None
    match = CALL.search(reply)
    if match:
        return match.group(1), match.group(2)
    words = reply.split()
    if not words:
        return None
    action = ACTIONS[zlib.crc32(words[0].encode()) % len(ACTIONS)]
    return None if action is None else (action, " ".join(words[1:4]))


def search(query: str) -> str:
    rng = random.Random(zlib.crc32(query.encode()))
    passages = (f"Result {i}: {query} was discussed at length; figures {rng.randint(1, 999)} and "
                f"{rng.randint(1, 999)} were cited by source {rng.randint(1, 50)}." for i in range(12))  # fmt: skip
    return " ".join(passages)


def calculator(expression: str) -> str:
    return f"{expression} = {len(expression) * 7}"


class Agent(LLMUser):
    """One agent episode per task; Python decides every next turn from the last reply."""

    wait_time = between(0.5, 1.5)

    def models(self, _: str) -> str:
        with self.client.get("/v1/models", name="tool: /v1/models", catch_response=True) as resp:
            return resp.text[:400] if resp.ok else f"error {resp.status_code}"

    def run_tool(self, name: str, argument: str) -> str:
        tools = {"search": search, "calculator": calculator, "models": self.models}
        return tools[name](argument)

    @task
    def episode(self) -> None:
        with self.session(name="agent", system=SYSTEM) as conv:
            rec = conv.chat(random.choice(GOALS), max_tokens=32, label="agent:turn1")
            for _ in range(MAX_STEPS):
                action = decide(rec.text) if rec.ok else None
                if action is None:
                    return  # the final answer (or a failed turn: the session counts as broken)
                name, argument = action
                result = self.run_tool(name, argument)
                rec = conv.chat(f"<tool_result name={name}>{result}</tool_result>", max_tokens=32,
                                label=f"agent:after_{name}")  # fmt: skip
