"""Tool descriptions from wherever an agent's tools are declared: one shape for the generator.

:func:`read_tools` takes LangChain tools (``@tool`` functions, ``BaseTool`` objects, and
anything ``convert_to_openai_tool`` reads), OpenAI tool schemas (Chat Completions'
``{"type": "function", "function": {...}}`` and the Responses API's flat form), an MCP server's
``tools/list`` answer (the JSON-RPC response, its ``result``, or the ``tools`` list; or
``mcp.types.Tool`` objects), Anthropic's ``input_schema`` form, and a
:class:`~turneval.worlds.ToolWorld` (its tools' argument schemas). Each becomes a
:class:`ToolInfo`: a name, a description and the JSON schema of the arguments.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

from turneval.errors import ConfigError
from turneval.worlds import ToolWorld

__all__ = [
    "ToolInfo",
    "read_tools",
    "tools_text",
]


@dataclass(frozen=True)
class ToolInfo:
    """One tool as the generator sees it.

    Attributes:
        name: The tool's name (what an agent calls).
        description: What it does.
        parameters: The JSON schema of its arguments (an object schema; ``{}`` when unknown).
    """

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(default_factory=dict)


def _from_mapping(item: Mapping[str, Any], where: str) -> ToolInfo:
    """A tool from one dict, in any of the forms the module docstring lists."""
    body: Mapping[str, Any] = item
    if isinstance(item.get("function"), Mapping):  # Chat Completions
        body = item["function"]
    name = body.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(
            f"{where}: a tool needs a 'name' (OpenAI: function.name; MCP: name), got "
            f"{json.dumps(dict(item), default=str)[:120]}"
        )
    schema: Any = {}
    for key in ("parameters", "inputSchema", "input_schema"):
        if key in body:
            schema = body[key]
            break
    if schema is None:
        schema = {}
    if not isinstance(schema, Mapping):
        raise ConfigError(f"{where} ({name}): the argument schema must be a JSON object")
    description = body.get("description") or ""
    return ToolInfo(name.strip(), str(description).strip(), dict(schema))


def _from_object(item: Any, where: str) -> ToolInfo:
    """A tool from an object: an MCP ``Tool``, or what LangChain converts to an OpenAI tool."""
    schema = getattr(item, "inputSchema", None)
    if isinstance(getattr(item, "name", None), str) and isinstance(schema, Mapping):
        return ToolInfo(
            str(item.name), str(getattr(item, "description", "") or ""), dict(schema)
        )  # an mcp.types.Tool (read without importing mcp)
    from langchain_core.utils.function_calling import convert_to_openai_tool

    try:
        converted = convert_to_openai_tool(item)
    except Exception as exc:
        raise ConfigError(
            f"{where}: not a tool turneval can read ({type(item).__name__}): give LangChain "
            "tools, OpenAI tool schemas, MCP tools/list output or a ToolWorld"
        ) from exc
    return _from_mapping(converted, where)


def _items(source: Any) -> Iterable[tuple[str, Any]]:
    """The tool entries of ``source`` with where each was found (for errors)."""
    if isinstance(source, Mapping):
        if isinstance(source.get("result"), Mapping):  # a JSON-RPC response to tools/list
            source = source["result"]
        if isinstance(source.get("tools"), list):  # MCP tools/list result
            return ((f"tools[{i}]", item) for i, item in enumerate(source["tools"]))
        return [("tool", source)]
    if isinstance(source, (str, bytes)) or not isinstance(source, Iterable):
        return [("tool", source)]
    return ((f"tool {i}", item) for i, item in enumerate(source))


def read_tools(source: Any) -> list[ToolInfo]:
    """The tools in ``source``, in order (see the module docstring for the forms read).

    ``source`` may also be a path to a JSON file holding any of the JSON forms.

    Raises:
        ConfigError: an entry is no tool (naming it), two tools share a name, or there is none.
    """
    if isinstance(source, ToolWorld):
        return [
            ToolInfo(spec.name, spec.description, spec.args_model.model_json_schema())
            for spec in source.tools.values()
        ]
    if isinstance(source, (str, PathLike)):
        path = Path(source)
        try:
            source = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{path}: cannot read tools from it ({exc})") from exc
    tools: list[ToolInfo] = []
    for where, item in _items(source):
        if isinstance(item, ToolInfo):
            tools.append(item)
        elif isinstance(item, Mapping):
            tools.append(_from_mapping(item, where))
        else:
            tools.append(_from_object(item, where))
    if not tools:
        raise ConfigError("no tool given: the generator needs at least one tool")
    names = [tool.name for tool in tools]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ConfigError(f"tools named {twice} more than once: an agent calls tools by name")
    return tools


def tools_text(tools: Sequence[ToolInfo]) -> str:
    """The tools as the generator's prompt shows them: name, description, argument schema."""
    lines = []
    for tool in tools:
        lines.append(f"- {tool.name}: {tool.description or '(no description)'}")
        if tool.parameters:
            schema = json.dumps(tool.parameters, ensure_ascii=False, sort_keys=True)
            lines.append(f"  arguments (JSON schema): {schema}")
    return "\n".join(lines)
