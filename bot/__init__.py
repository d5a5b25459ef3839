"""Loopgate: wires the channels to the agent core."""
