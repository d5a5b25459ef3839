"""Self-evolution: per-agent metrics from traces, rules that suggest changes, admin review,
apply with a baseline, and automatic rollback when quality drops (agent-loop spec,
"Self-Evolution System"). :class:`bot.evolution.service.EvolutionService` is the entry point.

Its settings live in :mod:`bot.config.evolution`. Empty of imports, so a service with evolution
off never loads it.
"""
