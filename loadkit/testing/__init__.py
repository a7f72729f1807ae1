"""Test helpers for loadkit and for projects that test against loadkit.

For adapter authors: `loadkit.testing.adapters` (the contract suite, needs pytest),
`loadkit.testing.replay` (a recorded stream through an adapter, the stream timer's rules),
`loadkit.testing.streamserver` (a loopback server streaming recorded events, TCP_NODELAY, with a
send-time log) and `loadkit.testing.simrun` (a headless load against ``loadkit sim`` checked
against its truth log). `loadkit.testing.llamacpp` starts a real llama.cpp server with a tiny
local model. Nothing here is imported by loadkit itself, and importing this package starts
nothing.
"""
