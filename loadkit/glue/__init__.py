"""Deprecated: loadkit's Locust layer was split in loadkit 0.3.0 into ``loadkit.run`` (the run's
set-up, without Locust) and ``loadkit.locust`` (the Locust adaptation: users, listeners,
runtime). The public modules of this package stay importable from here, each with a
``DeprecationWarning``, until 0.4.0 (docs/api/public.md, "Deprecated paths")."""
