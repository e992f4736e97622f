"""ir_datasets: a dataset registered in ir_datasets' registry from local files (no download) read
as a collection in memory, and written by ``clir data irds`` with its documents streamed."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import NamedTuple

import pytest

from clir.cli import main
from clir.datasets import Collection
from clir.datasets.irds import ir_dataset_parts
from clir.errors import ConfigError, DataNotFoundError
from clir.types import Document, Query

# ir_datasets makes a folder per registered dataset in its home at import: a temporary one here
os.environ.setdefault("IR_DATASETS_HOME", str(Path(tempfile.gettempdir()) / "clir-tests-ir_datasets"))
ir_datasets = pytest.importorskip("ir_datasets", reason="ir_datasets (clir-lowres[irds]) is not installed")
from ir_datasets.datasets.base import Dataset  # noqa: E402
from ir_datasets.formats import TrecQrels, TsvDocs, TsvQueries  # noqa: E402
from ir_datasets.util import LocalDownload  # noqa: E402


class TitledDoc(NamedTuple):
    """A document as HC4 / NeuCLIR / MIRACL give them: a title and a text."""

    doc_id: str
    title: str
    text: str

    def default_text(self) -> str:
        return f"{self.title} {self.text}"


class Topic(NamedTuple):
    query_id: str
    title: str
    description: str

    def default_text(self) -> str:
        return self.title


@pytest.fixture(scope="module")
def dataset_id(tmp_path_factory) -> str:
    """``clir-test/tiny-sw``: three Swahili documents, two English topics, three judgements."""
    root = tmp_path_factory.mktemp("irds")
    (root / "docs.tsv").write_text("d1\tMbwa\tmbwa anakula nyama\nd2\tMtoto\tmtoto analala\nd3\t\tpaka\n")
    (root / "queries.tsv").write_text(
        "401\tdog eats\tA dog eating meat.\n402\tchild sleeps\tA sleeping child.\n"
    )
    (root / "qrels.txt").write_text("401 0 d1 1\n402 0 d2 2\n402 0 d3 0\n")
    return register("clir-test/tiny-sw", root)


def register(name: str, root: Path) -> str:
    """Register ``root``'s docs.tsv, queries.tsv and qrels.txt as the dataset ``name`` (once)."""
    if name not in ir_datasets.registry:
        ir_datasets.registry.register(
            name,
            Dataset(
                TsvDocs(LocalDownload(root / "docs.tsv"), doc_cls=TitledDoc, lang="sw"),
                TsvQueries(LocalDownload(root / "queries.tsv"), query_cls=Topic, lang="en"),
                TrecQrels(LocalDownload(root / "qrels.txt"), {0: "not relevant", 1: "relevant", 2: "very"}),
            ),
        )
    return name


def test_collection_from_ir_datasets(dataset_id):
    collection = Collection.from_ir_datasets(dataset_id)
    assert (collection.name, collection.doc_lang, collection.query_lang) == ("clir-test-tiny-sw", "sw", "en")
    assert collection.documents == [
        Document("d1", "Mbwa mbwa anakula nyama"),
        Document("d2", "Mtoto mtoto analala"),
        Document("d3", " paka"),
    ]
    assert collection.split("test") == [
        Query("401", "dog eats", "A dog eating meat."),
        Query("402", "child sleeps", "A sleeping child."),
    ]
    assert collection.qrels == {"401": {"d1": 1}, "402": {"d2": 2, "d3": 0}}
    assert collection.stats["documents"] == 3 and collection.stats["judged_per_query"] == 1.5
    # fields and query field by name; the long form as the query
    other = Collection.from_ir_datasets(dataset_id, fields=["text"], query_field="description", split="dev")
    assert [d.text for d in other.documents] == ["mbwa anakula nyama", "mtoto analala", "paka"]
    assert other.split("dev")[0].text == "A dog eating meat."
    with pytest.raises(ConfigError, match=r"--field: documents of this dataset have no field 'body'; their "
                       r"fields: doc_id, title, text"):  # fmt: skip
        Collection.from_ir_datasets(dataset_id, fields=["body"])
    documents = ir_dataset_parts(dataset_id).documents  # streamed: an iterator, read once
    assert iter(documents) is documents and next(documents) == collection.documents[0]
    with pytest.raises(DataNotFoundError, match=r"ir_datasets has no dataset 'clir-test/absent'"):
        Collection.from_ir_datasets("clir-test/absent")


def test_clir_data_irds_writes_a_collection(dataset_id, tmp_path, capsys):
    out = tmp_path / "tiny"
    assert main(["data", "irds", dataset_id, "--out", str(out), "--field", "title", "text"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["documents"] == 3 and stats["document_words"] == 8 and stats["queries"] == {"test": 2}
    info = json.loads((out / "collection.json").read_text())
    assert info["type"] == "ir_datasets" and info["source"] == {"ir_datasets": dataset_id}
    loaded = Collection.load(out)
    assert loaded.documents[2] == Document("d3", "paka")  # the empty title is skipped
    assert loaded.qrels == Collection.from_ir_datasets(dataset_id).qrels
    assert (out / "qrels.test.txt").read_text() == "401 0 d1 1\n402 0 d2 2\n402 0 d3 0\n"
    assert main(["data", "irds", "clir-test/absent", "--out", str(tmp_path / "x")]) == 2
    assert "clir: error: ir_datasets has no dataset 'clir-test/absent'" in capsys.readouterr().err


def test_a_dataset_that_cannot_be_fetched_is_a_clear_error(tmp_path, capsys):
    """Offline, a dataset not in ir_datasets' cache failed with 'unexpected ConnectionError (a bug
    in clir ...)': a download that fails (here a file that is not there) is now named as such."""
    name = "clir-test/unreachable"
    if name not in ir_datasets.registry:
        missing = LocalDownload(tmp_path / "nowhere.tsv")
        ir_datasets.registry.register(
            name, Dataset(TsvDocs(missing, lang="sw"), TsvQueries(missing, lang="en"))
        )
    with pytest.raises(DataNotFoundError, match=f"ir_datasets dataset '{name}' is not in its cache"):
        ir_dataset_parts(name)
    assert main(["data", "irds", name, "--out", str(tmp_path / "c")]) == 2
    assert "could not be downloaded: FileNotFoundError" in capsys.readouterr().err
    assert not (tmp_path / "c").exists()


def test_a_document_judged_twice_is_refused(tmp_path):
    """The last grade had won silently (a query lost its only relevant document), where clir's
    qrels reader refuses the same file."""
    (tmp_path / "docs.tsv").write_text("d1\tMbwa\tmbwa\nd2\tPaka\tpaka\n")
    (tmp_path / "queries.tsv").write_text("401\tdog\tA dog.\n")
    (tmp_path / "qrels.txt").write_text("401 0 d1 1\n401 0 d1 0\n")
    with pytest.raises(ConfigError, match="document 'd1' is judged twice for query '401'"):
        Collection.from_ir_datasets(register("clir-test/judged-twice", tmp_path))
    # in memory, as clir data irds refuses them when it writes: a repeated docno or qid, a qid
    # with a space, a query without text
    for name, docs, queries, expected in (
        ("dup-doc", "d1\tA\tmbwa\nd1\tB\tpaka\n", "401\tdog\tA dog.\n", "docno 'd1' comes twice"),
        ("dup-qid", "d1\tA\tmbwa\n", "401\tdog\t.\n401\tcat\t.\n", "qid '401' comes twice"),
        ("space-qid", "d1\tA\tmbwa\n", "4 01\tdog\t.\n", "qid '4 01' "),
        ("empty-query", "d1\tA\tmbwa\n", "401\t\t.\n", "query '401' has no text"),
    ):
        root = tmp_path / name
        root.mkdir()
        (root / "docs.tsv").write_text(docs)
        (root / "queries.tsv").write_text(queries)
        (root / "qrels.txt").write_text("401 0 d1 1\n")
        with pytest.raises(ConfigError, match=expected):
            Collection.from_ir_datasets(register(f"clir-test/{name}", root))


def test_a_field_that_is_none_is_empty_text():
    """A record's field that is None (a document without a title) had become the word "None"."""
    from clir.datasets.irds import _text

    assert _text(TitledDoc("d1", None, "paka"), ["title", "text"], "documents", "--field") == "paka"
    assert _text(TitledDoc("d1", "Paka", "paka"), ["title", "text"], "documents", "--field") == "Paka paka"


def test_a_relevance_that_is_no_integer_is_refused(tmp_path, capsys):
    """A grade of 0.5 had become 0 (the only relevant document non-relevant), silently, and one
    of "high" an unexpected ValueError: clir's qrels hold integer grades (2.0 and "2" are 2)."""
    from ir_datasets.formats import BaseQrels

    class Judgement(NamedTuple):
        query_id: str
        doc_id: str
        relevance: object

    class Judgements(BaseQrels):
        def __init__(self, grades):
            self.grades = grades

        def qrels_iter(self):
            return (Judgement("401", f"d{i + 1}", grade) for i, grade in enumerate(self.grades))

        def qrels_cls(self):
            return Judgement

    (tmp_path / "docs.tsv").write_text("d1\tmbwa\nd2\tpaka\n")
    (tmp_path / "queries.tsv").write_text("401\tdog\n")

    def dataset(name, grades):
        if name not in ir_datasets.registry:
            docs, queries = LocalDownload(tmp_path / "docs.tsv"), LocalDownload(tmp_path / "queries.tsv")
            ir_datasets.registry.register(
                name, Dataset(TsvDocs(docs, lang="sw"), TsvQueries(queries, lang="en"), Judgements(grades))
            )
        return name

    assert Collection.from_ir_datasets(dataset("clir-test/grades", [2.0, "1"])).qrels == {
        "401": {"d1": 2, "d2": 1}
    }
    for name, grade in (("half", 0.5), ("word", "high"), ("nan", float("nan")), ("flag", True)):
        with pytest.raises(
            ConfigError, match=rf"the relevance of document 'd1' for query '401' is {grade!r}; "
        ):
            Collection.from_ir_datasets(dataset(f"clir-test/grade-{name}", [grade, 0]))
    assert main(["data", "irds", "clir-test/grade-half", "--out", str(tmp_path / "c")]) == 2
    assert (
        "clir: error: ir_datasets dataset 'clir-test/grade-half': the relevance of" in capsys.readouterr().err
    )
    assert not (tmp_path / "c").exists()


def test_a_malformed_file_and_a_record_without_text_name_the_dataset(tmp_path, capsys):
    """ir_datasets' own parse error of a malformed local file, and a document class with neither
    default_text() nor a text field, had been "unexpected RuntimeError / AttributeError"."""

    class Bare(NamedTuple):
        doc_id: str
        body: str

    (tmp_path / "docs.tsv").write_text("d1\tmbwa\n")
    (tmp_path / "queries.tsv").write_text("401\tdog\n")
    (tmp_path / "qrels.txt").write_text("401 0 d 1 1\n")  # a docno with a space: five columns
    docs, queries = LocalDownload(tmp_path / "docs.tsv"), LocalDownload(tmp_path / "queries.tsv")
    qrels = TrecQrels(LocalDownload(tmp_path / "qrels.txt"), {1: "relevant"})
    topics = TsvQueries(queries, lang="en")
    for name, dataset in (
        ("clir-test/bad-qrels", Dataset(TsvDocs(docs, lang="sw"), topics, qrels)),
        ("clir-test/bare-docs", Dataset(TsvDocs(docs, doc_cls=Bare, lang="sw"), topics)),
    ):
        if name not in ir_datasets.registry:
            ir_datasets.registry.register(name, dataset)
    out = tmp_path / "c"
    assert main(["data", "irds", "clir-test/bad-qrels", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert (
        "clir: error: ir_datasets dataset 'clir-test/bad-qrels': ir_datasets could not read its files ("
        in err
    )
    assert "unexpected" not in err and not out.exists()
    assert main(["data", "irds", "clir-test/bare-docs", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert (
        "clir: error: documents of this dataset have neither default_text() nor a 'text' field: name the "
        "fields to read with --field; their fields: doc_id, body"
    ) in err
    assert not out.exists()
    assert main(["data", "irds", "clir-test/bare-docs", "--field", "body", "--out", str(out)]) == 0
