"""The message path, one module per step in the order a message takes.

gateway → access → commands (→ stop) → session_keys → sender_limits → dedupe → bursts →
scheduler → job → turn → delivery / chunking, with reactions, typing_indicator and
run_registry alongside, replay after a restart and streaming/ for answers shown while they are
written. ``docs/architecture.md`` walks one message through it.
"""
