"""RAG: every request carries the same long retrieved context and a new question about it.

    locust -f locustfiles/rag.py --headless -u 8 -t 2m --host http://127.0.0.1:8000 --engine vllm \
        --report-dir reports/rag --raw-log

The context (about 3,000 tokens) is built once, from a fixed seed, so every user and every
worker sends exactly the same prefix: a server with prefix caching prefills it once and then
only the question; one without pays the whole prompt every time. Compare ``cached_tokens``
and TTFT between engines in the report. Two kinds of question, labelled apart: short factual
answers (``rag:answer``) and longer summaries (``rag:summary``).
"""

import random

from locust import between, task

from loadkit import LLMUser

VOCABULARY = ("river", "stone", "market", "winter", "harbor", "engine", "garden", "signal", "copper", "valley",
              "ledger", "orbit", "canvas", "timber", "lantern", "meadow", "quarry", "beacon", "saddle", "plank",
              "report", "budget", "clinic", "bridge", "forest", "museum", "tunnel", "island", "castle", "mirror")  # fmt: skip
CONTEXT_WORDS = 2_600  # ~3,000 tokens for BPE tokenizers (and the simulator's)


def build_context(words: int, seed: int) -> str:
    """Numbered 'documents' of pseudo-prose: deterministic, so every process sends the same bytes."""
    rng = random.Random(seed)
    docs, count = [], 0
    while count < words:
        n = min(rng.randint(60, 140), words - count)
        body = " ".join(rng.choice(VOCABULARY) for _ in range(n))
        docs.append(f"[document {len(docs) + 1}] {body}.")
        count += n
    return "\n".join(docs)


SYSTEM = "Answer only from the documents below. Cite document numbers.\n\n" + build_context(
    CONTEXT_WORDS, seed=7
)
QUESTIONS = ("Which documents mention the {w}?", "What does document {n} say about the {w}?",
             "How often does '{w}' appear in document {n}?", "Is the {w} older than the bridge in document {n}?")  # fmt: skip


def question() -> str:
    return random.choice(QUESTIONS).format(w=random.choice(VOCABULARY), n=random.randint(1, 25))


class RAG(LLMUser):
    """A RAG front end: one shared context, a fresh question per request."""

    wait_time = between(0.0, 0.5)

    def ask(self, text: str, max_tokens: int, label: str) -> None:
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": text}]
        self.chat(messages, max_tokens=max_tokens, label=label)

    @task(4)
    def answer(self) -> None:
        self.ask(question(), max_tokens=random.randint(24, 64), label="rag:answer")

    @task(1)
    def summary(self) -> None:
        self.ask(f"Summarise what the documents say about the {random.choice(VOCABULARY)}.", max_tokens=160,
                 label="rag:summary")  # fmt: skip
