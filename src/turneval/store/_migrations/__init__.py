"""Alembic migrations of the run store (shipped with the package, run when a store opens)."""
