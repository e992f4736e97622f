"""The experiment's report as one self-contained HTML page, ``report.html``.

Everything is inline (CSS, a small sorting script, the plots as base64 PNG): the page opens from
disk with no server and no network. It holds the results tables of every pair (sortable by a
click on a column header), the plots, the step timings and a per-query explorer: for each
evaluated query, every system's rank of the first relevant passage, and on click the relevant
passage and the passage the ``full`` system ranked first, each in its language and in its DT
translation (D-hat_en, the English tokens the reranker reads), and for a sample of queries (the
first :data:`HEATMAP_QUERIES` of each pair) the ``clir explain`` similarity matrices of ``full``'s
first passage, drawn on a canvas when the query is opened (the matrices travel as JSON, rounded
to :data:`HEATMAP_DECIMALS` decimals).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clir.datasets import Collection
from clir.evaluation import natural_order
from clir.formats import atomic_write, ranked
from clir.types import Qrels, Run

if TYPE_CHECKING:
    from clir.pipeline.explain import TermMatrix

PASSAGE_CHARS = 400
"""Passages in the explorer are cut to this many characters (keeps the page small)."""

TOP_SYSTEM = "full"
"""The system whose first-ranked passage the explorer shows beside the relevant one."""

HEATMAP_QUERIES = 20
"""Queries per pair whose similarity matrices the page holds (about 13 KB a query in make run)."""

HEATMAP_DECIMALS = 2
"""Decimals of the similarity values written into the page."""


@dataclass
class ExplorerViews:
    """What the explorer shows of one pair beyond the collection's texts.

    Attributes:
        translations: ``docno -> DT translation`` (D-hat_en, its tokens joined by spaces).
        heatmaps: ``qid -> (docno, component -> similarity matrix)`` for the sampled queries.
    """

    translations: Mapping[str, str] = field(default_factory=dict)
    heatmaps: Mapping[str, tuple[str, Mapping[str, TermMatrix]]] = field(default_factory=dict)


_STYLE = """
body { font-family: sans-serif; margin: 2em; max-width: 80em; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: right; vertical-align: top; }
th { background: #eee; cursor: pointer; user-select: none; }
td.text, th.text { text-align: left; }
details p { max-width: 50em; white-space: pre-wrap; }
img { max-width: 100%; }
div.heatmap { max-width: 60em; overflow-x: auto; }
canvas.heatmap { display: block; margin: 0.5em 0; }
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

_HEATMAP_SCRIPT = """
function heatmapColour(v) {
  var t = Math.max(-1, Math.min(1, v)), w = Math.round(255 * (1 - Math.abs(t)));
  return t >= 0 ? "rgb(255," + w + "," + w + ")" : "rgb(" + w + "," + w + ",255)";
}
function drawHeatmap(canvas) {
  var m = JSON.parse(canvas.dataset.matrix), cell = 12, left = 110, top = 90;
  var rows = m.values.length, cols = rows ? m.values[0].length : 0;
  canvas.width = left + cols * cell + 4;
  canvas.height = top + rows * cell + 4;
  var g = canvas.getContext("2d");
  g.font = "10px sans-serif";
  g.textAlign = "right";
  g.textBaseline = "middle";
  m.query.forEach(function (t, i) { g.fillText(t, left - 4, top + (i + 0.5) * cell); });
  m.doc.forEach(function (t, j) {
    g.save();
    g.translate(left + (j + 0.5) * cell, top - 4);
    g.rotate(-Math.PI / 2);
    g.textAlign = "left";
    g.fillText(t, 0, 0);
    g.restore();
  });
  m.values.forEach(function (row, i) {
    row.forEach(function (v, j) {
      g.fillStyle = heatmapColour(v);
      g.fillRect(left + j * cell, top + i * cell, cell, cell);
    });
  });
  canvas.addEventListener("mousemove", function (e) {
    var box = canvas.getBoundingClientRect();
    var j = Math.floor((e.clientX - box.left - left) / cell);
    var i = Math.floor((e.clientY - box.top - top) / cell);
    var inside = i >= 0 && i < rows && j >= 0 && j < cols;
    canvas.title = inside ? m.query[i] + " x " + m.doc[j] + ": " + m.values[i][j] : "";
  });
  canvas.dataset.drawn = "true";
}
document.addEventListener("click", function (e) {
  var summary = e.target.closest("summary");
  if (!summary) { return; }
  summary.parentNode.querySelectorAll("canvas.heatmap:not([data-drawn])").forEach(drawHeatmap);
});
"""


def relevant_rank(run: Mapping[str, float], judged: Mapping[str, int]) -> int | None:
    """The 1-based rank of the first relevant passage of one query's run, or ``None`` when no
    relevant passage was retrieved. The run is ranked as the evaluation ranks it
    (:func:`clir.formats.ranked`, trec_eval's order): by score read as a 32-bit float, ties
    broken by docno descending (scores equal only as float32 tie: ranked on float64, a page had
    shown rank 1 for a passage evaluated at rank 2)."""
    order = ranked(run)
    return next((rank for rank, (docno, _) in enumerate(order, 1) if judged.get(docno, 0) > 0), None)


def write_html_report(
    out: Path,
    results: Mapping[str, Any],
    runs: Mapping[str, Mapping[str, Run]],
    *,
    collections: Mapping[str, Collection],
    split: str,
    plots: Sequence[str],
    views: Mapping[str, ExplorerViews] | None = None,
    marks: Mapping[str, Mapping[str, Mapping[str, str]]] | None = None,
    legend: str = "",
) -> Path:
    """Write ``out/report.html``.

    Args:
        out: The report's folder (the plots named in ``plots`` are read from it).
        results: The ``results.json`` content (its systems, in report order, and timings).
        runs: ``pair -> system -> run``.
        collections: ``pair -> collection`` (queries, judgements and passage texts).
        split: The evaluated split; the explorer lists its judged queries.
        plots: File names of PNG plots in ``out``, inlined in this order.
        views: ``pair -> translations and heatmaps`` for the explorer (none: texts only).
        marks: ``pair -> system -> measure -> marks`` of significance, shown after the value
            (as the Markdown report's results tables show them).
        legend: What the marks say, shown above the first table.

    Returns:
        The path written.
    """
    title = escape(results["config"]["name"])
    parts = [f"<h1>{title}</h1>"] + ([f"<p>{escape(legend)}</p>"] if legend else [])
    for pair, rows in results["systems"].items():
        measures = list(next(iter(rows.values()), {}))
        marked = (marks or {}).get(pair, {})
        table = [
            [(name, None), *((f"{row[m]:.4f}{marked.get(name, {}).get(m, '')}", row[m]) for m in measures)]
            for name, row in rows.items()
        ]
        parts.append(f"<h2>{escape(pair)}</h2>")
        best = results.get("significance", {}).get(pair, {}).get("best_baseline")
        if best is not None:  # what the legend's "best lexical baseline" is, as report.md says
            parts.append(f"<p>Best lexical baseline: <code>{escape(best)}</code>.</p>")
        parts.append(_table(f"results-{pair}", ["system", *measures], table))
    if plots:
        parts.append("<h2>Plots</h2>")
        for name in plots:
            data = base64.b64encode((out / name).read_bytes()).decode("ascii")
            parts.append(f'<figure><img alt="{escape(name)}" src="data:image/png;base64,{data}">')
            parts.append(f"<figcaption>{escape(name)}</figcaption></figure>")
    timings, reused = results["timings"], results.get("reused", {})
    parts.append("<h2>Timings</h2>")
    rows = [[(step, None), _seconds(took), _seconds(reused.get(step))] for step, took in timings.items()]
    parts.append(_table("timings", ["step", "seconds", "reused: built in (s)"], rows))
    parts.append(f"<h2>Queries ({escape(split)})</h2>")
    if any(TOP_SYSTEM in rows for rows in results["systems"].values()):
        shown = (
            f"Click a query for the relevant passage and the passage <code>{TOP_SYSTEM}</code> "
            f"ranked first, each with its DT translation (cut to {PASSAGE_CHARS} characters), and, "
            f"for the first {HEATMAP_QUERIES} queries of each pair, the query-term x passage-term "
            f"similarities (red +1, white 0, blue -1; <code>clir explain</code>) of "
            f"<code>{TOP_SYSTEM}</code>'s first passage, one per component."
        )
    else:  # the page had promised a system's passage and heatmaps that no query holds
        shown = (
            "Click a query for the relevant passage with its DT translation (cut to "
            f"{PASSAGE_CHARS} characters); no <code>{TOP_SYSTEM}</code> system, so no passage it "
            "ranked first and no similarities."
        )
    parts.append(
        f"<p>Rank of the first relevant passage in each system's run (blank: not retrieved). {shown}</p>"
    )
    for pair, rows in results["systems"].items():
        parts.append(f"<h3>{escape(pair)}</h3>")
        pair_views = (views or {}).get(pair, ExplorerViews())
        parts.append(_explorer(pair, list(rows), runs[pair], collections[pair], split, pair_views))
    page = (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
        f"<style>{_STYLE}</style></head>\n<body>\n"
        + "\n".join(parts)
        + f"\n<script>{_SORT_SCRIPT}{_HEATMAP_SCRIPT}</script>"
        "\n</body></html>\n"
    )
    path = out / "report.html"
    with atomic_write(path) as handle:
        handle.write(page)
    return path


def seconds_text(value: float | None) -> str:
    """Seconds as the timings tables show them: one decimal, blank for ``None`` (a step built in
    this run has no earlier build time)."""
    return "" if value is None else f"{value:.1f}"


def _seconds(value: float | None) -> tuple[str, float | None]:
    """A sortable cell of seconds (:func:`seconds_text`)."""
    return seconds_text(value), value


def _table(table_id: str, header: Sequence[str], rows: Sequence[Sequence[tuple[str, Any]]]) -> str:
    """A sortable table; each cell is ``(html, sort value)``. The first column is plain text
    (escaped here), sorted by its sort value where given, else as text; other cells' html is
    written as given, left-aligned when sorted as text."""
    head = f"<th{_TEXT}>{escape(header[0])}</th>" + "".join(f"<th>{escape(h)}</th>" for h in header[1:])
    lines = [f'<table class="sortable" id="{escape(table_id)}"><thead><tr>{head}</tr></thead><tbody>']
    for (first, order), *cells in rows:
        tds = "".join(
            (
                "<td>"
                if value is None
                else f'<td{_TEXT * isinstance(value, str)} data-value="{escape(str(value))}">'
            )
            + f"{html}</td>"
            for html, value in cells
        )
        value = "" if order is None else f' data-value="{escape(str(order))}"'
        lines.append(f"<tr><td{_TEXT}{value}>{escape(first)}</td>{tds}</tr>")
    lines.append("</tbody></table>")
    return "\n".join(lines)


def explorer_passages(
    runs: Mapping[str, Run], collection: Collection, split: str
) -> dict[str, tuple[str, str | None]]:
    """The passages the explorer shows of each judged query of ``split``, in natural qid order
    (:func:`clir.evaluation.natural_order`: ``q2`` before ``q10``):
    ``qid -> (its most relevant passage, the passage TOP_SYSTEM ranked first or None)``."""
    qrels: Qrels = collection.qrels_of(split)
    shown: dict[str, tuple[str, str | None]] = {}
    for qid in natural_order(query.qid for query in collection.split(split)):
        judged = qrels.get(qid, {})
        relevant = sorted((d for d, grade in judged.items() if grade > 0), key=lambda d: (-judged[d], d))
        if relevant:
            top = runs.get(TOP_SYSTEM, {}).get(qid, {})
            shown[qid] = (relevant[0], ranked(top)[0][0] if top else None)
    return shown


def _explorer(
    pair: str,
    systems: Sequence[str],
    runs: Mapping[str, Run],
    collection: Collection,
    split: str,
    views: ExplorerViews,
) -> str:
    """The per-query table of one pair: query (with its passages on click) and every rank, in
    natural qid order; the qid column sorts by that order (its position, as ``data-value``)."""
    qrels: Qrels = collection.qrels_of(split)
    texts = {document.docno: document.text for document in collection.documents}
    queries = {query.qid: query for query in collection.split(split)}
    rows = []
    for position, (qid, (relevant, best)) in enumerate(explorer_passages(runs, collection, split).items()):
        query = queries[qid]
        details = [_passage("relevant", relevant, texts, views.translations)]
        if best is not None:
            details.append(_passage(f"ranked first by {TOP_SYSTEM}", best, texts, views.translations))
        if qid in views.heatmaps:
            details.append(_heatmaps(*views.heatmaps[qid]))
        cell = f"<details><summary>{escape(query.text)}</summary>{''.join(details)}</details>"
        judged = qrels[qid]
        ranks = [relevant_rank(runs[name].get(qid, {}), judged) for name in systems]
        rows.append(
            [(qid, position), (cell, query.text)]
            + [
                ("" if rank is None else str(rank), _NOT_RETRIEVED if rank is None else rank)
                for rank in ranks
            ]
        )
    return _table(f"queries-{pair}", ["qid", "query", *systems], rows)


def _cut(text: str) -> str:
    return text[:PASSAGE_CHARS] + "…" if len(text) > PASSAGE_CHARS else text


def _passage(label: str, docno: str, texts: Mapping[str, str], translations: Mapping[str, str]) -> str:
    html = f"<p><b>{escape(label)}</b> <code>{escape(docno)}</code>: {escape(_cut(texts.get(docno, '')))}</p>"
    if docno in translations:
        html += f'<p class="dt"><i>DT translation</i>: {escape(_cut(translations[docno]))}</p>'
    return html


def _heatmaps(docno: str, matrices: Mapping[str, TermMatrix]) -> str:
    """One canvas per component, its matrix as JSON in ``data-matrix`` (drawn on opening)."""
    parts = []
    for component, matrix in matrices.items():
        data = {
            "component": component,
            "query": matrix.query_tokens,
            "doc": matrix.doc_tokens,
            "values": [[round(float(v), HEATMAP_DECIMALS) for v in row] for row in matrix.values],
        }
        parts.append(
            f"<p><b>{escape(component)}</b>: {escape(matrix.query_view)} x <code>{escape(docno)}</code> "
            f"{escape(matrix.doc_view)} (component score {matrix.score:.3f})</p>"
            f'<div class="heatmap"><canvas class="heatmap" '
            f'data-matrix="{escape(json.dumps(data, ensure_ascii=False))}"></canvas></div>'
        )
    return "".join(parts)
