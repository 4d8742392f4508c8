"""ToolWorld: the tools an agent calls during an evaluation, with their state and faults.

Longer than 400 lines: :class:`ToolWorld` is one class, whose state, fault injection, call
log and comparison at the end are one object's life; its helpers live in ``_state``,
``_backends`` and ``_faults``.
"""

from __future__ import annotations

import contextvars
import copy
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import anyio

from turneval._sync import run_sync
from turneval.errors import ConfigError
from turneval.messages import Message, MessageBase, ToolCall
from turneval.worlds._backends import (
    Backend,
    ObjectBackend,
    ObjectsBackend,
    OnMissing,
    RecordedBackend,
    SimulatedBackend,
    ToolError,
    ToolSpec,
    dumps,
    recordings_of,
    to_json,
    validate,
)
from turneval.worlds._faults import Faults
from turneval.worlds._state import Difference, compare_states

__all__ = ["ToolWorld", "bind_worlds", "current_world"]

_ACTIVE: ContextVar[Mapping[str, ToolWorld] | None] = ContextVar("turneval_worlds", default=None)


@contextmanager
def bind_worlds(*worlds: ToolWorld) -> Iterator[None]:
    """Route the calls of tools built from worlds of these names to these worlds (this context).

    ``simulate`` and ``EvalTask`` bind each trial's fresh copy of its scenario's world, so an
    agent built once from ``world.as_langchain_tools()`` acts on the trial's own copy.
    """
    token = _ACTIVE.set({**(_ACTIVE.get() or {}), **{world.name: world for world in worlds}})
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def current_world(name: str) -> ToolWorld | None:
    """The world named ``name`` bound to the current trial, if any."""
    return (_ACTIVE.get() or {}).get(name)


class ToolWorld:
    """Tools with a state, served to an agent during an evaluation.

    Build one from a Python object whose public methods are the tools
    (:meth:`from_object`; several objects: :meth:`from_objects`), from recorded answers
    (:meth:`from_recordings`) or from a model that simulates the tools (:meth:`simulated`).
    :meth:`as_langchain_tools` gives LangChain tools for the agent; :meth:`fresh` gives an
    independent copy (what each trial gets); :attr:`state` shows the state as JSON and
    :meth:`differences` compares two worlds' live states, as end-state metrics need.

    A sync tool method runs in a worker thread (an async one on the event loop), so a slow
    or hung tool holds up neither the other trials nor the run's timeout; the calls on one
    world take turns.

    Every call is logged in :attr:`calls`; every injected fault in :attr:`faults_injected`
    (``tool``, ``call``: its index in :attr:`calls`, ``kind``, ``detail``). A tool's error
    (bad arguments, the method's exception, a missing recording, an injected fault) reaches
    the agent as an error answer (a ``ToolMessage`` with ``status="error"``), never as a
    crash of the run.

    Attributes:
        name: The world's name.
        seed: The seed its faults are drawn from.
        faults: Its :class:`Faults` (one for every tool, or by tool name), or None.
        calls: Every call made on this world: ``tool``, ``args``, and ``output`` or ``error``.
        faults_injected: Every fault injected into those calls.
        initial_state: The state (JSON) the world had when it was made or copied.

    Args:
        backend: What answers the calls (use the class methods instead).
        name: The world's name: trials bind their copy under it.
        faults: :class:`Faults` for every tool, or a mapping from tool name to its faults.
        seed: The seed faults are drawn from (a trial's copy derives its own from it).
    """

    def __init__(
        self,
        backend: Backend,
        *,
        name: str,
        faults: Faults | Mapping[str, Faults] | None = None,
        seed: int | str = 0,
    ) -> None:
        """Check the faults against the tools; nothing is called."""
        self.backend, self.name, self.seed = backend, name, seed
        if isinstance(faults, Mapping):
            unknown = sorted(set(faults) - set(backend.specs))
            if unknown:
                raise ConfigError(
                    f"faults name unknown tool(s) {unknown} of world {name!r} "
                    f"(its tools: {sorted(backend.specs)})"
                )
            for tool, spec in faults.items():
                if not isinstance(spec, Faults):
                    raise ConfigError(f"faults[{tool!r}] must be a Faults, got {spec!r}")
        elif faults is not None and not isinstance(faults, Faults):
            raise ConfigError(f"faults must be a Faults or a mapping of them, got {faults!r}")
        self.faults = faults
        self.calls: list[dict[str, Any]] = []
        self.faults_injected: list[dict[str, Any]] = []
        self._counts: dict[str, int] = {}
        self._lock: anyio.Lock | None = None  # made on the first call, on its event loop
        self.initial_state: Any = to_json(backend.get_state())

    # -- building ------------------------------------------------------------------------------

    @classmethod
    def from_object(
        cls,
        obj: Any,
        *,
        name: str | None = None,
        tools: Sequence[str] | None = None,
        faults: Faults | Mapping[str, Faults] | None = None,
        seed: int | str = 0,
    ) -> ToolWorld:
        """A world whose tools are ``obj``'s public methods and whose state is its attributes.

        The arguments are checked against each method's signature (type hints, pydantic
        rules); its docstring's first paragraph describes the tool. The state is ``obj.state``
        when the object has one, else its public instance attributes. A class is instantiated
        with no arguments. This is how BFCL's multi-turn backends are written: an object with
        a ``_load_scenario(state)`` method, as theirs have, loads each initial state with it
        (``fresh(initial_state)``).

        Args:
            obj: The object (or a class to instantiate).
            name: The world's name (default: the class name).
            tools: The methods to serve (default: every public method).
            faults: See :class:`ToolWorld`.
            seed: See :class:`ToolWorld`.
        """
        if isinstance(obj, type):
            obj = obj()
        backend = ObjectBackend(obj, tools)
        return cls(backend, name=name or type(obj).__name__, faults=faults, seed=seed)

    @classmethod
    def from_objects(
        cls,
        *objects: Any,
        names: Sequence[str] | None = None,
        name: str | None = None,
        tools: Mapping[str, Sequence[str]] | None = None,
        faults: Faults | Mapping[str, Faults] | None = None,
        seed: int | str = 0,
    ) -> ToolWorld:
        """One world served by several objects: BFCL's multi-class tasks, a shop and a bank.

        The tools are the public methods of all the objects; the state has one part per
        object, under its name (``{"GorillaFileSystem": {...}, "TwitterAPI": {...}}``), each
        read as :meth:`from_object` reads it. ``fresh(initial_state)`` takes one state per
        object by name (BFCL's ``initial_config``), each loaded with the object's own
        ``_load_scenario`` where it has one. End states are compared object by object: each
        difference's path starts with the object's name.

        Two objects serving a tool of the same name are refused (:class:`ConfigError`): an
        agent calls tools by name only. Leave the tool out of one object with ``tools``.

        Args:
            objects: The objects (or classes, instantiated with no arguments).
            names: Their names (default: their class names, which must then differ).
            name: The world's name (default: the objects' names joined by ``+``).
            tools: The methods to serve, by object name (default: every public method).
            faults: See :class:`ToolWorld`.
            seed: See :class:`ToolWorld`.
        """
        if not objects:
            raise ConfigError("from_objects needs at least one object")
        made = [obj() if isinstance(obj, type) else obj for obj in objects]
        labels = list(names) if names is not None else [type(obj).__name__ for obj in made]
        if len(labels) != len(made):
            raise ConfigError(f"names has {len(labels)} name(s) for {len(made)} object(s)")
        twice = sorted({label for label in labels if labels.count(label) > 1})
        if twice:
            raise ConfigError(
                f"objects named {twice} more than once: give each its own name with names=[...]"
            )
        backend = ObjectsBackend(dict(zip(labels, made, strict=True)), tools)
        return cls(backend, name=name or "+".join(labels), faults=faults, seed=seed)

    @classmethod
    def from_recordings(
        cls,
        recordings: Sequence[Message | MessageBase | tuple[ToolCall, Any]],
        *,
        name: str = "recorded",
        on_missing: OnMissing = "error",
        faults: Faults | Mapping[str, Faults] | None = None,
        seed: int | str = 0,
    ) -> ToolWorld:
        """A world answering from recorded calls (a trace's or an earlier run's messages).

        ``recordings`` are messages (a ``MultiTurnSample``'s ``user_input``: each
        ``ToolMessage`` answers the call it names) or ``(ToolCall, answer)`` pairs. A call is
        matched by tool name and arguments (key order free); identical calls get their
        recordings in order, the last repeating. With no match, ``on_missing="error"`` answers
        the agent with an error naming the recorded arguments; a function
        ``on_missing(name, args)`` answers instead (a fallback). The state is the calls made.
        """
        backend = RecordedBackend(recordings_of(recordings), on_missing)
        return cls(backend, name=name, faults=faults, seed=seed)

    @classmethod
    def simulated(
        cls,
        tools: Sequence[Callable[..., Any]],
        llm: Any,
        *,
        name: str = "simulated",
        instructions: str | None = None,
        faults: Faults | Mapping[str, Faults] | None = None,
        seed: int | str = 0,
    ) -> ToolWorld:
        """A world whose tools a model answers, each in its declared return schema.

        Each tool is a stub function: its signature gives the arguments, its docstring the
        description, its return annotation the schema of the answer (structured output
        through :class:`~turneval.judge.Judge`: retries, repairs, cache and usage as for a
        judge). The model sees the earlier calls and answers of the same world, so it can
        stay consistent; ``instructions`` describe the system simulated.
        """
        backend = SimulatedBackend(tools, llm, instructions)
        return cls(backend, name=name, faults=faults, seed=seed)

    # -- state ---------------------------------------------------------------------------------

    @property
    def tools(self) -> dict[str, ToolSpec]:
        """The tools, by name."""
        return dict(self.backend.specs)

    @property
    def state(self) -> Any:
        """The state now, as a JSON value (a copy: changing it changes nothing).

        Objects are shown as their public attributes, sets as sorted lists and a cycle as
        ``{"$ref": path}`` (the path of the ancestor it returns to).
        """
        return to_json(self.backend.get_state())

    @property
    def objects(self) -> list[str] | None:
        """The names of the objects of a world made by :meth:`from_objects`, else None."""
        if isinstance(self.backend, ObjectsBackend):
            return list(self.backend.parts)
        return None

    def differences(self, reference: ToolWorld) -> list[Difference]:
        """Where this world's state differs from ``reference``'s (the expected one).

        The live states are compared: an object with its own ``__eq__`` by it, the rest
        structurally (mappings and sets order-free, lists in order, objects attribute by
        attribute, cycles once). Each :class:`~turneval.worlds.Difference` has its path
        (``files['a.txt'].content``).

        Raises:
            WorldStateError: a state nests too deep to compare.
        """
        return compare_states(reference.backend.get_state(), self.backend.get_state())

    def fresh(
        self, initial_state: Mapping[str, Any] | None = None, *, seed: int | str | None = None
    ) -> ToolWorld:
        """An independent copy, no calls logged: this world's state now, then ``initial_state``.

        ``initial_state`` replaces the named top-level parts of the state (an object with a
        ``_load_scenario`` method loads it with that instead). The copy has the same name and
        faults, and ``seed`` (default: this world's); its fault draws start afresh.
        """
        backend = self.backend.copy()
        if initial_state:
            if not isinstance(initial_state, Mapping):
                raise ConfigError(
                    f"initial_state must be a mapping of state fields, got {initial_state!r}"
                )
            backend.set_state(initial_state)
        return ToolWorld(
            backend,
            name=self.name,
            faults=self.faults,
            seed=self.seed if seed is None else seed,
        )

    async def areplay(
        self, calls: Sequence[ToolCall], initial_state: Mapping[str, Any] | None = None
    ) -> ToolWorld:
        """A fresh copy (no faults) with ``calls`` applied in order: where they lead.

        An error of a call (a reference action the world refuses) is kept in the copy's
        :attr:`calls`, as it would be in a trial.
        """
        world = self.fresh(initial_state)
        world.faults = None
        for call in calls:
            try:
                await world.acall(call.name, dict(call.args))
            except ToolError:
                pass  # logged in world.calls
        return world

    def replay(
        self, calls: Sequence[ToolCall], initial_state: Mapping[str, Any] | None = None
    ) -> ToolWorld:
        """Sync form of :meth:`areplay`."""
        return run_sync(self.areplay, calls, initial_state)

    def report(self, reference: ToolWorld | None = None) -> dict[str, Any]:
        """What a trial's row records: name, seed, states, calls and injected faults.

        With ``reference`` (where the reference actions lead), also ``reference_state`` and
        ``differences`` (:meth:`differences`, each as a dict): the live states compared, so
        an object's own ``__eq__`` has its say, which the JSON states alone could not.
        A world of several objects records their names in ``objects``.

        Raises:
            WorldStateError: a state nests too deep to render or compare.
        """
        record: dict[str, Any] = {
            "name": self.name,
            "seed": self.seed,
            "initial_state": self.initial_state,
            "end_state": self.state,
            "calls": copy.deepcopy(self.calls),
            "faults": copy.deepcopy(self.faults_injected),
        }
        if self.objects is not None:
            record["objects"] = self.objects
        if reference is not None:
            record["reference_state"] = reference.state
            record["differences"] = [d.to_dict() for d in self.differences(reference)]
        return record

    # -- calls ---------------------------------------------------------------------------------

    def _faults_of(self, tool: str) -> Faults | None:
        if isinstance(self.faults, Mapping):
            return self.faults.get(tool)
        return self.faults

    async def acall(self, name: str, args: Mapping[str, Any] | None = None) -> str:
        """Call tool ``name``: its answer as the agent sees it (text; JSON for non-text).

        Raises:
            ToolError: the tool answered with an error (its message is the agent's answer).
        """
        args = dict(args or {})
        spec = self.backend.specs.get(name)
        entry: dict[str, Any] = {"tool": name, "args": to_json(args)}
        self.calls.append(entry)
        number = len(self.calls) - 1
        if spec is None:
            entry["error"] = f"unknown tool {name!r} (tools: {sorted(self.backend.specs)})"
            raise ToolError(entry["error"])
        faults = self._faults_of(name)
        draw = None
        if faults is not None:
            draw = faults.draw(self.seed, name, self._counts.get(name, 0))
            self._counts[name] = self._counts.get(name, 0) + 1
            if draw.latency_s > 0:
                self._fault(name, number, "latency", f"{draw.latency_s:.3f}s")
                await anyio.sleep(draw.latency_s)
            if draw.kind in ("error", "timeout", "rate_limit"):
                message = {
                    "error": f"ToolError: {name} failed (injected fault)",
                    "timeout": f"TimeoutError: {name} did not answer within {faults.timeout_s:g}s",
                    "rate_limit": f"RateLimitError: 429 Too Many Requests for {name}; retry later",
                }[draw.kind]
                self._fault(name, number, draw.kind, message)
                entry["error"] = message
                raise ToolError(message)
        if self._lock is None:
            self._lock = anyio.Lock()
        try:
            async with self._lock:  # one call at a time on a world: its state stays whole
                result = await self.backend.invoke(name, validate(spec, args))
            text = dumps(result)
        except ToolError as exc:
            entry["error"] = str(exc)
            raise
        except Exception as exc:  # the tool's own refusal reaches the agent as an error
            entry["error"] = f"{type(exc).__name__}: {exc}"
            raise ToolError(entry["error"]) from exc
        except BaseException:  # cancelled (the trial's timeout): the call never answered
            entry["error"] = "Cancelled: the call had not answered when the trial ended"
            raise
        if draw is not None and draw.kind == "malformed":
            text = '{"data": ' + text[: len(text) // 2]  # an unclosed, cut payload
            self._fault(name, number, "malformed", "answer truncated to half, envelope unclosed")
        entry["output"] = text
        return text

    def call(self, name: str, args: Mapping[str, Any] | None = None) -> str:
        """Sync form of :meth:`acall`."""
        return run_sync(self.acall, name, args)

    def _fault(self, tool: str, number: int, kind: str, detail: str) -> None:
        self.faults_injected.append({"tool": tool, "call": number, "kind": kind, "detail": detail})

    # -- LangChain -----------------------------------------------------------------------------

    def as_langchain_tools(self) -> list[Any]:
        """LangChain ``StructuredTool`` objects, one per tool, for any LangChain/LangGraph agent.

        Argument schemas come from the signatures (JSON schemas: the world itself validates
        each call, so a call with bad arguments is logged in :attr:`calls` too); errors reach
        the agent as error answers.
        A call made while a trial has bound its own copy of this world (same :attr:`name`,
        see :func:`bind_worlds`) goes to that copy, so the agent can be built once.
        """
        from langchain_core.tools import StructuredTool, ToolException

        def build(spec: ToolSpec) -> Any:
            async def coroutine(**kwargs: Any) -> str:
                world = current_world(self.name) or self
                try:
                    return await world.acall(spec.name, kwargs)
                except ToolError as exc:
                    raise ToolException(str(exc)) from None

            def function(**kwargs: Any) -> str:
                return _sync_call(coroutine, kwargs)

            return StructuredTool.from_function(
                func=function,
                coroutine=coroutine,
                name=spec.name,
                description=spec.description,
                args_schema=spec.args_model.model_json_schema(),  # the world validates
                handle_tool_error=True,
            )

        return [build(spec) for spec in self.backend.specs.values()]

    def __repr__(self) -> str:
        """Name, tools and calls made."""
        return (
            f"ToolWorld({self.name!r}, tools={sorted(self.backend.specs)}, calls={len(self.calls)})"
        )


def _sync_call(coroutine: Callable[..., Any], kwargs: dict[str, Any]) -> str:
    """A tool's sync call: on the sync-call loop, or in a worker thread inside a running loop."""
    import asyncio  # here: ``import turneval.metrics`` stays free of asyncio
    from concurrent.futures import ThreadPoolExecutor

    async def call() -> str:
        result: str = await coroutine(**kwargs)
        return result

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return run_sync(call)
    context = contextvars.copy_context()  # the trial's bound worlds go along
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(context.run, asyncio.run, call()).result()
