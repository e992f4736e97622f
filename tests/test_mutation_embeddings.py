"""Tests added by a mutation-testing hunt over clir.embeddings and clir.datasets.

Each test pins a behaviour that a small change of the source (a mutation) had left unnoticed by
the rest of the suite: the docstring names the mutation it kills. Expected values are computed
by hand in the comments (2-D unit vectors, small counts), not by the code under test.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from clir.datasets import KeywordSelector, build_pseudo_collection, passage_range
from clir.datasets.distractors import BigramSampler, distractor_docnos
from clir.embeddings import (
    AlignConfig,
    EmbeddingConfig,
    SharedSpace,
    align,
    evaluate_bli,
    map_to_pivot,
    normalize_vectors,
    pseudo_bilingual_corpus,
    seed_from_tables,
    split_pairs,
    translate,
)
from clir.embeddings import joint as joint_module
from clir.embeddings.align import induce_dictionary, validation_criterion
from clir.embeddings.bli import bli_predictions
from clir.embeddings.space import SubwordVectors
from clir.embeddings.vectors_io import make_keyed_vectors
from clir.errors import ConfigError
from clir.text import get_analyzer
from clir.translation.table import TranslationTable
from clir.types import ParallelPair


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _at(*degrees: float) -> np.ndarray:
    """Unit vectors of the plane at the given angles."""
    return np.array([[math.cos(math.radians(a)), math.sin(math.radians(a))] for a in degrees], np.float32)


# --- CSLS by hand -------------------------------------------------------------------------------

# sources s0 = (1, 0), s1 = (0.8, 0.6); targets t0 = (1, 0), t1 = (0, 1), t2 = (0.6, 0.8)
# cosines: s0 -> (1, 0, 0.6); s1 -> (0.8, 0.6, 0.96)
SRC = np.array([[1.0, 0.0], [0.8, 0.6]], np.float32)
TGT = np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]], np.float32)


def test_csls_scores_and_ranking_by_hand_for_k_1_and_k_2():
    """Kills: ``translate`` returning ``2 cos - r_S`` without subtracting ``r_T`` (the ranking
    is the same, the scores are not CSLS), and a neighbourhood of ``k + 1`` in the r terms."""
    # k = 1: r_T(s) = (1, 0.96); r_S(t) = (1, 0.6, 0.96)
    #   s0: 2 - 1 - 1 = 0;       0 - 1 - 0.6 = -1.6;      1.2 - 1 - 0.96 = -0.76
    #   s1: 1.6 - .96 - 1 = -.36; 1.2 - .96 - .6 = -.36;  1.92 - .96 - .96 = 0
    scores, top = translate(SRC, TGT, 3, method="csls", csls_k=1)
    assert top.tolist() == [[0, 2, 1], [2, 0, 1]]  # s1's tie at -0.36: t0 before t1
    np.testing.assert_allclose(scores, [[0, -0.76, -1.6], [0, -0.36, -0.36]], atol=1e-6)
    # k = 2: r_T(s) = (0.8, 0.88); r_S(t) = (0.9, 0.3, 0.78)
    #   s0: 2 - .8 - .9 = .3;    0 - .8 - .3 = -1.1;      1.2 - .8 - .78 = -.38
    #   s1: 1.6 - .88 - .9 = -.18; 1.2 - .88 - .3 = .02; 1.92 - .88 - .78 = .26
    scores, top = translate(SRC, TGT, 3, method="csls", csls_k=2)
    assert top.tolist() == [[0, 2, 1], [2, 1, 0]]  # the hub t0 falls behind t1 for s1
    np.testing.assert_allclose(scores, [[0.3, -0.38, -1.1], [0.26, 0.02, -0.18]], atol=1e-6)
    # nearest neighbour is plain cosine: s1 -> t2 (0.96), t0 (0.8), t1 (0.6)
    scores, top = translate(SRC, TGT, 3, method="nn")
    assert top.tolist() == [[0, 2, 1], [2, 0, 1]]
    np.testing.assert_allclose(scores, [[1, 0.6, 0], [0.96, 0.8, 0.6]], atol=1e-6)


# --- alignment ------------------------------------------------------------------------------------

# source 0 at 14°, 1 at 100°, 2-4 (rarer words) right on target 0; targets at 0° and 30°.
# With csls_k = 1 and the whole source vocabulary as background: r_S(t0) = 1, r_S(t1) = cos 16°,
# so source 0 scores 2 cos 14° - 1 = 0.941 against t0 and cos 16° = 0.961 against t1: CSLS
# translates it to t1, nearest neighbour to t0.
HUB_SOURCE = _at(14, 100, 0, 0, 0)
HUB_TARGET = _at(0, 30)


def test_validation_criterion_is_the_csls_translation_cosine_of_the_first_rank_words():
    """Kills: the criterion by nearest neighbour instead of CSLS, and averaging over every
    source word instead of the ``rank`` most frequent."""
    got = validation_criterion(HUB_SOURCE, HUB_TARGET, rank=1, csls_k=1)
    assert got == pytest.approx(math.cos(math.radians(16)), abs=1e-6)  # not cos 14° (NN)


def test_refinement_keeps_the_seed_pairs_with_keep_seed():
    """Kills: refinement dictionaries that drop the seed pairs despite ``keep_seed``."""
    rng = np.random.default_rng(0)
    target = _unit(rng.normal(size=(40, 6))).astype(np.float32)
    source = target.copy()
    seed = np.array([[0, 5], [2, 7], *([i, i] for i in range(10, 20))])  # two of them wrong
    config = AlignConfig(refine_iterations=1, max_rank=40, validation_rank=40, csls_k=3)
    first = align(source, target, seed, AlignConfig(refine_iterations=0, csls_k=3), progress=False)
    induced = induce_dictionary(source @ first.rotation, target, 40, 3)
    union = np.unique(np.concatenate([induced, seed]), axis=0)
    assert len(union) > len(induced)  # the wrong seed pairs are not induced
    with_seed = align(source, target, seed, config, progress=False)
    assert with_seed.history[1]["pairs"] == len(union)
    without = align(
        source, target, seed, AlignConfig(**{**config.to_dict(), "keep_seed": False}), progress=False
    )
    assert without.history[1]["pairs"] == len(induced)


def test_map_to_pivot_reads_seed_pairs_as_source_row_then_pivot_row():
    """Kills: seed pairs turned into ``(pivot row, source row)`` (invisible while every seed
    word sits at the same row on both sides)."""
    rng = np.random.default_rng(1)
    target = rng.normal(size=(30, 5))
    perm = rng.permutation(30)  # source word i is the translation of target word perm[i]
    q, _ = np.linalg.qr(rng.normal(size=(5, 5)))
    source = target[perm] @ q.T  # source @ q == target[perm]
    en = [f"e{i}" for i in range(30)]
    xx = [f"x{i}" for i in range(30)]
    vectors = {"en": make_keyed_vectors(en, target), "xx": make_keyed_vectors(xx, source)}
    seeds = {"xx": [(xx[i], en[perm[i]]) for i in range(10)]}
    space = map_to_pivot(vectors, seeds, AlignConfig(refine_iterations=0), progress=False)
    np.testing.assert_allclose(space.array("xx"), space.array("en")[perm], atol=1e-4)


def test_map_to_pivot_applies_given_subword_means_before_its_own_centring():
    """Kills: the subword means stacked as ``[this centring, the given ones]``: an unseen
    word's vector must be normalised in the order its vocabulary was, ``unit(unit(unit(raw) -
    m_given) - m_new)`` (unit is not linear: the order matters)."""
    rng = np.random.default_rng(2)
    ngrams = rng.normal(size=(64, 4)).astype(np.float32)
    given = np.array([0.5, -0.2, 0.1, 0.3], np.float32)
    kv = make_keyed_vectors(["alpha", "beta", "gamma"], rng.normal(loc=1.0, size=(3, 4)))
    subwords = {"en": SubwordVectors(ngrams, 3, 4, given)}
    space = map_to_pivot({"en": kv}, subwords=subwords, progress=False)
    raw = SubwordVectors(ngrams, 3, 4).vector("unseen")  # unit(raw), no centring
    _, m_new = normalize_vectors(kv.vectors, centre=True)
    expected = _unit(_unit(raw - given) - m_new)
    got, oov = space.lookup("en", ["unseen"])
    assert not oov.any()
    np.testing.assert_allclose(got[0], expected, atol=1e-5)


# --- BLI ----------------------------------------------------------------------------------------


def _hub_space() -> SharedSpace:
    return SharedSpace(
        {
            "xx": make_keyed_vectors([f"s{i}" for i in range(5)], HUB_SOURCE),
            "en": make_keyed_vectors(["t0", "t1"], HUB_TARGET),
        }
    )


def test_bli_csls_hub_term_is_over_the_whole_source_vocabulary():
    """Kills: the targets' ``r_S`` computed over the evaluated gold words only (in
    :func:`bli_predictions` and :meth:`SharedSpace.translate`): over s0 alone r_S(t0) = cos 14°
    and r_S(t1) = cos 16°, and s0 would go to t0."""
    space = _hub_space()
    rows = {r.method: r for r in evaluate_bli(space, "xx", "en", {"s0": "t1"}, csls_k=1)}
    assert (rows["csls"].queries, rows["csls"].p_at_1) == (1, 1.0)
    assert rows["nn"].p_at_1 == 0.0  # nearest neighbour: t0
    assert [w for w, _ in space.translate(["s0"], "xx", "en", k=2, csls_k=1)[0]] == ["t1", "t0"]


def test_bli_counts_a_hit_at_its_first_correct_rank_and_p_at_1_only_at_rank_0():
    """Kills: P@1 counting a hit at rank 1 (``hit_rank <= k``), the last correct candidate
    taken as the hit (no ``break``), and a gold word counted though none of its translations
    is in the target vocabulary."""
    # targets t0..t3 at 0°, 10°, 20°, 90°; source a at 12° (NN order t1, t2, t0, t3),
    # source b at 85° (t3, t2, t1, t0)
    space = SharedSpace(
        {
            "en": make_keyed_vectors(["t0", "t1", "t2", "t3"], _at(0, 10, 20, 90)),
            "xx": make_keyed_vectors(["a", "b", "c"], _at(12, 85, 45)),
        }
    )
    gold = {"a": {"t2", "t0"}, "b": {"t3"}, "c": {"absent"}}
    pred = bli_predictions(space, "xx", "en", gold, method="nn", k=4)
    assert pred.words == ["a", "b"]  # c's only translation has no vector: not evaluated
    assert pred.predictions == [["t1", "t2", "t0", "t3"], ["t3", "t2", "t1", "t0"]]
    assert pred.hit_rank.tolist() == [1, 0]  # a's first correct candidate is t2, at rank 1
    assert pred.precision(1) == 0.5 and pred.precision(2) == 1.0
    row = evaluate_bli(space, "xx", "en", gold, methods=("nn",))[0]
    assert (row.queries, row.p_at_1, row.p_at_5, row.gold_words) == (2, 0.5, 1.0, 3)


# --- seeds ----------------------------------------------------------------------------------------


def test_seed_from_tables_keeps_a_probability_equal_to_min_prob_and_checks_backward_prob():
    """Kills: ``min_prob`` as a strict bound (the docstring: probabilities "reach" it), and a
    backward probability left unchecked."""
    forward = TranslationTable.from_weights(
        [("a", "x", 0.5), ("a", "y", 0.25), ("a", "z", 0.25), ("b", "w", 0.9), ("b", "v", 0.1)], "sw", "en"
    )
    backward = TranslationTable.from_weights(
        [("x", "a", 1.0), ("w", "b", 0.3), ("w", "c", 0.25), ("w", "d", 0.25), ("w", "e", 0.2)], "en", "sw"
    )
    # a -> x at exactly 0.5 and back at 1.0: kept; b -> w at 0.9 but w -> b only at 0.3: dropped
    assert seed_from_tables(forward, backward, min_prob=0.5) == [("a", "x")]
    assert seed_from_tables(forward, backward, min_prob=0.3) == [("a", "x"), ("b", "w")]


def test_split_pairs_rounds_the_held_out_share_and_ignores_the_pairs_order():
    """Kills: ``int`` for ``round`` (0.3 of 9 words is 2.7: 3 held out, not 2), and a draw
    that depends on the order in which the pairs are listed."""
    pairs = [(f"s{i}", f"t{i}") for i in range(9)]
    train, test = split_pairs(pairs, 0.3, seed=4)
    assert len(test) == 3 and len(train) == 6
    shuffled = pairs[:]
    random.Random(0).shuffle(shuffled)
    _, test_shuffled = split_pairs(shuffled, 0.3, seed=4)
    assert sorted(test_shuffled) == sorted(test)


# --- the joint corpus -------------------------------------------------------------------------------


def test_ratio_merge_interleaves_by_the_centre_of_each_tokens_share():
    """Kills: positions ``i / len`` instead of ``(i + 0.5) / len`` (on either side): three pivot
    tokens (centres 1/6, 1/2, 5/6) and one other (1/2, after the pivot's on a tie) give a, b,
    x, c."""
    corpus = pseudo_bilingual_corpus({"sw": [(["a", "b", "c"], ["x"])]}, mix="ratio")
    assert corpus == [["en:a", "en:b", "sw:x", "en:c"]]
    # one pivot token (1/2) among three others (1/6, 1/2, 5/6): x, a, y, z
    corpus = pseudo_bilingual_corpus({"sw": [(["a"], ["x", "y", "z"])]}, mix="ratio")
    assert corpus == [["sw:x", "en:a", "sw:y", "sw:z"]]


def test_monolingual_text_is_tagged_with_its_own_language_and_shuffled_in():
    """Kills: monolingual text tagged with the pivot's code, and a final order that is not
    shuffled (the monolingual sentences all after the pairs)."""
    parallel = {"sw": [([f"e{i}"], [f"s{i}"]) for i in range(20)]}
    monolingual = {"sw": [[f"m{i}"] for i in range(20)], "en": [["heaven"]]}
    corpus = pseudo_bilingual_corpus(parallel, monolingual, seed=3)
    assert ["sw:m0"] in corpus and ["en:heaven"] in corpus and ["en:m0"] not in corpus
    single = [i for i, sentence in enumerate(corpus) if len(sentence) == 1]
    assert len(single) == 21 and single != list(range(20, 41))


def test_train_joint_seeds_the_corpus_with_the_configs_seed(monkeypatch):
    """Kills: the corpus shuffled with a fixed seed instead of ``config.seed``."""
    seen = []

    def fake_train(corpus, config, **_):
        seen.append(corpus)
        words = sorted({t for s in corpus for t in s})
        return make_keyed_vectors(words, np.random.default_rng(0).normal(size=(len(words), 4)))

    monkeypatch.setattr(joint_module, "train_vectors", fake_train)
    parallel = {"sw": [([f"e{i}", "x"], [f"s{i}", "y"]) for i in range(10)]}
    config = EmbeddingConfig(method="word2vec", dim=4, min_count=1, epochs=1, seed=7)
    joint_module.train_joint(parallel, config=config, progress=False)
    assert seen[0] == pseudo_bilingual_corpus(parallel, seed=7)
    assert seen[0] != pseudo_bilingual_corpus(parallel, seed=0)


# --- datasets: passages, the keyword recipe ---------------------------------------------------------


def test_passage_range_accepts_only_the_first_verse_of_a_bin():
    """Kills: the bin-start check written ``first.verse % k == 0`` (V005 taken as a start of a
    5-verse passage and V002 as well)."""
    assert passage_range("B40C005V006", 5) == range(6, 11)
    assert passage_range("B40C005V001", 1) == range(1, 2)
    for docno in ("B40C005V005", "B40C005V002", "B40C005V010"):
        with pytest.raises(ConfigError, match="does not start a passage of 5 verses"):
            passage_range(docno, 5)


KEYWORD_TEXTS = ["the king's ark", "a king and an ark", "lamb sleeps", "lamb sleep", "x"]  # N = 5


def test_keyword_recipe_possessives_three_letter_words_ties_and_one_word_per_stem():
    """Kills: a possessive ``'s`` left on (``king's`` no candidate), ``min_length`` as a strict
    bound (``ark`` has exactly 3 letters), ties of idf broken by the later word, and a stem
    counted once per occurrence instead of once (first surface form wins)."""
    selector = KeywordSelector(get_analyzer("en")).fit(KEYWORD_TEXTS)
    assert [selector.df_[s] for s in ("king", "ark", "lamb", "sleep")] == [2, 2, 2, 2]
    assert selector.select("The king's ark") == ["king's", "ark"]
    # four stems of one idf, log(5/2): m = 4 -> k = 2, the first two in verse order
    assert selector.select("lamb sleeps ark king") == ["lamb", "sleeps"]
    # lamb/lambs/lamb are one stem: m = 2 candidates, lamb (first form) and sleeps
    assert selector.select("lamb lambs lamb sleeps") == ["lamb", "sleeps"]


# --- datasets: distractors ------------------------------------------------------------------------------


def test_bigram_sampler_draws_every_token_and_falls_back_to_the_unigram_after_a_last_token():
    """Kills: the unigram draw with ``searchsorted(side="left")`` (a draw equal to a cumulative
    count picks the token before: "b" of "a b" is never drawn), the bigram draw without its
    row's base (after "b" comes the successor of row 0: "b"), and the bigram used for a token
    with no successor (an index past the successors)."""
    rng = np.random.default_rng(0)
    unigram = BigramSampler(0.0).fit(["a b"]).sample(200, rng)
    assert {t for text in unigram for t in text.split()} == {"a", "b"}
    texts = BigramSampler(1.0).fit(["a b c"]).sample(300, rng)
    pairs = {(x, y) for text in texts for x, y in zip(text.split(), text.split()[1:], strict=False)}
    assert {(x, y) for x, y in pairs if x in "ab"} == {("a", "b"), ("b", "c")}
    assert {y for x, y in pairs if x == "c"} == {"a", "b", "c"}  # no successor: the unigram


def test_distractor_docnos_are_padded_to_the_width_of_n():
    """Kills: the width taken from ``n - 1`` (``Z1``..``Z10`` instead of ``Z01``..``Z10``)."""
    assert distractor_docnos(10)[:2] == ["Z01", "Z02"] and distractor_docnos(10)[-1] == "Z10"
    assert distractor_docnos(9)[-1] == "Z9"


# --- datasets: pseudo-queries -----------------------------------------------------------------------


def _pairs(n: int, empty: set[int] = frozenset()) -> list[ParallelPair]:
    words = ["shepherd", "sheep", "water", "river", "stone", "bread"]
    return [
        ParallelPair(
            f"p{i:02d}",
            f"the {words[i % 6]} and the {words[(i + 1) % 6]} near {words[(i + 2) % 6]}",
            "" if i in empty else f"t{i}",
        )
        for i in range(n)
    ]


def test_pseudo_holdout_rounds_its_share_and_follows_the_seed():
    """Kills: ``int`` for ``round`` in the held-out count (0.3 of 9 passages: 3, not 2), held-out
    passages drawn with a fixed seed, and the query draw with a fixed seed."""
    pairs = _pairs(45)  # 9 windows of 5
    built = {seed: build_pseudo_collection(pairs, "xx", passage_verses=5, holdout=0.3, n_dev=0, seed=seed)
             for seed in (1, 2)}  # fmt: skip
    assert [len(b.documents) for b in built.values()] == [3, 3]
    assert {d.docno for d in built[1].documents} != {d.docno for d in built[2].documents}
    assert len(built[1].parallel) == 30
    drawn = {seed: build_pseudo_collection(pairs, "xx", passage_verses=5, n_train=4, n_dev=0, seed=seed)
             for seed in (1, 2)}  # fmt: skip
    assert [q.qid for q in drawn[1].all_queries()] != [q.qid for q in drawn[2].all_queries()]


def test_pseudo_a_pair_without_document_text_is_no_query_and_no_part_of_a_passage():
    """Kills: a query made from a pair whose document-language text is empty (its grade-2
    passage holds nothing of it, or is no document at all), and the empty text joined into
    its passage (a double space)."""
    pairs = _pairs(12, empty={4, 7})
    single = build_pseudo_collection(pairs, "xx", passage_verses=1, n_dev=0)
    docnos = {d.docno for d in single.documents}
    assert docnos == {p.pair_id for p in pairs} - {"p04", "p07"}
    assert all(set(judged) <= docnos for judged in single.qrels.values())
    assert not {"Qp04", "Qp07"} & {q.qid for q in single.all_queries()}
    windows = build_pseudo_collection(pairs, "xx", passage_verses=3, n_dev=0)
    assert [d.text for d in windows.documents] == ["t0 t1 t2", "t3 t5", "t6 t8", "t9 t10 t11"]
