"""Bring your own collection: the readers of other layouts, ``clir data import``, and a user
collection run through ``clir tables --parallel`` and ``clir baselines --tables``."""

from __future__ import annotations

import gzip
import json
import warnings
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clir.cli import main
from clir.datasets import Collection, ImportConfig, import_collection
from clir.errors import ConfigError, FormatError
from clir.formats import write_topics_xml
from clir.formats.atomic import MARKER
from clir.formats.layouts import iter_documents_as, read_qrels_as, read_topics_as, sniff_format
from clir.types import Document, Query

SGML = """<top>
<num> Number: 401
<title> dog eats meat
<desc> Description:
A dog eating &amp; meat.
<narr> Narrative:
Anything about dogs.
</top>

<top>
<num> Number: 402
<title> Topic: child sleeps
<desc> Description:
A sleeping
child.
</top>
"""

CLEF = """<topics>
<topic><num>C041</num><EN-title>Pesticides in baby food</EN-title>
<EN-desc>Find reports on pesticides.</EN-desc></topic>
</topics>
"""


def test_trec_sgml_topics_by_hand(tmp_path):
    path = tmp_path / "topics.401-402"
    path.write_text(SGML)
    assert sniff_format(path, "topics") == "trec"
    assert read_topics_as(path, "trec") == [
        Query("401", "dog eats meat", "A dog eating & meat."),
        Query("402", "child sleeps", "A sleeping child."),
    ]
    # the narrative as the long form; CLEF's language-tagged elements
    assert read_topics_as(path, "trec", description_field="narr")[0].description == "Anything about dogs."
    clef = tmp_path / "clef.xml"
    clef.write_text(CLEF)
    message = r"clef\.xml:2: topic 'C041' has no <title> element \(elements: en-desc, en-title, num\); name"
    with pytest.raises(FormatError, match=message + " the element with --query-field"):
        read_topics_as(clef, "trec")
    topics = read_topics_as(clef, "trec", query_field="EN-title", description_field="EN-desc")
    assert topics == [Query("C041", "Pesticides in baby food", "Find reports on pesticides.")]


_CHARS = st.characters(blacklist_categories=("Cs", "Cc"))


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(st.text(_CHARS, min_size=1).filter(str.strip), st.text(_CHARS)), min_size=1, max_size=4
    )
)
def test_trec_xml_written_by_clir_reads_back(tmp_path_factory, texts):
    path = tmp_path_factory.mktemp("xml") / "topics.xml"
    queries = [Query(f"q{i}", " ".join(t.split()), " ".join(d.split())) for i, (t, d) in enumerate(texts)]
    write_topics_xml(path, queries)
    assert read_topics_as(path, sniff_format(path, "topics")) == queries


def test_jsonl_documents_with_other_field_names(tmp_path):
    path = tmp_path / "corpus.jsonl.gz"
    rows = [
        {"_id": 7, "title": "Mbwa", "text": "mbwa anakula", "score": 0.5},
        {"_id": "d2", "title": "", "text": "x"},
    ]
    with gzip.open(path, "wt", encoding="utf-8") as out:
        out.writelines(json.dumps(row) + "\n" for row in rows)
    assert sniff_format(path, "documents") == "jsonl"
    docs = list(iter_documents_as(path, docno_field="_id", text_fields=("title", "text")))
    assert [(d.docno, d.text) for d in docs] == [("7", "Mbwa mbwa anakula"), ("d2", "x")]
    message = (
        r"corpus\.jsonl\.gz:1: no field 'docno' \(fields: _id, score, text, title\); name the field with"
    )
    with pytest.raises(FormatError, match=message + " --docno-field"):
        list(iter_documents_as(path))
    with pytest.raises(FormatError, match=r":1: field 'score' \(--text-field\) must be a string, got 0\.5"):
        list(iter_documents_as(path, docno_field="_id", text_fields=("score",)))
    tsv = tmp_path / "docs.tsv"
    tsv.write_text("a\tone two\na\tthree\n")
    assert sniff_format(tsv, "documents") == "tsv"
    with pytest.raises(FormatError, match=r"docs\.tsv:2: duplicate docno 'a'"):
        list(iter_documents_as(tsv, "tsv"))
    (tmp_path / "bad.gz").write_bytes(gzip.compress(b"a\tb\n")[:-6])
    with pytest.raises(FormatError, match=r"bad\.gz: not a complete gzip file"):
        list(iter_documents_as(tmp_path / "bad.gz", "tsv"))


def test_qrels_tsv_with_a_header_and_jsonl_topics(tmp_path):
    qrels = tmp_path / "test.tsv"
    qrels.write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t0\nq2\td1\t2\n")
    assert sniff_format(qrels, "qrels") == "tsv"
    assert read_qrels_as(qrels, "tsv") == {"q1": {"d1": 1, "d2": 0}, "q2": {"d1": 2}}
    trec = tmp_path / "qrels.txt"
    trec.write_text("q1\t0\td1\t1\n")  # TREC qrels may be tab-separated too
    assert sniff_format(trec, "qrels") == "trec"
    topics = tmp_path / "queries.jsonl"
    topics.write_text('{"_id": "q1", "text": "dog", "metadata": {}}\n{"_id": "q2", "text": "  "}\n')
    with pytest.raises(FormatError, match=r"queries\.jsonl:1: no field 'qid' .*--qid-field"):
        read_topics_as(topics, "jsonl")
    with pytest.raises(FormatError, match=r"queries\.jsonl:2: empty query text for qid 'q2'"):
        read_topics_as(topics, "jsonl", qid_field="_id")


def test_qrels_tsv_first_line_is_a_header_only_when_its_relevance_is_no_number(tmp_path):
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("q1\td1\t+1\nq2\td2\t1\n")
    assert read_qrels_as(qrels, "tsv") == {"q1": {"d1": 1}, "q2": {"d2": 1}}
    qrels.write_text("q1\td1\t1.0\n")
    with pytest.raises(FormatError, match=r"qrels\.tsv:1: relevance must be an integer, got '1\.0'"):
        read_qrels_as(qrels, "tsv")
    qrels.write_text("\nquery-id\tcorpus-id\tscore\nq1\td1\t2\n")  # a blank line before the header
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a header that names its relevance column: no warning
        assert read_qrels_as(qrels, "tsv") == {"q1": {"d1": 2}}
    qrels.write_text("q1\td1\tl\nq2\td2\t1\n")  # a letter l for a 1: skipped, and said so
    with pytest.warns(UserWarning, match=r"qrels\.tsv:1: skipped as a header \('q1' 'd1' 'l'\)"):
        assert read_qrels_as(qrels, "tsv") == {"q2": {"d2": 1}}


@pytest.mark.parametrize(
    ("text", "line", "problem"),
    [
        (SGML.replace("</top>\n\n<top>", "\n\n<top>"), 10, "inside the topic opened on line 1"),
        (SGML.rstrip().removesuffix("</top>"), 10, "is not closed"),
        ("<topics>\n<topic number='1'><title>a</title></topic\n<topic number='2'><title>b</title></topic>\n"
         "<topic number='3'><title>c</title></topic>\n</topics>\n", 3, "inside the topic opened on line 2"),
    ],
)  # fmt: skip
def test_trec_topics_with_a_missing_closing_tag_are_refused(tmp_path, text, line, problem):
    path = tmp_path / "topics.trec"
    path.write_text(text)
    with pytest.raises(FormatError, match=rf"topics\.trec:{line}: <top(ic)?> {problem}"):
        read_topics_as(path, "trec")


def test_trec_topics_merged_repeated_nested_or_unclosed(tmp_path):
    path = tmp_path / "topics.trec"
    # a lost </top><top>: the second topic was dropped silently (the first <num> kept)
    path.write_text(SGML.replace("</top>\n\n<top>\n", "\n"))
    with pytest.raises(FormatError, match=r"topics\.trec:9: a second <num> in the topic opened on line 1"):
        read_topics_as(path, "trec")
    path.write_text("<topics>\n<topic number='1'>\n<title>a</title>\n<title>b</title>\n</topic>\n</topics>\n")
    with pytest.raises(FormatError, match=r"topics\.trec:4: a second <title> in the topic opened on line 2"):
        read_topics_as(path, "trec")
    # nested markup keeps its text (it lost "earth"); a wrapping element keeps its children
    path.write_text(
        "<topics>\n<topic number='1'><title>god <b>earth</b> &amp; sky</title>"
        "<desc>a <i>b</i></desc></topic>\n"
        "<topic number='2'><query><title>rain</title></query></topic>\n</topics>\n"
    )
    assert read_topics_as(path, "trec") == [Query("1", "god earth & sky", "a b"), Query("2", "rain", "")]
    # a lone unclosed <top> is named at its line (it was "not TREC topics", without a line)
    path.write_text("\n" + SGML.split("</top>")[0])
    with pytest.raises(FormatError, match=r"topics\.trec:2: <top> is not closed"):
        read_topics_as(path, "trec")


def test_trec_xml_topics_skip_comments_and_read_cdata_as_text(tmp_path):
    """A commented-out topic had been read as a topic (and scored against its qrels), a CDATA
    section had put 'cdata' into the query, and a comment naming <topic> had been refused as a
    topic whose closing tag is missing."""
    path = tmp_path / "topics.xml"
    body = (
        '<topic number="1"><title><![CDATA[dogs & <cats>]]></title>\n'
        "<description>pets <!-- to refine --> at home</description></topic>\n"
        '<!-- dropped:\n<topic number="2"><title>old question</title></topic>\n-->\n'
        '<topic number="3"><title>river fish</title></topic>\n'
    )
    path.write_text(f'<?xml version="1.0"?>\n<topics>\n{body}</topics>\n')
    assert read_topics_as(path, "trec") == [
        Query("1", "dogs & <cats>", "pets at home"),
        Query("3", "river fish", ""),
    ]
    path.write_text(
        f"<!-- the <topic> elements of the pilot -->\n<topics>\n{body}<topic number='4'>\n</topics>\n"
    )
    with pytest.raises(FormatError, match=r"topics\.xml:9: <topic> is not closed"):  # lines still hold
        read_topics_as(path, "trec")


def test_jsonl_records_with_a_key_written_twice_are_refused(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_text('{"_id": "d1", "text": "a", "metadata": {}}\n{"_id": "d2", "text": "b", "_id": "d7"}\n')
    with pytest.raises(FormatError, match=r"corpus\.jsonl:2: key '_id' is written twice in one object"):
        list(iter_documents_as(path, "jsonl", docno_field="_id"))


def test_tsv_headers_of_documents_and_topics_are_warned_about(tmp_path):
    docs, topics = tmp_path / "docs.tsv", tmp_path / "topics.tsv"
    docs.write_text("docno\ttext\nd1\tmbwa\n")
    with pytest.warns(UserWarning, match=r"docs\.tsv:1: 'docno' 'text' looks like a header"):
        assert [d.docno for d in iter_documents_as(docs, "tsv")] == ["docno", "d1"]
    topics.write_text("query-id\tquery\nq1\tdog\n")
    with pytest.warns(UserWarning, match=r"topics\.tsv:1: 'query-id' 'query' looks like a header"):
        assert [q.qid for q in read_topics_as(topics, "tsv")] == ["query-id", "q1"]


def test_import_config_is_checked():
    with pytest.raises(ConfigError, match=r"x: documents_layout='xml' is invalid; expected one of"):
        ImportConfig.from_dict({"documents_layout": "xml"}, "x")


# ------------------------------------------------------------------------------ a user's collection


def write_user_files(root: Path) -> dict[str, Path]:
    """Plain files as a user has them: BEIR-style documents, TREC topics, BEIR-style qrels, and
    parallel text in which each English word has one Swahili translation."""
    root.mkdir()
    docs = [
        {"_id": "d1", "title": "Mbwa", "text": "mbwa anakula nyama"},
        {"_id": "d2", "title": "Mtoto", "text": "mtoto analala kitandani"},
        {"_id": "d3", "title": "Paka", "text": "paka anakunywa maziwa"},
    ]
    files = {name: root / name for name in ("corpus.jsonl", "topics.txt", "qrels.tsv", "parallel.tsv")}
    files["corpus.jsonl"].write_text("".join(json.dumps(d) + "\n" for d in docs))
    files["topics.txt"].write_text(SGML)
    files["qrels.tsv"].write_text("query-id\tcorpus-id\tscore\n401\td1\t1\n402\td2\t2\n")
    pairs = [
        ("dog eats", "mbwa anakula"),
        ("child sleeps", "mtoto analala"),
        ("the child", "mtoto"),
        ("cat drinks milk", "paka anakunywa maziwa"),
        ("dog and cat", "mbwa na paka"),
        ("meat", "nyama"),
    ]
    files["parallel.tsv"].write_text("".join(f"p{i}\t{en}\t{sw}\n" for i, (en, sw) in enumerate(pairs)))
    return files


def test_data_import_then_baselines_with_tables(tmp_path, capsys):
    files = write_user_files(tmp_path / "mine")
    out = tmp_path / "collection"
    argv = ["data", "import", "--documents", str(files["corpus.jsonl"]), "--topics", str(files["topics.txt"]),
            "--qrels", str(files["qrels.tsv"]), "--doc-lang", "sw", "--out", str(out)]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert (
        "corpus.jsonl:1: no field 'docno' (fields: _id, text, title); name the field with --docno-field"
        in err
    )
    assert not out.exists()  # nothing half-written
    assert main([*argv, "--docno-field", "_id", "--text-field", "title", "text"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["documents"] == 3 and stats["document_words"] == 12 and stats["queries"] == {"test": 2}
    assert stats["relevant_per_query"] == {"2": 0.5, "1": 0.5}
    info = json.loads((out / "collection.json").read_text())
    assert [info[key] for key in ("type", "doc_lang", "query_lang", "name")] == [
        "import",
        "sw",
        "en",
        "collection",
    ]
    assert info["parameters"]["docno_field"] == "_id"
    assert json.loads((out / MARKER).read_text())["kind"] == "collection"
    collection = Collection.load(out)
    assert collection.documents[0].text == "Mbwa mbwa anakula nyama"
    assert collection.split("test")[0] == Query("401", "dog eats meat", "A dog eating & meat.")
    assert collection.qrels == {"401": {"d1": 1}, "402": {"d2": 2}}
    # a user's own directory is never replaced
    assert main([*argv[:-1], str(files["corpus.jsonl"].parent), "--docno-field", "_id"]) == 2
    assert "choose another --out" in capsys.readouterr().err

    # no parallel text: the command says what to pass
    baselines = tmp_path / "baselines"
    assert main(["baselines", "--collection", str(out), "--out", str(baselines), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "has no parallel text to learn translation tables from: pass --tables DIR" in err
    assert "or --parallel FILE" in err
    tables = tmp_path / "tables"
    argv = ["tables", "--collection", str(out), "--parallel", str(files["parallel.tsv"])]
    assert main([*argv, "--out", str(tables)]) == 0
    argv = ["baselines", "--collection", str(out), "--tables", str(tables), "--out", str(baselines)]
    assert main([*argv, "--modes", "qt", "dt", "--models", "bm25", "--quiet"]) == 0
    results = json.loads((baselines / "results.json").read_text())["systems"]
    # each query's keywords translate (QT) or are translated into (DT) words of its relevant
    # passage alone: found first, one relevant document per query
    for name in ("qt-bm25", "dt-bm25"):
        assert (results[name]["AP"], results[name]["P@10"], results[name]["R@100"]) == (1.0, 0.1, 1.0)
    run = baselines / "runs" / "qt-bm25.run"
    assert [line.split()[:3] for line in run.read_text().splitlines()][:1] == [["401", "Q0", "d1"]]


def test_doc_lang_and_parallel_wherever_a_collection_is_read(tmp_path, capsys):
    files = write_user_files(tmp_path / "mine")
    hand = tmp_path / "hand"  # made by hand: no collection.json
    hand.mkdir()
    (hand / "documents.jsonl").write_text('{"docno": "d1", "text": "mbwa anakula nyama"}\n')
    (hand / "topics.tsv").write_text("401\tdog\n")
    (hand / "qrels.txt").write_text("401 0 d1 1\n")
    tables = tmp_path / "tables"
    assert main(["tables", "--collection", str(hand), "--out", str(tables)]) == 2
    assert "the document language is unknown: pass --doc-lang LANG" in capsys.readouterr().err
    argv = ["tables", "--collection", str(hand), "--doc-lang", "sw", "--parallel", str(files["parallel.tsv"])]
    assert main([*argv, "--out", str(tables)]) == 0
    index = tmp_path / "index"
    argv = ["index", "--collection", str(hand), "--doc-lang", "sw", "--tables", str(tables), "--mode", "qt"]
    assert main([*argv, "--out", str(index), "--quiet"]) == 0
    run = tmp_path / "run"
    argv = ["retrieve", "--index", str(index), "--collection", str(hand), "--doc-lang", "sw"]
    assert main([*argv, "--out", str(run), "--quiet"]) == 0
    assert run.read_text().split()[:3] == ["401", "Q0", "d1"]
    for command in ("train", "rerank", "explain", "baselines"):
        help_text = _help(command, capsys)
        assert "--doc-lang" in help_text and "--parallel" in help_text and "--tables" in help_text
    # rerank without tables or parallel text fails before any model is read, naming both options
    argv = ["rerank", "--model", str(tmp_path / "absent"), "--collection", str(hand), "--doc-lang", "sw",
            "--space", str(tmp_path / "absent"), "--out", str(tmp_path / "reranked")]  # fmt: skip
    assert main(argv) == 2
    assert "pass --tables DIR (tables written by 'clir tables') or --parallel FILE" in capsys.readouterr().err
    # embed train reads collections too (a joint space needs their parallel text)
    (hand / "parallel.tsv").write_text(files["parallel.tsv"].read_text())
    argv = ["embed", "train", str(hand), "--dim", "4", "--epochs", "1", "--min-count", "1", "--quiet"]
    assert main([*argv, "--out", str(tmp_path / "space")]) == 2
    assert "pass --doc-lang LANG" in capsys.readouterr().err
    assert main([*argv, "--doc-lang", "sw", "--out", str(tmp_path / "space")]) == 0
    assert "joint shared space for en, sw" in capsys.readouterr().out


def test_tables_without_parallel_text_names_the_options_of_clir_tables(tmp_path, capsys):
    """`clir tables` of a collection without parallel text said "pass --tables DIR", an option
    it does not have (learn_tables' message, meant for the commands that read tables); and with
    tables already in --out it said "wrote" having learned nothing."""
    hand = tmp_path / "hand"
    hand.mkdir()
    (hand / "documents.jsonl").write_text('{"docno": "d1", "text": "mbwa anakula nyama"}\n')
    (hand / "topics.tsv").write_text("401\tdog\n")
    (hand / "qrels.txt").write_text("401 0 d1 1\n")
    (hand / "collection.json").write_text('{"doc_lang": "sw"}')
    tables = tmp_path / "tables"
    message = (
        "clir: error: collection 'hand' has no parallel text to learn translation tables from: pass "
        "--parallel FILE (TSV: pair_id, English, sw), or make the tables from another toolkit's with "
        "--import-tables\n"
    )
    assert main(["tables", "--collection", str(hand), "--out", str(tables)]) == 2
    assert capsys.readouterr().err == message
    assert not tables.exists()
    files = write_user_files(tmp_path / "mine")
    argv = [
        "tables",
        "--collection",
        str(hand),
        "--parallel",
        str(files["parallel.tsv"]),
        "--out",
        str(tables),
    ]
    assert main([*argv, "--quiet"]) == 0
    capsys.readouterr()
    assert main(["tables", "--collection", str(hand), "--out", str(tables)]) == 2
    assert capsys.readouterr().err == message


def _help(command: str, capsys) -> str:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    return capsys.readouterr().out


def test_topics_of_several_splits_and_the_python_api(tmp_path):
    files = write_user_files(tmp_path / "mine")
    train = tmp_path / "train.tsv"
    train.write_text("t1\tcat milk\n")
    (tmp_path / "qrels.trec").write_text("t1 0 d3 1\n")
    stats = import_collection(
        tmp_path / "c",
        documents=files["corpus.jsonl"],
        topics={"train": train, "test": files["topics.txt"]},
        qrels=[files["qrels.tsv"], tmp_path / "qrels.trec"],
        doc_lang="sw",
        parallel=files["parallel.tsv"],
        config=ImportConfig(docno_field="_id"),
    )
    assert stats["queries"] == {"train": 1, "test": 2} and stats["parallel_pairs"] == 6
    collection = Collection.load(tmp_path / "c")
    assert collection.qrels_of("train") == {"t1": {"d3": 1}} and len(collection.parallel) == 6
    assert (tmp_path / "c" / "qrels.train.txt").read_text() == "t1 0 d3 1\n"
    with pytest.raises(
        FormatError, match=r"qid '401' of split 'test' is also in .*topics.txt \(split 'dev'\)"
    ):
        import_collection(tmp_path / "d", documents=files["corpus.jsonl"], qrels=[files["qrels.tsv"]],
                          topics={"dev": files["topics.txt"], "test": files["topics.txt"]}, doc_lang="sw",
                          config=ImportConfig(docno_field="_id"))  # fmt: skip


def test_a_split_without_queries_is_left_out(tmp_path):
    import warnings

    collection = Collection(
        "c",
        "sw",
        "en",
        [Document("d1", "mbwa")],
        {"train": [Query("q1", "dog")], "dev": []},
        {"q1": {"d1": 1}},
    )
    collection.save(tmp_path / "c")
    assert not (tmp_path / "c" / "topics.dev.tsv").exists()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no stale statistics, no unjudged query
        loaded = Collection.load(tmp_path / "c")
    assert list(loaded.queries) == ["train"] and loaded.stats["queries"] == {"train": 1}


@pytest.mark.parametrize("split", ["../x", "a/b", "", "my split"])
def test_a_split_name_that_is_no_file_name_is_refused(tmp_path, capsys, split):
    """``--topics ../x=FILE`` had written topics.../x.tsv, which Collection.load does not find."""
    files = write_user_files(tmp_path / "mine")
    argv = ["data", "import", "--documents", str(files["corpus.jsonl"]), "--docno-field", "_id",
            "--topics", f"{split}={files['topics.txt']}", "--qrels", str(files["qrels.tsv"]),
            "--doc-lang", "sw", "--out", str(tmp_path / "c")]  # fmt: skip
    assert main(argv) == 2
    said = "expected FILE or SPLIT=FILE" if not split else f"not written: split {split!r} is not a split name"
    assert said in capsys.readouterr().err
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("lang", ["../x", "", "sw/x", "s w", "sw2", "ＳＷ", "sẃ"])
def test_a_doc_lang_that_is_no_language_code_is_refused_before_writing(tmp_path, capsys, lang):
    """``--doc-lang ../x`` had written a collection that every later command refused (its
    analyzer wants letters): refused at import now, naming the option, with nothing written."""
    files = write_user_files(tmp_path / "mine")
    out = tmp_path / "c"
    argv = ["data", "import", "--documents", str(files["corpus.jsonl"]), "--docno-field", "_id",
            "--topics", str(files["topics.txt"]), "--qrels", str(files["qrels.tsv"]),
            "--out", str(out)]  # fmt: skip
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--doc-lang", lang])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("clir: error: argument --doc-lang: language code must be letters like 'sw'")
    assert f"got {lang!r}" in err
    with pytest.raises(SystemExit):
        main([*argv, "--doc-lang", "sw", "--query-lang", lang])
    assert "argument --query-lang: language code must be letters" in capsys.readouterr().err
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["mine"]
    with pytest.raises(ConfigError, match=r"not written: doc_lang must be letters like 'sw', got"):
        import_collection(out, documents=files["corpus.jsonl"], topics={"test": files["topics.txt"]},
                          qrels=[files["qrels.tsv"]], doc_lang=lang)  # fmt: skip
    assert not out.exists()
    assert main([*argv, "--doc-lang", "sw"]) == 0  # a code of letters is fine
    assert Collection.load(out).doc_lang == "sw"


@pytest.mark.parametrize(
    "argv",
    [
        ["search", "--bundle", "b", "--collection", "c", "--query", "maji"],
        ["retrieve", "--index", "i", "--collection", "c", "--out", "r.run"],
        ["data", "check", "c"],
        ["train", "--collection", "c", "--out", "m"],
    ],
)
def test_every_doc_lang_option_is_a_language_code(tmp_path, capsys, argv):
    """``--doc-lang 'sw!'`` was taken by the commands that read a collection and failed later
    ("the space has no vectors for 'sw!'")."""
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--doc-lang", "sw!"])
    assert exited.value.code == 2
    assert capsys.readouterr().err.startswith(
        "clir: error: argument --doc-lang: language code must be letters like 'sw', got 'sw!'"
    )


def test_field_options_no_imported_file_reads_are_refused(tmp_path, capsys):
    """--query-field / --qid-field / --description-field for topics whose layouts have no such
    field, and --docno-field / --text-field for TSV documents, had been ignored, silently."""
    files = write_user_files(tmp_path / "mine")
    (tmp_path / "docs.tsv").write_text("d1\tmbwa anakula nyama\nd2\tmtoto analala\nd3\tpaka\n")
    (tmp_path / "dev.tsv").write_text("501\tcat\n")
    (tmp_path / "dev.jsonl").write_text('{"qid": "501", "title": "cat"}\n')
    argv = ["data", "import", "--documents", str(tmp_path / "docs.tsv"), "--qrels", str(files["qrels.tsv"]),
            "--doc-lang", "sw", "--out", str(tmp_path / "c")]  # fmt: skip
    trec, tsv, jsonl = (
        "test=" + str(files["topics.txt"]),
        f"dev={tmp_path / 'dev.tsv'}",
        f"dev={tmp_path / 'dev.jsonl'}",
    )
    layouts = "have none (TSV is read by column: qid, text, description; a TREC topic's qid is its number"
    for options, message in (
        (["--topics", tsv, "--query-field", "description"], "--query-field names a field that no --topics "
         f"file has: their layouts (tsv) {layouts}"),
        (["--topics", trec, tsv, "--qid-field", "id"], "--qid-field names a field that no --topics file "
         f"has: their layouts (trec, tsv) {layouts}"),
        (["--topics", trec, "--docno-field", "_id"], f"--docno-field / --text-field name JSON fields, but "
         f"--documents {tmp_path / 'docs.tsv'} is TSV, read by column (docno, text)"),
    ):  # fmt: skip
        assert main([*argv, *options]) == 2
        assert f"clir: error: {message}" in capsys.readouterr().err
        assert not (tmp_path / "c").exists()
    # a field one of the files reads: taken
    assert main([*argv, "--topics", trec, jsonl, "--query-field", "title"]) == 0
    assert Collection.load(tmp_path / "c").split("dev") == [Query("501", "cat")]


def test_a_lone_surrogate_in_imported_jsonl_names_the_file_line_and_field(tmp_path, capsys):
    """clir data import of JSONL text with a "\\ud800" escape said only "unexpected UnicodeEncodeError"."""
    docs, topics, qrels = tmp_path / "docs.jsonl", tmp_path / "t.jsonl", tmp_path / "q.txt"
    docs.write_text('{"docno": "d1", "text": "mtu \\ud800 sokoni"}\n')
    topics.write_text('{"qid": "q1", "text": "a"}\n{"qid": "q2", "text": "b \\udfff"}\n')
    qrels.write_text("q1 0 d1 1\n")
    with pytest.raises(
        FormatError, match=r"docs\.jsonl:1: field 'text' \(--text-field\) holds a lone surrogate"
    ):
        list(iter_documents_as(docs))
    with pytest.raises(
        FormatError, match=r"t\.jsonl:2: field 'text' \(--query-field\) holds a lone surrogate"
    ):
        read_topics_as(topics, "jsonl")
    argv = ["data", "import", "--documents", str(docs), "--topics", str(topics), "--qrels", str(qrels)]
    assert main([*argv, "--doc-lang", "sw", "--out", str(tmp_path / "c"), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"clir: error: {topics}:2: field 'text'") and "lone surrogate" in err
    assert "Traceback" not in err and not (tmp_path / "c").exists()


def test_a_json_array_or_trec_documents_are_named_not_read_as_tsv(tmp_path, capsys):
    """A JSON array of documents (json.dump's output) was read as TSV: "expected 2 fields (docno,
    text), found 1", quoting the whole file (230 KB for 300 documents); TREC <DOC> files too."""
    array, pretty, trec = tmp_path / "corpus.json", tmp_path / "pretty.json", tmp_path / "docs.trec"
    rows = [{"_id": f"d{i}", "text": "neno " * 100} for i in range(50)]
    array.write_text(json.dumps(rows))
    pretty.write_text(json.dumps(rows, indent=2))
    trec.write_text("<DOC>\n<DOCNO> d1 </DOCNO>\n<TEXT>\nmbwa\n</TEXT>\n</DOC>\n")
    for path in (array, pretty):
        with pytest.raises(FormatError, match=r"is a JSON array, not JSON Lines: write one object per line"):
            sniff_format(path, "documents")
        with pytest.raises(FormatError, match=r"is a JSON array"):
            sniff_format(path, "topics")
    with pytest.raises(FormatError, match=r"docs\.trec: holds TREC <DOC> documents, which are not read"):
        sniff_format(trec, "documents")
    topics, qrels = tmp_path / "t.tsv", tmp_path / "q.txt"
    topics.write_text("q1\tmbwa\n")
    qrels.write_text("q1 0 d1 1\n")
    argv = ["data", "import", "--documents", str(array), "--topics", str(topics), "--qrels", str(qrels)]
    assert main([*argv, "--doc-lang", "sw", "--out", str(tmp_path / "c"), "-q"]) == 2
    err = capsys.readouterr().err
    assert err == f"clir: error: {array}: is a JSON array, not JSON Lines: write one object per line " + (
        "(e.g. jq -c '.[]' FILE)\n"
    )


def test_a_bad_tsv_line_is_quoted_short_and_a_line_without_tabs_is_named(tmp_path):
    """A bad TSV line was quoted whole (a 10 MB document in the message), and a TREC qrels line
    of 5 columns, or one separated by spaces, was said to hold "1 field" with no word of tabs."""
    docs, qrels = tmp_path / "docs.tsv", tmp_path / "qrels.txt"
    docs.write_text("d1\tmbwa\nd2\t" + "neno\t" * 10_000 + "\n")
    with pytest.raises(FormatError, match=r"docs\.tsv:2: expected 2 fields") as error:
        list(iter_documents_as(docs, "tsv"))
    assert len(str(error.value)) < 300 and "(50003 characters)" in str(error.value)
    qrels.write_text("q1 0 d1 1 extra\n")
    assert sniff_format(qrels, "qrels") == "tsv"
    match = (
        r"qrels\.txt:1: expected 3 fields \(qid, docno, relevance\), found 1: 'q1 0 d1 1 extra' "
        r"\(no tab: its 5 fields are separated by spaces\)$"
    )
    with pytest.raises(FormatError, match=match):
        read_qrels_as(qrels, "tsv")
    # topics too (they had said "found 1" alone, in data import, retrieve --topics, search --topics)
    topics = tmp_path / "t.tsv"
    topics.write_text("q1 dog eats meat\n")
    match = (
        r"t\.tsv:1: expected 2 or 3 tab-separated fields \(qid, text\[, description\]\), found 1: "
        r"'q1 dog eats meat' \(no tab: its 4 fields are separated by spaces\)$"
    )
    with pytest.raises(FormatError, match=match):
        read_topics_as(topics, "tsv")


@pytest.mark.parametrize(
    ("content", "hint"),
    [
        (gzip.compress(b'{"docno": "d1", "text": "a"}\n'), "a gzip file: name it \\*\\.gz"),
        (b"BZh91AY&SY\x8a\x00", "a bzip2 file: decompress it first"),
        ('{"docno": "d1"}\n'.encode("utf-16"), r"UTF-16 text: convert it to UTF-8 first"),
    ],
)
def test_a_compressed_or_utf16_file_says_so(tmp_path, content, hint):
    """They were "not valid UTF-8 (invalid start byte)" alone (a .GZ or .bz2 corpus, a
    Windows editor's UTF-16)."""
    path = tmp_path / "corpus.jsonl"
    path.write_bytes(content)
    with pytest.raises(FormatError, match=rf"corpus\.jsonl:1: not valid UTF-8 \(.*\); it starts like {hint}"):
        list(iter_documents_as(path))


def test_an_empty_documents_file_is_named_as_the_input(tmp_path, capsys):
    """It was "OUT/documents.jsonl: not written: no document", naming the output."""
    docs, topics, qrels = tmp_path / "docs.jsonl", tmp_path / "t.tsv", tmp_path / "q.txt"
    docs.write_text("\n\n")
    topics.write_text("q1\tmbwa\n")
    qrels.write_text("q1 0 d1 1\n")
    argv = ["data", "import", "--documents", str(docs), "--topics", str(topics), "--qrels", str(qrels)]
    assert main([*argv, "--doc-lang", "sw", "--out", str(tmp_path / "c"), "-q"]) == 2
    assert capsys.readouterr().err == f"clir: error: {docs}: holds no document\n"
    assert not (tmp_path / "c").exists()


def test_a_collection_of_beir_documents_names_the_missing_docno_field(tmp_path):
    """A BEIR corpus.jsonl copied in as documents.jsonl said "field 'docno' must be a string,
    got None": the field is missing, and clir data import reads other names."""
    root = tmp_path / "mine"
    root.mkdir()
    (root / "documents.jsonl").write_text('{"_id": "d1", "title": "", "text": "mbwa"}\n')
    (root / "topics.test.tsv").write_text("q1\tdog\n")
    (root / "qrels.txt").write_text("q1 0 d1 1\n")
    match = (
        r"documents\.jsonl:1: no field 'docno' \(fields: _id, text, title\); a document needs 'docno' "
        r"and 'text' \('clir data import --docno-field --text-field' reads other names\)"
    )
    with pytest.raises(FormatError, match=match):
        Collection.load(root, doc_lang="sw")


def test_a_doc_lang_in_capitals_is_the_language_s_code(tmp_path):
    # `--doc-lang SW` had been stored as written: a collection of language 'SW', which a bundle
    # or tables of 'sw' refused as another language
    files = write_user_files(tmp_path / "mine")
    argv = ["data", "import", "--documents", str(files["corpus.jsonl"]), "--docno-field", "_id",
            "--topics", str(files["topics.txt"]), "--qrels", str(files["qrels.tsv"]),
            "--doc-lang", "SW", "--query-lang", "En", "--out", str(tmp_path / "c")]  # fmt: skip
    assert main(argv) == 0
    collection = Collection.load(tmp_path / "c")
    assert (collection.doc_lang, collection.query_lang) == ("sw", "en")


def test_clir_s_own_topic_xml_keeps_words_that_look_like_trec_labels(tmp_path, capsys):
    """A query 'Topic: the weather' written to clir's topic XML had been read back as 'the
    weather' (the TREC SGML labels were stripped from any element): clir data check reported a
    difference and search --topics searched other text. SGML <top> topics still lose them."""
    queries = [
        Query("q1", "Topic: the weather", "Description: rain and wind"),
        Query("q2", "Title: Number: 5", "Narrative: anything"),
    ]
    path = tmp_path / "topics.xml"
    write_topics_xml(path, queries)
    assert read_topics_as(path, "trec") == queries
    collection = Collection("c", "sw", "en", [Document("d1", "mvua")], {"test": queries}, {"q1": {"d1": 1}})
    collection.save(tmp_path / "c", xml=True)
    assert main(["data", "check", str(tmp_path / "c")]) == 0
    assert "clir: error" not in capsys.readouterr().err
    sgml = tmp_path / "topics.sgml"
    sgml.write_text("<top>\n<num> Number: 7\n<title> Topic: the weather\n<desc> Description:\nrain\n</top>\n")
    assert read_topics_as(sgml, "trec") == [Query("7", "the weather", "rain")]


def test_a_bare_less_than_in_sgml_topic_text_is_text_not_a_tag(tmp_path):
    """In '<title> x < 5 and y > 3' the part from '<' to '>' had been taken as a tag and
    dropped (the query read 'x 3'); only a well-formed tag is one."""
    path = tmp_path / "topics.sgml"
    path.write_text(
        "<top>\n<num> Number: 1\n<title> x < 5 and y > 3\n<desc> Description:\nchildren <5 years, a<b\n"
        "</top>\n<top>\n<num> Number: 2\n<title lang=\"en\" src='t'> rain > snow\n<desc/>\n</top>\n"
    )
    assert read_topics_as(path, "trec") == [
        Query("1", "x < 5 and y > 3", "children <5 years, a<b"),
        Query("2", "rain > snow", ""),  # a tag with attributes, an empty one: tags still
    ]
