"""The argument settings of a metric that matches calls: a comparator, a threshold, rules.

Shared by the call-matching metrics (:class:`~turneval.metrics._call_metric.CallMatchingMetric`)
and :class:`~turneval.metrics.HandoffAccuracy`, which compare two calls' arguments the same way:
by JSON-value equality, or by ``arg_comparison_metric`` (scored per argument), or by
``arg_rules`` per tool and argument; a pair matches when its arguments score reaches
``match_threshold``. Each metric documents the fields in its own words.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from pydantic import BaseModel, Field, field_validator

from turneval.metrics._compare import ArgComparator, check_comparator, resolve_comparator
from turneval.metrics.arg_rules import RuleBook, resolve_rules

__all__ = ["ArgComparing"]


class ArgComparing(BaseModel):
    """The fields ``arg_comparison_metric``, ``match_threshold`` and ``arg_rules``, checked.

    Mixed into a metric (a pydantic model) before its metric base, so the fields come after the
    base's (``name``, ...) in the metric's configuration, as they always have.
    """

    arg_comparison_metric: Any = None
    match_threshold: float = Field(default=1.0, ge=0.0, le=1.0)
    arg_rules: Any = None

    @field_validator("arg_comparison_metric")
    @classmethod
    def _check_comparator(cls, value: Any) -> Any:
        return check_comparator(value)

    @field_validator("arg_rules")
    @classmethod
    def _check_rules(cls, value: Any) -> Any:
        return resolve_rules(value)

    @cached_property
    def _rule_book(self) -> RuleBook | None:
        return None if self.arg_rules is None else RuleBook(self.arg_rules)

    @cached_property
    def _comparator(self) -> ArgComparator | None:
        # Cleared by Metric.__setattr__ when arg_comparison_metric is reassigned.
        return resolve_comparator(self.arg_comparison_metric)
