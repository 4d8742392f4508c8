"""The ready-made worlds and their scenarios, at their new path and their deprecated old one."""

import importlib
import sys

import pytest

from turneval.simulation import Scenario, domains
from turneval.worlds import ToolWorld


def test_the_ready_made_worlds_come_with_their_scenarios() -> None:
    for world, scenarios in (
        (domains.orders_world(), domains.orders_scenarios()),
        (domains.files_world(), domains.files_scenarios()),
    ):
        assert isinstance(world, ToolWorld)
        assert scenarios and all(isinstance(s, Scenario) for s in scenarios)
        assert all(s.world is not None and s.reference_tool_calls for s in scenarios)


def test_the_old_path_still_imports_the_same_names_with_a_deprecation_warning() -> None:
    sys.modules.pop("turneval.worlds.domains", None)  # imported afresh: its warning is raised
    with pytest.warns(DeprecationWarning, match=r"moved to turneval\.simulation\.domains"):
        old = importlib.import_module("turneval.worlds.domains")
    assert old.__all__ == domains.__all__
    for name in domains.__all__:
        assert getattr(old, name) is getattr(domains, name)
