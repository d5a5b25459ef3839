"""Self-evolution: per-agent metrics from traces, rules that suggest changes, admin review,
apply with a baseline, and automatic rollback when quality drops (agent-loop spec,
"Self-Evolution System"). :class:`bot.evolution.service.EvolutionService` is the entry point.

Deliberately empty of imports: :mod:`bot.agent_config` imports :mod:`bot.evolution.config`,
and importing the service here would import the config back (a cycle).
"""
