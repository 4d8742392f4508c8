"""The demo: three small agent datasets we wrote, evaluated with every rule-based metric.

The datasets (also in ``examples/data/``) follow Vertex AI's example agents: an on-device home
assistant, a customer-support agent and a content-creation agent. Each domain has eight
hand-written scenarios (a request, the tool calls that fulfil it, the tool outputs, the answer;
shipped as package data in ``turneval/data/demo_domains.json``)
replayed under four agent behaviours out of: correct, a wrong argument value, a missing step,
an unneeded extra call, two steps swapped, an off-topic question answered, one refused; 32
samples per domain, each with reference tool calls, reference topics and a goal.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from turneval._files import naming
from turneval.dataset import EvaluationDataset

__all__ = ["DOMAINS", "Domain", "build_rows", "run_demo", "write_datasets"]

Call = dict[str, Any]


@dataclass(frozen=True)
class DemoCase:
    """One request of a demo domain and how a good agent fulfils it (no simulation scenario).

    Each is replayed under four agent behaviours; the package data calls them ``scenarios``.
    """

    request: str
    calls: list[list[Call]]  # steps; a step with several calls is one parallel AI message
    outputs: list[str]  # one tool output per call, in order
    answer: str
    goal: str


@dataclass(frozen=True)
class Domain:
    """A dataset: its scenarios, topics, an off-topic question and a tool to look for."""

    name: str
    topics: list[str]
    off_topic: tuple[str, str, str]  # question, an answer that goes along, a refusal
    key_tool: str
    scenarios: list[DemoCase]  # named as in the package data


def _load_domains() -> tuple[Domain, ...]:
    """The three domains, from the package's ``data/demo_domains.json``."""
    text = resources.files("turneval").joinpath("data/demo_domains.json").read_text("utf-8")
    return tuple(
        Domain(
            name=domain["name"],
            topics=domain["topics"],
            off_topic=tuple(domain["off_topic"]),
            key_tool=domain["key_tool"],
            scenarios=[DemoCase(**case) for case in domain["scenarios"]],
        )
        for domain in json.loads(text)["domains"]
    )


DOMAINS = _load_domains()
BEHAVIOURS = (
    "correct",
    "wrong_value",
    "missing_step",
    "extra_call",
    "swapped",
    "off_topic_answered",
    "off_topic_refused",
)


def _wrong(call: Call) -> Call:
    args = dict(call["args"])
    for key, value in args.items():
        if isinstance(value, bool):
            args[key] = not value
        elif isinstance(value, (int, float)):
            args[key] = value + 1
        elif isinstance(value, str):
            args[key] = value + "_2" if "_" in value or "-" in value else value.upper()
        else:
            continue
        break
    return {"name": call["name"], "args": args}


def _conversation(domain: Domain, case: DemoCase, behaviour: str) -> list[dict[str, Any]]:
    steps = [list(step) for step in case.calls]
    outputs = list(case.outputs)
    answer = case.answer
    if behaviour == "wrong_value":
        steps[-1][-1] = _wrong(steps[-1][-1])
    elif behaviour == "missing_step" and sum(map(len, steps)) > 1:
        removed = steps[-1].pop()
        outputs.pop()
        steps = [step for step in steps if step]
        answer = f"I could not finish: {removed['name']} was not done."
    elif behaviour == "missing_step":
        steps, outputs = [], []
        answer = "I think that's already done."
    elif behaviour == "extra_call":
        steps.insert(0, [{"name": "search_help_center", "args": {"query": case.request[:40]}}])
        outputs.insert(0, "3 articles found.")
    elif behaviour == "swapped" and len(steps) > 1:
        steps[0], steps[1] = steps[1], steps[0]
        count = len(steps[1])
        outputs = (
            outputs[count : count + len(steps[0])]
            + outputs[:count]
            + outputs[count + len(steps[0]) :]
        )
    messages: list[dict[str, Any]] = [{"type": "human", "content": case.request}]
    position = 0
    for index, step in enumerate(steps):
        content = "Let me take care of that." if index == 0 else ""
        messages.append({"type": "ai", "content": content, "tool_calls": step})
        for _ in step:
            messages.append({"type": "tool", "content": outputs[position]})
            position += 1
    messages.append({"type": "ai", "content": answer})
    if behaviour.startswith("off_topic"):
        question, along, refusal = domain.off_topic
        messages.append({"type": "human", "content": question})
        messages.append(
            {"type": "ai", "content": along if behaviour == "off_topic_answered" else refusal}
        )
    return messages


def build_rows(domain: Domain) -> list[dict[str, Any]]:
    """The domain's samples as dicts (32: each case under four behaviours, rotating)."""
    rows = []
    for number, case in enumerate(domain.scenarios):
        for shift in range(4):
            behaviour = BEHAVIOURS[(number + 2 * shift) % len(BEHAVIOURS)] if shift else "correct"
            rows.append(
                {
                    "user_input": _conversation(domain, case, behaviour),
                    "reference_tool_calls": [call for step in case.calls for call in step],
                    "reference_topics": domain.topics,
                    "reference": case.goal,
                    "metadata": {"domain": domain.name, "scenario": number, "behaviour": behaviour},
                }
            )
    return rows


def write_datasets(folder: Path) -> list[Path]:
    """Write each domain's JSONL file into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    return [_write_dataset(folder, domain, build_rows(domain)) for domain in DOMAINS]


def _write_dataset(folder: Path, domain: Domain, rows: list[dict[str, Any]]) -> Path:
    """``rows`` as ``folder/<domain>.jsonl``, one sample a line; its path."""
    path = folder / f"{domain.name}.jsonl"
    with naming(path):
        path.write_text(
            "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8"
        )
    return path


RULE_BASED = [
    "tool_call_accuracy",
    "tool_call_f1",
    "trajectory_exact_match",
    "trajectory_in_order_match",
    "trajectory_any_order_match",
    "trajectory_precision",
    "trajectory_recall",
]
JUDGED = [
    "topic_adherence",
    "agent_goal_accuracy_with_reference",
    "agent_goal_accuracy_without_reference",
]


def run_demo(
    out: Path, *, llm: Any = None, cache: str | None = None, store: str | None = None
) -> int:
    """Evaluate the three datasets, print each summary, write results and HTML reports.

    ``out/data/`` gets the three input files and ``out/<dataset>/`` each run's folder, as
    ``turneval evaluate`` writes one: ``results.jsonl``, ``summary.json``, ``report.html`` and
    ``run.json`` (what the run was started with: metrics, judge, input and its digest), so that
    ``compare`` checks two demo runs' metric configurations. With ``store`` (a run store's URL
    or path), the three runs are kept there too, named ``demo: <dataset>``.
    """
    from turneval._runfile import RunFile
    from turneval.aggregate import summary_document
    from turneval.judge import SQLiteCache
    from turneval.metrics import ToolCallAccuracy, TrajectorySingleToolUse
    from turneval.runner import evaluate

    out.mkdir(parents=True, exist_ok=True)
    run_store = None
    if store is not None:
        from turneval.store import RunStore

        run_store = RunStore(store)
    inputs = out / "data"
    inputs.mkdir(exist_ok=True)
    for domain in DOMAINS:
        rows = build_rows(domain)
        source = _write_dataset(inputs, domain, rows)
        dataset = EvaluationDataset.from_list(rows)
        metrics: list[Any] = [
            *RULE_BASED,
            ToolCallAccuracy(name="tool_call_accuracy_unordered", strict_order=False),
            TrajectorySingleToolUse(tool_name=domain.key_tool),
        ]
        if llm is not None:
            metrics += JUDGED
        result = evaluate(
            dataset,
            metrics,
            llm=llm,
            cache=SQLiteCache(cache) if cache else None,
            show_progress=False,
            store=run_store,
        )
        if run_store is not None:
            run_store.rename_run(str(result.store_run), f"demo: {domain.name}")
        folder = out / domain.name
        folder.mkdir(exist_ok=True)
        record = RunFile(folder, source, result.metrics, llm)
        try:
            record.read_to(len(rows))  # every line of the input was scored
        finally:
            record.close()
        result.to_jsonl(folder / "results.jsonl")
        result.to_html(folder / "report.html", title=f"turneval demo: {domain.name}")
        document = summary_document(len(result), result.summary(), result.usage)
        with naming(folder / "summary.json"):
            (folder / "summary.json").write_text(
                json.dumps(document, indent=2) + "\n", encoding="utf-8"
            )
        print(f"\n{domain.name}: {len(dataset)} samples")
        width = max(map(len, result.metric_names))
        for name, s in result.summary().items():
            ci = "n/a" if s.ci_low is None else f"[{s.ci_low:.3f}, {s.ci_high:.3f}]"
            mean = "n/a" if s.mean is None else f"{s.mean:.3f}"
            print(f"  {name:<{width}}  mean {mean}  95% CI {ci}  failed {s.failed}")
        print(f"  report: {folder / 'report.html'}")
    if run_store is not None:
        print(f"\nruns kept in {run_store.url}: turneval store list --store {store}")
        print(f"browse, compare and label them: turneval view --store {store}")
        run_store.close()
    if llm is None:
        print(
            "\n(set OPENAI_API_KEY, or pass --judge-model MODEL / --judge-base-url URL "
            "--judge-model MODEL, to add the LLM-judged metrics)"
        )
    return 0
