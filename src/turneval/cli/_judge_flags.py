"""The judge the ``--judge-*`` flags (or an API key alone) configure; a judged metric needs one."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from turneval.cli._arguments import UsageError

if TYPE_CHECKING:
    from turneval.metrics import Evaluator

API_KEY_ENV = "OPENAI_API_KEY"
"""The variable read for the judge's API key unless ``--judge-api-key-env`` names another."""

DEFAULT_JUDGE_MODEL = "gpt-4o-mini"
"""The judge model used when only an API key is given (``$TURNEVAL_JUDGE_MODEL`` overrides)."""


def judge_from_flags(args: argparse.Namespace, needed: bool = True) -> Any:
    """The judge from ``--judge-model``/``--judge-base-url``, or from the API key alone.

    The same rules for ``evaluate`` and ``demo``: ``--judge-base-url`` needs ``--judge-model``;
    ``--judge-model`` without a server needs the key in ``--judge-api-key-env``
    (``$OPENAI_API_KEY``); with neither flag, a key alone picks ``$TURNEVAL_JUDGE_MODEL`` or
    ``gpt-4o-mini``. Returns None when no judge is configured or ``needed`` is False.
    """
    env = args.judge_api_key_env or API_KEY_ENV
    key = os.environ.get(env)
    if needed and args.judge_api_key_env and not key:  # named on purpose: say it is missing
        raise UsageError(f"--judge-api-key-env {env}: ${env} is not set or empty")
    if args.judge_base_url and not args.judge_model:
        raise UsageError(
            "--judge-base-url needs --judge-model: the model name the server serves "
            "(e.g. --judge-model llama3.1)"
        )
    if args.judge_model and not args.judge_base_url and not key:
        raise UsageError(
            f"--judge-model {args.judge_model} needs an API key in ${env} "
            "(set it, name another variable with --judge-api-key-env, or pass --judge-base-url "
            "for a local OpenAI-compatible server)"
        )
    model = args.judge_model or (
        key and os.environ.get("TURNEVAL_JUDGE_MODEL", DEFAULT_JUDGE_MODEL)
    )
    if not needed or not model:
        return None
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(model=model, base_url=args.judge_base_url, api_key=key or "unused")


def require_judge(metrics: list[Evaluator | str], llm: Any) -> None:
    """Fail before the run, naming the CLI flags, when a judged metric has no judge."""
    from turneval.runner import resolve_metrics

    judged = [  # grounding metrics need none: they fall back to their offline backend
        m.name for m in resolve_metrics(metrics) if m.needs_judge(llm) and m.judge_llm(llm) is None
    ]
    if judged:
        raise UsageError(
            f"{', '.join(judged)} {'needs' if len(judged) == 1 else 'need'} an LLM judge: "
            f"set $OPENAI_API_KEY (the model is "
            f"{DEFAULT_JUDGE_MODEL} unless --judge-model says otherwise), or pass "
            "--judge-model MODEL, or --judge-base-url URL --judge-model MODEL for an "
            "OpenAI-compatible server"
        )


def dry_run_judge(args: argparse.Namespace) -> Any:
    """The judge a run with these flags would have (never called; a dry run needs no key).

    Metrics with an offline fallback (grounding) send judge requests only when there is a
    judge, so the estimate counts them only with one.
    """
    key = os.environ.get(args.judge_api_key_env or API_KEY_ENV)
    model = args.judge_model or (
        key and os.environ.get("TURNEVAL_JUDGE_MODEL", DEFAULT_JUDGE_MODEL)
    )
    if not model:
        return None
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(model=model, base_url=args.judge_base_url, api_key="unused")
