"""Sharded indexes: built from a stream, memory-mapped, and searched to the single index's run."""

from __future__ import annotations

import json
import shutil
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clir.cli import main
from clir.datasets import Collection, build_bible_collection
from clir.datasets.distractors import sample_distractors
from clir.errors import ConfigError, FormatError
from clir.formats import write_run
from clir.pipeline.tables import DOC_EN, EN_DOC
from clir.retrieval import BM25, FirstStage, QueryLikelihood, SparseIndex, shards
from clir.retrieval.base import Results
from clir.retrieval.shards import ShardedIndex, ShardedRetriever, merge_results
from clir.text import get_analyzer
from clir.translation import TranslationTable
from clir.types import Document, Query

WORDS = [f"w{i}" for i in range(12)]


def corpus(seed: int, n_docs: int) -> tuple[list[str], list[list[str]]]:
    """Zipf-ish documents over a few words (many ties), docnos in shuffled order."""
    rng = np.random.default_rng(seed)
    p = 1 / np.arange(1, len(WORDS) + 1)
    docs = [list(rng.choice(WORDS, size=int(rng.integers(1, 9)), p=p / p.sum())) for _ in range(n_docs)]
    docnos = [f"d{i:03d}" for i in rng.permutation(n_docs)]
    return docnos, docs


def run_bytes(tmp_path, run, name: str) -> bytes:
    write_run(tmp_path / name, run)
    return (tmp_path / name).read_bytes()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 10_000),
    n_docs=st.integers(1, 40),
    shard_docs=st.integers(1, 45),
    model=st.sampled_from(["bm25", "bm25-lucene", "ql"]),
    pad=st.booleans(),
    k=st.integers(1, 50),
    workers=st.integers(1, 3),
)
def test_sharded_run_equals_single_index_run_byte_for_byte(
    tmp_path, seed, n_docs, shard_docs, model, pad, k, workers
):
    docnos, docs = corpus(seed, n_docs)
    rng = np.random.default_rng(seed + 1)
    queries = {f"q{i}": list(rng.choice([*WORDS, "unseen"], size=int(rng.integers(1, 4)))) for i in range(8)}
    queries["psq"] = [{"w0": 0.5, "w3": 0.25, "w7": 0.25}, "w1"]  # a PSQ term
    name, params = {"bm25": ("bm25", {}), "bm25-lucene": ("bm25", {"idf": "lucene"}), "ql": ("ql", {})}[model]
    single = (BM25(**params) if name == "bm25" else QueryLikelihood()).index(docnos, docs, progress=False)
    index = ShardedIndex.build(
        tmp_path / "idx", zip(docnos, docs, strict=True), shard_docs=shard_docs, progress=False
    )
    assert len(index.shards) == -(-n_docs // shard_docs)
    sharded = ShardedRetriever(name, workers=workers, **params).use_index(index)
    expected, expected_warnings = searched(single, queries, k, pad)
    got, got_warnings = searched(sharded, queries, k, pad)
    assert run_bytes(tmp_path, got, "sharded") == run_bytes(tmp_path, expected, "single")
    assert got == expected  # the scores to the bit, not only as printed
    assert got_warnings == expected_warnings  # the same count of queries with no known term


@pytest.mark.parametrize(
    ("model", "pad", "k", "processes"),
    [("bm25", False, 5, 2), ("bm25", True, 30, 2), ("ql", False, 7, 2), ("bm25", False, 5, 1)],
)
def test_query_batches_in_processes_give_the_single_index_run(
    tmp_path, monkeypatch, model, pad, k, processes
):
    """Batches of 3 of 25 queries: in 2 forked processes, or (1 process, a PSQ term among the
    queries) one after the other here."""
    monkeypatch.setattr(shards, "BATCH", 3)
    docnos, docs = corpus(7, 60)
    rng = np.random.default_rng(8)
    queries = {f"q{i}": list(rng.choice([*WORDS, "unseen"], size=int(rng.integers(1, 4)))) for i in range(23)}
    queries["psq"] = [{"w0": 0.5, "w3": 0.25, "w7": 0.25}, "w1"]
    queries["none"] = ["unseen"]  # no known term: listed empty, warned about once
    single = (BM25() if model == "bm25" else QueryLikelihood()).index(docnos, docs, progress=False)
    index = ShardedIndex.build(
        tmp_path / "idx", zip(docnos, docs, strict=True), shard_docs=25, progress=False
    )
    sharded = ShardedRetriever(model, workers=2, processes=processes).use_index(index)
    calls = []
    monkeypatch.setattr(ShardedRetriever, "_batched", spy(ShardedRetriever._batched, calls))
    expected, expected_warnings = searched(single, queries, k, pad)
    got, got_warnings = searched(sharded, queries, k, pad)
    assert len(calls) == 1  # the queries were searched in batches
    assert run_bytes(tmp_path, got, "batches") == run_bytes(tmp_path, expected, "single")
    assert got == expected and got_warnings == expected_warnings
    assert got["none"] == {} and "'none'" in got_warnings[0]
    del queries["psq"]  # plain terms in one process: one search of them all
    searched(ShardedRetriever(model).use_index(index), queries, k, pad)
    assert len(calls) == 1


def spy(method, calls):
    def wrapped(self, *args, **kwargs):
        calls.append(args)
        return method(self, *args, **kwargs)

    return wrapped


def searched(retriever, queries, k, pad):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = retriever.search(queries, k=k, pad=pad)
    return run, [str(w.message) for w in caught]


def test_global_statistics_are_the_collections(tmp_path):
    """Every shard sees the collection's N, avgdl, |C|, df and cf, not its own."""
    docnos = ["a", "b", "c"]
    docs = [["x", "y"], ["x"], ["z", "z", "z"]]
    index = ShardedIndex.build(tmp_path / "idx", zip(docnos, docs, strict=True), shard_docs=2, progress=False)
    assert index.vocab == ["x", "y", "z"]
    assert index.df.tolist() == [2, 1, 1] and index.cf.tolist() == [2, 1, 3]
    assert index.stats == (3, 6.0, 2.0)
    assert [s.docnos.tolist() for s in index.shards] == [["a", "b"], ["c"]]
    for shard in index.shards:
        assert shard.stats == (3, 6.0, 2.0) and shard.df.tolist() == [2, 1, 1]
        assert shard.postings.shape == (3, shard.n_docs)
    # the first shard never saw "z": its row is there and empty
    assert index.shards[0].postings[2].nnz == 0
    meta = json.loads((tmp_path / "idx" / "sharded.json").read_text())
    assert meta["shards"] == ["00000", "00001"] and meta["n_docs"] == 3
    assert isinstance(index.shards[0].doc_len, np.memmap) and isinstance(index.df, np.memmap)
    assert not index.shards[0].postings.data.flags.owndata  # a view of the memory map
    # BM25 of "z" in c: idf from N = 3, df = 1 (okapi: log(2.5/1.5)); tf 3, |c| 3 = avgdl 2 * 1.5
    run = ShardedRetriever("bm25").use_index(index).search({"q": ["z"]})
    norm = 1.5 * (1 - 0.75 + 0.75 * 3 / 2)
    assert run == {"q": {"c": pytest.approx(np.log(2.5 / 1.5) * 3 * 2.5 / (3 + norm))}}


def test_build_errors(tmp_path):
    with pytest.raises(ConfigError, match="duplicate docno 'a'"):
        ShardedIndex.build(
            tmp_path / "i", [("a", ["x"]), ("b", ["y"]), ("a", ["z"])], shard_docs=2, progress=False
        )
    assert not (tmp_path / "i").exists()
    with pytest.raises(ConfigError, match="empty collection"):
        ShardedIndex.build(tmp_path / "i", [], progress=False)
    with pytest.raises(ConfigError, match="shard_docs must be a positive integer, got 0"):
        ShardedIndex.build(tmp_path / "i", [("a", ["x"])], shard_docs=0)
    with pytest.raises(ConfigError, match="unknown retriever 'bm26'"):
        ShardedRetriever("bm26")
    with pytest.raises(ConfigError, match="workers must be a positive integer, got 0"):
        ShardedRetriever("bm25", workers=0)
    with pytest.raises(ConfigError, match="processes must be a positive integer, got 0"):
        ShardedRetriever("bm25", processes=0)


def test_merge_orders_ties_by_docno_descending():
    parts = [
        Results([np.array(["a", "c"])], [np.array([2.0, 1.0])]),
        Results([np.array(["b", "d"])], [np.array([2.0, 0.5])]),
    ]
    merged = merge_results(parts, 3)
    assert merged.docnos[0].tolist() == ["b", "a", "c"] and merged.scores[0].tolist() == [2.0, 2.0, 1.0]
    assert merge_results(parts, 1).docnos[0].tolist() == ["b"]
    # a tie across the cut: the k-th best score is shared by three documents in two shards
    tied = [
        Results([np.array(["e", "a"])], [np.array([3.0, 2.0])]),
        Results([np.array(["f", "b", "c"])], [np.array([2.0, 2.0, 1.0])]),
    ]
    assert merge_results(tied, 3).docnos[0].tolist() == ["e", "f", "b"]


def test_single_index_statistics_unchanged():
    index = SparseIndex.build(["a", "b"], [["x", "y", "y"], ["x"]], progress=False)
    assert index.stats == (2, 4.0, 2.0)


@pytest.mark.filterwarnings("ignore:.*no term in the index")
@pytest.mark.parametrize("mode", ["qt", "psq", "dt"])
def test_first_stage_in_shards_equals_in_memory(tmp_path, mode):
    """The streaming path (analysis, DT translation, spelling matching over the collection's
    vocabulary) on Swahili passages padded with distractors gives the in-memory run."""
    en, sw = get_analyzer("en"), get_analyzer("sw")
    collection = build_bible_collection(
        "en-sw", collection_books=(8, 61, 65), n_train=6, n_dev=6, n_test=12, progress=False
    )
    documents = collection.documents + list(sample_distractors(collection, 150, progress=False))
    god, love, lord = en.analyze("God love Lord")
    mungu, upendo, bwana = sw.analyze("Mungu upendo Bwana")
    en_sw = TranslationTable(
        [god, love, lord],
        [mungu, upendo, bwana],
        sp.identity(3, format="csr") * 0.5 + sp.csr_matrix(np.full((3, 3), 0.5 / 3)),
        "en",
        "sw",
    )
    sw_en = TranslationTable(
        [mungu, upendo, bwana], [god, love, lord], sp.identity(3, format="csr"), "sw", "en"
    )
    queries = [*collection.all_queries(), Query("x", "God love the Lord")]
    kwargs = {
        "en_analyzer": en,
        "doc_analyzer": sw,
        "table_en_doc": en_sw,
        "table_doc_en": sw_en,
        "spelling": 0.5,
        "progress": False,
    }
    in_memory = FirstStage(mode, "bm25", **kwargs).index(documents).search(queries, k=100)
    stage = FirstStage(mode, "bm25", **kwargs).index_shards(
        iter(documents), tmp_path / "shards", shard_docs=37
    )
    assert len(stage.retriever.index_.shards) == 6
    assert sum(len(docs) for docs in in_memory.values()) > 100
    assert stage.search(queries, k=100) == in_memory
    assert (
        FirstStage(mode, "bm25", **kwargs).use_shards(tmp_path / "shards" / "shards").search(queries, k=100)
        == in_memory
    )
    assert FirstStage.load(tmp_path / "shards", progress=False).search(queries, k=100) == in_memory
    with pytest.raises(ConfigError, match="a sharded first stage is saved where index_shards"):
        stage.save(tmp_path / "saved")


def test_cli_index_in_shards_gives_the_same_run_file(tmp_path, monkeypatch):
    """``clir index --shard-docs`` streams documents.jsonl; ``clir retrieve`` writes the same bytes
    (also with ``--processes 2``: 8 queries, batches of 2)."""
    monkeypatch.setattr(shards, "BATCH", 2)
    en, sw = get_analyzer("en"), get_analyzer("sw")
    collection = build_bible_collection(
        "en-sw", collection_books=(8,), n_train=3, n_dev=3, n_test=8, progress=False
    )
    collection.save(tmp_path / "c")
    (mungu,) = sw.analyze("Mungu")
    (god,) = en.analyze("God")
    TranslationTable([god], [mungu], sp.csr_matrix(np.ones((1, 1))), "en", "sw").save(tmp_path / "t" / EN_DOC)
    TranslationTable([mungu], [god], sp.csr_matrix(np.ones((1, 1))), "sw", "en").save(tmp_path / "t" / DOC_EN)
    common = ["--collection", str(tmp_path / "c"), "--tables", str(tmp_path / "t"), "--mode", "qt", "-q"]
    assert main(["index", *common, "--out", str(tmp_path / "one")]) == 0
    assert main(["index", *common, "--out", str(tmp_path / "sharded"), "--shard-docs", "4"]) == 0
    for name in ("one", "sharded"):
        retrieve = ["retrieve", "--index", str(tmp_path / name), "--collection", str(tmp_path / "c")]
        assert main([*retrieve, "--out", str(tmp_path / f"{name}.run"), "--tag", "x", "-q"]) == 0
    assert len(list((tmp_path / "sharded" / "shards" / "shards").iterdir())) == 5  # Ruth: 19 passages
    assert main([*retrieve, "--out", str(tmp_path / "processes.run"), "--tag", "x", "--processes", "2"]) == 0
    assert (tmp_path / "one.run").read_bytes() == (tmp_path / "sharded.run").read_bytes()
    assert (tmp_path / "processes.run").read_bytes() == (tmp_path / "sharded.run").read_bytes()
    assert len((tmp_path / "one.run").read_text().splitlines()) > 20
    # an index of another language's documents is refused, however the language is given (the
    # run had been written, silently)
    other = tmp_path / "c-tl"
    shutil.copytree(tmp_path / "c", other)
    (other / "collection.json").write_text(
        json.dumps({**json.loads((other / "collection.json").read_text()), "doc_lang": "tl"})
    )
    sources = (["--collection", str(other)], ["--collection", str(tmp_path / "c"), "--doc-lang", "tl"])
    for name in ("one", "sharded"):
        for source in sources:
            argv = ["retrieve", "--index", str(tmp_path / name), *source, "--out", str(tmp_path / "tl.run")]
            assert main(argv) == 2
            assert not (tmp_path / "tl.run").exists()


def test_cli_retrieve_refuses_processes_for_an_index_that_is_not_sharded(tmp_path, capsys):
    """``clir retrieve --processes N`` searches a sharded index with N processes; an index that is
    not sharded is searched in this process, so N > 1 is refused rather than ignored (it had been
    accepted silently)."""
    collection = build_bible_collection(
        "en-sw", collection_books=(8,), n_train=1, n_dev=1, n_test=3, progress=False
    )
    collection.save(tmp_path / "c")
    (mungu,) = get_analyzer("sw").analyze("Mungu")
    (god,) = get_analyzer("en").analyze("God")
    TranslationTable([god], [mungu], sp.csr_matrix(np.ones((1, 1))), "en", "sw").save(tmp_path / "t" / EN_DOC)
    TranslationTable([mungu], [god], sp.csr_matrix(np.ones((1, 1))), "sw", "en").save(tmp_path / "t" / DOC_EN)
    common = ["--collection", str(tmp_path / "c"), "--tables", str(tmp_path / "t"), "--mode", "qt", "-q"]
    assert main(["index", *common, "--out", str(tmp_path / "one")]) == 0
    retrieve = ["retrieve", "--index", str(tmp_path / "one"), "--collection", str(tmp_path / "c"), "-q"]
    assert main([*retrieve, "--out", str(tmp_path / "p.run"), "--processes", "2"]) == 2
    assert f"clir: error: processes=2 has no effect with the index {tmp_path / 'one'}: it is not sharded" in (
        capsys.readouterr().err
    )
    for option in ("workers", "processes"):  # the API refuses them as the command does
        with pytest.raises(ConfigError, match=f"{option}=3 has no effect with the index"):
            FirstStage.load(tmp_path / "one", **{option: 3})
    assert FirstStage.load(tmp_path / "one", workers=1, processes=1).mode == "qt"
    assert not (tmp_path / "p.run").exists()
    assert main([*retrieve, "--out", str(tmp_path / "p.run"), "--processes", "1"]) == 0


def test_an_edited_model_of_a_sharded_stage_is_named(tmp_path):
    """A sharded index keeps no retriever that an edit of ``first_stage.json``'s model could
    contradict (a single index's does): k1 1.5 -> 1.2 changed every score, silently."""
    en, sw = get_analyzer("en"), get_analyzer("sw")
    table = TranslationTable(["god"], ["mungu"], sp.csr_matrix(np.ones((1, 1))), "en", "sw")
    documents = [Document("s0", "Mungu ni upendo"), Document("s1", "nuru"), Document("s2", "Mungu nuru")]
    stage = FirstStage("qt", "bm25", en_analyzer=en, doc_analyzer=sw, table_en_doc=table, progress=False)
    stage.index_shards(iter(documents), tmp_path / "stage", shard_docs=2)
    expected = FirstStage.load(tmp_path / "stage", progress=False).search([Query("q", "God")], k=3)
    description = tmp_path / "stage" / "first_stage.json"
    meta = json.loads(description.read_text())
    for edited in (
        {**meta, "model_params": {**meta["model_params"], "k1": 1.2}},
        {**meta, "model": "ql", "model_params": {}},
    ):
        description.write_text(json.dumps(edited))
        with pytest.raises(FormatError, match=r"first_stage\.json: model .* is not the one it was saved"):
            FirstStage.load(tmp_path / "stage", progress=False)
    # another model given to load() is the caller's choice; one saved before the digest loads
    loaded = FirstStage.load(tmp_path / "stage", progress=False, model="bm25", model_params={"k1": 1.2})
    assert loaded.search([Query("q", "God")], k=3) != expected
    description.write_text(json.dumps({k: v for k, v in meta.items() if k != "model_sha256"}))
    assert FirstStage.load(tmp_path / "stage", progress=False).search([Query("q", "God")], k=3) == expected


def test_build_streams_each_shard_to_disk_before_reading_on(tmp_path):
    """The stream is read lazily: when document i is pulled, the i // shard_docs shards before it
    are already written (so no more than one chunk of documents is held)."""
    written_when_pulled = []

    def documents():
        for i in range(10):
            written_when_pulled.append(len(list(tmp_path.glob(".idx.*.tmp/shards/*"))))
            yield f"d{i}", ["x"] * (i + 1)

    ShardedIndex.build(tmp_path / "idx", documents(), shard_docs=3, progress=False)
    assert written_when_pulled == [i // 3 for i in range(10)]  # 0, 0, 0, 1, 1, 1, 2, ...


def test_cli_index_in_shards_of_no_document_names_the_file(tmp_path, capsys):
    """``clir index --shard-docs`` of an empty documents.jsonl said "cannot index an empty
    collection (no documents given)", naming no file (the single index names it)."""
    Collection("c", "sw", "en", [Document("d1", "Mungu")], {"test": [Query("q", "God")]}, {}).save(
        tmp_path / "c"
    )
    (tmp_path / "c" / "documents.jsonl").write_text("")
    (mungu,) = get_analyzer("sw").analyze("Mungu")
    (god,) = get_analyzer("en").analyze("God")
    TranslationTable([god], [mungu], sp.csr_matrix(np.ones((1, 1))), "en", "sw").save(tmp_path / "t" / EN_DOC)
    TranslationTable([mungu], [god], sp.csr_matrix(np.ones((1, 1))), "sw", "en").save(tmp_path / "t" / DOC_EN)
    argv = ["index", "--collection", str(tmp_path / "c"), "--tables", str(tmp_path / "t"), "--mode", "qt"]
    assert main([*argv, "--out", str(tmp_path / "i"), "--shard-docs", "2", "-q"]) == 2
    assert f"{tmp_path / 'c' / 'documents.jsonl'}: holds no document" in capsys.readouterr().err
    assert not (tmp_path / "i").exists()


def test_cli_index_in_shards_counts_in_the_singular(tmp_path, capsys):
    """``clir index --shard-docs`` of one document printed "over 1 documents in 1 shards"."""
    (mungu,) = get_analyzer("sw").analyze("Mungu")
    (god,) = get_analyzer("en").analyze("God")
    TranslationTable([god], [mungu], sp.csr_matrix(np.ones((1, 1))), "en", "sw").save(tmp_path / "t" / EN_DOC)
    TranslationTable([mungu], [god], sp.csr_matrix(np.ones((1, 1))), "sw", "en").save(tmp_path / "t" / DOC_EN)
    documents = [Document("d1", "Mungu"), Document("d2", "Mungu nuru")]
    for n, expected in ((1, "over 1 document in 1 shard\n"), (2, "over 2 documents in 2 shards\n")):
        qrels = {"q": {"d1": 1}}
        Collection("c", "sw", "en", documents[:n], {"test": [Query("q", "God")]}, qrels).save(
            tmp_path / f"c{n}"
        )
        argv = [
            "index",
            "--collection",
            str(tmp_path / f"c{n}"),
            "--tables",
            str(tmp_path / "t"),
            "--mode",
            "qt",
        ]
        assert main([*argv, "--out", str(tmp_path / f"i{n}"), "--shard-docs", "1", "-q"]) == 0
        assert capsys.readouterr().out.endswith(expected)


def test_cli_index_in_shards_refuses_engine_options_it_would_ignore(tmp_path, capsys):
    """``clir index --shard-docs`` analyses its documents in this process: ``--engine ray`` (and
    ``--workers`` without it, which every other command refuses) had been accepted and ignored."""
    (mungu,) = get_analyzer("sw").analyze("Mungu")
    (god,) = get_analyzer("en").analyze("God")
    TranslationTable([god], [mungu], sp.csr_matrix(np.ones((1, 1))), "en", "sw").save(tmp_path / "t" / EN_DOC)
    TranslationTable([mungu], [god], sp.csr_matrix(np.ones((1, 1))), "sw", "en").save(tmp_path / "t" / DOC_EN)
    documents = [Document("d1", "Mungu"), Document("d2", "Mungu nuru")]
    queries = {"test": [Query("q", "God")]}
    Collection("c", "sw", "en", documents, queries, {"q": {"d1": 1}}).save(tmp_path / "c")
    argv = ["index", "--collection", str(tmp_path / "c"), "--tables", str(tmp_path / "t"), "--mode", "qt"]
    argv += ["--shard-docs", "1", "--out", str(tmp_path / "i"), "-q"]
    for options, expected in (
        (["--engine", "ray"], "--engine ray does not apply with --shard-docs"),
        (["--engine", "ray", "--workers", "2"], "--engine ray does not apply with --shard-docs"),
        (["--workers", "2"], "expected no value with the local engine"),
    ):
        assert main([*argv, *options]) == 2
        assert expected in capsys.readouterr().err
        assert not (tmp_path / "i").exists()
    assert main([*argv, "--engine", "local"]) == 0
