"""Union candidates: the reranker's candidates from several first stages (``data.first_stage: [...]``),
fused by reciprocal rank, with every feature computed exactly for every candidate; training and
reranking over them."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from gensim.models import KeyedVectors
from hypothesis import given, settings
from hypothesis import strategies as st

from clir.datasets import Collection
from clir.embeddings import SharedSpace
from clir.errors import ConfigError
from clir.formats import ranked
from clir.pipeline.features import (
    DEFAULT_FEATURES,
    RRF_K,
    CollectionFeatures,
    collection_rerank_data,
    fuse_runs,
    rerank_collection,
    stage_features,
    train_reranker,
)
from clir.training import DataConfig, TrainConfig, load_models, member_scores, normalise_scores
from clir.training.checkpoint import read_state
from clir.translation import TranslationTable
from clir.types import Document, Query

UNION = ["qt-bm25", "psq-bm25", "dt-bm25"]
N_CONCEPTS = 30
EN = [f"e{i:02d}x" for i in range(N_CONCEPTS)]
SW = [f"s{i:02d}x" for i in range(N_CONCEPTS)]


def _table(source: list[str], target: list[str], shift: int, weight: float, src: str, tgt: str):
    """Word i translates to word i (``weight``) and to word i + ``shift`` (the rest)."""
    rows = np.arange(N_CONCEPTS)
    probs = sp.csr_matrix(
        (
            np.r_[np.full(N_CONCEPTS, weight), np.full(N_CONCEPTS, 1 - weight)],
            (np.r_[rows, rows], np.r_[rows, (rows + shift) % N_CONCEPTS]),
        ),
        shape=(N_CONCEPTS, N_CONCEPTS),
    )
    return TranslationTable(source, target, probs, src, tgt)


Tables = tuple[TranslationTable, TranslationTable]


def tiny_world(seed: int = 0, n_docs: int = 40) -> tuple[Collection, Tables, SharedSpace]:
    """A Swahili-like collection of made-up words: concept i is ``e<i>x`` in English and
    ``s<i>x`` in the documents; each query (3 concepts) has 2 relevant documents that hold some
    of its concepts. The two tables disagree a little, so QT, PSQ and DT rank differently."""
    rng = np.random.default_rng(seed)
    concepts = [list(rng.integers(0, N_CONCEPTS, size=int(rng.integers(6, 14)))) for _ in range(n_docs)]
    queries: dict[str, list[Query]] = {}
    qrels: dict[str, dict[str, int]] = {}
    for split, n in (("train", 16), ("dev", 8), ("test", 4)):
        queries[split] = []
        for i in range(n):
            terms = rng.choice(N_CONCEPTS, size=3, replace=False)
            relevant = rng.choice(n_docs, size=2, replace=False)
            for d in relevant:
                concepts[d] += list(terms[: int(rng.integers(1, 4))])
            qid = f"{split}{i:02d}"
            queries[split].append(Query(qid, " ".join(EN[t] for t in terms)))
            qrels[qid] = {f"d{d:03d}": 1 for d in relevant}
    documents = [Document(f"d{j:03d}", " ".join(SW[c] for c in cs)) for j, cs in enumerate(concepts)]
    collection = Collection("tiny-en-sw", "sw", "en", documents, queries, qrels)
    tables = (_table(EN, SW, 1, 0.7, "en", "sw"), _table(SW, EN, 2, 0.8, "sw", "en"))
    vectors = rng.normal(size=(N_CONCEPTS, 8)).astype(np.float32)
    spaces = {}
    for lang, words in (("en", EN), ("sw", SW)):
        kv = KeyedVectors(8)
        kv.add_vectors(words, vectors / np.linalg.norm(vectors, axis=1, keepdims=True))
        spaces[lang] = kv
    return collection, tables, SharedSpace(spaces, 8)


def tiny_reranker_config(first_stage: str | list[str] = "qt-bm25", depth: int = 10) -> TrainConfig:
    """A small, fast reranker config for :func:`tiny_world` (two shared components, two epochs)."""
    return TrainConfig.from_dict(
        {
            "model": {"components": ["en_en", "src_src"], "shared_weights": True},
            "data": {
                "first_stage": first_stage,
                "depth": depth,
                "negatives_per_positive": 2,
                "max_doc_len": 30,
            },
            "optim": {"lr": 0.05, "epochs": 2, "batch_size": 16, "patience": 0},
            "device": "cpu",
            "progress": False,
        }
    )


@pytest.fixture(scope="module")
def world():
    collection, tables, space = tiny_world()
    names = list(dict.fromkeys([*UNION, *stage_features(DEFAULT_FEATURES)]))
    features = CollectionFeatures.build(collection, stage_names=names, tables=tables, progress=False)
    return collection, tables, space, features


# ------------------------------------------------------------------------------------ fusion


def test_fuse_runs_by_hand():
    a = {"q": {"a": 3.0, "b": 2.0, "c": 1.0}}
    b = {"q": {"c": 5.0, "d": 4.0, "a": 0.5}, "r": {"x": 1.0}}
    fused = fuse_runs([a, b], depth=2)
    assert fused == {"q": {"a": 1 / 61, "b": 1 / 62, "c": 1 / 61, "d": 1 / 62}, "r": {"x": 1 / 61}}
    assert [d for d, _ in ranked(fused["q"])] == ["c", "a", "d", "b"]  # ties: docno descending
    assert fuse_runs([a, b])["q"]["a"] == pytest.approx(1 / 61 + 1 / 63)  # every rank counts
    assert fuse_runs([b], depth=1) == {"q": {"c": 5.0}, "r": {"x": 1.0}}  # one run: its own top


_RUN = st.dictionaries(
    st.sampled_from([f"d{i}" for i in range(12)]), st.integers(-3, 3).map(float), max_size=12
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_RUN, min_size=2, max_size=4), st.integers(1, 6))
def test_fused_candidates_are_the_union_of_the_top_lists_in_rrf_order(docs, depth):
    runs = [{"q": d} for d in docs]
    fused = fuse_runs(runs, depth)
    tops = [[d for d, _ in ranked(d)[:depth]] for d in docs]
    assert set(fused.get("q", {})) == set().union(*tops)
    for docno, score in fused.get("q", {}).items():
        assert score == pytest.approx(sum(1 / (RRF_K + top.index(docno) + 1) for top in tops if docno in top))


# ------------------------------------------------------------------------------------ config


def test_first_stage_names_one_stage_or_several():
    one = TrainConfig.from_dict({"data": {"first_stage": "qt-bm25"}})
    assert one.to_dict()["data"]["first_stage"] == "qt-bm25"  # a single name hashes as before
    assert (one.data.first_stages, one.data.max_candidates) == (["qt-bm25"], 100)
    union = TrainConfig.from_dict({"data": {"first_stage": UNION, "depth": 50}})
    assert (union.data.first_stages, union.data.max_candidates) == (UNION, 150)
    for value, message in [
        (5, "data.first_stage must be a string or a list, got int 5"),
        ([], r"data.first_stage=\[\] is invalid; expected at least one item"),
        (["qt-bm25", "qt-bm25"], r"data.first_stage=\[.qt-bm25., .qt-bm25.\] is invalid; expected distinct"),
        (["qt-bm25", "bm25"], r"data.first_stage\[1\]='bm25' is invalid; expected '<mode>-<model>'"),
        (["qt-bm25", 3], r"data.first_stage\[1\] must be a string, got int 3"),
    ]:
        with pytest.raises(ConfigError, match=rf"^r\.yaml: {message}"):
            TrainConfig.from_dict({"data": {"first_stage": value}}, "r.yaml")


# ------------------------------------------------------------------------------------ data


def test_union_candidates_and_their_features_are_exact(world):
    collection, _, _, features = world
    depth = 4
    queries = collection.split("train")
    data = collection_rerank_data(
        features, queries, candidates=UNION, data=DataConfig(depth=depth), progress=False
    )
    assert data.meta["candidates"] == UNION
    n_docs = len(collection.documents)
    columns = stage_features(DEFAULT_FEATURES)
    padded = {name: features.stages[name].search(queries, k=n_docs, pad=True) for name in columns}
    sizes = []
    for query, record in zip(queries, data.queries, strict=True):
        tops = [[d for d, _ in ranked(features.stages[n].search([query], k=depth)[query.qid])] for n in UNION]
        rrf = {d: sum(1 / (RRF_K + t.index(d) + 1) for t in tops if d in t) for d in set().union(*tops)}
        assert record.docnos == [d for d, _ in ranked(rrf)]  # the union, in RRF order
        np.testing.assert_allclose(record.scores, [rrf[d] for d in record.docnos])
        sizes.append(len(record.docnos))
        assert np.isfinite(record.features).all()
        for name in columns:  # each stage's exact score, retrieved by it or not
            assert len(padded[name][query.qid]) == n_docs
            raw = np.array([padded[name][query.qid][d] for d in record.docnos])
            column = record.features[:, DEFAULT_FEATURES.index(name)]
            np.testing.assert_allclose(column, normalise_scores(raw), rtol=1e-5, atol=1e-5)
    assert max(sizes) > depth  # the stages disagree: the union is larger than any one list
    assert max(sizes) <= depth * len(UNION)


def test_a_single_stage_gives_the_same_data_as_its_run(world):
    collection, _, _, features = world
    queries = collection.split("dev")
    by_name = collection_rerank_data(features, queries, candidates="qt-bm25", depth=5, progress=False)
    run = features.stages["qt-bm25"].search(queries, k=1000)
    given_run = collection_rerank_data(features, queries, candidates=run, depth=5, progress=False)
    for a, b in zip(by_name.queries, given_run.queries, strict=True):
        assert a.docnos == b.docnos and len(a.docnos) <= 5
        np.testing.assert_array_equal(a.scores, b.scores)
        np.testing.assert_array_equal(a.features, b.features)
    with pytest.raises(ConfigError, match=r"candidate runs \['qt-dense'\] are not among the indexed"):
        collection_rerank_data(features, queries, candidates=["qt-bm25", "qt-dense"], progress=False)


def test_training_and_reranking_on_union_candidates(world, tmp_path):
    collection, tables, space, features = world
    config = tiny_reranker_config(UNION, depth=4)
    out = train_reranker(config, collection, space, tmp_path / "m", tables=tables)
    train = collection_rerank_data(features, "train", data=config.data, progress=False)

    def pairs(depth: int | None) -> int:
        total = 0
        for query in train.queries:
            judged = [collection.qrels[query.qid].get(d, 0) for d in query.docnos[:depth]]
            if 0 < sum(judged) < len(judged):
                total += sum(judged) * config.data.negatives_per_positive
        return total

    assert pairs(None) != pairs(config.data.depth)  # some relevant candidates lie below depth 4
    assert read_state(out / "seed0").curve[0]["pairs"] == pairs(None)  # all were trained on

    dev = collection_rerank_data(features, "dev", data=config.data, progress=False)
    scores = member_scores(load_models(out), dev, space=space)[0]
    assert [len(s) for s in scores] == [len(q.docnos) for q in dev.queries]  # all candidates scored
    assert max(len(q.docnos) for q in dev.queries) > config.data.depth
    run = rerank_collection(out, collection, space, split="dev", tables=tables)
    for query in dev.queries:
        top = [d for d, _ in ranked(run[query.qid])]
        assert set(top[: len(query.docnos)]) == set(query.docnos)  # reranked candidates first
        assert len(top) > len(query.docnos)  # the fused deeper runs beneath
