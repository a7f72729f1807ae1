"""Test helpers for loadkit and for projects that test against loadkit.

`loadkit.testing.llamacpp` starts a real llama.cpp server with a tiny local model. Nothing
here is imported by loadkit itself, and importing this package starts nothing.
"""
