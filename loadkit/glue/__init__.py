"""The thin layer between loadkit and Locust: options, per-run runtime, user classes.

Only modules in this package import locust or gevent.
"""
