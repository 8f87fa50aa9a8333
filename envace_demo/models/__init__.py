"""Model backends: one interface (``Backend.generate``), several engines."""
