"""Several Loopgate processes on one Postgres and one Redis (docs/scaling.md)."""
