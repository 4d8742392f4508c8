"""The Ray engine on a local 2-CPU Ray cluster: the same rows as a local run, one quota.

evaluate_on_ray, its deprecated front end, is checked here too (it runs the same engine).
"""

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from turneval import ConfigError
from turneval.engines import Local, Ray
from turneval.ratelimit import RateLimit
from turneval.results import EvaluationResult
from turneval.stream import evaluate_jsonl
from turneval.traces import from_otlp_json

from ._builders import call, conversation
from ._openai_stub import OpenAIStub, Reply
from .test_four_sinks import in_memory, the_same, traces_file, trials_file
from .test_row_evaluators import FailedRows

ray = pytest.importorskip("ray")

from turneval.distributed import DistributedResult, evaluate_on_ray  # noqa: E402

pytestmark = [  # Ray warns about its own deprecated settings while it starts
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
]

METRICS = ["tool_call_f1", "trajectory_in_order_match"]
ROOT = Path(__file__).resolve().parent.parent  # the workers import tests and turneval from here
RATED = json.dumps({"explanation": "fine", "score": 3})


ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module", autouse=True)
def cluster() -> Iterator[None]:
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        # the workers import this checkout's turneval, as the driver does (not an installed one)
        runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}},
    )
    yield
    ray.shutdown()


def sample_lines(n: int) -> list[str]:
    """Good samples of varying calls, with a bad line and a blank line among them."""
    names = ["a", "b", "c"]
    lines = []
    for i in range(n):
        calls = [call(names[(i + k) % 3]) for k in range(1 + i % 3)]
        sample = conversation(calls, reference=[call("a"), call("b")])
        lines.append(sample.model_dump_json(exclude_none=True))
    lines[7] = "{not json"
    lines[11] = ""
    return lines


def rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_same_rows_and_summary_as_a_local_run(tmp_path: Path) -> None:
    data = tmp_path / "data.jsonl"
    # the three traces of test_four_sinks, saved as samples (with reference calls): agent rows
    traces = [
        sample.model_copy(update={"reference_tool_calls": [call("f")]}).model_dump_json()
        for sample in from_otlp_json(traces_file(tmp_path))
    ]
    data.write_text("".join(line + "\n" for line in [*sample_lines(3000), *traces]))
    local = tmp_path / "local"
    aggregates = [FailedRows()]  # a user's aggregate, computed in the driver from the rows
    here = evaluate_jsonl(
        data,
        METRICS,
        local,
        engine=Local(workers=1, chunk_size=100),
        details=False,
        aggregates=aggregates,
    )
    context = ray.data.DataContext.get_current()  # the user's own Ray Data settings
    context.enable_progress_bars, context.execution_options.preserve_order = True, False
    stream = evaluate_jsonl(
        data,
        METRICS,
        tmp_path / "ray",
        engine=Ray(chunk_size=350),
        details=False,
        aggregates=aggregates,
    )
    result = DistributedResult(stream, tmp_path / "ray")
    # are theirs again once the run is over
    assert (context.enable_progress_bars, context.execution_options.preserve_order) == (True, False)
    assert isinstance(result, DistributedResult)
    assert rows(result.results_path) == rows(local / "results.jsonl")  # row by row
    assert result.summary() == json.loads((local / "summary.json").read_text())
    # one summariser: Ray's summary is the file's read back, agent figures of the traces first
    back = EvaluationResult.from_jsonl(result.results_path).summary().to_dict()
    assert result.summary()["metrics"] == back
    assert list(back)[:2] == ["latency_in_seconds", "failure"]
    assert back["failure"]["mean"] == 1 / 3 and back["latency_in_seconds"]["mean"] == 3.0
    assert result.stream.total_rows == 3002 and result.stream.bad_lines == 1
    # the one failed row is the unreadable line 8
    assert result.stream.aggregates == here.aggregates == {"failed_row_share": 1 / 3002}
    assert result.summary()["aggregates"] == {"failed_row_share": 1 / 3002}
    assert result.to_pandas()["line"].tolist()[:8] == [1, 2, 3, 4, 5, 6, 7, 8]


def test_four_sinks_give_one_summary_on_the_same_data(tmp_path: Path) -> None:
    # the traces of test_four_sinks (saved as samples) and its saved trials, in memory,
    # streamed, read back from results.jsonl and on Ray: every figure of every summary equal
    from turneval import EvaluationDataset
    from turneval.metrics import Evaluator, ToolCallF1, TrajectorySingleToolUse

    data = tmp_path / "data.jsonl"
    samples = [
        *from_otlp_json(traces_file(tmp_path)),
        *EvaluationDataset.from_jsonl(trials_file(tmp_path)),
    ]
    EvaluationDataset(samples).to_jsonl(data)
    metrics: list[Evaluator] = [TrajectorySingleToolUse(tool_name="f"), ToolCallF1()]
    evaluate_jsonl(data, metrics, tmp_path / "streamed", engine=Local(workers=1))
    ray_run = evaluate_jsonl(data, metrics, tmp_path / "ray", engine=Ray(chunk_size=4))
    on_ray = DistributedResult(ray_run, tmp_path / "ray")
    summaries: dict[str, dict[str, dict[str, Any]]] = {
        "memory": in_memory(data, metrics),
        "summary.json": json.loads((tmp_path / "streamed" / "summary.json").read_text())["metrics"],
        "from_jsonl": EvaluationResult.from_jsonl(tmp_path / "streamed" / "results.jsonl")
        .summary()
        .to_dict(),
        "ray": on_ray.summary()["metrics"],
    }
    the_same(summaries)
    # what is compared is there: the traces' agent figures, the trials' pass^k
    assert summaries["ray"]["latency_in_seconds"]["mean"] == 3.0
    assert summaries["ray"]["tool_call_f1"]["extra"]["pass@3"] == 2 / 3


def test_a_killed_worker_loses_and_duplicates_no_row(tmp_path: Path) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text("".join(line + "\n" for line in sample_lines(300)))
    marker = tmp_path / "killed"
    from turneval.metrics import CustomMetric

    def dies_once(instance: dict[str, Any]) -> float:
        """Kills its worker process the first time it is called in the run."""
        if not marker.exists():
            marker.write_text("x")
            os._exit(1)
        return float(len(instance["user_input"]))

    metric = CustomMetric(name="length", metric_function=dies_once)
    stream = evaluate_jsonl(data, [metric], tmp_path / "out", engine=Ray(chunk_size=25))
    result = DistributedResult(stream, tmp_path / "out")
    assert marker.exists()  # a worker did die
    lines = [row["line"] for row in rows(result.results_path)]
    assert lines == [n for n in range(1, 301) if n != 12]  # every row once, in order
    assert all(row["length"] is not None for row in rows(result.results_path) if row["line"] != 8)


def test_one_quota_across_workers_and_resume_pays_nothing(tmp_path: Path) -> None:
    from langchain_openai import ChatOpenAI

    from turneval.metrics import PointwiseMetric

    stub = OpenAIStub()
    stub.reset(default=Reply(RATED, delay=0.02))
    try:
        url = stub.url
        questions = [
            json.dumps({"user_input": f"Question {i}?", "response": f"Answer {i}."})
            for i in range(40)
        ]
        data = tmp_path / "q.jsonl"
        data.write_text("".join(q + "\n" for q in questions))
        clarity = PointwiseMetric(
            name="clarity", criteria="Clear?", rating_rubric={"1": "no", "3": "ok", "5": "yes"}
        )

        def judge() -> Any:
            return ChatOpenAI(model="gpt-4o-mini", base_url=url, api_key="k")

        quota = RateLimit(requests_per_minute=1200, max_in_flight=4)  # 20 a second
        out = tmp_path / "out"
        engine = Ray(llm_factory=judge, chunk_size=10)
        result = DistributedResult(
            evaluate_jsonl(data, [clarity], out, engine=engine, rate_limit=quota), out
        )
        assert [row["clarity"] for row in rows(result.results_path)] == [3.0] * 40
        times = sorted(stub.times)
        assert len(times) == 40
        # 2 workers share one quota: 40 requests take at least 39 gaps of 1/20 s (two quotas of
        # their own would let them through in about half that), and any second holds at most
        # 20 arrivals (+2 for the jitter between a start and its arrival on a loaded machine).
        assert times[-1] - times[0] >= 39 / 20 * 0.95
        most = max(sum(1 for t in times if start <= t < start + 1.0) for start in times)
        assert most <= 22
        resumed = evaluate_jsonl(
            data, [clarity], out, engine=Ray(llm_factory=judge), rate_limit=quota, resume=True
        )
        again = DistributedResult(resumed, out)
        assert len(stub.requests) == 40  # nothing scored twice
        assert rows(again.results_path) == rows(result.results_path)
        assert again.summary()["metrics"]["clarity"]["mean"] == 3.0
    finally:
        stub.close()


def test_configuration_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from turneval.metrics import PointwiseMetric
    from turneval.testing import ScriptedChatModel

    from .metrics.test_capabilities import AsksWhenTold

    data = tmp_path / "d.jsonl"
    data.write_text(sample_lines(20)[0] + "\n")
    out = tmp_path / "o"
    judged = PointwiseMetric(name="c", criteria="c", rating_rubric={"1": "a", "2": "b"})
    with pytest.raises(ConfigError, match=r"need an LLM judge: pass Ray\(llm_factory=\.\.\.\)"):
        evaluate_jsonl(data, [judged], out, engine=Ray())
    with pytest.raises(ConfigError, match=r"builds the judge in each worker: pass Ray\(llm_fac"):
        evaluate_jsonl(data, [judged], out, engine=Ray(), llm=ScriptedChatModel(responses=[]))
    holding = judged.model_copy(update={"llm": ScriptedChatModel(responses=[RATED])})
    with pytest.raises(ConfigError, match="not shipped to Ray workers"):
        evaluate_jsonl(data, [holding], out, engine=Ray(llm_factory=lambda: None))
    # a metric of the user's that declares it needs a judge (Evaluator.needs_judge), before
    # the input is read: the missing file is not what fails
    with pytest.raises(ConfigError, match="capability_probe_asks_when_told.*need an LLM judge"):
        evaluate_jsonl(tmp_path / "missing.jsonl", [AsksWhenTold()], out, engine=Ray())
    with pytest.raises(ConfigError, match="invalid Ray engine setting: workers: Input should"):
        Ray(workers=0)
    with pytest.raises(ConfigError, match="output_format: Input should be 'jsonl' or 'parquet'"):
        Ray(output_format="csv")
    # evaluate_on_ray: deprecated, with its settings checked by the engine, and its 0.x names
    with (
        pytest.warns(DeprecationWarning, match=r"evaluate_on_ray is deprecated: use evaluate_js"),
        pytest.raises(ConfigError, match="invalid Ray engine setting: workers"),
    ):
        evaluate_on_ray(data, METRICS, output=out, concurrency=0)
    with (
        pytest.warns(DeprecationWarning, match=r"sample_concurrency=\.\.\.\) is deprecated"),
        pytest.raises(ConfigError, match="output_format"),
    ):
        evaluate_on_ray(data, METRICS, output=out, output_format="csv", sample_concurrency=2)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="'sample_concurency'"):
        evaluate_on_ray(data, METRICS, output=out, sample_concurency=2)
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ConfigError, match=r"pip install 'turneval\[ray\]'"):
        evaluate_jsonl(data, METRICS, out, engine=Ray())
    assert not out.exists()  # nothing made for a run that cannot start


def test_cli_engine_ray_writes_what_the_local_engine_writes(tmp_path: Path) -> None:
    from turneval.cli import main

    data = tmp_path / "data.jsonl"
    data.write_text("".join(line + "\n" for line in sample_lines(120)))
    common = ["evaluate", str(data), "--metric", "tool_call_f1", "--quiet", "--max-failed", "1"]
    assert main([*common, "--out", str(tmp_path / "local"), "--workers", "1"]) == 0
    assert main([*common, "--out", str(tmp_path / "ray"), "--engine", "ray"]) == 0
    assert rows(tmp_path / "ray" / "results.jsonl") == rows(tmp_path / "local" / "results.jsonl")
    # as locally, an existing results.jsonl is kept unless --overwrite or --resume is given
    assert main([*common, "--out", str(tmp_path / "ray"), "--engine", "ray"]) == 2


def test_a_ray_dataset_and_a_parquet_folder_give_the_rows_of_the_same_jsonl(tmp_path: Path) -> None:
    # Parquet cannot hold an empty struct: calls with arguments here.
    samples = [
        conversation([call("a", city="Paris", days=i)], reference=[call("a", city="Paris", days=1)])
        for i in range(30)
    ]
    lines = [sample.model_dump_json(exclude_none=True) for sample in samples]
    data = tmp_path / "data.jsonl"
    data.write_text("".join(line + "\n" for line in lines))
    evaluate_jsonl(data, METRICS, tmp_path / "local", engine=Local(workers=1))
    expected = rows(tmp_path / "local" / "results.jsonl")
    records = [json.loads(line) for line in lines]
    # evaluate_on_ray (deprecated) runs the Ray engine as evaluate_jsonl does
    with pytest.warns(DeprecationWarning, match="evaluate_on_ray is deprecated"):
        from_dataset = evaluate_on_ray(
            ray.data.from_items(records), METRICS, output=tmp_path / "ds"
        )
    assert rows(from_dataset.results_path) == expected
    parquet = tmp_path / "parquet"
    ray.data.from_items(records, override_num_blocks=1).write_parquet(str(parquet))
    engine = Ray(output_format="parquet")
    evaluate_jsonl(parquet, METRICS, tmp_path / "pq", engine=engine)
    assert rows(tmp_path / "pq" / "results.jsonl") == expected
    # the CLI reads its input through the engine: --engine ray takes the Parquet folder too
    from turneval.cli import main

    flags = [flag for name in METRICS for flag in ("--metric", name)]
    cli_out = tmp_path / "cli-pq"
    command = ["evaluate", str(parquet), *flags, "--details", "--quiet", "--out", str(cli_out)]
    assert main([*command, "--engine", "ray"]) == 0
    assert rows(cli_out / "results.jsonl") == expected
    import pandas as pd

    written = pd.read_parquet(tmp_path / "pq" / "results.parquet").sort_values("index")
    assert written["index"].tolist() == [row["index"] for row in expected]
    for name in METRICS:
        assert written[name].tolist() == [row[name] for row in expected]
        assert written[f"{name}_reason"].tolist() == [row[f"{name}_reason"] for row in expected]


def test_a_parquet_cell_that_is_not_utf8_costs_its_row_only(tmp_path: Path) -> None:
    import numpy as np
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    samples = [conversation([call("a", k=i)], reference=[call("a", k=1)]) for i in range(12)]
    table = pa.Table.from_pylist([sample.model_dump(exclude_none=True) for sample in samples])
    texts = [b"fine"] * 12
    texts[4] = b"f\xffne"  # row 5: Parquet stores the bytes unchecked
    offsets = np.cumsum([0, *map(len, texts)], dtype=np.int32)
    buffers = [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(b"".join(texts))]
    table = table.append_column("reference", pa.Array.from_buffers(pa.string(), 12, buffers))
    data = tmp_path / "data.parquet"
    pq.write_table(table, data)

    class Batches:  # what the Ray engine reads of ray.data.read_parquet: Arrow batches
        def iter_batches(self, *, batch_size: None, batch_format: str) -> Iterator[Any]:
            assert batch_format == "pyarrow"
            for batch in pq.read_table(data).to_batches(max_chunksize=5):
                yield pa.Table.from_batches([batch])

    # the Ray engine's first step (the rows as JSONL, in order), then the local scorer (the
    # one its actors run); a Ray Data pass costs tens of seconds on a loaded 2-core runner.
    from turneval.engines._ray_rows import write_rows

    written = write_rows(Batches(), tmp_path, str(data))
    evaluate_jsonl(written, METRICS, tmp_path / "out", engine=Local(workers=1))
    scored = rows(tmp_path / "out" / "results.jsonl")
    assert [row["line"] for row in scored] == list(range(1, 13))
    assert [row["tool_call_f1"] for row in scored] == [0.0, 1.0, 0.0, 0.0, None] + [0.0] * 7
    assert scored[4]["tool_call_f1_error"] == (
        f"InvalidSampleError: line 5: row 5 of {data}: column 'reference' is not valid UTF-8 "
        "(byte 0xff at byte offset 1)"
    )


def test_a_429_burst_shrinks_the_workers_window(tmp_path: Path) -> None:
    import threading

    from langchain_openai import ChatOpenAI

    from turneval.metrics import PointwiseMetric

    stub = OpenAIStub()
    arrivals: list[int] = []  # requests in flight at the server as each one arrives
    lock = threading.Lock()
    first_round = threading.Event()  # set once the whole window has arrived: it stays set

    def respond(body: dict[str, Any]) -> Reply:
        with lock:
            arrivals.append(stub.in_flight)
            seen = len(arrivals)
            if seen == 4:
                first_round.set()
        if seen <= 4:  # the first round: held until the whole window is in flight, then 429
            first_round.wait(20.0)  # (a count read in a loop missed it once one had answered)
            return Reply(status=429, headers={"retry-after": "0"})
        return Reply(RATED, delay=0.02)

    stub.reset(responder=respond)
    try:
        url = stub.url
        data = tmp_path / "q.jsonl"
        data.write_text(
            "".join(
                json.dumps({"user_input": f"Question {i}?", "response": f"Answer {i}."}) + "\n"
                for i in range(20)
            )
        )
        clarity = PointwiseMetric(
            name="clarity", criteria="Clear?", rating_rubric={"1": "no", "3": "ok", "5": "yes"}
        )

        def judge() -> Any:
            return ChatOpenAI(model="gpt-4o-mini", base_url=url, api_key="k")

        evaluate_jsonl(
            data,
            [clarity],
            tmp_path / "out",
            engine=Ray(llm_factory=judge, workers=1),
            rate_limit=RateLimit(requests_per_minute=60_000, max_in_flight=4),
            max_concurrency=8,
        )
        assert [row["clarity"] for row in rows(tmp_path / "out" / "results.jsonl")] == [3.0] * 20
        assert len(arrivals) == 20 + 4  # the burst cost 4 retries, no row
        # 4 answers of 429 (one round) halve the actor's window from 4 to 2: the requests
        # right after the burst are at most 2 in flight.
        assert max(arrivals[4:6]) <= 2
        assert stub.peak_in_flight <= 4
    finally:
        stub.close()


def test_to_pandas_keeps_the_rows_types(tmp_path: Path) -> None:
    # ids that look like numbers stay text; scores are floats (NaN where failed), errors None
    lines = [
        conversation([call("a")], reference=[call("a")]).model_copy(update={"metadata": {"id": i}})
        for i in ("001", "010")
    ]
    data = tmp_path / "data.jsonl"
    data.write_text("".join(s.model_dump_json(exclude_none=True) + "\n" for s in lines) + "{\n")
    from turneval.metrics import CustomMetric, Evaluator

    def broken(instance: dict[str, Any]) -> float:
        return float(instance["budget"])  # a bug: KeyError, with a traceback on the row

    metrics: list[Evaluator | str] = [
        "tool_call_f1",
        CustomMetric(name="budget", metric_function=broken),
    ]
    stream = evaluate_jsonl(data, metrics, tmp_path / "out", engine=Local(workers=1), details=False)
    frame = DistributedResult(stream, tmp_path / "out").to_pandas()
    assert frame["id"].tolist()[:2] == ["001", "010"]
    assert frame["tool_call_f1"].dtype == float and frame["tool_call_f1"].tolist()[:2] == [1.0, 1.0]
    assert frame["tool_call_f1_error"].tolist()[:2] == [None, None]
    assert frame["tool_call_f1_error"][2].startswith("InvalidSampleError: line 3")
    # a traceback stays in results.jsonl, not a column (as EvaluationResult.to_pandas)
    assert frame["budget_error"][0].startswith("KeyError")
    assert "budget_traceback" in rows(tmp_path / "out" / "results.jsonl")[0]
    assert not [column for column in frame.columns if column.endswith("_traceback")]


def test_a_missing_input_or_a_kept_results_file_is_refused_before_ray_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def started(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("Ray was started")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)  # as in a fresh driver
    monkeypatch.setattr(ray, "init", started)
    from turneval import InvalidSampleError

    for missing, message in (("none.jsonl", "no such file"), ("none.parquet", "no such file")):
        with pytest.raises(InvalidSampleError, match=f"{missing}: {message}"):
            evaluate_jsonl(tmp_path / missing, METRICS, tmp_path / "o", engine=Ray())
    with pytest.raises(InvalidSampleError, match="a folder, not a JSONL file"):
        evaluate_jsonl(tmp_path, METRICS, tmp_path / "o", engine=Ray())
    assert not (tmp_path / "o").exists()  # nothing made for a run that cannot start
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "results.jsonl").write_text('{"index": 0}\n')
    data = tmp_path / "d.jsonl"
    data.write_text(sample_lines(20)[0] + "\n")
    with pytest.raises(ConfigError, match="already exists; resume it"):
        evaluate_jsonl(data, METRICS, kept, engine=Ray(), overwrite=False)


def test_a_ray_run_hands_its_rows_to_its_sinks(tmp_path: Path) -> None:
    from turneval.runs import MemorySink

    data = tmp_path / "data.jsonl"
    data.write_text("".join(line + "\n" for line in sample_lines(20)))
    memory = MemorySink()
    on_ray = evaluate_jsonl(
        data, METRICS, tmp_path / "ray", engine=Ray(chunk_size=4), sinks=[memory]
    )
    assert memory.manifest is not None and memory.manifest.metric_names == METRICS
    assert memory.status == "finished"
    assert memory.summary == json.loads((tmp_path / "ray" / "summary.json").read_text())
    kept = memory.result()
    written = rows(tmp_path / "ray" / "results.jsonl")
    assert [row.index for row in kept.rows] == [row["index"] for row in written]
    # the bad line's row (line 8) has no score: NaN in memory, null in the file
    assert [str(score) for score in kept.scores("tool_call_f1")] == [
        str(float("nan") if row["tool_call_f1"] is None else row["tool_call_f1"]) for row in written
    ]
    assert written[7]["tool_call_f1"] is None and str(kept.scores("tool_call_f1")[7]) == "nan"
    assert on_ray.total_rows == len(written) == 19  # the blank line is no row
