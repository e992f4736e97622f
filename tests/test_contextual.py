"""Tests of clir.embeddings.contextual with a tiny random BERT built in the test (no download)."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from clir.embeddings.base import TokenVectors  # noqa: E402
from clir.embeddings.contextual import ContextualEncoder  # noqa: E402
from clir.errors import DataNotFoundError  # noqa: E402

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "mungu", "ni", "upendo", "watoto", "wa", "##to", "ng"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny-bert")
    vocab_file = path / "vocab.txt"
    vocab_file.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    if "vocab" in inspect.signature(transformers.BertTokenizerFast.__init__).parameters:  # transformers >= 5
        tokenizer = transformers.BertTokenizerFast(vocab={w: i for i, w in enumerate(VOCAB)})
    else:
        tokenizer = transformers.BertTokenizerFast(vocab_file=str(vocab_file))
    assert tokenizer.tokenize("ngto") == ["ng", "##to"]
    tokenizer.save_pretrained(str(path))
    config = transformers.BertConfig(
        vocab_size=len(VOCAB),
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
    )
    torch.manual_seed(0)
    transformers.BertModel(config).eval().save_pretrained(str(path))
    return path


def test_encode_mean_pools_subword_pieces(checkpoint):
    encoder = ContextualEncoder(checkpoint, normalize=False)
    assert encoder.dim == 16
    words = ["mungu", "ni", "ngto", "upendo"]  # "ngto" -> "ng" "##to"
    (vectors,) = encoder.encode([words])
    assert vectors.shape == (4, 16) and vectors.dtype == np.float32
    # independent computation: run the model on the pieces and average by hand
    ids = [VOCAB.index(t) for t in ["[CLS]", "mungu", "ni", "ng", "##to", "upendo", "[SEP]"]]
    model = transformers.BertModel.from_pretrained(str(checkpoint)).eval()
    with torch.no_grad():
        hidden = model(torch.tensor([ids])).last_hidden_state[0].numpy()
    np.testing.assert_allclose(vectors[0], hidden[1], atol=1e-5)
    np.testing.assert_allclose(vectors[2], hidden[3:5].mean(axis=0), atol=1e-5)
    np.testing.assert_allclose(vectors[3], hidden[5], atol=1e-5)


def test_batches_padding_and_lookup(checkpoint):
    encoder = ContextualEncoder(checkpoint, batch_size=2)
    batch = [["mungu"], ["watoto", "wa", "mungu"], ["upendo", "ni"]]
    out = encoder.encode(batch)
    assert [v.shape for v in out] == [(1, 16), (3, 16), (2, 16)]
    np.testing.assert_allclose(np.linalg.norm(out[1], axis=1), 1.0, atol=1e-5)
    alone = encoder.encode([batch[1]])[0]  # padding in a batch must not change a sequence's vectors
    np.testing.assert_allclose(out[1], alone, atol=1e-5)
    vectors, oov = encoder.lookup("sw", batch[1])
    np.testing.assert_allclose(vectors, alone, atol=1e-6)
    assert not oov.any()
    assert isinstance(encoder, TokenVectors)


def test_truncated_words_are_zero_and_oov(checkpoint):
    encoder = ContextualEncoder(checkpoint, max_length=4)  # [CLS] + 2 pieces + [SEP]
    vectors, oov = encoder.lookup("sw", ["mungu", "ni", "upendo", "wa"])
    assert oov.tolist() == [False, False, True, True]
    assert not vectors[2:].any()


def test_missing_checkpoint(tmp_path):
    with pytest.raises(DataNotFoundError, match="nothing is downloaded"):
        ContextualEncoder(tmp_path / "absent")
