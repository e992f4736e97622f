"""Results tables: systems as rows, measures as columns, as plain text or Markdown."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence

Rows = Mapping[str, Mapping[str, float]]
"""``rows[system][measure] = value``."""

_DIGITS = re.compile(r"(\d+)")


def natural_key(qid: str) -> tuple[tuple[str | int, ...], str]:
    """The sort key that orders identifiers as a reader expects: runs of digits compared as
    numbers, the rest as text (``"q2"`` before ``"q10"``; ``"Q1.9"`` before ``"Q1.10"``). Two
    identifiers equal as numbers (``"q01"``, ``"q1"``) are ordered as text.

    Every listing of queries for a reader (the report's explorer, ``clir evaluate --per-query``)
    orders by this key, the HTML page's sorting script included (it sorts the qid column by the
    position this key gives, :func:`natural_order`).
    """
    parts = tuple(int(part) if i % 2 else part for i, part in enumerate(_DIGITS.split(qid)))
    return parts, qid


def natural_order(qids: Iterable[str]) -> list[str]:
    """``qids`` sorted by :func:`natural_key`, e.g. ``["q1", "q2", "q10"]``."""
    return sorted(qids, key=natural_key)


def _cells(
    rows: Rows,
    measures: Sequence[str],
    digits: int,
    markers: Mapping[str, Mapping[str, str]] | None,
    align_markers: bool = False,
) -> list[list[str]]:
    marks = {system: dict((markers or {}).get(system, {})) for system in rows}
    # Pad markers to one width per column, so that decimal points stay aligned.
    width = {
        m: max((len(marks[s].get(m, "")) for s in rows), default=0) if align_markers else 0 for m in measures
    }
    table = []
    for system, values in rows.items():
        line = [str(system)]
        for measure in measures:
            value = values.get(measure)
            cell = "-" if value is None or math.isnan(value) else f"{value:.{digits}f}"
            if cell.startswith("-0") and cell[1:].strip("0.") == "":  # -2.8e-17 had shown as -0.0000
                cell = cell[1:]
            line.append(cell + marks[system].get(measure, "").ljust(width[measure]))
        table.append(line)
    return table


def format_table(
    rows: Rows,
    measures: Sequence[str],
    *,
    digits: int = 4,
    markers: Mapping[str, Mapping[str, str]] | None = None,
    first: str = "system",
) -> str:
    """A plain-text table with aligned columns.

    Args:
        rows: ``rows[system][measure] = value``; systems appear in this order.
        measures: Columns, in order. A missing or NaN value shows as ``-``.
        digits: Decimals of each value.
        markers: Optional ``markers[system][measure]`` appended to a value, e.g. ``"*"`` for a
            significant difference from the baseline.
        first: The heading of the first column (what the rows are: ``"query"`` per query).

    Returns:
        The table, header and a rule first, one line per system, no trailing newline.
    """
    header = [first, *measures]
    body = _cells(rows, measures, digits, markers, align_markers=True)
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]

    def render(line: list[str]) -> str:
        first = line[0].ljust(widths[0])
        rest = (cell.rjust(width) for cell, width in zip(line[1:], widths[1:], strict=True))
        return "  ".join([first, *rest]).rstrip()

    rule = "  ".join("-" * width for width in widths)
    return "\n".join([render(header), rule, *(render(line) for line in body)])


def markdown_table(
    rows: Rows,
    measures: Sequence[str],
    *,
    digits: int = 4,
    markers: Mapping[str, Mapping[str, str]] | None = None,
) -> str:
    """A GitHub Markdown table (numbers right-aligned); arguments as :func:`format_table`."""
    header = ["system", *measures]
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join([" --- ", *([" ---: "] * len(measures))]) + "|",
    ]
    for line in _cells(rows, measures, digits, markers):
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in line) + " |")
    return "\n".join(lines)


def format_p(p: float | None, digits: int = 4, alpha: float | None = None) -> str:
    """A p-value as text: ``digits`` decimals, ``<0.0001`` (for 4 digits) below what they show,
    ``-`` for one that could not be computed (``None`` or NaN).

    Args:
        p: The p-value.
        digits: Decimals shown.
        alpha: The significance level the p-value is marked by: a p below it that would round up
            to it (``0.04996`` to ``0.0500``, beside a mark of significance) gets more decimals.

    Returns:
        The text, e.g. ``0.0312``, ``<0.0001``, ``1.0000`` or ``0.04996``.
    """
    if p is None or math.isnan(p):
        return "-"
    smallest = 10.0**-digits
    if p < smallest:
        return f"<{smallest:.{digits}f}"
    text = f"{p:.{digits}f}"
    while alpha is not None and p < alpha <= float(text) and digits < 12:
        digits += 1
        text = f"{p:.{digits}f}"
    return text
