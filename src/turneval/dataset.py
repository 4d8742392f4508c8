"""EvaluationDataset: an ordered list of samples of one kind, with JSONL, pandas and Vertex I/O."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from pydantic import ValidationError

from turneval._gc import batch_collection
from turneval.errors import InvalidSampleError
from turneval.jsonl import first_undecodable, jsonl_rows
from turneval.messages import AIMessage, HumanMessage, Message, ToolCall
from turneval.samples import MultiTurnSample, Sample, SingleTurnSample, sample_id

if TYPE_CHECKING:
    import pandas as pd


__all__ = ["EvaluationDataset", "distinct_sample_ids", "sample_from_dict"]


def _describe(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or "sample"
        parts.append(f"{where}: {error['msg']}")
    return "; ".join(parts)


_MULTI_TURN_ONLY = frozenset(MultiTurnSample.model_fields) - frozenset(
    SingleTurnSample.model_fields
)


def sample_from_dict(row: Mapping[str, Any], *, index: int | str | None = None) -> Sample:
    """Build a sample from its dict: multi-turn when ``user_input`` is a list, else single-turn.

    A row without a text or list ``user_input`` that holds fields only conversations have
    (``reference_tool_calls``, ``reference_topics``) is checked as a conversation, so the
    error names ``user_input`` rather than those fields.

    Raises:
        InvalidSampleError: naming ``index`` and the offending field.
    """
    where = f"row {index}" if index is not None else "sample"
    if not isinstance(row, Mapping):
        raise InvalidSampleError(
            f"{where}: expected an object (dict), got {type(row).__name__}", sample_id=index
        )
    user_input = row.get("user_input")
    multi = isinstance(user_input, list) or (
        not isinstance(user_input, str) and not _MULTI_TURN_ONLY.isdisjoint(row)
    )  # no conversation, but a conversation's fields: its user_input is what is wrong
    kind = MultiTurnSample if multi else SingleTurnSample
    try:
        return kind.model_validate(row)
    except ValidationError as exc:
        error = exc
    cleared = _empty_ai_content(row) if multi else None
    if cleared is not None:  # only on this path: valid rows pay nothing for it
        try:
            return kind.model_validate(cleared)
        except ValidationError as exc:
            error = exc
    first = error.errors(include_url=False)[0]
    field = str(first["loc"][0]) if first["loc"] else None
    raise InvalidSampleError(
        f"{where} ({kind.__name__}): {_describe(error)}", sample_id=index, field=field
    ) from error


def _empty_ai_content(row: Mapping[str, Any]) -> dict[str, Any] | None:
    """``row`` with each AI message's null ``content`` as ``""`` (None: there is none).

    OpenAI's API and its exports give an assistant message that only calls tools
    ``"content": null``; an AI message's content defaults to ``""``.
    """
    messages = row.get("user_input")
    if not isinstance(messages, list):
        return None
    cleared = [
        {**message, "content": ""}
        if isinstance(message, Mapping)
        and message.get("type") == "ai"
        and "content" in message
        and message["content"] is None
        else message
        for message in messages
    ]
    if all(new is old for new, old in zip(cleared, messages, strict=True)):
        return None
    return {**row, "user_input": cleared}


def _trajectory(value: Any, *, index: int, key: str) -> list[ToolCall]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise InvalidSampleError(
                f"row {index}: {key} is a string but not valid JSON ({exc.msg})",
                sample_id=index,
                field=key,
            ) from exc
    if not isinstance(value, list):
        raise InvalidSampleError(
            f"row {index}: {key} must be a list of {{'tool_name', 'tool_input'}} objects, "
            f"got {type(value).__name__}",
            sample_id=index,
            field=key,
        )
    calls = []
    for position, item in enumerate(value):
        if not isinstance(item, Mapping) or "tool_name" not in item:
            raise InvalidSampleError(
                f"row {index}: {key}[{position}] must be an object with 'tool_name' "
                "(and optional 'tool_input')",
                sample_id=index,
                field=key,
            )
        args = item.get("tool_input") or {}
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except json.JSONDecodeError as exc:
                raise InvalidSampleError(
                    f"row {index}: {key}[{position}].tool_input is not valid JSON ({exc.msg})",
                    sample_id=index,
                    field=key,
                ) from exc
        try:
            calls.append(ToolCall(name=item["tool_name"], args=args))
        except ValidationError as exc:
            raise InvalidSampleError(
                f"row {index}: {key}[{position}]: {_describe(exc)}", sample_id=index, field=key
            ) from exc
    return calls


def _hint(given: object, item: object) -> str:
    """Which reader turns what was given into samples (empty when none is known)."""
    if type(given).__name__ == "DataFrame":  # iterating a DataFrame gives its column names
        return " (a DataFrame: read it with EvaluationDataset.from_pandas(frame))"
    if isinstance(item, Mapping):
        return " (dicts: read them with EvaluationDataset.from_list(rows))"
    return ""


class EvaluationDataset:
    """An ordered collection of samples, all single-turn or all multi-turn.

    Supports ``len``, iteration and indexing (an int gives a sample, a slice a dataset).
    A dataset rebuilt from traces (:mod:`turneval.traces`) counts in ``skipped_traces`` the
    traces that were no conversation, by reason (``{"no_llm_span": 2}``); ``evaluate`` copies
    them to its result.
    """

    __slots__ = ("samples", "skipped_traces")

    def __init__(self, samples: Iterable[Sample]) -> None:
        """Hold ``samples``; mixing single- and multi-turn samples raises naming the index."""
        self.samples: list[Sample] = list(samples)
        self.skipped_traces: dict[str, int] = {}
        kind: type | None = None
        for index, sample in enumerate(self.samples):
            if not isinstance(sample, (SingleTurnSample, MultiTurnSample)):
                raise InvalidSampleError(
                    f"sample {index}: expected SingleTurnSample or MultiTurnSample, "
                    f"got {type(sample).__name__}{_hint(samples, sample)}",
                    sample_id=index,
                )
            if kind is None:
                kind = type(sample)
            elif type(sample) is not kind:
                raise InvalidSampleError(
                    f"sample {index}: a dataset holds one sample type; it is a "
                    f"{type(sample).__name__} among {kind.__name__}s",
                    sample_id=index,
                )

    @classmethod
    def coerce(cls, data: EvaluationDataset | Iterable[Sample] | Sample) -> EvaluationDataset:
        """Return ``data`` if it is a dataset, else a dataset of its samples (or of one sample).

        Raises:
            InvalidSampleError: for anything else, saying what was expected.
        """
        if isinstance(data, EvaluationDataset):
            return data
        if isinstance(data, (SingleTurnSample, MultiTurnSample)):
            return cls([data])
        if isinstance(data, (str, bytes, Mapping)) or not isinstance(data, Iterable):
            raise InvalidSampleError(
                "expected an EvaluationDataset, a sample or a list of samples, got "
                f"{type(data).__name__} (read files with EvaluationDataset.from_jsonl(path))"
            )
        return cls(data)

    @property
    def is_multi_turn(self) -> bool:
        """Whether the samples are multi-turn (False for an empty dataset)."""
        return bool(self.samples) and isinstance(self.samples[0], MultiTurnSample)

    def __len__(self) -> int:
        """Number of samples."""
        return len(self.samples)

    def __iter__(self) -> Iterator[Sample]:
        """Iterate over the samples in order."""
        return iter(self.samples)

    @overload
    def __getitem__(self, index: int) -> Sample: ...
    @overload
    def __getitem__(self, index: slice) -> EvaluationDataset: ...
    def __getitem__(self, index: int | slice) -> Sample | EvaluationDataset:
        """A sample by position, or a sub-dataset by slice."""
        if isinstance(index, slice):
            return EvaluationDataset(self.samples[index])
        return self.samples[index]

    def __repr__(self) -> str:
        """Short description: kind and size."""
        kind = "multi-turn" if self.is_multi_turn else "single-turn"
        return f"EvaluationDataset({len(self)} {kind} samples)"

    # -- lists and JSONL ---------------------------------------------------------------------

    @classmethod
    def from_list(cls, rows: Iterable[Mapping[str, Any]]) -> EvaluationDataset:
        """Build from dicts; errors name the row index and field."""
        with batch_collection():  # the collector would walk every sample built so far
            return cls(sample_from_dict(row, index=index) for index, row in enumerate(rows))

    def to_list(self) -> list[dict[str, Any]]:
        """Dicts that :meth:`from_list` reads back to equal samples (``None`` fields left out)."""
        return [sample.model_dump(mode="json", exclude_none=True) for sample in self.samples]

    @classmethod
    def from_jsonl(
        cls, path: str | PathLike[str], *, lenient_json: bool = False
    ) -> EvaluationDataset:
        """Read one JSON object per line (blank lines skipped); errors name the line number.

        Args:
            path: The JSONL file (UTF-8; a byte-order mark on line 1 is skipped).
            lenient_json: Accept lines that are not strict JSON: duplicate keys (the last
                wins) and non-finite numbers (``NaN``, ``Infinity``, ``1e400``).

        Raises:
            InvalidSampleError: naming the file and line: not UTF-8, not JSON, not strict JSON
                (a duplicate key or a non-finite number, naming the key), or not a sample.
        """
        with batch_collection():  # the collector would walk every sample read so far
            return cls(
                sample_from_dict(row, index=f"line {n}")
                for n, row in jsonl_rows(path, lenient_json)
            )

    def to_jsonl(self, path: str | PathLike[str]) -> None:
        """Write one JSON object per line, UTF-8."""
        with Path(path).open("w", encoding="utf-8") as handle:
            for sample in self.samples:
                handle.write(sample.model_dump_json(exclude_none=True))
                handle.write("\n")

    # -- pandas (optional extra) -------------------------------------------------------------

    @classmethod
    def from_pandas(cls, frame: pd.DataFrame) -> EvaluationDataset:
        """Build from a DataFrame with one sample per row (NaN/None cells are left unset).

        Cells of list or dict fields (``user_input`` of conversations, ``reference_tool_calls``,
        ``retrieved_contexts``, ...) may hold JSON text, as a CSV file gives them back.
        """
        rows = []
        for record in frame.to_dict(orient="records"):
            rows.append(
                {
                    str(key): _decode_cell(str(key), value)
                    for key, value in record.items()
                    if not _is_missing(value)
                }
            )
        return cls.from_list(rows)

    def to_csv(self, path: str | PathLike[str]) -> None:
        """Write a CSV file (pandas extra), list and dict fields as JSON; :meth:`from_csv` reads it."""
        frame = self.to_pandas()
        for column in frame.columns:
            frame[column] = [
                json.dumps(value, ensure_ascii=False) if isinstance(value, (list, dict)) else value
                for value in frame[column]
            ]
        frame.to_csv(path, index=False)

    @classmethod
    def from_csv(cls, path: str | PathLike[str]) -> EvaluationDataset:
        """Read a CSV file written by :meth:`to_csv` or by ``to_pandas().to_csv(path)``.

        Raises:
            InvalidSampleError: a line is not UTF-8 (naming the file, the line and the byte),
                or a row is not a valid sample (naming the row and field).
        """
        import pandas as pd

        try:
            frame = pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""])
        except UnicodeDecodeError as exc:  # pandas names a byte of its buffer: find the line
            raise first_undecodable(path) from exc
        index = [c for c in frame.columns if str(c).startswith("Unnamed: ")]  # to_csv's index
        return cls.from_pandas(frame.drop(columns=index))

    def to_pandas(self) -> pd.DataFrame:
        """One row per sample; ``user_input`` of multi-turn samples holds message dicts."""
        import pandas as pd

        frame: pd.DataFrame = pd.DataFrame(self.to_list())
        return frame

    # -- Vertex AI ---------------------------------------------------------------------------

    @classmethod
    def from_vertex(cls, rows: Iterable[Mapping[str, Any]] | pd.DataFrame) -> EvaluationDataset:
        """Build multi-turn samples from Vertex AI agent-evaluation rows.

        ``prompt`` becomes a HumanMessage, ``predicted_trajectory`` one AIMessage with its tool
        calls, ``response`` a final AIMessage and ``reference_trajectory`` the reference tool
        calls; trajectory items are ``{"tool_name", "tool_input"}`` (``tool_input`` defaults to
        ``{}``; both lists may also be JSON strings). ``reference`` is kept. Every key is
        optional, but a row must yield at least one message.
        """
        records: Iterable[Mapping[Any, Any]] = (
            rows.to_dict(orient="records") if hasattr(rows, "to_dict") else rows
        )
        samples: list[Sample] = []
        for index, record in enumerate(records):
            row = {str(key): value for key, value in record.items() if not _is_missing(value)}
            messages: list[Message] = []
            if "prompt" in row:
                messages.append(HumanMessage(content=str(row["prompt"])))
            if "predicted_trajectory" in row:
                calls = _trajectory(
                    row["predicted_trajectory"], index=index, key="predicted_trajectory"
                )
                if calls:
                    messages.append(AIMessage(tool_calls=calls))
            if "response" in row:
                messages.append(AIMessage(content=str(row["response"])))
            if not messages:
                raise InvalidSampleError(
                    f"row {index}: yields no message; give at least one of 'prompt', "
                    "'predicted_trajectory' or 'response'",
                    sample_id=index,
                )
            reference_calls = None
            if "reference_trajectory" in row:
                reference_calls = _trajectory(
                    row["reference_trajectory"], index=index, key="reference_trajectory"
                )
            reference = row.get("reference")
            samples.append(
                MultiTurnSample(
                    user_input=messages,
                    reference=None if reference is None else str(reference),
                    reference_tool_calls=reference_calls,
                )
            )
        return cls(samples)


_STRUCTURED_FIELDS = frozenset(
    {
        "user_input",
        "reference_tool_calls",
        "reference_topics",
        "retrieved_contexts",
        "rubrics",
        "metadata",
        "agents",
        "reference_handoffs",
    }
)


def _decode_cell(key: str, value: Any) -> Any:
    """JSON (or a Python literal, as ``DataFrame.to_csv`` writes lists) in a structured field."""
    if key not in _STRUCTURED_FIELDS or not isinstance(value, str):
        return value
    text = value.strip()
    if not text.startswith(("[", "{")):
        return value
    try:
        decoded = json.loads(text)
    except json.JSONDecodeError:
        import ast

        try:
            decoded = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return value  # left to validation, which names the row and field
    if key == "user_input" and not (
        isinstance(decoded, list) and all(isinstance(item, dict) for item in decoded)
    ):
        return value  # a single-turn prompt that merely looks like JSON
    return decoded


def _is_missing(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float):
        return value != value  # NaN
    return False


def distinct_sample_ids(samples: Sequence[Sample]) -> list[str]:
    """Each sample's readable id (:func:`~turneval.samples.sample_id`), made distinct.

    A repeated id is numbered in order (``#1``, ``#2``, ...), skipping numbers another
    sample's id already has: pytest needs distinct test ids.
    """
    ids = [sample_id(sample, position) for position, sample in enumerate(samples)]
    counts = Counter(ids)
    taken = set(ids)
    last: dict[str, int] = {}
    for position, name in enumerate(ids):
        if counts[name] > 1:
            number = last.get(name, 0) + 1
            while f"{name}#{number}" in taken:
                number += 1
            last[name] = number
            ids[position] = f"{name}#{number}"
            taken.add(ids[position])
    return ids
