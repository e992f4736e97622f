"""Evaluation of runs against qrels: standard measures through ir_measures, MATERIAL's AQWV,
paired significance tests and results tables.

Every measure is aggregated over the same queries: those of the qrels with at least one relevant
document (``relevance >= 1``); a query the run does not list scores 0. Measures are averaged,
except trec_eval's counts (``NumQ``, ``NumRet``, ``NumRel``, ``NumRelRet``), summed as
ir_measures and trec_eval sum them.
"""

from clir.evaluation._queries import CoverageWarning, evaluated_queries
from clir.evaluation.aqwv import AQWVConfig, aqwv, aqwv_per_query, qwv
from clir.evaluation.measures import (
    DEFAULT_MEASURES,
    aggregate,
    evaluate,
    evaluate_per_query,
    means,
    measure_name,
    summed,
)
from clir.evaluation.significance import (
    CORRECTIONS,
    INTERVALS,
    Comparison,
    SignificanceConfig,
    adjust_pvalues,
    compare,
    compare_per_query,
    compare_runs,
    confidence_interval,
    paired_ttest,
    randomization_test,
)
from clir.evaluation.table import format_p, format_table, markdown_table, natural_key, natural_order

__all__ = [
    "CORRECTIONS",
    "DEFAULT_MEASURES",
    "INTERVALS",
    "AQWVConfig",
    "Comparison",
    "CoverageWarning",
    "SignificanceConfig",
    "adjust_pvalues",
    "aggregate",
    "aqwv",
    "aqwv_per_query",
    "compare",
    "compare_per_query",
    "compare_runs",
    "confidence_interval",
    "evaluate",
    "evaluate_per_query",
    "evaluated_queries",
    "format_p",
    "format_table",
    "markdown_table",
    "means",
    "measure_name",
    "natural_key",
    "natural_order",
    "paired_ttest",
    "qwv",
    "randomization_test",
    "summed",
]
