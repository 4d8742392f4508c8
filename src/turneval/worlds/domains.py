"""Deprecated: the ready-made worlds and their scenarios are :mod:`turneval.simulation.domains`.

This path still imports them, with a ``DeprecationWarning``. It is the one module of
``turneval.worlds`` that imports the simulation: an alias kept for the old path, which the
architecture test places in the top layer (``worlds`` itself sits below the simulation).
"""

from __future__ import annotations

import warnings

from turneval.simulation.domains import (
    FileSystem,
    OrderDesk,
    files_scenarios,
    files_world,
    orders_scenarios,
    orders_world,
)

__all__ = [
    "FileSystem",
    "OrderDesk",
    "files_scenarios",
    "files_world",
    "orders_scenarios",
    "orders_world",
]

warnings.warn(
    "turneval.worlds.domains moved to turneval.simulation.domains: import "
    f"{', '.join(__all__)} from there",
    DeprecationWarning,
    stacklevel=2,
)
