"""The Locust adaptation: loadkit's user classes and the calls they make, the per-process
runtime, the event listeners (starts, stops, shape steps, the stats' messages between master
and workers), the failure handling that acts on a run (breaker, reachability, ending) and the
process hygiene of a Locust process (stall guards, memory trimming, gevent's yield).

With the web UI, this is the only package that imports locust or gevent (lint-imports checks
it; docs/architecture.md). The run's set-up that needs neither lives in loadkit.run.
"""
