"""One request on the wire: connect (TCP, TLS), send, read stamped bytes (kernel receive
stamps, hub-queued reads), HTTP framing, SSE decoding, and the timer that measures it all
into a RequestRecord. The read path's self-check counters (``READS``) live here too."""
