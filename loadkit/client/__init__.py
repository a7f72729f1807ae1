"""One request on the wire, in the order a request meets it:

- ``timer``: ``run_request`` / ``StreamRun``, one request's life into a RequestRecord;
- ``tlsstream`` / ``tls``: connect, the TLS session over memory BIOs, TLS error reasons;
- ``httpstream``: the endpoint, request bytes, response head, chunked framing, keep-alive pool;
- ``reads``: the one stamped-read interface (``StampedReader``) and its two readers;
- ``hubreads``: under gevent, reads stamped in the hub (``ArrivalQueue``) and the deadline timer;
- ``stamps``: kernel receive stamps (SO_TIMESTAMPNS) and the ``READS`` self-check counters;
- ``sse`` / ``events`` / ``streamend``: SSE and NDJSON decoding, events into the record, how
  an ok stream ended.

Import from the modules (``loadkit.client.timer.run_request``); this package imports nothing,
so the engines and the self-check can use ``stamps`` or ``httpstream`` without the timer.
"""
