"""The self-contained HTML report: tables, ranks per query, passages on click, no network."""

from __future__ import annotations

import base64
import html
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser

import numpy as np
import pytest

from clir.datasets import Collection
from clir.evaluation import SignificanceConfig
from clir.pipeline.config import ExperimentConfig
from clir.pipeline.explain import TermMatrix
from clir.pipeline.html_report import ExplorerViews
from clir.pipeline.report import write_report
from clir.types import Document, Query

LONG = "x" * 450

# q2's heatmap: full's first passage d1, one component (the page rounds to 2 decimals)
MATRIX = TermMatrix("query_en", "en", ["water", "wine"], ["first", "pass", "x"],
                    np.array([[0.904, -0.5, 0.0], [-0.996, 0.25, 0.1234]]), 0.75)  # fmt: skip
VIEWS = ExplorerViews({"d1": "one pass " + LONG, "d2": "two <i>"}, {"q2": ("d1", {"en_en": MATRIX})})


class _Tables(HTMLParser):
    """Each table's rows (cell texts) by table id, and every ``src``/``href`` attribute."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.links: list[str] = []
        self.scripts: list[str] = []
        self._table: str | None = None
        self._cell: list[str] | None = None
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.links += [attrs[a] for a in ("src", "href") if a in attrs]
        if tag == "table":
            self._table = attrs["id"]
            self.tables[self._table] = []
        elif tag == "tr" and self._table:
            self.tables[self._table].append([])
        elif tag in ("td", "th") and self._table:
            self._cell = []
        self._in_script = tag == "script"

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.tables[self._table][-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "table":
            self._table = None
        self._in_script = False

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
        if self._in_script:
            self.scripts.append(data)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """A two-pair report. en-sw: test queries q1-q3 (one relevant passage each) and train query
    q9, which the explorer must leave out. Ranks of the relevant passage, by hand:
    qt-bm25 2, 1, not retrieved (AP 1/2, 1, 0: MAP 0.5); full 1, 3, 1 (AP 1, 1/3, 1: MAP 7/9).
    en-tl: one query, both systems rank its passage first. DT translations of d1 and d2 only,
    a heatmap for q2 only."""
    out = tmp_path_factory.mktemp("report")
    documents = [
        Document("d1", "first passage " + LONG),
        Document("d2", "second passage <b>"),
        Document("d3", "third passage"),
        Document("d4", "fourth passage"),
    ]
    queries = {
        "test": [Query("q1", "light"), Query("q2", "water & wine"), Query("q3", "bread")],
        "train": [Query("q9", "fish")],
    }
    qrels = {"q1": {"d1": 1}, "q2": {"d2": 1, "d4": 0}, "q3": {"d3": 1}, "q9": {"d4": 1}}
    sw = Collection("bible-en-sw", "sw", "en", documents, queries, qrels)
    tl = Collection("bible-en-tl", "tl", "en", documents, {"test": [Query("q1", "light")]}, {"q1": {"d1": 1}})
    runs = {
        "en-sw": {
            "qt-bm25": {"q1": {"d2": 3.0, "d1": 2.0}, "q2": {"d2": 1.0}, "q3": {"d1": 1.0, "d2": 0.5}},
            "full": {
                "q1": {"d1": 2.0, "d4": 1.0},
                "q2": {"d1": 3.0, "d3": 2.0, "d2": 1.0},
                "q3": {"d3": 1.0},
            },
        },
        "en-tl": {"qt-bm25": {"q1": {"d1": 1.0}}, "full": {"q1": {"d1": 1.0}}},
    }
    config = ExperimentConfig(systems={"full": {}}, significance=SignificanceConfig(bootstrap_samples=200))
    write_report(
        out, config, runs, collections={"en-sw": sw, "en-tl": tl}, curves={}, bli={},
        timings={"collection-en-sw": 1.25, "tables-en-sw": 0.0}, reused={"tables-en-sw": 25.88},
        measures=["AP", "RR"],
        views={"en-sw": VIEWS},
    )  # fmt: skip
    page = (out / "report.html").read_text()
    parser = _Tables()
    parser.feed(page)
    parser.close()
    return out, page, parser


def test_one_results_table_per_pair_with_the_measures(report):
    out, _, parsed = report
    assert parsed.tables["results-en-sw"] == [
        ["system", "AP", "RR"],
        ["qt-bm25", "0.5000", "0.5000"],
        ["full", "0.7778", "0.7778"],
    ]
    assert parsed.tables["results-en-tl"][1:] == [
        ["qt-bm25", "1.0000", "1.0000"],
        ["full", "1.0000", "1.0000"],
    ]
    assert parsed.tables["timings"] == [
        ["step", "seconds", "reused: built in (s)"],
        ["collection-en-sw", "1.2", ""],
        ["tables-en-sw", "0.0", "25.9"],
    ]
    # a step reused from an earlier run shows its build time beside this run's 0 (it had shown 0 alone)
    markdown = (out / "report.md").read_text()
    assert "| collection-en-sw | 1.2 |  |\n| tables-en-sw | 0.0 | 25.9 |" in markdown
    assert json.loads((out / "results.json").read_text())["reused"] == {"tables-en-sw": 25.88}


def test_one_query_row_per_test_query_with_hand_computed_ranks(report):
    _, page, parsed = report
    rows = parsed.tables["queries-en-sw"]
    assert rows[0] == ["qid", "query", "qt-bm25", "full"]
    # the query cell holds the query, then (on click) the relevant passage and full's first
    ranks = [[row[0], row[2], row[3]] for row in rows[1:]]
    assert ranks == [["q1", "2", "1"], ["q2", "1", "3"], ["q3", "", "1"]]
    q2 = rows[2][1]
    assert q2.startswith("water & wine") and "relevant d2: second passage <b>DT translation: two <i>" in q2
    assert "ranked first by full d1: first passage " in q2
    assert "second passage &lt;b&gt;" in page and "two &lt;i&gt;" in page  # texts escaped, not markup
    q1_passage = rows[1][1].split("relevant d1: ")[1].split("DT translation")[0].strip()
    assert len(q1_passage) == 401 and q1_passage.endswith("…")  # cut to 400 characters
    q1_translation = rows[1][1].split("DT translation: ")[1].split("ranked first")[0].strip()
    assert q1_translation == "one pass " + "x" * 391 + "…"
    q3 = rows[3][1]  # d3 has no translation: none shown
    assert q3 == "breadrelevant d3: third passageranked first by full d3: third passage"
    assert "fish" not in page  # a train query is not listed
    assert [row[0] for row in parsed.tables["queries-en-tl"][1:]] == ["q1"]


def test_the_sampled_query_holds_the_heatmap_of_full_s_first_passage(report):
    _, page, parsed = report
    (canvas,) = re.findall(r'<canvas class="heatmap" data-matrix="([^"]*)">', page)
    assert json.loads(html.unescape(canvas)) == {
        "component": "en_en",
        "query": ["water", "wine"],
        "doc": ["first", "pass", "x"],
        "values": [[0.9, -0.5, 0.0], [-1.0, 0.25, 0.12]],
    }
    q2 = parsed.tables["queries-en-sw"][2][1]
    assert q2.endswith("en_en: query_en x d1 en (component score 0.750)")
    assert page.index("water &amp; wine") < page.index("<canvas") < page.index("bread")


def test_page_is_self_contained_and_sortable(report):
    out, page, parsed = report
    assert "http://" not in page and "https://" not in page
    plots = [(out / f"ap_diff_{pair}.png").read_bytes() for pair in ("en-sw", "en-tl")]
    assert parsed.links == ["data:image/png;base64," + base64.b64encode(png).decode() for png in plots]
    script = "".join(parsed.scripts)
    assert 'querySelectorAll("table.sortable th")' in script and "addEventListener" in script
    assert page.count('class="sortable"') == len(parsed.tables) == 5


# Appended to a copy of the page: clicks in a real browser, results left on <body> for --dump-dom.
_PROBE = """<script>
(function () {
  var table = document.getElementById("results-en-sw"), ap = table.tHead.rows[0].children[1];
  var order = function () {
    return Array.from(table.tBodies[0].rows).map(function (r) { return r.children[0].textContent; });
  };
  ap.click();
  document.body.dataset.ascending = JSON.stringify(order());
  ap.click();
  document.body.dataset.descending = JSON.stringify(order());
  var query = document.querySelector("canvas.heatmap").closest("details");
  query.querySelector("summary").click();
  document.body.dataset.opened = String(query.open);
  var canvas = query.querySelector("canvas.heatmap"), g = canvas.getContext("2d");
  // the centre of each cell of the 2 x 3 matrix (cells 12 px, from x 110, y 90)
  var colours = [0, 1].map(function (i) {
    return [0, 1, 2].map(function (j) {
      return Array.from(g.getImageData(110 + 12 * j + 6, 90 + 12 * i + 6, 1, 1).data);
    });
  });
  document.body.dataset.colours = JSON.stringify(colours);
  document.body.dataset.errors = JSON.stringify(window.__errors);
})();
</script>"""
_ERRORS = (
    "<script>window.__errors = []; window.addEventListener('error', "
    "function (e) { window.__errors.push(String(e.message)); });</script>"
)


def test_in_a_headless_browser_tables_sort_queries_open_and_nothing_fails(report, tmp_path):
    browser = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
    if browser is None:
        pytest.skip(
            "no chromium, chromium-browser or google-chrome on PATH ('make browser' installs it as root)"
        )
    _, page, _ = report
    probed = tmp_path / "probed.html"
    probed.write_text(page.replace("<head>", "<head>" + _ERRORS, 1).replace("</body>", _PROBE + "</body>", 1))
    dom = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", probed.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert 'id="results-en-sw"' in dom and "0.7778" in dom
    body = re.search(r"<body([^>]*)>", dom).group(1)
    attributes = {k: html.unescape(v) for k, v in re.findall(r'data-([a-z]+)="([^"]*)"', body)}
    systems = json.loads(attributes["ascending"])
    assert json.loads(attributes["descending"]) == systems[::-1] and len(systems) >= 2
    assert systems.index("qt-bm25") < systems.index("full")  # MAP 0.5 before 0.7778, ascending
    assert attributes["opened"] == "true"
    # red for +1, white for 0, blue for -1 (RGBA), value v -> 255 * (1 - |v|) in the other channels
    assert json.loads(attributes["colours"]) == [
        [[255, 25, 25, 255], [128, 128, 255, 255], [255, 255, 255, 255]],
        [[0, 0, 255, 255], [255, 191, 191, 255], [255, 224, 224, 255]],
    ]
    assert json.loads(attributes["errors"]) == []


def test_rank_breaks_score_ties_by_docno_descending_as_trec_eval():
    from clir.pipeline.html_report import relevant_rank

    assert relevant_rank({"a": 1.0, "b": 1.0, "c": 2.0}, {"b": 1}) == 2
    assert relevant_rank({"a": 1.0, "b": 1.0, "c": 2.0}, {"a": 1, "c": 0}) == 3
    assert relevant_rank({"a": 1.0}, {"b": 1}) is None


def test_rank_and_first_passage_follow_the_evaluation_s_float32_order():
    """Scores equal only as float32 tie in the evaluation (trec_eval's order: docno descending
    breaks the tie); ranked on float64, the page had shown rank 1 for a passage that the
    evaluation counts at rank 2 (RR 0.5), and another first passage than the run's."""
    from clir.evaluation import evaluate_per_query
    from clir.pipeline.html_report import explorer_passages, relevant_rank

    run = {"a": 1.0 + 1e-9, "b": 1.0, "c": 0.5}  # a > b in float64, a == b in float32
    assert evaluate_per_query({"q1": run}, {"q1": {"a": 1}}, ["RR"]) == {"RR": {"q1": 0.5}}
    assert relevant_rank(run, {"a": 1}) == 2
    collection = Collection(
        "c", "sw", "en", [Document(d, d) for d in "abc"], {"test": [Query("q1", "x")]}, {"q1": {"c": 1}}
    )
    assert explorer_passages({"full": {"q1": run}}, collection, "test") == {"q1": ("c", "b")}


def _write_thirty_query_report(out, measures):
    """A report of 30 queries: qt-bm25 ranks each relevant passage second, full first."""
    n = 30
    documents = [Document(f"d{i}", f"passage {i}") for i in range(n)] + [Document("x", "other")]
    queries = {"test": [Query(f"q{i}", f"word{i}") for i in range(n)]}
    qrels = {f"q{i}": {f"d{i}": 1} for i in range(n)}
    collection = Collection("bible-en-sw", "sw", "en", documents, queries, qrels)
    runs = {
        "en-sw": {
            "qt-bm25": {f"q{i}": {"x": 2.0, f"d{i}": 1.0} for i in range(n)},
            "full": {f"q{i}": {f"d{i}": 2.0, "x": 1.0} for i in range(n)},
        }
    }
    config = ExperimentConfig(systems={"full": {}}, significance=SignificanceConfig(bootstrap_samples=200))
    write_report(
        out, config, runs, collections={"en-sw": collection}, curves={}, bli={}, timings={}, measures=measures
    )


def test_significance_marks_are_the_markdown_report_s(tmp_path):
    """The page marks a significant improvement as report.md does (it had shown the values
    alone). 30 queries: qt-bm25 ranks each relevant passage second, full first (p < 0.0001)."""
    _write_thirty_query_report(tmp_path, ["AP", "RR"])
    parser = _Tables()
    parser.feed((tmp_path / "report.html").read_text())
    parser.close()
    rows = [["qt-bm25", "0.5000", "0.5000"], ["full", "1.0000*", "1.0000*"]]
    assert parser.tables["results-en-sw"][1:] == rows
    assert "| full | 1.0000* | 1.0000* |" in (tmp_path / "report.md").read_text()
    assert "*: significantly better than the best lexical baseline" in (tmp_path / "report.html").read_text()


def test_queries_are_listed_and_sorted_in_natural_qid_order(tmp_path):
    """The explorer had listed the split's order (q1, q10, q2 where it came sorted as text) and
    the page's script sorted the qid column as text (q10 before q2): numbers now count as numbers,
    in the rows and in the position the script sorts the column by."""
    from clir.evaluation import natural_key, natural_order

    assert natural_order(["q10", "q2", "q1", "Q1.10", "Q1.9", "q01"]) == [
        "Q1.9",
        "Q1.10",
        "q01",
        "q1",
        "q2",
        "q10",
    ]
    assert natural_key("q2") < natural_key("q10") and natural_key("10") > natural_key("9")
    qids = ["q1", "q10", "q2", "q21", "q3"]
    documents = [Document(f"d{q}", f"passage {q}") for q in qids]
    collection = Collection(
        "c",
        "sw",
        "en",
        documents,
        {"test": [Query(q, f"word {q}") for q in qids]},
        {q: {f"d{q}": 1} for q in qids},
    )
    run = {q: {f"d{q}": 1.0} for q in qids}
    runs = {"en-sw": {"qt-bm25": run, "full": run}}
    config = ExperimentConfig(systems={"full": {}}, significance=SignificanceConfig(bootstrap_samples=200))
    write_report(
        tmp_path, config, runs, collections={"en-sw": collection}, curves={}, bli={}, timings={},
        measures=["AP"],
    )  # fmt: skip
    page = (tmp_path / "report.html").read_text()
    parser = _Tables()
    parser.feed(page)
    parser.close()
    assert [row[0] for row in parser.tables["queries-en-sw"][1:]] == ["q1", "q2", "q3", "q10", "q21"]
    # the script sorts a cell by its data-value where given: the qid's position in natural order
    cells = re.findall(r'<td class="text" data-value="(\d+)">(q\d+)</td>', page)
    assert sorted(cells, key=lambda cell: int(cell[0])) == [
        (str(i), q) for i, q in enumerate(natural_order(qids))
    ]


def test_page_names_the_best_lexical_baseline_the_marks_refer_to(report):
    """The legend's ``*`` is "better than the best lexical baseline": report.md names it for each
    pair, the page had not (a reader could not tell which of the six lexical runs it was)."""
    _, page, _ = report
    section = page[page.index("<h2>en-sw</h2>") : page.index('id="results-en-sw"')]
    assert "Best lexical baseline: <code>qt-bm25</code>." in section


def test_reports_say_the_aqwv_beta_and_returned_set_and_that_intervals_are_uncorrected(tmp_path):
    """AQWV's value depends on beta and the returned set; neither report said which (40, top 10).
    The bootstrap intervals are not corrected for multiple comparisons while the p-values are:
    the heading says so (runs/default's en-ny full vs lexical-fusion P@10 [+0.001, +0.008] beside
    a corrected p of 0.0502 and no mark had read as a contradiction)."""
    _write_thirty_query_report(tmp_path, ["AP", "AQWV"])
    note = (
        "AQWV: the mean over queries of 1 - P_miss - beta * P_FA (MATERIAL), beta = 40, each "
        "query's returned set the top 10 documents."
    )
    markdown = (tmp_path / "report.md").read_text()
    assert note in markdown and html.escape(note) in (tmp_path / "report.html").read_text()
    assert "[95% paired bootstrap interval, not corrected for the other comparisons" in markdown


def test_training_curves_name_each_system_s_loss(tmp_path, monkeypatch):
    """The left plot's axis had said "training hinge loss" for every system while the default
    config trains weak-full and full on the softmax loss (other values, another scale)."""
    import clir.pipeline.report as report_module

    for system in ("lexical-fusion", "full"):
        (tmp_path / system / "seed0").mkdir(parents=True)
        curve = [{"epoch": 1, "loss": 1.0, "dev": 0.5}, {"epoch": 2, "loss": 0.5, "dev": 0.6}]
        (tmp_path / system / "seed0" / "curve.json").write_text(json.dumps(curve))
    drawn = {}

    def keep(fig, path):
        if path.name == "training_curves.png":
            axis = fig.axes[0]
            drawn["ylabel"] = axis.get_ylabel()
            drawn["labels"] = [line.get_label() for line in axis.get_lines()]

    monkeypatch.setattr(report_module, "_save", keep)
    config = ExperimentConfig(
        systems={"lexical-fusion": {"model": {"components": []}}, "full": {"optim": {"loss": "softmax"}}}
    )
    curves = {system: tmp_path / system for system in ("lexical-fusion", "full")}
    report_module._plots(tmp_path, config, {}, {}, curves, {})
    assert "hinge" not in drawn["ylabel"]
    assert drawn["labels"] == ["lexical-fusion, hinge loss", "full, softmax loss"]
