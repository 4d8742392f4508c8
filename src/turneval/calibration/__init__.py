"""Can this judge be trusted? Agreement with human labels, and alignment from labeled examples.

* :func:`agreement` compares a judged metric's scores with human labels: exact agreement,
  Cohen's kappa (quadratic-weighted too on ordinal scales), balanced accuracy, precision, recall
  and F1 per class for binary judges, Spearman and Kendall correlations for scales, the mean bias
  (judge minus human), the confusion matrix, Krippendorff's alpha, and percentile bootstrap 95%
  intervals for kappa and agreement. The statistics are scikit-learn's, scipy's and the
  ``krippendorff`` package's (the ``calibration`` extra).
* :func:`krippendorff_alpha` measures agreement between several raters (judges or people).
* :func:`align` picks labeled examples from a training split (disagreements first, balanced over
  the labels), adds them to the judge's prompt and reports agreement before and after on the
  held-out split only: the cheap method.
* :func:`optimize` searches a judge's instructions and examples with GEPA (the ``optimize``
  extra) on optimisation rows, and measures the starting judge, the optimised one and the
  few-shot baseline on validation rows it never saw, with the paired difference's interval;
  the result is a :class:`~turneval.judge.JudgeConfig` any judged metric loads.

Labels are on the metric's scale: the rubric's scores (1-5, 0/1, ...), 1/0 (or yes/no,
true/false, pass/fail) for yes/no judges, and CANDIDATE/TIE/BASELINE (1/0.5/0) for pairwise ones.

The package's modules: ``labels`` (reading labels), ``scales`` (a metric's scale, the judge's
verdict on it), ``pairing`` (:func:`agreement`: labels paired with a run's rows),
``statistics`` (the statistics, :func:`krippendorff_alpha`), ``report`` (:class:`AgreementReport`
and its HTML page), ``alignment`` (:func:`align`), and for :func:`optimize`: ``units``
(labeled rows, the split, verdicts per row or item), ``paired`` (the paired difference),
``budget`` (the hard budget), ``candidates`` (a candidate scored on rows), ``search`` (GEPA's adapter), ``planning``
(the dry run), ``outcome`` (the report), ``measuring`` (:func:`measure`) and ``optimizing``.
"""

from turneval.calibration._alignment import AlignedMetric, aalign, align
from turneval.calibration._budget import Budget, BudgetExhaustedError
from turneval.calibration._labels import Label, label_from_record, load_labels
from turneval.calibration._measuring import ameasure, measure
from turneval.calibration._optimizing import aoptimize, optimize
from turneval.calibration._outcome import OptimizationReport
from turneval.calibration._paired import PairedDifference, paired_difference
from turneval.calibration._pairing import agreement
from turneval.calibration._planning import OptimizationPlan, plan_optimization
from turneval.calibration._report import AgreementReport, ClassScores, render_agreement_html
from turneval.calibration._scales import verdict_text
from turneval.calibration._statistics import krippendorff_alpha
from turneval.calibration._units import LabeledRow, stratified_split

__all__ = [
    "AgreementReport",
    "AlignedMetric",
    "Budget",
    "BudgetExhaustedError",
    "ClassScores",
    "Label",
    "LabeledRow",
    "OptimizationPlan",
    "OptimizationReport",
    "PairedDifference",
    "aalign",
    "agreement",
    "align",
    "ameasure",
    "aoptimize",
    "krippendorff_alpha",
    "label_from_record",
    "load_labels",
    "measure",
    "optimize",
    "paired_difference",
    "plan_optimization",
    "render_agreement_html",
    "stratified_split",
    "verdict_text",
]
