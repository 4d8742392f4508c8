"""The demo: three small agent datasets we wrote, evaluated with every rule-based metric.

The datasets (also in ``examples/data/``) follow Vertex AI's example agents: an on-device home
assistant, a customer-support agent and a content-creation agent. Each domain has eight
hand-written scenarios (a request, the tool calls that fulfil it, the tool outputs, the answer;
shipped as package data in ``turneval/data/demo_domains.json``)
replayed under four agent behaviours out of: correct, a wrong argument value, a missing step,
an unneeded extra call, two steps swapped, an off-topic question answered, one refused; 32
samples per domain, each with reference tool calls, reference topics and a goal.

Longer than 400 lines: the single-agent demo and the team (multi-agent) demo share the
domains, the row builder and the run folder they write; each is a few short functions.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from turneval._files import naming
from turneval.dataset import EvaluationDataset

__all__ = [
    "DOMAINS",
    "DemoCase",
    "Domain",
    "build_rows",
    "build_team_rows",
    "run_demo",
    "write_datasets",
]

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
"""The three demo domains, in order: ``on_device``, ``customer_support``, ``content_creation``."""
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
        _write_folder(folder, source, result, llm, len(rows))
        result.to_html(folder / "report.html", title=f"turneval demo: {domain.name}")
        print(f"\n{domain.name}: {len(dataset)} samples")
        width = max(map(len, result.metric_names))
        for name, s in result.summary().items():
            ci = "n/a" if s.ci_low is None else f"[{s.ci_low:.3f}, {s.ci_high:.3f}]"
            mean = "n/a" if s.mean is None else f"{s.mean:.3f}"
            print(f"  {name:<{width}}  mean {mean}  95% CI {ci}  failed {s.failed}")
        print(f"  report: {folder / 'report.html'}")
    _run_team(out, inputs, llm, run_store)
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


def _write_folder(folder: Path, source: Path, result: Any, llm: Any, lines: int) -> Any:
    """Write the run folder ``evaluate`` writes, through the folder sink; returns the summary.

    ``run.json`` (what the run was started with: its metrics, judge and every ``lines`` line
    of ``source`` read), ``results.jsonl`` (with details) and ``summary.json``.
    """
    from turneval.aggregate import summary_document
    from turneval.manifest import RunManifest
    from turneval.results import json_line
    from turneval.runs import FolderSink, Rows

    sink = FolderSink(folder, source=source)
    try:
        sink.start(RunManifest.of(result.metrics, llm))
        sink.read_to(lines)  # every line of the input was scored
        records = result.records(details=True)
        sink.add(Rows.encoded([json_line(record) for record in records], result.metric_names))
        summary = result.summary()
        sink.finish(summary_document(len(result), summary, result.usage), "finished")
    finally:
        sink.close()
    return summary


# -- a team of agents (issue 46): a supervisor, a flights agent and a hotels agent ------------

TEAM_TRIPS = (
    ("Lisbon", "2025-05-02", "2025-05-06"),
    ("Oslo", "2025-06-10", "2025-06-12"),
    ("Rome", "2025-07-01", "2025-07-08"),
    ("Kyoto", "2025-09-15", "2025-09-20"),
    ("Quito", "2025-10-03", "2025-10-05"),
    ("Tunis", "2025-11-20", "2025-11-23"),
)
TEAM_BEHAVIOURS = ("correct", "wrong_handoff", "wrong_tool", "wrong_argument")
TEAM_TOOLS = {
    "flights": ["search_flights", "book_flight"],
    "hotels": ["search_hotels", "book_hotel"],
}


def _team_calls(city: str, start: str, end: str) -> dict[str, list[Call]]:
    return {
        "flights": [
            {"name": "search_flights", "args": {"to": city, "date": start}},
            {"name": "book_flight", "args": {"to": city, "date": start}},
        ],
        "hotels": [
            {"name": "search_hotels", "args": {"city": city, "check_in": start, "check_out": end}},
            {"name": "book_hotel", "args": {"city": city, "check_in": start, "check_out": end}},
        ],
    }


def _worker_turns(agent: str, calls: list[Call], number: int) -> list[dict[str, Any]]:
    """A worker's calls, each answered, then its report and its handoff back."""
    turns: list[dict[str, Any]] = []
    for position, call in enumerate(calls):
        call_id = f"{agent[0]}{number}.{position}"
        turns.append(
            {"type": "ai", "name": agent, "content": "", "tool_calls": [{**call, "id": call_id}]}
        )
        turns.append({"type": "tool", "content": f"{call['name']}: ok", "tool_call_id": call_id})
    back = f"{agent[0]}{number}.back"
    turns.append({"type": "ai", "name": agent, "content": f"{agent} done."})
    turns.append(
        {
            "type": "ai",
            "name": agent,
            "content": "Transferring back to supervisor",
            "tool_calls": [{"name": "transfer_back_to_supervisor", "args": {}, "id": back}],
        }
    )
    turns.append(
        {"type": "tool", "content": "Transferred back to supervisor", "tool_call_id": back}
    )
    return turns


def _handoff(target: str, call_id: str) -> list[dict[str, Any]]:
    return [
        {
            "type": "ai",
            "name": "supervisor",
            "content": "",
            "tool_calls": [{"name": f"transfer_to_{target}", "args": {}, "id": call_id}],
        },
        {"type": "tool", "content": f"Transferred to {target}", "tool_call_id": call_id},
    ]


def build_team_rows() -> list[dict[str, Any]]:
    """The team's samples (24: six trips, each under four behaviours), with agents declared.

    Behaviours: ``correct``; ``wrong_handoff`` (the supervisor sends the flight to the hotels
    agent first, who hands it back); ``wrong_tool`` (the flights agent books the hotel itself);
    ``wrong_argument`` (the hotels agent books one night short).
    """
    rows = []
    for number, (city, start, end) in enumerate(TEAM_TRIPS):
        expected = _team_calls(city, start, end)
        back = {"name": "transfer_back_to_supervisor", "args": {}}
        for behaviour in TEAM_BEHAVIOURS:
            calls = _team_calls(city, start, end)
            turns: list[dict[str, Any]] = [
                {
                    "type": "human",
                    "content": f"Book me a flight and a hotel in {city}, {start} to {end}.",
                }
            ]
            if behaviour == "wrong_handoff":
                turns += _handoff("hotels", f"s{number}.x")
                turns += _worker_turns("hotels", [], number * 10 + 9)
            if behaviour == "wrong_tool":
                calls["flights"].append(calls["hotels"].pop())
            if behaviour == "wrong_argument":
                calls["hotels"][1] = {
                    "name": "book_hotel",
                    "args": {**calls["hotels"][1]["args"], "check_out": start},
                }
            turns += _handoff("flights", f"s{number}.f")
            turns += _worker_turns("flights", calls["flights"], number * 10)
            turns += _handoff("hotels", f"s{number}.h")
            turns += _worker_turns("hotels", calls["hotels"], number * 10 + 1)
            turns.append(
                {"type": "ai", "name": "supervisor", "content": f"Your trip to {city} is booked."}
            )
            rows.append(
                {
                    "user_input": turns,
                    "agents": [
                        {
                            "name": "supervisor",
                            "description": "routes each request to the right agent",
                            "tools": [],
                            "handoffs": ["flights", "hotels"],
                            "reference_tool_calls": [
                                {"name": "transfer_to_flights", "args": {}},
                                {"name": "transfer_to_hotels", "args": {}},
                            ],
                        },
                        *(
                            {
                                "name": agent,
                                "description": f"books {agent}",
                                "tools": TEAM_TOOLS[agent],
                                "handoffs": ["supervisor"],
                                "reference_tool_calls": [*expected[agent], back],
                            }
                            for agent in ("flights", "hotels")
                        ),
                    ],
                    "reference_handoffs": [
                        {"source": "supervisor", "target": "flights"},
                        {"source": "flights", "target": "supervisor"},
                        {"source": "supervisor", "target": "hotels"},
                        {"source": "hotels", "target": "supervisor"},
                    ],
                    "reference": f"A flight and a hotel in {city} from {start} to {end} are booked.",
                    "metadata": {"id": f"trip-{number}-{behaviour}", "behaviour": behaviour},
                }
            )
    return rows


def _run_team(out: Path, inputs: Path, llm: Any, run_store: Any) -> None:
    """The team's run: per-agent figures, handoffs, failure clusters (attribution with a judge)."""
    from turneval.clusters import cluster_failures
    from turneval.metrics import (
        FailureAttribution,
        HandoffAccuracy,
        ToolCallF1,
        ToolPermission,
        TrajectoryInOrderMatch,
    )
    from turneval.runner import evaluate

    rows = build_team_rows()
    source = inputs / "team.jsonl"
    with naming(source):
        source.write_text(
            "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8"
        )
    metrics: list[Any] = [
        ToolCallF1(by_agent=True),
        TrajectoryInOrderMatch(by_agent=True),
        ToolPermission(by_agent=True),
        HandoffAccuracy(),
    ]
    if llm is not None:
        metrics.append(FailureAttribution())
    result = evaluate(
        EvaluationDataset.from_list(rows),
        metrics,
        llm=llm,
        show_progress=False,
        store=run_store,
    )
    if run_store is not None:
        run_store.rename_run(str(result.store_run), "demo: team")
    folder = out / "team"
    summary = _write_folder(folder, source, result, llm, len(rows))
    result.to_html(folder / "report.html", title="turneval demo: a team of agents")
    print(f"\nteam (a supervisor, a flights and a hotels agent): {len(rows)} samples")
    width = max(map(len, result.metric_names))
    for name, s in summary.items():
        mean = "n/a" if s.mean is None else f"{s.mean:.3f}"
        print(f"  {name:<{width}}  mean {mean}  failed {s.failed}")
        agents = {
            key.removeprefix("by_agent."): value
            for key, value in (s.extra or {}).items()
            if key.startswith("by_agent.") and not key.endswith(".rows")
        }
        if agents:
            print("    by agent: " + ", ".join(f"{a} {v:.3f}" for a, v in agents.items()))
    clusters = cluster_failures(result.rows, fail_under=1.0)
    print(f"  failure clusters (turneval clusters {folder} --fail-under 1):")
    for cluster in clusters[:4]:
        print(f"    {cluster.size} rows: {cluster.label}")
    print(f"  report: {folder / 'report.html'}")
