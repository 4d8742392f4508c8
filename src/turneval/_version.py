"""The version of turneval, in one place: the package, the CLI, run files and the store read it."""

VERSION = "0.1.0"
"""turneval's version (pyproject.toml reads it from here)."""
