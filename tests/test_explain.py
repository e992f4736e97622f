"""``clir explain``'s numbers: what its shares and contributions say of the model's score."""

from __future__ import annotations

import math

import pytest
import torch

from clir.pipeline.explain import PairExplanation, explain_pair, signed_shares


def test_shares_keep_the_sign_of_each_contribution():
    """An input that lowers the score (positive value, negative weight) had shown a positive
    share (|c| / sum |c|): on runs/default's en-sw Q06001001 / B06C024V026, src_src 0.9374 with
    weight -1.23 (contribution -1.15) printed as 12.8%, read as raising the score."""
    assert signed_shares([2.0, -1.0, 1.0]) == [0.5, -0.25, 0.25]
    assert signed_shares([0.0, 0.0]) == [0.0, 0.0]
    shares = signed_shares([0.3, -1.15, 0.02])
    assert sum(abs(s) for s in shares) == pytest.approx(1.0) and shares[1] < 0


def test_explanation_carries_contributions_and_bias_that_add_up_to_the_score():
    explained = PairExplanation(
        "q1", "d1", 1, 0.5, {"a": 1.0, "b": 2.0}, {"a": 0.25, "b": -0.75}, {}, None,
        contributions={"a": 1.5, "b": -4.5}, bias=3.5,
    )  # fmt: skip
    assert explained.bias + sum(explained.contributions.values()) == pytest.approx(explained.score)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: the rerank moves the model there")
def test_explain_on_a_cuda_machine(tmp_path):
    """On a CUDA machine explain failed for every model of ``device: auto`` (the default): the
    rerank that ranks the pair as the run does moved the model to the GPU, and the pair's batch,
    made on the CPU, met it there ("Expected all tensors to be on the same device")."""
    from test_union import tiny_reranker_config, tiny_world

    from clir.pipeline.features import train_reranker
    from clir.training import TrainConfig

    collection, tables, space = tiny_world()
    tables[0].save(tmp_path / "tables" / "en-doc")
    tables[1].save(tmp_path / "tables" / "doc-en")
    config = TrainConfig.from_dict({**tiny_reranker_config().to_dict(), "device": "auto"})
    model = train_reranker(config, collection, space, tmp_path / "model", tables=tables)
    query = collection.split("test")[0]
    docno = next(iter(collection.qrels[query.qid]))
    explained = explain_pair(model, collection, space, query.qid, docno, tables_dir=tmp_path / "tables")
    assert explained.rank >= 1 and math.isfinite(explained.score) and explained.matrices
    assert explained.bias + sum(explained.contributions.values()) == pytest.approx(explained.score)
