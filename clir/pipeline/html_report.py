"""The experiment's report as one self-contained HTML page, ``report.html``.

Everything is inline (CSS, a small sorting script, the plots as base64 PNG): the page opens from
disk with no server and no network. It holds the results tables of every pair (sortable by a
click on a column header), the plots, the step timings and a per-query explorer: for each
evaluated query, every system's rank of the first relevant passage, and on click the relevant
passage's text and the passage the ``full`` system ranked first.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from clir.datasets import Collection
from clir.formats import atomic_write
from clir.types import Qrels, Run

PASSAGE_CHARS = 400
"""Passages in the explorer are cut to this many characters (keeps the page small)."""

TOP_SYSTEM = "full"
"""The system whose first-ranked passage the explorer shows beside the relevant one."""

_STYLE = """
body { font-family: sans-serif; margin: 2em; max-width: 80em; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: right; vertical-align: top; }
th { background: #eee; cursor: pointer; user-select: none; }
td.text, th.text { text-align: left; }
details p { max-width: 50em; white-space: pre-wrap; }
img { max-width: 100%; }
"""

_TEXT = ' class="text"'
_NOT_RETRIEVED = 10**9
"""The sort value of a query whose relevant passage a system did not retrieve (sorts last)."""

_SORT_SCRIPT = """
document.querySelectorAll("table.sortable th").forEach(function (th) {
  th.addEventListener("click", function () {
    var table = th.closest("table"), body = table.tBodies[0];
    var column = Array.prototype.indexOf.call(th.parentNode.children, th);
    var ascending = th.dataset.order !== "asc";
    table.querySelectorAll("th").forEach(function (h) { delete h.dataset.order; });
    th.dataset.order = ascending ? "asc" : "desc";
    var key = function (row) {
      var cell = row.children[column], value = cell.dataset.value || cell.textContent;
      var number = parseFloat(value);
      return isNaN(number) ? value : number;
    };
    Array.from(body.rows).sort(function (a, b) {
      var x = key(a), y = key(b), order = x < y ? -1 : x > y ? 1 : 0;
      return ascending ? order : -order;
    }).forEach(function (row) { body.appendChild(row); });
  });
});
"""


def relevant_rank(run: Mapping[str, float], judged: Mapping[str, int]) -> int | None:
    """The 1-based rank of the first relevant passage of one query's run, or ``None`` when no
    relevant passage was retrieved. Ties in score are broken by docno, as trec_eval does
    (descending)."""
    ranked = sorted(run, key=lambda docno: (run[docno], docno), reverse=True)
    return next((rank for rank, docno in enumerate(ranked, 1) if judged.get(docno, 0) > 0), None)


def write_html_report(
    out: Path,
    results: Mapping[str, Any],
    runs: Mapping[str, Mapping[str, Run]],
    *,
    collections: Mapping[str, Collection],
    split: str,
    plots: Sequence[str],
) -> Path:
    """Write ``out/report.html``.

    Args:
        out: The report's folder (the plots named in ``plots`` are read from it).
        results: The ``results.json`` content (its systems, in report order, and timings).
        runs: ``pair -> system -> run``.
        collections: ``pair -> collection`` (queries, judgements and passage texts).
        split: The evaluated split; the explorer lists its judged queries.
        plots: File names of PNG plots in ``out``, inlined in this order.

    Returns:
        The path written.
    """
    title = escape(results["config"]["name"])
    parts = [f"<h1>{title}</h1>"]
    for pair, rows in results["systems"].items():
        measures = list(next(iter(rows.values()), {}))
        parts.append(f"<h2>{escape(pair)}</h2>")
        parts.append(
            _table(
                f"results-{pair}",
                ["system", *measures],
                [
                    [(name, None), *((f"{row[m]:.4f}", row[m]) for m in measures)]
                    for name, row in rows.items()
                ],
            )
        )
    if plots:
        parts.append("<h2>Plots</h2>")
        for name in plots:
            data = base64.b64encode((out / name).read_bytes()).decode("ascii")
            parts.append(f'<figure><img alt="{escape(name)}" src="data:image/png;base64,{data}">')
            parts.append(f"<figcaption>{escape(name)}</figcaption></figure>")
    timings = results["timings"]
    parts.append("<h2>Timings</h2>")
    parts.append(
        _table("timings", ["step", "seconds"], [[(s, None), (f"{t:.1f}", t)] for s, t in timings.items()])
    )
    parts.append(f"<h2>Queries ({escape(split)})</h2>")
    parts.append(
        "<p>Rank of the first relevant passage in each system's run (blank: not retrieved). "
        f"Click a query for the relevant passage and the passage <code>{TOP_SYSTEM}</code> "
        f"ranked first (cut to {PASSAGE_CHARS} characters).</p>"
    )
    for pair, rows in results["systems"].items():
        parts.append(f"<h3>{escape(pair)}</h3>")
        parts.append(_explorer(pair, list(rows), runs[pair], collections[pair], split))
    page = (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
        f"<style>{_STYLE}</style></head>\n<body>\n" + "\n".join(parts) + f"\n<script>{_SORT_SCRIPT}</script>"
        "\n</body></html>\n"
    )
    path = out / "report.html"
    with atomic_write(path) as handle:
        handle.write(page)
    return path


def _table(table_id: str, header: Sequence[str], rows: Sequence[Sequence[tuple[str, Any]]]) -> str:
    """A sortable table; each cell is ``(html, sort value)``. The first column is plain text
    (escaped here); other cells' html is written as given, left-aligned when sorted as text."""
    head = f"<th{_TEXT}>{escape(header[0])}</th>" + "".join(f"<th>{escape(h)}</th>" for h in header[1:])
    lines = [f'<table class="sortable" id="{escape(table_id)}"><thead><tr>{head}</tr></thead><tbody>']
    for (first, _), *cells in rows:
        tds = "".join(
            (
                "<td>"
                if value is None
                else f'<td{_TEXT * isinstance(value, str)} data-value="{escape(str(value))}">'
            )
            + f"{html}</td>"
            for html, value in cells
        )
        lines.append(f"<tr><td{_TEXT}>{escape(first)}</td>{tds}</tr>")
    lines.append("</tbody></table>")
    return "\n".join(lines)


def _explorer(
    pair: str, systems: Sequence[str], runs: Mapping[str, Run], collection: Collection, split: str
) -> str:
    """The per-query table of one pair: query (with its passages on click) and every rank."""
    qrels: Qrels = collection.qrels_of(split)
    texts = {document.docno: document.text for document in collection.documents}
    rows = []
    for query in collection.split(split):
        judged = qrels.get(query.qid, {})
        relevant = sorted(
            (docno for docno, grade in judged.items() if grade > 0), key=lambda d: (-judged[d], d)
        )
        if not relevant:
            continue
        top = runs.get(TOP_SYSTEM, {}).get(query.qid, {})
        details = [_passage("relevant", relevant[0], texts)]
        if top:
            best = max(top, key=lambda docno: (top[docno], docno))
            details.append(_passage(f"ranked first by {TOP_SYSTEM}", best, texts))
        cell = f"<details><summary>{escape(query.text)}</summary>{''.join(details)}</details>"
        ranks = [relevant_rank(runs[name].get(query.qid, {}), judged) for name in systems]
        rows.append(
            [(query.qid, None), (cell, query.text)]
            + [
                ("" if rank is None else str(rank), _NOT_RETRIEVED if rank is None else rank)
                for rank in ranks
            ]
        )
    return _table(f"queries-{pair}", ["qid", "query", *systems], rows)


def _passage(label: str, docno: str, texts: Mapping[str, str]) -> str:
    text = texts.get(docno, "")
    if len(text) > PASSAGE_CHARS:
        text = text[:PASSAGE_CHARS] + "…"
    return f"<p><b>{escape(label)}</b> <code>{escape(docno)}</code>: {escape(text)}</p>"
