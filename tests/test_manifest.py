"""One run manifest: every metric is recorded one way and built again from its record.

``MetricSpec.of(metric).build()`` gives the metric again (same configuration) for every
built-in metric and for many configurations of them; run files written before the manifest
(the class as ``module.Qualname`` by the stream's and the store's writers, as
``module:Qualname`` by batch runs, watch's without a judge server) are read, compared and
resumed as the same runs; a run file never makes turneval import a module of its choosing.
"""

from __future__ import annotations

import enum
import json
import sys
import types
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st
from langchain_openai import ChatOpenAI
from pydantic import ValidationError

from turneval import ConfigError
from turneval._moved import MOVED
from turneval.manifest import (
    CLASS_KEY,
    DatasetSpec,
    JudgeSpec,
    MetricSpec,
    RunManifest,
    class_path,
    judge_base_url,
    resolve_class,
)
from turneval.metrics import (
    AgentGoalAccuracyWithoutReference,
    DistanceMeasure,
    Evaluator,
    ExactMatch,
    Explained,
    JudgedMetric,
    MultiTurnMetric,
    NonLLMStringSimilarity,
    StateAssertions,
    ToolCallAccuracy,
    ToolCallF1,
    TrajectorySingleToolUse,
    builtin_metrics,
)
from turneval.samples import MultiTurnSample

OLD_PATHS = {new: old for old, new in MOVED.items()}  # module -> its path before it moved


class CallsAtLeast(MultiTurnMetric):
    """A user's metric (defined outside turneval)."""

    name: str = "test_calls_at_least"
    count: int = 1

    async def _evaluate(self, sample: MultiTurnSample) -> Explained:
        return Explained(float(len(sample.tool_calls) >= self.count))


def cancelled(state: Any) -> bool:
    """A predicate on a world's end state (a module's function: recorded by its path)."""
    return bool(state["orders"]["A100"]["status"] == "cancelled")


def _needs_arguments(cls: type[Evaluator]) -> Evaluator:
    if cls is TrajectorySingleToolUse:
        return TrajectorySingleToolUse(tool_name="search")
    if cls is StateAssertions:
        return StateAssertions(assertions={"A100 cancelled": cancelled})
    built: Evaluator = cls()  # type: ignore[call-arg]  # every other one has defaults
    return built


def _same(metric: Evaluator) -> None:
    """The metric's record builds it again, also after a trip through JSON."""
    spec = MetricSpec.of(metric)
    assert type(spec.build()) is type(metric)
    assert MetricSpec.of(spec.build()) == spec
    again = MetricSpec.from_dict(json.loads(json.dumps(spec.to_dict())))
    assert again == spec
    assert MetricSpec.of(again.build()) == spec


@pytest.mark.parametrize("name", sorted(builtin_metrics()))
def test_every_built_in_metric_is_built_again_from_its_record(name: str) -> None:
    metric = _needs_arguments(builtin_metrics()[name])
    _same(metric)
    assert MetricSpec.of(metric).class_path == class_path(type(metric))


def test_the_class_path_is_the_public_one_in_one_form() -> None:
    # ToolCallF1 is defined in turneval.metrics._tool_calls; its path is where users import it,
    # so the record does not change when it moves between turneval's modules
    assert ToolCallF1.__module__ == "turneval.metrics._tool_calls"
    assert class_path(ToolCallF1) == "turneval.metrics:ToolCallF1"
    assert class_path(CallsAtLeast) == "tests.test_manifest:CallsAtLeast"
    for path in (
        "turneval.metrics:ToolCallF1",
        "turneval.metrics.ToolCallF1",  # dotted: the stream's and the store's old writers
        "turneval.metrics._tool_calls.ToolCallF1",  # the defining module
        "turneval.metrics.tool_calls.ToolCallF1",  # the defining module before it moved
        "turneval.metrics.tool_calls:ToolCallF1",  # batch's old writer
    ):
        assert resolve_class(path) is ToolCallF1


def _pick(values: list[Any]) -> st.SearchStrategy[Any]:
    return st.sampled_from(values)


SIMPLE: dict[Any, st.SearchStrategy[Any]] = {
    bool: st.booleans(),
    int: _pick([0, 1, 2, 3, 7, 2048]),
    float: st.one_of(_pick([0.0, 0.5, 1.0, 3.0, 30.0]), st.floats(0.01, 1.0)),
    str: st.text("abcxyz_ ", min_size=1, max_size=8),
}


def _strategy(annotation: Any) -> st.SearchStrategy[Any] | None:
    """Values of a field of a simple type (None: not one this test draws)."""
    if annotation in SIMPLE:
        return SIMPLE[annotation]
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return st.sampled_from(list(annotation))
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Literal:
        return st.sampled_from(args)
    if origin in (Union, types.UnionType) and type(None) in args:
        inner = [_strategy(arg) for arg in args if arg is not type(None)]
        if all(strategy is not None for strategy in inner):
            return st.one_of(st.none(), *[s for s in inner if s is not None])
    return None


CLASSES = sorted(builtin_metrics().values(), key=lambda cls: cls.__name__)
RULES: st.SearchStrategy[dict[str, dict[str, Any]]] = st.dictionaries(
    st.sampled_from(["*", "book", "search"]),
    st.dictionaries(
        st.sampled_from(["city", "date", "request_id"]),
        st.one_of(
            st.sampled_from(["exact", "ignore", "casefold", "subset", "superset"]),
            st.builds(
                dict,
                kind=st.just("numeric"),
                tolerance=st.floats(0, 5),
                relative=st.floats(0, 1),
            ),
            st.builds(dict, kind=st.just("fuzzy"), threshold=st.floats(0, 1)),
            st.builds(dict, kind=st.just("custom"), compare=st.just(ExactMatch())),
        ),
        max_size=2,
    ),
    max_size=2,
)


@settings(max_examples=100, suppress_health_check=[HealthCheck.filter_too_much])
@given(data=st.data())
def test_configurations_are_built_again_from_their_records(data: st.DataObject) -> None:
    cls = data.draw(st.sampled_from(CLASSES))
    fields: dict[str, Any] = {}
    for name, info in cls.model_fields.items():
        strategy = _strategy(info.annotation)
        if strategy is not None and name != "name" and data.draw(st.booleans()):
            fields[name] = data.draw(strategy)
    if "arg_rules" in cls.model_fields and data.draw(st.booleans()):
        fields["arg_rules"] = data.draw(RULES)
    if "arg_comparison_metric" in cls.model_fields:
        fields["arg_comparison_metric"] = data.draw(
            st.sampled_from(
                [None, ExactMatch(), NonLLMStringSimilarity(distance_measure=DistanceMeasure.JARO)]
            )
        )
    if issubclass(cls, JudgedMetric) and data.draw(st.booleans()):
        fields["examples"] = data.draw(
            st.lists(st.builds(dict, input=st.text(max_size=5), output=st.text(max_size=5)))
        )
    if cls is TrajectorySingleToolUse:
        fields["tool_name"] = "search"
    if cls is StateAssertions:
        fields["assertions"] = {"A100 cancelled": cancelled}
    try:
        metric = cls(**fields)
    except (ValidationError, ConfigError, ValueError, TypeError):
        reject()
    _same(metric)


def test_a_metric_held_in_a_field_keeps_its_class() -> None:
    metric = ToolCallAccuracy(
        arg_comparison_metric=NonLLMStringSimilarity(distance_measure=DistanceMeasure.JARO)
    )
    config = MetricSpec.of(metric).config
    assert config is not None
    assert config["arg_comparison_metric"] == {
        CLASS_KEY: "turneval.metrics:NonLLMStringSimilarity",
        **MetricSpec.of(NonLLMStringSimilarity(distance_measure=DistanceMeasure.JARO)).config,  # type: ignore[dict-item]
    }
    built = MetricSpec.of(metric).build()
    assert isinstance(built, ToolCallAccuracy)
    assert built.arg_comparison_metric == NonLLMStringSimilarity(
        distance_measure=DistanceMeasure.JARO
    )


def test_a_judge_is_recorded_by_name_and_given_back_apart() -> None:
    judge = ChatOpenAI(
        model="gpt-4o-mini", api_key="sk-secret", base_url="http://u:pw@127.0.0.1:9/v1?key=k"
    )
    metric = AgentGoalAccuracyWithoutReference(llm=judge)
    spec = MetricSpec.of(metric)
    text = json.dumps(spec.to_dict())
    assert spec.config is not None and spec.config["llm"] == "gpt-4o-mini"
    assert "sk-secret" not in text and "pw" not in text
    built, given = spec.build(), spec.build(judge)
    assert isinstance(built, JudgedMetric) and isinstance(given, JudgedMetric)
    assert built.llm is None  # a model's name builds no model
    assert given.llm is judge
    # a metric loading a judge configuration (anything with a digest): which one is recorded
    loaded = types.SimpleNamespace(
        digest="sha256:abc", parent=None, model="gpt-4o", labels_digest="sha256:l"
    )
    configured = types.SimpleNamespace(name="fluency", judge_config=loaded)
    recorded = JudgeSpec.of(judge, [metric, configured])
    assert recorded.to_dict() == {
        "model": "gpt-4o-mini",
        "base_url": "http://127.0.0.1:9/v1",  # no user, password or query
        "prompt_version": None,
        "configs": {
            "fluency": {
                "digest": "sha256:abc",
                "parent": None,
                "model": "gpt-4o",
                "labels_digest": "sha256:l",
            }
        },
    }
    assert JudgeSpec.from_dict(recorded.to_dict()) == recorded
    assert "configs" not in JudgeSpec.of(judge, [metric]).to_dict()  # none loaded: not written
    assert judge_base_url(None) is None and JudgeSpec.of(None).to_dict()["model"] is None


def test_a_users_metric_is_built_once_its_module_is_imported(tmp_path: Path) -> None:
    _same(CallsAtLeast(count=3))  # this module is imported: its class is found
    # a run file naming a module nobody imported: refused, and the module is not imported
    (tmp_path / "planted_metrics.py").write_text(
        "from pathlib import Path\n"
        f"Path({str(tmp_path / 'imported')!r}).touch()\n"
        "from tests.test_manifest import CallsAtLeast as Planted\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        spec = MetricSpec("p", "planted_metrics:Planted", {"name": "p", "count": 2})
        with pytest.raises(ConfigError, match="module planted_metrics is not imported"):
            spec.build()
        assert not (tmp_path / "imported").exists() and "planted_metrics" not in sys.modules
        built = spec.build(import_any=True)  # a folder the caller wrote itself (batch runs)
        assert (tmp_path / "imported").exists()
        assert isinstance(built, CallsAtLeast) and built.count == 2
        assert spec.build(classes=[CallsAtLeast]).name == "p"
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("planted_metrics", None)
    with pytest.raises(ConfigError, match=r"metric m \(turneval.metrics:ToolCallF1\): "):
        MetricSpec("m", "turneval.metrics:ToolCallF1", {"nonsense": 1}).build()
    with pytest.raises(ConfigError, match="its class is not recorded"):
        MetricSpec("m", config={}).build()  # a run imported from a folder without run.json
    with pytest.raises(ConfigError, match="its configuration is not recorded"):
        MetricSpec("m").build()


def _old_stream_run_json(metric: Evaluator, judge: Any) -> dict[str, Any]:
    """run.json as the stream's writer (``_runfile.RunFile``) wrote it before the manifest."""
    cls = type(metric)
    return {
        "turneval_version": "0.1.0",
        "metrics": [
            {
                "name": metric.name,
                "class": f"{OLD_PATHS.get(cls.__module__, cls.__module__)}.{cls.__qualname__}",
                "config": {
                    name: (
                        getattr(metric, name).model_name
                        if name == "llm" and getattr(metric, name) is not None
                        else json.loads(json.dumps(getattr(metric, name), default=str))
                    )
                    for name in cls.model_fields
                },
            }
        ],
        "judge": {"model": judge, "base_url": None, "prompt_version": None},
        "dataset": {"path": "data.jsonl", "sha256": "ab", "lines_read": 3, "bytes_read": 30},
    }


def test_run_files_from_before_the_manifest_read_as_the_same_run() -> None:
    metric = ToolCallF1(match_threshold=0.5)
    old = RunManifest.from_dict(_old_stream_run_json(metric, "gpt-4o-mini"))
    new = RunManifest.of([metric], ChatOpenAI(model="gpt-4o-mini", api_key="x"))
    assert old.metrics[0].class_path == "turneval.metrics.tool_calls.ToolCallF1"
    assert new.metrics[0].class_path == "turneval.metrics:ToolCallF1"
    assert old.changes(new) == []  # the same run: resume continues it, compare compares it
    assert old.metric_changes(new) == []
    assert old.build_metrics() == [metric]
    assert old.dataset == DatasetSpec("data.jsonl", "ab", 3, 30)
    changed = RunManifest.of([ToolCallF1(match_threshold=0.8)], None)
    assert old.changes(changed) == [
        "metric tool_call_f1's configuration changed: match_threshold 0.5 -> 0.8",
        "the judge changed: gpt-4o-mini -> none",
    ]
    # batch runs wrote module:Qual and model_dump (without the judge)
    batch: dict[str, Any] = {"name": "m", "class": "turneval.metrics.tool_calls:ToolCallF1"}
    batch["config"] = metric.model_dump(mode="json", exclude={"llm"})
    assert MetricSpec.from_dict(batch).build() == metric
    # watch wrote its run.json sorted, with its settings, and no judge server
    watch = {
        "group_by": "trace",
        "judge": {"model": "gpt-4o-mini", "prompt_version": None},
        "metrics": [MetricSpec.of(metric).to_dict()],
        "sample": 0.5,
        "source": "turneval watch",
        "turneval_version": "0.1.0",
    }
    read = RunManifest.from_dict(watch)
    assert (read.source, read.extra) == ("turneval watch", {"group_by": "trace", "sample": 0.5})
    assert not read.judge.base_url_recorded  # its server is not compared
    elsewhere = ChatOpenAI(model="gpt-4o-mini", api_key="x", base_url="http://127.0.0.1:1/v1")
    assert read.changes(RunManifest.of([metric], elsewhere)) == []
    assert RunManifest.from_dict(read.to_dict()).to_dict() == read.to_dict()


def test_the_batch_section_and_other_keys_are_kept(tmp_path: Path) -> None:
    document = _old_stream_run_json(ToolCallF1(), None)
    document["batch"] = {"run_id": "r1", "usage": {"calls": 3}, "cost": None}
    document["later_key"] = [1, 2]
    (tmp_path / "run.json").write_text(json.dumps(document))
    manifest = RunManifest.read(tmp_path)
    assert manifest.batch == document["batch"]
    manifest.write(tmp_path)
    written = json.loads((tmp_path / "run.json").read_text())
    assert written["batch"] == document["batch"] and written["later_key"] == [1, 2]
    assert RunManifest.read(tmp_path / "run.json") == manifest
    without = {key: value for key, value in document.items() if key != "batch"}
    (tmp_path / "run.json").write_text(json.dumps(without))
    assert RunManifest.read(tmp_path).batch is None
    assert "batch" not in RunManifest.read(tmp_path).to_dict()


def test_what_makes_another_run_is_named() -> None:
    base = RunManifest.of([ToolCallF1()], ChatOpenAI(model="m", api_key="x"))
    more = RunManifest.of([ToolCallF1(), ExactMatch()], None)
    assert base.changes(more) == [
        "the metrics changed: the run has tool_call_f1; this one has tool_call_f1, exact_match"
    ]
    server = ChatOpenAI(model="m", api_key="x", base_url="http://127.0.0.1:2/v1")
    assert base.changes(RunManifest.of([ToolCallF1()], server)) == [
        "the judge's server changed: the default -> http://127.0.0.1:2/v1"
    ]
    # fields that change no score are not another run; nor, for compare, another judge model
    timed = RunManifest.of([ToolCallF1(), CallsAtLeast()], None)
    retimed = RunManifest.of([ToolCallF1(), CallsAtLeast(count=2)], None)
    assert timed.metric_changes(retimed) == ["test_calls_at_least (count 1 -> 2)"]
    judged = [AgentGoalAccuracyWithoutReference(timeout=5, max_retries=0)]
    assert (
        RunManifest.of([AgentGoalAccuracyWithoutReference()]).changes(RunManifest.of(judged)) == []
    )


def test_a_run_file_that_is_no_run_record_is_named(tmp_path: Path) -> None:
    assert RunManifest.find(tmp_path) is None  # no run.json: a run from before it
    assert RunManifest.find(tmp_path / "other.jsonl") is None
    (tmp_path / "run.json").write_text("[1, 2]")
    with pytest.raises(ConfigError, match=r"run.json: not a run record \(no \"metrics\" list\)"):
        RunManifest.find(tmp_path / "results.jsonl")
    (tmp_path / "run.json").write_text("{")
    with pytest.raises(ConfigError, match=r"run.json: not a run record \(Expecting"):
        RunManifest.read(tmp_path)
    (tmp_path / "run.json").write_text('{"metrics": [{"class": "x"}]}')
    with pytest.raises(ConfigError, match=r"metric 1: expected an object with a \"name\""):
        RunManifest.read(tmp_path)
