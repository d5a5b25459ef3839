"""Agents as the service runs them: :mod:`.router` builds and caches each configured agent,
:mod:`.settings` turns its configuration into agent_core settings and :mod:`.tools` builds its
tool set."""
