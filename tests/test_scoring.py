"""Tests of the scoring fast path: tensor tables, batching, options, the bf16 guard (CUDA parts skip)."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from clir.cli import main
from clir.errors import ConfigError, NonFiniteError
from clir.evaluation import evaluate
from clir.formats import write_run
from clir.rerankers import fused_knrm
from clir.training import (
    RerankData,
    RerankQuery,
    ScoringOptions,
    Tensorizer,
    TrainedReranker,
    Trainer,
    Vocabulary,
    load_config,
    load_models,
    member_scores,
    precision_guard,
    rerank,
    rerank_arrays,
    rerank_parts,
    score_candidates,
    scores_to_run,
)
from clir.training import ensemble as ensemble_module
from clir.training.idtables import IdTable, id_table, input_key
from clir.training.scoring import (
    choose_precision,
    fusable,
    kendall_taus,
    score_pairs,
    set_embeddings,
    split_scores,
)
from clir.training.trainer import build_reranker

CONFIGS = Path(__file__).resolve().parents[1] / "configs"

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


class ToySpace:
    """A shared space stand-in: ``e<i>`` (English) and ``x<i>`` (language xx) share random vector i."""

    dim = 16

    def __init__(self, seed: int = 0) -> None:
        self.vectors = np.random.default_rng(seed).normal(size=(60, self.dim)).astype(np.float32)

    def matrix(self, entries: list[tuple[str, str]]) -> np.ndarray:
        return self.vectors[[int(token[1:]) for _lang, token in entries]]


def varied_data(
    seed: int = 0, n_queries: int = 6, n_docs: int = 40, depth: int = 15
) -> tuple[RerankData, dict[str, dict[str, int]]]:
    """Queries and documents of many lengths (so that padding differs from batch to batch), and
    qrels: the first two candidates of each query are relevant and hold its words."""
    rng = np.random.default_rng(seed)
    docs = {
        f"d{i}": [f"x{c}" for c in rng.integers(0, 60, size=int(rng.integers(1, 30)))] for i in range(n_docs)
    }
    queries, qrels = [], {}
    for qi in range(n_queries):
        words = [int(c) for c in rng.integers(0, 60, size=int(rng.integers(1, 9)))]
        docnos = [f"d{i}" for i in rng.permutation(n_docs)[: int(rng.integers(2, depth))]]
        qrels[f"q{qi}"] = {docnos[0]: 1, docnos[1]: 1}
        for docno in docnos[:2]:
            docs[docno] = docs[docno][:10] + [f"x{w}" for w in words] + docs[docno][10:]
        queries.append(
            RerankQuery(
                f"q{qi}", [f"e{w}" for w in words], [f"x{w}" for w in words[::-1]],
                list(rng.uniform(0.5, 3, len(words))), list(rng.uniform(0.5, 3, len(words))),
                docnos, rng.normal(size=len(docnos)), rng.normal(size=(len(docnos), 1)),
            )
        )  # fmt: skip
    doc_en = {d: [t.replace("x", "e") for t in tokens[::-1]] for d, tokens in docs.items()}
    return RerankData("xx", queries, docs, doc_en, ["f"]), qrels


def map_metric(run, qrels):
    return evaluate(run, qrels, ["AP"])["AP"]


def tiny_config():
    config = load_config(CONFIGS / "reranker-tiny.yaml")
    config.progress = False
    config.optim.epochs, config.optim.patience = 2, 0
    return config


# ------------------------------------------------------------------------------- tensorisation


def test_gathered_batches_equal_the_per_pair_batches():
    data, _ = varied_data()
    tz = Tensorizer(Vocabulary.build([data]), data, max_query_len=5, max_doc_len=20)
    index = tz.candidates(depth=4)
    assert tz.counts(4) == [min(4, len(q.docnos)) for q in data.queries]
    pairs = [p for qi in range(len(data.queries)) for p in tz.query_pairs(qi, 4)]
    assert len(index) == len(pairs)
    by_pairs = tz.batch(pairs)
    gathered = tz.gather(index)
    for name in ("q_en", "q_src", "d_src", "d_en"):
        a, b = getattr(by_pairs, name), getattr(gathered, name)
        assert torch.equal(a.tokens, b.tokens) and torch.equal(a.surface, b.surface), name
    assert torch.equal(by_pairs.q_en.idf, gathered.q_en.idf)
    assert torch.equal(by_pairs.features, gathered.features)
    # each pair's row holds its own document's ids: the docno's tokens, truncated to 20
    qi, docno = pairs[5]
    rows, _ = tz.vocab.ids("xx", data.doc_src[docno][:20])
    assert gathered.d_src.tokens[5, : len(rows)].tolist() == rows.tolist()
    assert (gathered.d_src.tokens[5, len(rows) :] == 0).all()
    assert gathered.features[5, 0] == pytest.approx(
        data.queries[qi].features[data.queries[qi].docnos.index(docno), 0]
    )
    # fixed widths pad further with zeros and change nothing else
    wide = tz.gather(index, widths=(12, 40))
    assert wide.q_en.tokens.shape == (len(pairs), 12) and wide.d_en.tokens.shape == (len(pairs), 40)
    width = gathered.d_en.tokens.shape[1]
    assert (
        torch.equal(wide.d_en.tokens[:, :width], gathered.d_en.tokens)
        and not wide.d_en.tokens[:, width:].any()
    )


def test_fast_scores_match_the_model_on_each_query_and_do_not_depend_on_the_batch_size():
    data, _ = varied_data(seed=3)
    space = ToySpace()
    config = tiny_config()
    vocab = Vocabulary.build([data])
    model = build_reranker(config, vocab.embedding_matrix(space), 1, seed=0).eval()
    set_embeddings(model, torch.from_numpy(vocab.embedding_matrix(space)))
    tz = Tensorizer(vocab, data, 5, 20)
    expected = [
        model(tz.batch(tz.query_pairs(qi))).double().detach().numpy() for qi in range(len(data.queries))
    ]
    for size in (1, 7, 256):
        got = score_candidates(model, tz, None, ScoringOptions(device="cpu", batch_size=size).resolve())
        assert [len(g) for g in got] == [len(q.docnos) for q in data.queries]
        for g, e in zip(got, expected, strict=True):
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


def test_no_pair_to_score_gives_no_score():
    """A search whose queries retrieve nothing (only stopwords) crashed in score_pairs (zip of
    no batch start with the one end)."""
    data, _ = varied_data(seed=3)
    vocab = Vocabulary.build([data])
    model = build_reranker(tiny_config(), vocab.embedding_matrix(ToySpace()), 1, seed=0)
    tz = Tensorizer(vocab, data, 5, 20)
    nothing = tz.candidates(depth=4).take(np.zeros(0, dtype=np.int64))
    scores = score_pairs(model, tz, nothing, ScoringOptions(device="cpu").resolve())
    assert scores.shape == (0,) and scores.dtype == torch.float32


def test_split_scores_cuts_per_query():
    parts = split_scores(np.arange(6.0), [2, 0, 3, 1])
    assert [p.tolist() for p in parts] == [[0.0, 1.0], [], [2.0, 3.0, 4.0], [5.0]]
    assert split_scores(np.zeros(0), []) == []


def test_a_tensorizer_that_extends_an_empty_vocabulary_scores_exactly_as_a_built_one():
    # rerank builds the vocabulary while laying out the tables (one pass); the ids differ from
    # Vocabulary.build's (truncated documents add fewer words) but the scores must not
    data, _ = varied_data(seed=6)
    space = ToySpace()
    built = Vocabulary.build([data])
    grown = Vocabulary()
    tz_built, tz_grown = Tensorizer(built, data, 5, 12), Tensorizer(grown, data, 5, 12, extend_vocab=True)
    assert set(grown.entries) <= set(built.entries)  # the words of the first 12 tokens, and no others
    assert len(set(grown.entries)) == len(grown) and grown.entries[0] == ("", "")
    model = build_reranker(tiny_config(), built.embedding_matrix(space), 1, seed=0)
    options = ScoringOptions(device="cpu").resolve()
    scores = []
    for vocab, tz in ((built, tz_built), (grown, tz_grown)):
        set_embeddings(model, torch.from_numpy(vocab.embedding_matrix(space)))
        scores.append(np.concatenate(score_candidates(model, tz, None, options)))
    np.testing.assert_array_equal(scores[0], scores[1])
    with pytest.raises(ConfigError, match="token 'e99' is not in the vocabulary"):
        grown.ids("en", ["e1", "e99"])
    assert grown.ids("en", ["e99"], add=True)[0].tolist() == [len(grown) - 1]


def test_an_id_table_numbers_words_in_order_of_first_appearance():
    table = IdTable.build([["b", "a", "b"], [], ["c"]], min_len=4)
    assert table.words == ["b", "a", "c"]
    assert table.ids.tolist() == [[1, 2, 1, 0], [0, 0, 0, 0], [3, 0, 0, 0]]
    assert table.lengths.tolist() == [3, 0, 1]
    # the cache key reads every token, the texts' lengths and the width; a separator: no key
    key = input_key([["b", "a", "b"], [], ["c"]], 4)
    assert key == input_key([["b", "a", "b"], [], ["c"]], 4)
    others = ([["b", "a", "b"], ["c"]], [["b", "a", "b"], [], ["d"]], [["b", "a"], ["b"], ["c"]])
    assert key not in {input_key(texts, 4) for texts in others} | {input_key([["b", "a", "b"], [], ["c"]], 3)}
    assert input_key([["a\x1fb"]], 4) is None and input_key([["a\x00"]], 4) is None


def _tables(tz):
    return [
        (t.tokens.tolist(), t.surface.tolist(), t.lengths.tolist())
        for t in (*tz._query_tables.values(), *tz._doc_tables.values())
    ]


def _cache_changes_nothing(data: RerankData, cache: Path, plain: RerankData | None = None) -> dict:
    """Assert that tensorizers of ``data`` that fill ``cache`` and then read it have the tables,
    vocabulary and scores of one of ``plain`` (default ``data``) without a cache; return the
    files written, with their bytes."""
    space = ToySpace()
    vocabs = Vocabulary(), Vocabulary(), Vocabulary()
    tz_plain = Tensorizer(vocabs[0], plain or data, 5, 12, extend_vocab=True)
    tz_cold = Tensorizer(vocabs[1], data, 5, 12, extend_vocab=True, cache=cache)
    written = {path: path.read_bytes() for path in cache.glob("*.npz")}
    tz_warm = Tensorizer(vocabs[2], data, 5, 12, extend_vocab=True, cache=cache)
    assert vocabs[0].entries == vocabs[1].entries == vocabs[2].entries
    assert vocabs[0].n_surfaces == vocabs[2].n_surfaces
    assert _tables(tz_plain) == _tables(tz_cold) == _tables(tz_warm)
    model = build_reranker(tiny_config(), vocabs[0].embedding_matrix(space), 1, seed=0)
    options = ScoringOptions(device="cpu").resolve()
    scores = []
    for vocab, tz in ((vocabs[0], tz_plain), (vocabs[2], tz_warm)):
        set_embeddings(model, torch.from_numpy(vocab.embedding_matrix(space)))
        scores.append(np.concatenate(score_candidates(model, tz, None, options)))
    np.testing.assert_array_equal(scores[0], scores[1])
    return written


def test_cached_id_tables_give_the_uncached_tables_vocabulary_and_scores(tmp_path):
    data, _ = varied_data(seed=8)
    cache = tmp_path / "ids"
    assert len(_cache_changes_nothing(data, cache)) == 2  # the documents' two views
    # other documents (one token changed), or other lengths: other files
    data.doc_src["d0"] = ["x59", *data.doc_src["d0"][1:]]
    Tensorizer(Vocabulary(), data, 5, 12, extend_vocab=True, cache=cache)
    Tensorizer(Vocabulary(), data, 5, 13, extend_vocab=True, cache=cache)
    assert len(list(cache.glob("*.npz"))) == 5  # d0's own-language view and both views at 13 are new


def test_a_damaged_id_table_file_is_rebuilt_never_used(tmp_path):
    texts = [["a", "b", "a"], ["c", "a"]]
    table = id_table(texts, 3, tmp_path)
    (path,) = tmp_path.glob("*.npz")
    intact = path.read_bytes()
    # numbers edited behind the checksum's back
    with np.load(path) as arrays:
        kept = dict(arrays)
    np.savez(path, **{**kept, "ids": kept["ids"][:, ::-1].copy()})
    with pytest.warns(UserWarning, match=r"damaged id-table cache file .*do not match their checksum"):
        again = id_table(texts, 3, tmp_path)
    assert again.words == table.words and np.array_equal(again.ids, table.ids)
    assert path.read_bytes() == intact  # written anew
    # truncated: unreadable
    path.write_bytes(intact[: len(intact) // 2])
    with pytest.warns(UserWarning, match="damaged id-table cache file"):
        assert id_table(texts, 3, tmp_path).ids.tolist() == [[1, 2, 1], [3, 1, 0]]


def test_an_id_table_file_copied_over_another_keys_is_rebuilt_never_used(tmp_path):
    """Each file's checksum covered its contents only: a whole file of other texts copied over
    this one's (a cache put together by hand) was read as this one's table, and a tensorizer
    took its words for these documents' (no key of a token digest checks the texts)."""
    texts, others = [["a", "b", "a"], ["c", "a"]], [["x", "y"], ["z", "x"]]
    table = id_table(texts, 3, tmp_path)
    id_table(others, 3, tmp_path)
    path, other = (tmp_path / f"{input_key(t, 3)}.npz" for t in (texts, others))
    intact = path.read_bytes()
    path.write_bytes(other.read_bytes())
    with pytest.warns(UserWarning, match=r"damaged id-table cache file .*holds the table of key"):
        again = id_table(texts, 3, tmp_path)
    assert again.words == ["a", "b", "c"] and again.ids.tolist() == [[1, 2, 1], [3, 1, 0]]
    assert _same_table(again, table) and path.read_bytes() == intact  # written anew


def test_id_tables_kept_under_the_documents_key_are_the_uncached_ones(tmp_path):
    # a documents_key (clir rerank --index-cache: the index step's) keys the files instead of a
    # digest of every token; a hit gives the tables, vocabulary and scores of a miss
    data, _ = varied_data(seed=8)
    data.documents_key = "index step 0123"
    cache = tmp_path / "ids"
    files = _cache_changes_nothing(data, cache, replace(data, documents_key=None))
    assert len(files) == 2
    # the subsets and feature selections of the data keep the key; without it, the token digest
    assert (
        data.subset(data.qids[:2]).documents_key
        == data.without_features().documents_key
        == data.documents_key
    )
    Tensorizer(Vocabulary(), replace(data, documents_key=None), 5, 12, extend_vocab=True, cache=cache)
    assert len(list(cache.glob("*.npz"))) == 4
    # another key, another length or other lengths of the documents: other files
    Tensorizer(
        Vocabulary(), replace(data, documents_key="index step 4567"), 5, 12, extend_vocab=True, cache=cache
    )
    Tensorizer(Vocabulary(), data, 5, 13, extend_vocab=True, cache=cache)
    assert len(list(cache.glob("*.npz"))) == 8
    # a key kept while a document's first token changed: the table found does not fit, rebuilt
    stale = replace(data, doc_src={**data.doc_src, "d0": ["x59", *data.doc_src["d0"][1:]]})
    fresh = Tensorizer(Vocabulary(), replace(stale, documents_key=None), 5, 12, extend_vocab=True)
    with pytest.warns(UserWarning, match="holds other texts; rebuilt"):
        rebuilt = Tensorizer(Vocabulary(), stale, 5, 12, extend_vocab=True, cache=cache)
    assert _tables(rebuilt) == _tables(fresh) and rebuilt.vocab.entries == fresh.vocab.entries
    assert all(path.read_bytes() == kept for path, kept in files.items())  # nothing written over them
    assert len(list(cache.glob("*.npz"))) == 8


def _same_table(a: IdTable, b: IdTable) -> bool:
    return a.words == b.words and np.array_equal(a.ids, b.ids) and np.array_equal(a.lengths, b.lengths)


def test_a_damaged_id_table_file_found_by_a_source_key_is_rebuilt(tmp_path):
    texts = [["a", "b", "a"], ["c", "a"], []]
    table = id_table(texts, 3, tmp_path, source="docs 1")
    (path,) = tmp_path.glob("*.npz")
    assert path.name == f"{input_key(texts, 3, 'docs 1')}.npz" != f"{input_key(texts, 3)}.npz"
    assert _same_table(id_table(texts, 3, tmp_path, source="docs 1"), table)
    intact = path.read_bytes()
    with np.load(path) as arrays:
        kept = dict(arrays)
    np.savez(path, **{**kept, "words": kept["words"][::-1].copy()})  # edited behind the checksum
    with pytest.warns(UserWarning, match="do not match their checksum"):
        assert _same_table(id_table(texts, 3, tmp_path, source="docs 1"), table)
    assert path.read_bytes() == intact
    path.write_bytes(intact[:100])
    with pytest.warns(UserWarning, match="damaged id-table cache file"):
        assert id_table(texts, 3, tmp_path, source="docs 1").ids.tolist() == table.ids.tolist()


def test_an_empty_id_table_file_is_rebuilt_with_a_warning(tmp_path):
    """A cache file left empty (a crash after the rename, before its data reached the disk) had
    stopped the rerank with numpy's EOFError ("No data left in file"), a traceback."""
    texts = [["a", "b", "a"], ["c"]]
    for source in ("docs 1", None):
        table = id_table(texts, 3, tmp_path, source=source)
        path = tmp_path / f"{input_key(texts, 3, source)}.npz"
        path.write_bytes(b"")
        with pytest.warns(UserWarning, match="damaged id-table cache file"):
            assert _same_table(id_table(texts, 3, tmp_path, source=source), table)
        assert _same_table(id_table(texts, 3, tmp_path, source=source), table)  # written anew
        assert path.stat().st_size > 0


def test_words_that_would_not_read_back_are_not_kept(tmp_path):
    # the kept word list is one text cut at a separator: a word holding it, or an empty word,
    # is never written (a source key reads no token, so the words are checked when written)
    for texts in ([["a\x1fb", "c"]], [["", "c"]]):
        assert id_table(texts, 2, tmp_path, source="s").ids.tolist() == IdTable.build(texts, 2).ids.tolist()
    assert not list(tmp_path.glob("*.npz"))
    texts = [["é", "a\x00", "\ud800"], ["a\x00"]]  # NUL, non-ASCII and a lone surrogate read back
    assert _same_table(id_table(texts, 2, tmp_path, source="s"), IdTable.build(texts, 2))
    assert len(list(tmp_path.glob("*.npz"))) == 1
    assert _same_table(id_table(texts, 2, tmp_path, source="s"), IdTable.build(texts, 2))
    assert id_table(texts, 2, tmp_path, source="s").words == ["é", "a\x00", "\ud800"]


def test_the_vocabulary_numbers_rows_and_surfaces_in_order_of_addition():
    vocab = Vocabulary()
    vocab.add("en", iter(["a", "b", "a"]))
    assert vocab.ids("xx", ["b", "c", "c"], add=True)[0].tolist() == [3, 4, 4]
    rows, surfaces = vocab._add_distinct("en", ["c", "a", "d"])
    assert (rows.tolist(), surfaces.tolist()) == ([5, 1, 6], [3, 1, 4])
    assert vocab.entries == [
        ("", ""),
        ("en", "a"),
        ("en", "b"),
        ("xx", "b"),
        ("xx", "c"),
        ("en", "c"),
        ("en", "d"),
    ]
    assert vocab.n_surfaces == 5 and len(vocab) == 7
    assert [a.tolist() for a in vocab.ids("xx", ["c", "b"])] == [[4, 3], [3, 2]]
    # distinct words added at once: what ids(..., add=True) gives, on random overlapping words
    rng = np.random.default_rng(0)
    one, other = Vocabulary(), Vocabulary()
    for lang in ("en", "xx", "xx", "en", "yy"):
        words = list(dict.fromkeys(f"w{i}" for i in rng.integers(0, 300, size=200)))
        got, expected = one._add_distinct(lang, words), other.ids(lang, words, add=True)
        assert all(np.array_equal(g, e) for g, e in zip(got, expected, strict=True))
    assert one.entries == other.entries and one.n_surfaces == other.n_surfaces
    # the matrix less its padding row (rerank adds that row where the matrix goes)
    space = ToySpace()
    assert Vocabulary().embedding_rows(space).shape == (0, space.dim)
    assert Vocabulary().embedding_matrix(space).tolist() == [[0.0] * space.dim]
    vocab = Vocabulary()
    vocab.add("en", ["e3", "e1"])
    matrix = vocab.embedding_matrix(space)
    assert np.array_equal(matrix[1:], vocab.embedding_rows(space)) and not matrix[0].any()
    assert np.array_equal(matrix[1:], space.vectors[[3, 1]])


def test_members_combined_together_equal_one_query_at_a_time():
    from clir.training.ensemble import _combine_one, combine

    rng = np.random.default_rng(4)
    counts = [5, 5, 5, 3, 3, 1, 0, 7, 1000, 1000, 2]
    for members in (1, 2, 3):
        scores = [[rng.normal(size=n) * 10 ** rng.uniform(-6, 6) for n in counts] for _ in range(members)]
        for member in scores:
            member[1] = np.full(5, 2.5)  # constant: all zeros
            member[9] = member[9].round(1)  # ties
        for method in ("zscore", "minmax"):
            got = combine(scores, method)
            expected = [_combine_one(scores, qi, method) for qi in range(len(counts))]
            assert all(g.tobytes() == e.tobytes() for g, e in zip(got, expected, strict=True))
    scores[0][0] = np.array([1.0, np.nan, 2.0, 3.0, 4.0])
    with pytest.raises(NonFiniteError, match="1 of 5 values are not finite"):
        combine(scores)


# ------------------------------------------------------------------------------ rerank in parts


def _untrained(config, seed=0, n_features=1):
    """An untrained member (speed and files do not depend on the weights)."""
    model = build_reranker(config, np.zeros((2, ToySpace.dim), np.float32), n_features, seed=seed)
    return TrainedReranker(model, config, ["f"][:n_features])


def _out_of_order(data):
    """``data`` with qids whose string order is not the data's order (q10 before q2)."""
    for query, number in zip(data.queries, [7, 10, 2, 11, 0, 5, 1, 9, 3, 8, 6, 4, 12, 13], strict=False):
        query.qid = f"q{number}"
    return data


def _deeper_run(data, seed=0):
    """The first-stage run with documents beyond each query's candidates (ranked beneath them)."""
    rng = np.random.default_rng(seed)
    run = data.first_stage_run()
    for query in data.queries:
        others = [d for d in data.doc_src if d not in query.docnos]
        for docno in rng.choice(others, size=3, replace=False):
            run[query.qid][str(docno)] = float(rng.normal()) - 10
    return run


def tied_scorer(model, tensorizer, index, options, progress=False, timings=None):
    """Scores with many ties (and equal rows across members): a pair's query and document modulo 3."""
    return torch.from_numpy(((index.query * 5 + index.doc) % 3).astype(np.float32))


@pytest.mark.parametrize(("chunk_pairs", "parts"), [(1, 12), (20, None), (45, None), (10**6, 1), (0, 1)])
@pytest.mark.parametrize("members", [1, 2])
@pytest.mark.parametrize("deeper", [False, True])
def test_a_rerank_in_parts_writes_the_file_of_the_whole_rerank(tmp_path, chunk_pairs, parts, members, deeper):
    # ties, an ensemble's z-scores, documents beneath the candidates: every chunking, the same bytes
    data = _out_of_order(varied_data(seed=5, n_queries=12, depth=15)[0])
    run = _deeper_run(data) if deeper else None
    config = tiny_config()
    models = [_untrained(config, seed) for seed in range(members)]
    options = ScoringOptions(device="cpu")
    kwargs = {"space": ToySpace(), "run": run, "options": options, "scorer": tied_scorer}
    whole = tmp_path / "whole.run"
    write_run(whole, rerank_arrays(models, data, **kwargs), tag="t", workers=0)
    got = list(rerank_parts(models, data, **kwargs, chunk_pairs=chunk_pairs))
    assert len(list(rerank_parts(models, data, **kwargs))) == 1  # the default on a CPU: one part
    total = sum(len(q.docnos) for q in data.queries)
    assert len(got) == (parts or total // chunk_pairs)
    qids = [qid for part in got for qid in part.qids]
    assert sorted(qids) == sorted(q.qid for q in data.queries)
    if len(got) > 1:  # the file's order, part after part
        assert qids == sorted(qids) and qids != [q.qid for q in data.queries]
    for workers in (0, 2):
        path = tmp_path / f"parts{workers}.run"
        assert write_run(path, iter(got), tag="t", workers=workers) == len(data.queries)
        assert path.read_bytes() == whole.read_bytes()


def test_a_reranked_model_in_parts_writes_the_whole_reruns_file(tmp_path):
    # the real model on a CPU, each pair in a batch of its own: any chunking scores it alike
    data = _out_of_order(varied_data(seed=6, n_queries=12, depth=15)[0])
    models = [_untrained(tiny_config(), seed) for seed in (0, 1)]
    kwargs = {
        "space": ToySpace(),
        "run": _deeper_run(data),
        "options": ScoringOptions(device="cpu", batch_size=1),
    }
    whole, parts = tmp_path / "whole.run", tmp_path / "parts.run"
    write_run(whole, rerank_arrays(models, data, **kwargs), workers=0)
    write_run(parts, rerank_parts(models, data, **kwargs, chunk_pairs=30), workers=0)
    assert parts.read_bytes() == whole.read_bytes()


def test_chunks_are_cut_in_qid_order_at_about_as_many_pairs():
    from clir.training.ensemble import CHUNK_PAIRS, _chunks

    data = _out_of_order(varied_data(seed=2, n_queries=14, depth=15)[0])
    counts = [len(q.docnos) for q in data.queries]
    by_qid = sorted(range(len(counts)), key=lambda qi: data.queries[qi].qid)
    assert _chunks(data, counts, 0) == [None] and _chunks(data, counts, sum(counts) // 2 + 1) == [None]
    for chunk_pairs in (1, 10, 30, sum(counts) // 2):
        chunks = _chunks(data, counts, chunk_pairs)
        assert np.concatenate(chunks).tolist() == by_qid
        n = sum(counts) // chunk_pairs
        assert len(chunks) == min(n, len(counts))
        sizes = [sum(counts[qi] for qi in chunk) for chunk in chunks]
        assert all(size >= sum(counts) / n - max(counts) for size in sizes)
    thousand = [1000] * 500  # the benchmark's run: four chunks of 125 queries
    big = replace(data, queries=[replace(data.queries[0], qid=f"Q{i:03d}") for i in range(500)])
    assert [len(c) for c in _chunks(big, thousand, CHUNK_PAIRS)] == [125] * 4
    for bad in (-1, True, 2.5):
        with pytest.raises(ConfigError, match="chunk_pairs must be an integer >= 0"):
            rerank_parts([], data, space=ToySpace(), chunk_pairs=bad)


def test_chunks_are_the_default_when_every_member_scores_on_cuda():
    from clir.training.ensemble import CHUNK_PAIRS, default_chunk_pairs

    cpu, cuda = ScoringOptions(device="cpu"), ScoringOptions(device="cuda")
    assert default_chunk_pairs([cuda]) == default_chunk_pairs([cuda, cuda]) == CHUNK_PAIRS
    assert default_chunk_pairs([cpu]) == default_chunk_pairs([cuda, cpu]) == 0


def test_a_subset_scored_at_the_widths_of_all_meets_batches_of_the_same_shapes():
    # CUDA's batches, computed on the host: one width a batch, each pair at its width among all
    from clir.training.scoring import _batch_starts, _width_order, batch_widths

    data = varied_data(seed=9, n_queries=30, depth=15)[0]
    tz = Tensorizer(Vocabulary.build([data]), data, 5, 200)
    every = tz.candidates()
    lengths = tz.doc_lengths(every)
    for size in (1, 4, 16, 1000):
        widths = batch_widths(tz, every, size)
        order = _width_order(widths, lengths, tz.max_doc_width)  # all pairs: as before, by length
        assert order.tolist() == np.argsort(lengths, kind="stable").tolist()
        assert _batch_starts(widths[order], size) == list(range(0, len(every), size))
        last = [lengths[order][min(start + size, len(every)) - 1] for start in range(0, len(every), size)]
        expected = [min(-(-max(n, 1) // 32) * 32, tz.max_doc_width) for n in last]
        assert widths[order].tolist() == np.repeat(expected, size)[: len(every)].tolist()
        subset = every.take(np.flatnonzero(np.random.default_rng(size).random(len(every)) < 0.4))
        sub = replace(subset, width=batch_widths(tz, every, size)[np.isin(np.arange(len(every)), subset.row)])
        order = _width_order(sub.width, tz.doc_lengths(sub), tz.max_doc_width)
        starts = _batch_starts(sub.width[order], size)
        for start, end in zip(starts, [*starts[1:], len(sub)], strict=True):
            assert 0 < end - start <= size and len(set(sub.width[order][start:end].tolist())) == 1
            batch_lengths = tz.doc_lengths(sub)[order][start:end]
            assert batch_lengths.tolist() == sorted(batch_lengths.tolist())


# ------------------------------------------------------------------------------------- options


def test_scoring_options_defaults_and_errors():
    cpu = ScoringOptions(device="cpu").resolve()
    assert (cpu.device, cpu.batch_size, cpu.precision, cpu.compile) == ("cpu", 256, "fp32", False)
    assert ScoringOptions(batch_size=64).resolve("cpu").batch_size == 64
    with pytest.raises(
        ConfigError,
        match=r"^precision='bf16' \(--precision bf16, or precision: bf16 in a config\) needs CUDA, got "
        r"device 'cpu'",
    ):
        ScoringOptions(device="cpu", precision="bf16")
    with pytest.raises(ConfigError, match=r"^compile=True and fused=True need CUDA, got device 'cpu'"):
        ScoringOptions(device="cpu", compile=True, fused=True)
    with pytest.raises(ConfigError, match="unknown precision 'fp16'"):
        ScoringOptions(precision="fp16")
    with pytest.raises(ConfigError, match="batch_size must be a positive integer, got 0"):
        ScoringOptions(batch_size=0)
    if not torch.cuda.is_available():
        with pytest.raises(
            ConfigError,
            match=r"precision='bf16' \(--precision bf16, or precision: bf16 in a config\) needs CUDA",
        ):
            ScoringOptions(precision="bf16").resolve("auto")


def test_the_fused_kernel_is_the_default_of_uncompiled_cuda_scoring_of_windowed_knrm(monkeypatch):
    monkeypatch.setattr(fused_knrm, "triton", object())  # as if installed: the rule, not the kernel
    config = tiny_config()
    config.model.interaction_kwargs = {"window": 6}
    windowed = build_reranker(config, np.zeros((3, 16), np.float32), 1, seed=0)
    config.model.interaction_kwargs = {"window": 0}
    whole = build_reranker(config, np.zeros((3, 16), np.float32), 1, seed=0)
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert fusable(windowed, cuda) and not fusable(windowed, cpu) and not fusable(whole, cuda)
    assert ScoringOptions(device="cpu").resolve().fused is False
    # with the kernel (fp32 throughout) "auto" is fp32 at once: no bf16 probe is scored
    data, _ = varied_data()
    tz = Tensorizer(Vocabulary.build([data]), data, 5, 20)
    options = ScoringOptions(device="cuda", fused=True)
    settled = choose_precision(windowed, tz, tz.candidates(), tz.counts(), options)
    assert settled.precision == "fp32"


def test_cli_refuses_bf16_on_a_cpu(tmp_path, capsys):
    absent = str(tmp_path / "absent")
    argv = ["rerank", "--model", absent, "--collection", absent, "--space", absent, "--out", absent]
    assert main([*argv, "--device", "cpu", "--precision", "bf16"]) == 2
    err = capsys.readouterr().err
    # it said "precision='bf16', compile=None, fused=None need CUDA": settings never given
    assert err.startswith(
        "clir: error: precision='bf16' (--precision bf16, or precision: bf16 in a config) needs CUDA, "
        "got device 'cpu'"
    )
    assert "compile=" not in err and "fused=" not in err


# --------------------------------------------------------------------------------------- guard


def test_kendall_taus_by_hand():
    ref = [
        np.arange(10.0),
        np.array([3.0, 2.0, 1.0]),
        np.array([1.0, 1.0]),
        np.array([5.0]),
        np.array([1.0, 2.0]),
    ]
    swapped = np.arange(10.0)
    swapped[[3, 4]] = swapped[[4, 3]]  # one discordant pair of 45
    cand = [
        swapped,
        np.array([30.0, 20.0, 10.0]),
        np.array([7.0, 7.0]),
        np.array([0.0]),
        np.array([4.0, 4.0]),
    ]
    np.testing.assert_allclose(kendall_taus(ref, cand), [43 / 45, 1.0, 1.0, 1.0, 0.0])


def test_precision_guard_logic():
    ref = [np.linspace(0, 1, 20), np.linspace(1, 0, 30)]
    same_order = [r * 2 + 0.1 for r in ref]  # a monotone change: the rankings are equal
    result = precision_guard(ref, same_order)
    assert result.passed and result.min_tau == pytest.approx(1.0) and result.metric_delta is None
    # one adjacent swap in 20 candidates: tau = 1 - 2/190 = 0.98947 < 0.99
    swapped = [ref[0].copy(), ref[1]]
    swapped[0][[7, 8]] = swapped[0][[8, 7]]
    result = precision_guard(ref, swapped)
    assert not result.passed and result.min_tau == pytest.approx(188 / 190)
    # the same swap among 30 candidates (tau 1 - 2/435 = 0.9954) passes the tau test ...
    swapped30 = [ref[0], ref[1].copy()]
    swapped30[1][[7, 8]] = swapped30[1][[8, 7]]
    assert precision_guard(ref, swapped30).passed

    # ... and fails when the measure moves by more than 0.002
    def metric(scores):
        return 0.5 if scores is ref else 0.5025

    result = precision_guard(ref, swapped30, metric=metric)
    assert not result.passed and result.metric_delta == pytest.approx(0.0025)
    assert precision_guard(ref, swapped30, metric=lambda s: 0.5 if s is ref else 0.5015).passed


# ----------------------------------------------------------------------------------------- CUDA


@cuda
def test_cuda_fast_path_ranks_as_the_cpu_does(tmp_path):
    space = ToySpace()
    train, qrels = varied_data(seed=1, n_queries=30)
    test, test_qrels = varied_data(seed=4, n_queries=40)
    path = Trainer(tiny_config(), metric=map_metric).fit(train, None, qrels, tmp_path / "ckpt", space=space)
    cpu = rerank(path, test, space=space, options=ScoringOptions(device="cpu"))
    fp32 = rerank(path, test, space=space, options=ScoringOptions(device="cuda", precision="fp32"))
    for qid, ranking in cpu.items():
        np.testing.assert_allclose(
            [fp32[qid][d] for d in ranking], list(ranking.values()), rtol=1e-4, atol=1e-5
        )
    members = load_models(path)
    reference = member_scores(members, test, space=space, options=ScoringOptions(device="cpu"))[0]

    def measure(scores):
        return map_metric(scores_to_run(test, scores), test_qrels)

    def scored(**options):
        return member_scores(members, test, space=space, options=ScoringOptions(device="cuda", **options))[0]

    # bf16 is taken exactly when it ranks the probed queries (all 40 here) as fp32 does
    fp32, bf16 = scored(precision="fp32", compile=False), scored(precision="bf16", compile=True)
    default = scored(compile=True)
    expected = bf16 if precision_guard(fp32, bf16).passed else fp32
    for got, want in zip(default, expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    # and the default run stays within the guard of the CPU's fp32 run
    guard = precision_guard(reference, default, metric=measure)
    assert guard.passed, guard


@cuda
@pytest.mark.parametrize(("fused", "precision"), [(None, "auto"), (False, "fp32"), (None, "bf16")])
def test_a_cuda_rerank_in_parts_writes_the_file_of_the_whole_rerank(tmp_path, monkeypatch, fused, precision):
    # documents of 1 to 150 tokens, batches of 16: batches of several widths. A chunk's pairs are
    # scored at the widths they have among all pairs, in batches of the same size, so the fused
    # kernel's, eager fp32's and bf16's scores are the whole rerank's, bit for bit
    data = _out_of_order(varied_data(seed=7, n_queries=14, n_docs=60, depth=30)[0])
    rng = np.random.default_rng(7)
    for texts in (data.doc_src, data.doc_en):
        for docno, tokens in texts.items():
            texts[docno] = (tokens * 150)[: int(rng.integers(1, 151))]
    config = load_config(CONFIGS / "reranker-knrm.yaml")
    models = [_untrained(config, seed) for seed in (0, 1)]
    options = ScoringOptions(device="cuda", batch_size=16, precision=precision, fused=fused)
    kwargs = {"space": ToySpace(), "run": _deeper_run(data), "options": options}
    whole, parts = tmp_path / "whole.run", tmp_path / "parts.run"
    write_run(whole, rerank_arrays(models, data, **kwargs), workers=0)
    monkeypatch.setattr(ensemble_module, "CHUNK_PAIRS", 50)  # the default on CUDA: chunks
    got = list(rerank_parts(models, data, **kwargs))
    assert len(got) > 1  # several parts (about a part per 50 of the pairs)
    write_run(parts, got, workers=0)
    assert parts.read_bytes() == whole.read_bytes()


# ---------------------------------------------------------------------------------- fused kernel

fused_runs = pytest.mark.skipif(
    fused_knrm.triton is None or not (torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1"),
    reason="needs Triton and CUDA (or TRITON_INTERPRET=1)",
)


@fused_runs
def test_bilingual_model_scores_alike_with_the_fused_kernel():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    data, _ = varied_data(seed=5, n_queries=4)
    space = ToySpace()
    config = tiny_config()
    config.model.interaction_kwargs = {"window": 6}
    vocab = Vocabulary.build([data])
    model = build_reranker(config, vocab.embedding_matrix(space), 1, seed=0).to(device)
    batch = Tensorizer(vocab, data, 5, 40).gather(Tensorizer(vocab, data, 5, 40).candidates()).to(device)
    assert batch.d_src.tokens.shape[1] > 6  # the documents are longer than a window: the kernel runs
    with torch.inference_mode():
        plain = model.eval()(batch)
        model.fused_kernel = True
        fast = model(batch)
    np.testing.assert_allclose(fast.cpu().numpy(), plain.cpu().numpy(), rtol=1e-3, atol=1e-4)
    if torch.cuda.is_available():  # the scorer switches the kernel on for its batches and back off
        tz = Tensorizer(vocab, data, 5, 40)
        model.fused_kernel = False
        options = ScoringOptions(device="cuda", precision="fp32", fused=True).resolve()
        scored = score_pairs(model, tz, tz.candidates(), options)
        assert model.fused_kernel is False
        np.testing.assert_allclose(scored.cpu().numpy(), plain.cpu().numpy(), rtol=1e-3, atol=1e-4)
