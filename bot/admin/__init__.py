"""The operator dashboard under ``/admin``: live runs, sessions, traces, channels, agents and
evolution suggestions, as server-rendered pages and as JSON under ``/admin/api/``.

Off unless ``admin.token`` is set (its settings live in :mod:`bot.config.admin`). Kept free of
imports: importing the admin app costs its templates, and a service without it skips them.
"""
