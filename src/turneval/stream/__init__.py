"""Evaluate a JSONL file of any size: read, score and write as it goes, in bounded memory.

:func:`evaluate_jsonl` scores a source of samples (a JSONL file, OTLP/JSON traces:
:class:`JsonlSource`, :class:`OtlpSource`) line by line into a run folder: results.jsonl (one
row per non-blank line, in input order, flushed as written), summary.json and report.html;
:class:`StreamResult` is what it leaves in memory. With ``resume=True`` the rows of an
interrupted run are kept and their lines skipped (:func:`finished_lines`). Its ``engine``
(:mod:`turneval.engines`: ``Local``, ``Ray``, ``Batch``) scores the chunks.

The package, from the bottom up: :mod:`~turneval.stream._chunks` (the input read into chunks
of numbered lines; a scored :class:`~turneval.stream._chunks.Chunk`),
:mod:`~turneval.stream._sources` (the input and how to read it),
:mod:`~turneval.stream.scoring` (a chunk scored), :mod:`~turneval.stream._resume` (a partial
run read back), :mod:`~turneval.stream._sink` (rows written, totals, summary, run store),
:mod:`~turneval.stream._engine` (what an engine is handed), :mod:`~turneval.stream._workers`
(worker processes), :mod:`~turneval.stream._run` (the run around an engine's scorer) and
:mod:`~turneval.stream._evaluate` (the front end). Each line is read into a sample by
:func:`turneval._sample_lines.parse_line`.
"""

from turneval.stream._chunks import FIRST_ERRORS, UNREADABLE, RowError, is_otlp
from turneval.stream._engine import ChunkEngine, ChunkWork
from turneval.stream._evaluate import evaluate_jsonl
from turneval.stream._resume import ResumeWarning, finished_lines
from turneval.stream._run import StreamJob
from turneval.stream._sink import StreamResult
from turneval.stream._sources import JsonlSource, OtlpSource, Source

__all__ = [
    "ChunkEngine",
    "ChunkWork",
    "FIRST_ERRORS",
    "JsonlSource",
    "OtlpSource",
    "ResumeWarning",
    "RowError",
    "Source",
    "StreamJob",
    "StreamResult",
    "UNREADABLE",
    "evaluate_jsonl",
    "finished_lines",
    "is_otlp",
]
