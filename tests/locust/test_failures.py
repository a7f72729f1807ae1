"""The text Locust's failure table shows: the outcome and the server's message, bounded."""

from __future__ import annotations

import pytest

from loadkit.locust.failures import FailureTexts, RequestOutcomeError
from tests.helpers.records import record


def failed(outcome: str, error: str, status: int | None = None):
    r = record(outcome=outcome, ttft_ms=None)
    r.error, r.http_status = error, status
    return r


@pytest.mark.in_process_locust  # locust.stats: importing locust patches the process
def test_locust_shows_the_outcome_and_what_the_server_said():
    from locust.stats import StatsError

    err = FailureTexts().error_for(failed("http_error:422", 'HTTP 422: {"detail": "Unexpected fields"}', 422))
    assert repr(err) == str(err) == 'http_error:422: {"detail": "Unexpected fields"}'
    assert StatsError.parse_error(err) == 'http_error:422: {"detail": "Unexpected fields"}'
    assert repr(RequestOutcomeError("timeout_total")) == "timeout_total"


def test_distinct_texts_are_bounded():
    texts = FailureTexts(limit=3)
    names = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]
    shown = {repr(texts.error_for(failed("http_error:500", f"HTTP 500: id {n}", 500))) for n in names}
    assert len(shown) == 4  # three messages, then one pointer to loadkit's report
    assert "http_error:500: (one of many distinct server messages: see loadkit's report)" in shown
    assert (
        repr(texts.error_for(failed("http_error:500", "HTTP 500: id beta", 500))) == "http_error:500: id beta"
    )


def test_texts_differing_only_in_numbers_are_one_row_shown_as_their_template():
    texts = FailureTexts(limit=3)
    shown = {repr(texts.error_for(failed("http_error:400", f"HTTP 400: you requested {n} tokens", 400)))
             for n in range(9000, 9010)}  # fmt: skip
    assert shown == {"http_error:400: you requested <n> tokens"}
    assert len(texts.seen) == 1  # no room taken from other messages
