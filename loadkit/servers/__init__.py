"""Everything that talks to a server outside the timed stream: server info, ``--engine auto``,
metrics scraping, the tokenize endpoint, and the targets a run loads.

All of it goes through one HTTP helper (``servers.http``: bounded GET/POST over plain HTTP or
TLS, a timeout on every call, the process's TLS context by default). The engine knowledge
(which paths, which metric names, which tokenize body) comes from the adapters, through the
contract in ``loadkit.core``; the timed stream is the client's (``loadkit.client``).
"""
