"""The bottom layer every other package points down to: the engine adapter contract.

``core.adapter`` (what an adapter is: ``EngineAdapter``, ``StreamParser``, ``AdapterOptions``,
the optional ``AdapterExtras``), ``core.channels`` (the reasoning/answer/tool marks a parser
hands the timer), ``core.priority`` (where a tenant's priority goes) and ``core.servertimings``
(an engine's own timings, normalised). These import nothing of loadkit but ``loadkit.types``,
so ``loadkit.records``, ``loadkit.client``, ``loadkit.engines``, ``loadkit.plugins`` and
``loadkit.servers`` can all depend on them without depending on each other.
"""
