"""A saved index is verified when loaded: the manifest its description records (sizes always,
SHA-256 of the smallest files within a budget, every file with ``verify``), and cheap invariants
of its arrays. A damaged file is an error that names it; an index saved before manifests loads
with a warning."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from clir.cli import main
from clir.errors import DataNotFoundError, FormatError
from clir.formats import manifest
from clir.retrieval import BM25, FirstStage, Retriever, SparseIndex
from clir.retrieval.shards import ShardedIndex
from clir.text import get_analyzer
from clir.translation import TranslationTable
from clir.types import Document, Query

WORDS = [f"w{i}" for i in range(12)]
QUERIES = [["w0"], ["w3", "w7"], ["w11", "w1", "w1"], ["w5", "w9", "w2"]]
FILES = ["docnos.npy", "indptr.npy", "doc_ids.npy", "tf.npy", "doc_len.npy", "df.npy", "cf.npy", "vocab.json"]


def corpus(n_docs: int = 50, seed: int = 3) -> tuple[list[str], list[list[str]]]:
    rng = np.random.default_rng(seed)
    docs = [list(rng.choice(WORDS, size=int(rng.integers(1, 9)))) for _ in range(n_docs)]
    return [f"d{i:03d}" for i in rng.permutation(n_docs)], docs


def results(index: SparseIndex) -> list[tuple[list[str], list[float]]]:
    found = BM25().use_index(index).retrieve(QUERIES, k=50)
    return [(list(d), list(s)) for d, s in zip(found.docnos, found.scores, strict=True)]


@pytest.fixture
def saved(tmp_path) -> tuple[SparseIndex, Path]:
    """A 50-document index and its directory."""
    index = SparseIndex.build(*corpus(), progress=False)
    return index, index.save(tmp_path / "index")


def edit(path: Path, change) -> None:
    """Rewrite a saved array with ``change`` applied, keeping its size (the header is the same)."""
    array = np.load(path)
    size = path.stat().st_size
    change(array)
    np.save(path, array, allow_pickle=False)
    assert path.stat().st_size == size


def mapped(array: np.ndarray) -> bool:
    """Whether ``array`` is (a view of) a memory map rather than a copy in memory."""
    while isinstance(array, np.ndarray):
        if isinstance(array, np.memmap):
            return True
        array = array.base
    return False


def drop_manifest(record: Path) -> None:
    """Make a directory look saved by a clir that recorded no manifest."""
    meta = json.loads(record.read_text())
    del meta["files"]
    record.write_text(json.dumps(meta))


def test_a_good_index_loads_verified_mapped_and_with_the_same_results(saved):
    index, path = saved
    meta = json.loads((path / "index.json").read_text())
    assert sorted(meta["files"]) == sorted(FILES)
    assert meta["files"]["doc_ids.npy"]["size"] == (path / "doc_ids.npy").stat().st_size
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for options in ({}, {"verify": True}, {"mmap": False}):
            loaded = SparseIndex.load(path, **options)
            assert results(loaded) == results(index)
            assert (loaded.postings != index.postings).nnz == 0
    postings = SparseIndex.load(path).postings
    assert all(mapped(array) for array in (postings.data, postings.indices, postings.indptr))


def test_a_document_id_set_to_999_is_named(saved):
    """The audit's case: one entry of doc_ids.npy set to 999 had searched with no error."""
    _, path = saved
    edit(path / "doc_ids.npy", lambda ids: ids.__setitem__(17, 999))
    with pytest.raises(
        FormatError, match=r"doc_ids\.npy: damaged file, differs from the manifest \(SHA-256\)"
    ):
        SparseIndex.load(path)


@pytest.mark.parametrize("name", FILES)
def test_a_changed_byte_of_any_file_is_named(saved, name):
    _, path = saved
    data = bytearray((path / name).read_bytes())
    data[-1] ^= 0x01
    (path / name).write_bytes(bytes(data))
    with pytest.raises(FormatError, match=rf"{name}: damaged file, differs from the manifest \(SHA-256\)"):
        SparseIndex.load(path)


@pytest.mark.parametrize("name", FILES)
def test_a_truncated_file_is_named_with_or_without_a_manifest(saved, name):
    _, path = saved
    size = (path / name).stat().st_size
    (path / name).write_bytes((path / name).read_bytes()[:-8])
    with pytest.raises(
        FormatError, match=rf"{name}: damaged file, has {size - 8} bytes, the manifest {size}"
    ):
        SparseIndex.load(path)
    drop_manifest(path / "index.json")  # an older clir's index: no ValueError without a file name
    with pytest.warns(UserWarning, match="without a manifest"), pytest.raises(FormatError) as caught:
        SparseIndex.load(path)
    assert str(caught.value).startswith(str(path / name))


def test_a_missing_file_is_named(saved):
    _, path = saved
    (path / "tf.npy").unlink()
    with pytest.raises(DataNotFoundError, match=r"tf\.npy is missing \(listed in .*index\.json\)"):
        SparseIndex.load(path)


def test_an_index_saved_without_a_manifest_loads_with_a_warning(saved):
    index, path = saved
    drop_manifest(path / "index.json")
    with pytest.warns(UserWarning, match=rf"{path}: saved by clir .* without a manifest of its files"):
        loaded = SparseIndex.load(path)
    assert results(loaded) == results(index)


def test_beyond_the_hash_budget_sizes_and_invariants_are_still_checked(saved, monkeypatch):
    """A large file is not hashed by default (the memory maps stay lazy): its size and the
    arrays' cheap invariants are checked instead, and ``verify=True`` hashes it."""
    index, path = saved
    monkeypatch.setattr(manifest, "HASH_BUDGET", 0)
    indptr = index.postings.indptr
    edit(path / "doc_ids.npy", lambda ids: ids.__setitem__(indptr[1] - 1, 999))  # the end of a list
    with pytest.raises(FormatError, match=r"doc_ids\.npy: holds a document id outside \[0, 50\)"):
        SparseIndex.load(path)
    edit(
        path / "doc_ids.npy",
        lambda ids: ids.__setitem__(indptr[1] - 1, index.postings.indices[indptr[1] - 1]),
    )
    SparseIndex.load(path)  # restored
    edit(path / "indptr.npy", lambda ptr: ptr.__setitem__(3, ptr[4] + 1))
    with pytest.raises(FormatError, match=r"indptr\.npy: is not 13 offsets rising from 0"):
        SparseIndex.load(path)
    edit(path / "indptr.npy", lambda ptr: ptr.__setitem__(slice(None), indptr))
    edit(path / "df.npy", lambda df: df.__setitem__(2, df[2] + 1))
    with pytest.raises(FormatError, match=r"df\.npy: differs from the number of postings of each term"):
        SparseIndex.load(path)
    edit(path / "df.npy", lambda df: df.__setitem__(2, df[2] - 1))
    edit(path / "docnos.npy", lambda docnos: docnos.__setitem__(slice(0, 2), docnos[1::-1].copy()))
    with pytest.raises(FormatError, match=r"docnos\.npy: docnos are not unique and sorted"):
        SparseIndex.load(path)
    edit(path / "docnos.npy", lambda docnos: docnos.__setitem__(slice(0, 2), docnos[1::-1].copy()))
    middle = indptr[1] - 2  # inside a posting list, another valid id: only a hash sees it
    edit(path / "doc_ids.npy", lambda ids: ids.__setitem__(middle, ids[middle] ^ 1))
    assert results(SparseIndex.load(path)) != results(index)
    with pytest.raises(FormatError, match=r"doc_ids\.npy: damaged file, differs from the manifest"):
        SparseIndex.load(path, verify=True)


def test_malformed_descriptions_are_named(saved):
    _, path = saved
    record = path / "index.json"
    good = record.read_bytes()
    record.write_bytes(b"\xff" + good)
    with pytest.raises(FormatError, match=r"index\.json: not UTF-8 text"):
        SparseIndex.load(path)
    meta = json.loads(good)
    for files, expected in (
        ("all", r"'files' is not a manifest"),
        ({"../x": {"size": 1, "sha256": "0"}}, "'files' names '../x', not a path inside"),
    ):
        record.write_text(json.dumps({**meta, "files": files}))
        with pytest.raises(FormatError, match=rf"index\.json: {expected}"):
            SparseIndex.load(path)
    record.write_text(json.dumps([1]))
    with pytest.raises(FormatError, match=r"index\.json: type is 'list', expected 'SparseIndex'"):
        SparseIndex.load(path)
    drop_manifest_meta = {k: v for k, v in meta.items() if k != "files"}
    record.write_text(json.dumps(drop_manifest_meta))
    (path / "vocab.json").write_bytes(b'["\xff"]')
    with pytest.warns(UserWarning), pytest.raises(FormatError, match=r"vocab\.json: not UTF-8 text"):
        SparseIndex.load(path)


def test_a_retrievers_weights_are_verified(tmp_path, saved):
    index, _ = saved
    path = BM25().use_index(index).save(tmp_path / "bm25")
    assert Retriever.load(path).retrieve(QUERIES, k=50).scores[1].tolist() == results(index)[1][1]
    data = bytearray((path / "weights.npy").read_bytes())
    data[-3] ^= 0x40
    (path / "weights.npy").write_bytes(bytes(data))
    with pytest.raises(FormatError, match=r"bm25/weights\.npy: damaged file, differs from the manifest"):
        Retriever.load(path)


def test_a_sharded_index_is_verified(tmp_path, monkeypatch):
    docnos, docs = corpus()
    path = tmp_path / "sharded"
    ShardedIndex.build(path, zip(docnos, docs, strict=True), shard_docs=20, progress=False)
    meta = json.loads((path / "sharded.json").read_text())
    assert len(meta["files"]) == 3 + 3 * 5 and "shards/00002/doc_ids.npy" in meta["files"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ShardedIndex.load(path, verify=True).n_docs == 50
    edit(path / "shards" / "00001" / "doc_ids.npy", lambda ids: ids.__setitem__(0, 999))
    with pytest.raises(FormatError, match=r"shards/00001/doc_ids\.npy: damaged file, differs"):
        ShardedIndex.load(path)
    monkeypatch.setattr(manifest, "HASH_BUDGET", 0)
    with pytest.raises(
        FormatError, match=r"shards/00001/doc_ids\.npy: holds a document id outside \[0, 20\)"
    ):
        ShardedIndex.load(path)
    edit(path / "df.npy", lambda df: df.__setitem__(0, df[0] + 1))
    drop_manifest(path / "sharded.json")
    edit(path / "shards" / "00001" / "doc_ids.npy", lambda ids: ids.__setitem__(0, 0))
    with (
        pytest.warns(UserWarning, match="without a manifest"),
        pytest.raises(FormatError, match=r"df\.npy: differs"),
    ):
        ShardedIndex.load(path)


def cut_manifest(record: Path, keep) -> None:
    """Leave in the manifest of ``record`` only the entries whose name ``keep`` accepts."""
    meta = json.loads(record.read_text())
    meta["files"] = {name: entry for name, entry in meta["files"].items() if keep(name)}
    record.write_text(json.dumps(meta))


@pytest.mark.parametrize(
    ("keep", "first", "more"),
    [
        (lambda name: False, "df.npy", " and 17 more of its files: they"),  # "files": {}
        (lambda name: "00001" not in name, "shards/00001/docnos.npy", " and 4 more of its files: they"),
    ],
    ids=["emptied", "one-shard-cut"],
)
def test_a_sharded_index_whose_manifest_was_cut_is_refused(tmp_path, keep, first, more):
    """A manifest emptied or cut by hand is not leave to use the files it omits unverified (a
    deleted ``files`` key warns; an edited one is refused, naming the file and the key)."""
    docnos, docs = corpus()
    path = tmp_path / "sharded"
    ShardedIndex.build(path, zip(docnos, docs, strict=True), shard_docs=20, progress=False)
    cut_manifest(path / "sharded.json", keep)
    with pytest.raises(
        FormatError,
        match=rf"sharded\.json: 'files' does not list '{first}'{more} would be used unverified",
    ):
        ShardedIndex.load(path)


def test_single_artefacts_whose_manifest_was_cut_are_refused(tmp_path, saved):
    index, path = saved
    cut_manifest(path / "index.json", lambda name: name != "tf.npy")
    with pytest.raises(FormatError, match=r"index\.json: 'files' does not list 'tf\.npy': it would be used"):
        SparseIndex.load(path)
    retriever = BM25().use_index(index).save(tmp_path / "bm25")
    cut_manifest(retriever / "retriever.json", lambda name: False)
    with pytest.raises(FormatError, match=r"retriever\.json: 'files' does not list 'weights\.npy'"):
        Retriever.load(retriever)
    table = TranslationTable(["god"], ["mungu"], sp.csr_matrix(np.ones((1, 1))), "en", "sw")
    table.save(tmp_path / "table")
    cut_manifest(tmp_path / "table" / "meta.json", lambda name: name != "data.npy")
    with pytest.raises(FormatError, match=r"meta\.json: 'files' does not list 'data\.npy'"):
        TranslationTable.load(tmp_path / "table")


@pytest.mark.parametrize(("key", "value"), [("avg_doc_len", 5.0), ("total_len", 1.0)])
def test_a_sharded_index_s_statistics_are_checked_against_its_shards(tmp_path, key, value):
    """BM25's avgdl and QL's |C| come from ``sharded.json``, which no manifest covers: an edited
    value would change every score silently."""
    docnos, docs = corpus()
    path = tmp_path / "sharded"
    ShardedIndex.build(path, zip(docnos, docs, strict=True), shard_docs=20, progress=False)
    meta = json.loads((path / "sharded.json").read_text())
    meta[key] = value
    (path / "sharded.json").write_text(json.dumps(meta))
    with pytest.raises(
        FormatError, match=rf"sharded\.json: {key} is {value}, but the shards' documents give"
    ):
        ShardedIndex.load(path)


def test_clir_retrieve_names_the_damaged_file_and_writes_no_run(tmp_path, capsys):
    en, sw = get_analyzer("en"), get_analyzer("sw")
    (god,), (mungu,) = en.analyze("God"), sw.analyze("Mungu")
    table = TranslationTable([god], [mungu], sp.csr_matrix(np.ones((1, 1))), "en", "sw")
    documents = [Document(f"s{i}", text) for i, text in enumerate(["Mungu ni upendo", "nuru", "Mungu Mungu"])]
    stage = FirstStage("qt", "bm25", en_analyzer=en, doc_analyzer=sw, table_en_doc=table, progress=False)
    stage.index(documents).save(tmp_path / "stage")
    (tmp_path / "topics.tsv").write_text("q1\tGod\n")
    argv = ["retrieve", "--index", str(tmp_path / "stage"), "--topics", str(tmp_path / "topics.tsv"), "-q"]
    assert main([*argv, "--out", str(tmp_path / "good.run"), "--verify"]) == 0
    assert FirstStage.load(tmp_path / "stage", progress=False).search([Query("q1", "God")], k=3)["q1"]
    damaged = tmp_path / "stage" / "retriever" / "index" / "doc_ids.npy"
    edit(damaged, lambda ids: ids.__setitem__(0, 999))
    assert main([*argv, "--out", str(tmp_path / "bad.run")]) == 2
    assert capsys.readouterr().err.startswith(
        f"clir: error: {damaged}: damaged file, differs from the manifest"
    )
    assert not (tmp_path / "bad.run").exists()


def test_edited_descriptions_of_a_first_stage_are_named(tmp_path):
    en, sw = get_analyzer("en"), get_analyzer("sw")
    table = TranslationTable(["god"], ["mungu"], sp.csr_matrix(np.ones((1, 1))), "en", "sw")
    stage = FirstStage("qt", "bm25", en_analyzer=en, doc_analyzer=sw, table_en_doc=table, progress=False)
    stage.index([Document("s0", "Mungu ni upendo"), Document("s1", "nuru")]).save(tmp_path / "stage")
    description = tmp_path / "stage" / "first_stage.json"
    meta = json.loads(description.read_text())
    for edited, expected in (
        (
            {k: v for k, v in meta.items() if k != "mode"},
            r"lacks the key\(s\) \['mode'\] of a saved FirstStage",
        ),
        ({**meta, "mode": "xx"}, "does not describe a first stage: "),
        (
            {**meta, "model_params": {"k9": 1}},
            r"does not describe a first stage: retriever 'bm25' takes no parameter \['k9'\]; it takes",
        ),
        (
            {**meta, "model": "ql"},
            r"does not describe a first stage: retriever 'ql' takes no parameter \['b'",
        ),
        ({**meta, "psq_top_k": 0}, r"does not describe a first stage: psq_top_k must be a whole number >= 1"),
        (
            {**meta, "psq_cumulative": 5},
            r"does not describe a first stage: psq_cumulative must be in \(0, 1\]",
        ),
        ({**meta, "qt_k": 0}, r"does not describe a first stage: qt_k must be a whole number >= 1"),
        ({**meta, "mode": "dt"}, "mode is 'dt', but the stage holds a query translation table"),
        (
            {**meta, "model_params": {**meta["model_params"], "k1": 0.5}},
            r"model 'bm25' with \{'k1': 0\.5, .*differs from the saved retriever's \(BM25 with \{'k1': 1\.5",
        ),
        (
            {**meta, "model": "ql", "model_params": {}},
            r"model 'ql' with \{'mu': .*differs from the saved retriever's \(BM25 with",
        ),
    ):
        description.write_text(json.dumps(edited))
        with pytest.raises(FormatError, match=rf"first_stage\.json: {expected}"):
            FirstStage.load(tmp_path / "stage")
    record = tmp_path / "stage" / "retriever" / "retriever.json"
    description.write_text(json.dumps(meta))
    record.write_text(json.dumps({**json.loads(record.read_text()), "params": {"k9": 1}}))
    with pytest.raises(FormatError, match=r"retriever\.json: params: "):
        FirstStage.load(tmp_path / "stage")


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("spelling", "abc", r"spelling must be a similarity in \(0, 1\] or None, got 'abc'"),
        ("spelling", True, r"spelling must be a similarity in \(0, 1\] or None, got True"),
        ("psq_cumulative", "abc", r"psq_cumulative must be in \(0, 1\] or None, got 'abc'"),
        ("model_params", "abc", r"model_params is 'abc', expected an object of the retriever's parameters"),
        ("model_params", {"k1": "abc"}, r"k1 must be a finite number >= 0, got 'abc'"),
        ("index", "abc", r"index is 'abc', expected 'retriever' or 'shards'"),
    ],
    ids=["spelling-str", "spelling-bool", "psq_cumulative-str", "model_params-str", "k1-str", "index-str"],
)
def test_a_value_of_a_first_stage_edited_by_hand_is_named(tmp_path, key, value, expected):
    """A value of the wrong kind in ``first_stage.json`` names the file, the key and what it may
    be (not Python's "'<' not supported between instances of 'int' and 'str'")."""
    table = TranslationTable(["god"], ["mungu"], sp.csr_matrix(np.ones((1, 1))), "en", "sw")
    stage = FirstStage("qt", "bm25", doc_analyzer="sw", table_en_doc=table, progress=False)
    stage.index([Document("s0", "Mungu ni upendo"), Document("s1", "nuru")]).save(tmp_path / "stage")
    description = tmp_path / "stage" / "first_stage.json"
    description.write_text(json.dumps({**json.loads(description.read_text()), key: value}))
    with pytest.raises(
        FormatError, match=rf"first_stage\.json: (does not describe a first stage: )?{expected}"
    ):
        FirstStage.load(tmp_path / "stage", progress=False)


def test_clir_retrieve_names_a_damaged_translation_table(tmp_path, capsys):
    en, sw = get_analyzer("en"), get_analyzer("sw")
    (god,), (mungu,) = en.analyze("God"), sw.analyze("Mungu")
    table = TranslationTable([god], [mungu], sp.csr_matrix(np.ones((1, 1))), "en", "sw")
    stage = FirstStage("psq", "bm25", en_analyzer=en, doc_analyzer=sw, table_en_doc=table, progress=False)
    stage.index([Document("s0", "Mungu ni upendo"), Document("s1", "nuru")]).save(tmp_path / "stage")
    (tmp_path / "topics.tsv").write_text("q1\tGod\n")
    damaged = tmp_path / "stage" / "table_en_doc" / "data.npy"
    data = bytearray(damaged.read_bytes())
    data[-1] ^= 0x40  # the probability 1.0 becomes another float: same size, another SHA-256
    damaged.write_bytes(bytes(data))
    argv = ["retrieve", "--index", str(tmp_path / "stage"), "--topics", str(tmp_path / "topics.tsv"), "-q"]
    assert main([*argv, "--out", str(tmp_path / "bad.run")]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"clir: error: {damaged}: damaged file, differs from the manifest"), error
    assert not (tmp_path / "bad.run").exists()


def test_an_index_without_a_term_saves_and_loads(tmp_path):
    """A collection of stopwords only: its index was written with an int64 cf (numpy's bincount
    of no posting) that loading then refused as damage."""
    BM25().index(["d1", "d2"], [[], []], progress=False).save(tmp_path / "idx")
    loaded = Retriever.load(tmp_path / "idx")
    assert np.load(tmp_path / "idx" / "index" / "cf.npy").dtype == np.float64
    with pytest.warns(UserWarning, match="have no term in the index"):
        assert loaded.search({"q1": ["maji"]}, k=5) == {"q1": {}}
