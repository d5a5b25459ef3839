"""The operator dashboard under ``/admin``: live runs, sessions, traces, channels, agents and
evolution suggestions, as server-rendered pages and as JSON under ``/admin/api/``.

Off unless ``admin.token`` is set. Kept free of imports: :mod:`bot.config` imports
:mod:`bot.admin.config`, and the rest of the package needs the whole service.
"""
