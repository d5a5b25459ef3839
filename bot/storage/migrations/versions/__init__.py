"""Migration revisions; a package so the files ship in wheels (Alembic skips this file)."""
