"""Multi-agent orchestration: spawn, delegate and team tasks (agent-loop spec)."""
