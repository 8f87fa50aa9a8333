"""EnvACE world rehearsal demo: act, rehearse, commit."""

__version__ = "0.1.0"
