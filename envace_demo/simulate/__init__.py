"""Rehearsal as a service: a tool schema answered by the model's rehearsal.

``pairs``: real (call, result) pairs read from a file (few-shot examples, a history);
``rehearse``: one call rehearsed through the engine's rehearser prompt, parsed and checked;
``world``: the simulated world a server keeps (cache, per-session history);
``server``: the ``mcp`` SDK's server in front of it (stdio or streamable HTTP).
"""
