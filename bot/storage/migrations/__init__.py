"""Alembic environment of the storage schema; applied at start-up by ``open_database``."""
