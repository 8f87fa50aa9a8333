"""Real, stateful environments the agent commits its calls against."""
