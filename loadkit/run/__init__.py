"""A run's set-up, without Locust: the options loadkit adds to Locust's parser, the one typed
configuration built from them (``build_run_config``, run/runconfig.py, its parts in
run/settings.py), the scenarios and workloads, engine detection, pre-flight, the start checks,
the open-loop dispatcher and the stage plan, the run manifest.

Nothing here imports locust, gevent or loadkit.locust (lint-imports checks it): the Locust
adaptation (loadkit.locust) hands this package plain values and reads its products.
"""
