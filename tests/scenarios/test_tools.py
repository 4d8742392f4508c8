"""Tools from LangChain, OpenAI schemas, MCP tools/list output, Anthropic, a world, a file."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import tool

from turneval.errors import ConfigError
from turneval.scenarios import ToolInfo, read_tools
from turneval.simulation.domains import orders_world

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return "sunny"


@dataclass
class McpTool:  # the shape of mcp.types.Tool (read by attributes, mcp not imported)
    name: str
    description: str | None
    inputSchema: dict[str, Any]


def test_every_form_gives_the_same_tool() -> None:
    expected = ToolInfo("get_weather", "The weather in a city.", WEATHER)
    chat = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city.",
            "parameters": WEATHER,
        },
    }
    flat = {
        "type": "function",
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": WEATHER,
    }
    mcp = {"name": "get_weather", "description": "The weather in a city.", "inputSchema": WEATHER}
    anthropic = {
        "name": "get_weather",
        "description": "The weather in a city.",
        "input_schema": WEATHER,
    }
    for form in (
        [chat],
        [flat],
        {"tools": [mcp]},  # MCP tools/list result
        {"jsonrpc": "2.0", "id": 1, "result": {"tools": [mcp], "nextCursor": None}},
        [McpTool("get_weather", "The weather in a city.", WEATHER)],
        [anthropic],
        chat,  # one tool alone
    ):
        assert read_tools(form) == [expected], form
    (langchain,) = read_tools([get_weather])
    assert (langchain.name, langchain.description) == ("get_weather", "The weather in a city.")
    assert langchain.parameters["properties"] == {"city": {"type": "string"}}


def test_a_world_and_a_json_file(tmp_path: Path) -> None:
    names = [t.name for t in read_tools(orders_world())]
    assert names == ["cancel_order", "get_order", "refund_order", "update_address"]
    refund = next(t for t in read_tools(orders_world()) if t.name == "refund_order")
    assert refund.parameters["properties"]["amount"]["type"] == "number"
    path = tmp_path / "tools.json"
    path.write_text(json.dumps({"result": {"tools": [{"name": "ping"}]}}))
    assert read_tools(path) == [ToolInfo("ping", "", {})]


def test_bad_tools_are_named() -> None:
    with pytest.raises(ConfigError, match=r"tool 1: a tool needs a 'name'"):
        read_tools([{"name": "a"}, {"description": "no name"}])
    with pytest.raises(ConfigError, match=r"tools named \['a'\] more than once"):
        read_tools([{"name": "a"}, {"type": "function", "function": {"name": "a"}}])
    with pytest.raises(ConfigError, match="no tool given"):
        read_tools({"tools": []})
    with pytest.raises(ConfigError, match=r"tool 0: not a tool turneval can read \(int\)"):
        read_tools([3])
    with pytest.raises(ConfigError, match="cannot read tools from it"):
        read_tools(Path("/nonexistent/tools.json"))
    with pytest.raises(ConfigError, match=r"tools\[0\] \(x\): the argument schema must be"):
        read_tools({"tools": [{"name": "x", "inputSchema": [1]}]})
