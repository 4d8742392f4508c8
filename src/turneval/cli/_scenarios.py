"""``turneval scenarios generate`` (grow a test set) and ``turneval scenarios accepted``."""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from typing import Any

from turneval.cli._arguments import UsageError, fraction, whole_number
from turneval.cli._judge_flags import dry_run_judge, judge_from_flags
from turneval.cli._options import store_url
from turneval.cli._vocabulary import add_deprecated, add_flag, add_judge_group, file_flag
from turneval.errors import ConfigError

__all__ = ["add_scenarios_command", "resolve_object"]

SOURCES = ("tools", "world", "conversations", "traces", "store", "failures", "scenarios")

_INPUT_HELP = (
    "what to generate from: tools: a JSON file (OpenAI tool schemas, MCP tools/list output) or "
    "MODULE:NAME (LangChain tools); world: MODULE:NAME of a ToolWorld or a function making one; "
    "conversations: a JSONL dataset; traces: an OTLP/JSON file; store: a run id (--store); "
    "failures: a run id (--store) or a run folder (with --data); scenarios: a scenario JSONL"
)

EXIT_FAILED_REQUESTS = 3
"""``scenarios generate``: some requests got no usable answer (rerun to ask them again)."""


def add_scenarios_command(commands: Any) -> None:
    """``turneval scenarios generate|accepted``."""
    parser = commands.add_parser(
        "scenarios", help="grow a test set: generate scenarios from tools, worlds, runs, traces"
    )
    actions = parser.add_subparsers(dest="scenarios_command", required=True)
    generate = actions.add_parser(
        "generate", help="write Scenario JSONL generated from a source (see --from)"
    )
    generate.add_argument("--from", dest="source", choices=SOURCES, required=True)
    generate.add_argument("input", help=_INPUT_HELP)
    add_flag(generate, "--output", detail="the scenario JSONL (needed unless --dry-run)")
    add_deprecated(generate, "--out", "--output FILE", metavar="FILE")
    generate.add_argument("-n", type=whole_number, default=None, help="scenarios to generate")
    add_flag(generate, "--seed", default=0, detail="of the generation (default 0)")
    generate.add_argument("--batch-size", type=whole_number, default=5, metavar="N")
    generate.add_argument("--temperature", type=float, default=None, metavar="T")
    generate.add_argument("--world", metavar="MODULE:NAME", help="the world scenarios play on")
    generate.add_argument(
        "--names", action="append", default=[], metavar="NAME", help="a name to replace"
    )
    generate.add_argument(
        "--dedup-threshold", type=fraction, default=None, metavar="X", help="default 0.9"
    )
    generate.add_argument("--no-dedup", action="store_true", help="keep near duplicates")
    generate.add_argument("--existing", metavar="FILE", help="scenarios you have (JSONL)")
    generate.add_argument("--scenarios", metavar="FILE", help="failures: the scenarios played")
    add_flag(generate, "--data", detail="--from failures with a run folder: the run's input")
    generate.add_argument("--run", metavar="RUN", help="store: the stored run (also INPUT)")
    add_flag(generate, "--report", detail="HTML (default: OUTPUT with .html)")
    generate.add_argument("--progress", metavar="FILE", help="default: OUTPUT.progress.jsonl")
    add_flag(generate, "--dry-run")
    generate.add_argument("--review", action="store_true", help="accept or reject in the viewer")
    add_flag(generate, "--store", detail="default $TURNEVAL_STORE")
    add_flag(generate, "--port", default=8765, detail="--review (default 8765)")
    generate.add_argument("--engine", choices=("live", "batch"), default="live")
    generate.add_argument("--batch-dir", metavar="DIR", help="default: OUTPUT.batch")
    add_flag(generate, "--poll-interval", default=30.0, detail="--engine batch (default 30)")
    generate.add_argument(
        "--request-timeout", type=float, default=None, metavar="SECONDS", help="default 120"
    )
    add_judge_group(generate, scoring=False)
    generate.set_defaults(handler=_generate)
    accepted = actions.add_parser(
        "accepted", help="write the scenarios accepted in a review run (turneval view)"
    )
    accepted.add_argument("run", help="the review run's id (or a unique prefix)")
    add_flag(accepted, "--output", detail="the accepted scenarios' JSONL")
    add_deprecated(accepted, "--out", "--output FILE", metavar="FILE")
    add_flag(accepted, "--store", detail="default $TURNEVAL_STORE")
    accepted.set_defaults(handler=_accepted)


def resolve_object(spec: str, what: str) -> Any:
    """``MODULE:NAME`` imported (the working directory on the path); a factory is called."""
    module, _, name = spec.partition(":")
    if not module or not name:
        raise UsageError(
            f"{what} must be MODULE:NAME (e.g. turneval.simulation.domains:orders_world)"
        )
    sys.path.insert(0, str(Path.cwd()))
    try:
        target: Any = importlib.import_module(module)
    except ImportError as exc:
        raise UsageError(f"{what} {spec}: cannot import {module} ({exc})") from None
    finally:
        sys.path.pop(0)
    for part in name.split("."):
        if not hasattr(target, part):
            raise UsageError(f"{what} {spec}: {module} has no {name}")
        target = getattr(target, part)
    if callable(target) and not isinstance(target, type) and not hasattr(target, "invoke"):
        target = target()
    return target


def _world(args: argparse.Namespace) -> Any:
    if args.world is None:
        return None
    from turneval.worlds import ToolWorld

    world = resolve_object(args.world, "--world")
    if not isinstance(world, ToolWorld):
        raise UsageError(f"--world {args.world} is a {type(world).__name__}, not a ToolWorld")
    return world


def _store(args: argparse.Namespace) -> Any:
    url = store_url(args)
    if url is None:
        raise UsageError(f"--from {args.source} reads a run store: give --store URL")
    from turneval.store import RunStore

    return RunStore(url)


def _failures(args: argparse.Namespace) -> Any:
    from turneval.dataset import EvaluationDataset
    from turneval.results import EvaluationResult
    from turneval.scenarios import from_failures, load

    played = load(args.scenarios) if args.scenarios else []
    folder = Path(args.input)
    if folder.is_dir():
        if not args.data:
            raise UsageError(
                "--from failures with a run folder needs --data INPUT.jsonl: results.jsonl "
                "keeps no conversations (or give a stored run's id with --store)"
            )
        result = EvaluationResult.from_jsonl(folder / "results.jsonl")
        samples = dict(enumerate(EvaluationDataset.from_jsonl(args.data).samples))
    else:
        store = _store(args)
        run = store.run(args.input)
        result = store.result(run.id)
        samples = store.samples(run.id, range(run.rows))
    return from_failures(
        result, scenarios=played, world=_world(args), names=args.names, samples=samples
    )


def _source(args: argparse.Namespace) -> Any:
    from turneval import scenarios as gen

    kind = args.source
    if kind == "tools":
        found = Path(args.input)
        if found.suffix == ".json" or found.exists():
            return gen.from_tools(found)
        return gen.from_tools(resolve_object(args.input, "tools"))
    if kind == "world":
        from turneval.worlds import ToolWorld

        world = resolve_object(args.input, "world")
        if not isinstance(world, ToolWorld):
            raise UsageError(f"{args.input} is a {type(world).__name__}, not a ToolWorld")
        return gen.from_world(world)
    if kind == "conversations":
        from turneval.dataset import EvaluationDataset

        return gen.from_conversations(EvaluationDataset.from_jsonl(args.input), names=args.names)
    if kind == "traces":
        return gen.from_traces(args.input, names=args.names)
    if kind == "store":
        return gen.from_stored_run(_store(args), args.run or args.input, names=args.names)
    if kind == "failures":
        return _failures(args)
    return gen.perturb(gen.load(args.input, world=_world(args)))


def _generator(args: argparse.Namespace) -> Any:
    llm = dry_run_judge(args) if args.dry_run else judge_from_flags(args)
    if llm is None:
        raise UsageError(
            "generating scenarios needs a model: set $OPENAI_API_KEY, or pass --judge-model "
            "MODEL, or --judge-base-url URL --judge-model MODEL for an OpenAI-compatible server"
        )
    return llm


def _options(args: argparse.Namespace) -> dict[str, Any]:
    from turneval.scenarios import DEFAULT_TEMPERATURE

    return {
        "n": args.n,
        "seed": args.seed,
        "batch_size": args.batch_size,
        "temperature": DEFAULT_TEMPERATURE if args.temperature is None else args.temperature,
    }


def _dry_run(args: argparse.Namespace, source: Any, llm: Any, progress: Path | None) -> int:
    from turneval.results import Prices
    from turneval.scenarios import estimate_generation

    found = estimate_generation(
        source, llm=llm, cache=args.cache, progress=progress, **_options(args)
    )
    print(found)
    if args.price_input is not None:
        prices = Prices(args.price_input, args.price_output or 0.0)
        cost = found.cost(prices)
        print(f"estimated cost: {cost:.4f} (through a batch API: {cost / 2:.4f})")
    return 0


def _batch(args: argparse.Namespace, source: Any, llm: Any, out: Path) -> str | None:
    """Submit or resume the batches and wait; the cache they fill (None: interrupted)."""
    from turneval.scenarios import open_batch, submit_batch

    folder = Path(args.batch_dir or f"{out}.batch")
    if (folder / "state.sqlite").exists():
        run = open_batch(source, llm=llm, out=folder, **_options(args))
    else:
        run = submit_batch(source, llm=llm, out=folder, cache=args.cache, **_options(args))
    try:
        status = run.wait(progress=not args.quiet, poll_interval=args.poll_interval)
    except KeyboardInterrupt:
        print(
            f"\nturneval: the batches keep running at the provider ({run.status()}); run the "
            "same command again to wait for them and write the scenarios",
            file=sys.stderr,
        )
        return None
    print(f"batches: {status}")
    return str(run.cache_path)


def _review(args: argparse.Namespace, result: Any, out: Path) -> Any:
    from turneval.scenarios import review_path, reviewed, submit_for_review
    from turneval.view import serve

    url = store_url(args) or ".turneval/runs.db"
    run_id = submit_for_review(result.scenarios, url, name=out.name)
    print(
        f"review the {len(result.scenarios)} scenarios: http://127.0.0.1:{args.port}"
        f"{review_path(run_id)} (1 accepts, 0 rejects; Ctrl-C when done)",
        flush=True,
    )
    serve(url, port=args.port)
    review = reviewed(url, run_id)
    print(f"review run {run_id[:12]}: {review}")
    return review


def _generate(args: argparse.Namespace) -> int:
    from turneval.cli._engines import rate_limit_of
    from turneval.scenarios import generate, load, write_scenarios
    from turneval.scenarios._engine import REQUEST_TIMEOUT

    output = file_flag(args, "scenarios generate")
    if output is None and not args.dry_run:
        raise UsageError("--output FILE is needed: where to write the scenarios")
    if args.no_dedup and args.dedup_threshold is not None:
        raise UsageError("--no-dedup and --dedup-threshold contradict each other")
    out = Path(output) if output else None
    progress = (
        Path(args.progress)
        if args.progress
        else (Path(f"{out}.progress.jsonl") if out is not None else None)
    )
    source = _source(args)
    llm = _generator(args)
    if args.dry_run:
        return _dry_run(args, source, llm, progress)
    assert out is not None
    cache = args.cache
    if args.engine == "batch":
        cache = _batch(args, source, llm, out)
        if cache is None:
            return 130
    result = generate(
        source,
        llm=llm,
        **_options(args),
        dedup_threshold=None if args.no_dedup else (args.dedup_threshold or 0.9),
        existing=load(args.existing) if args.existing else (),
        cache=cache,
        progress=progress,
        max_llm_concurrency=args.llm_concurrency,
        rate_limit=rate_limit_of(args),
        show_progress=False if args.quiet else None,
        request_timeout=args.request_timeout or REQUEST_TIMEOUT,
    )
    print(result)
    scenarios = result.scenarios
    if args.review and scenarios:
        scenarios = _review(args, result, out).accepted
    write_scenarios(scenarios, out)
    report = Path(args.report) if args.report else out.with_suffix(".html")
    result.to_html(report)
    print(f"wrote {len(scenarios)} scenarios to {out} and the report to {report}")
    if result.failed:
        print(
            f"turneval: {len(result.failed)} request(s) failed; run the same command again to "
            f"ask them (the answers so far are kept in {progress})",
            file=sys.stderr,
        )
        return EXIT_FAILED_REQUESTS
    return 0


def _accepted(args: argparse.Namespace) -> int:
    from turneval.scenarios import reviewed, write_scenarios

    output = file_flag(args, "scenarios accepted")
    if output is None:
        raise UsageError("scenarios accepted needs --output FILE: the scenario JSONL to write")
    url = store_url(args) or ".turneval/runs.db"
    try:
        review = reviewed(url, args.run)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    write_scenarios(review.accepted, output)
    print(f"{review}; wrote the {len(review.accepted)} accepted to {output}")
    return 0
