"""Scoring candidates with a trained reranker and turning scores into runs."""

from __future__ import annotations

import itertools
import time
import warnings
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace

import numpy as np
import torch
from scipy.stats import kendalltau
from torch import nn

from clir.errors import ConfigError
from clir.formats import RunArrays, ranked
from clir.progress import progress_bar
from clir.rerankers import fused_knrm
from clir.rerankers.encoding import FrozenEmbedding
from clir.rerankers.knrm import KNRM
from clir.training.config import PRECISIONS
from clir.training.data import CandidateIndex, PairIndex, RerankData, Tensorizer, check_finite
from clir.training.pooled import PooledCache
from clir.types import Run


def set_embeddings(model: nn.Module, matrix: torch.Tensor | None) -> None:
    """Lend a frozen embedding matrix to a reranker (``None`` takes it back).

    The matrix is built for the vocabulary of the data being scored, so one trained model
    scores data of any vocabulary (and language) of the shared space. The matrix goes to the
    model's device first, so its unit-normalised copy is made there (on a GPU, rather than on
    the host and then copied).
    """
    if matrix is None:
        model.embedding = None
        return
    expected = getattr(model, "embedding_dim", None)
    if expected is not None and getattr(model, "components", True) and matrix.shape[1] != expected:
        raise ConfigError(
            f"the space has {matrix.shape[1]} dimensions, the model was trained on {expected}: "
            "pass the space it was trained with"
        )
    device = next(iter(model.parameters()), torch.empty(0)).device
    model.embedding = FrozenEmbedding(matrix.to(device))


def resolve_device(device: str) -> torch.device:
    """``"cpu"``, ``"cuda"`` or ``"auto"`` (CUDA when available) as a :class:`torch.device`.

    Raises:
        ConfigError: On another name, or ``"cuda"`` without a CUDA device.
    """
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device='cuda' but torch sees no CUDA device; use 'cpu' or 'auto'")
    if device not in ("cpu", "cuda"):
        raise ConfigError(f"unknown device {device!r}; expected 'cpu', 'cuda' or 'auto'")
    return torch.device(device)


CPU_BATCH = 256
"""Default pairs per forward pass on a CPU (the batch size every CPU result was made with)."""
CUDA_BATCH = 8192
"""Default pairs per forward pass on CUDA."""
COMPILE_MIN_PAIRS = 20_000_000
"""Pairs from which ``torch.compile`` pays for its compilation on CUDA: on an H200 compiling the
default model took 15–19 s in a fresh process (1.9 s in a second one that found the first one's
inductor cache on disk) and saved about 0.9 µs per pair over eager bf16 (0.16 µs over the fused
kernel), so it pays from about 20M pairs in one process (README, Speed)."""
WIDTH_STEP = 32
"""On CUDA, document widths are rounded up to a multiple of this, or to the longest document (few
distinct shapes to compile)."""
GUARD_MIN_TAU = 0.99
"""Least per-query Kendall τ of a bf16 ranking against the fp32 one."""
GUARD_MAX_METRIC_DELTA = 0.002
"""Largest difference of a run measure (MAP) between the bf16 and the fp32 run."""
GUARD_QUERIES = 64
"""Queries scored in both precisions when ``precision="auto"`` decides on CUDA."""


@dataclass(frozen=True)
class ScoringOptions:
    """How candidates are scored: where, in what batches, at what precision, compiled or not.

    Attributes:
        device: ``"cpu"``, ``"cuda"`` or ``"auto"``; ``None``: the model's config decides.
        batch_size: Pairs per forward pass; ``None``: :data:`CPU_BATCH` or :data:`CUDA_BATCH`.
        precision: One of :data:`PRECISIONS`.
        compile: ``torch.compile`` the model (CUDA only); ``None``: when at least
            :data:`COMPILE_MIN_PAIRS` pairs are scored.
        fused: Pool windowed K-NRM components with the fused Triton kernel
            (:mod:`clir.rerankers.fused_knrm`; CUDA only, then uncompiled; float32 sums of products
            split in bf16 halves, similarities within about 1e-5 of fp32, or with ``precision``
            ``"bf16"`` one bf16 product, as autocast multiplies); ``None``: on
            CUDA when Triton is there, the model has such a component and it is not compiled (for
            one process's scoring the kernel is the fastest path: README, Speed).

    Raises:
        ConfigError: On an unknown precision, a batch size below 1, or bf16 / compile on a CPU
            (checked by :meth:`resolve`).
    """

    device: str | None = None
    batch_size: int | None = None
    precision: str = "auto"
    compile: bool | None = None
    fused: bool | None = None

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise ConfigError(f"unknown precision {self.precision!r}; expected one of {list(PRECISIONS)}")
        if self.batch_size is not None and (isinstance(self.batch_size, bool) or self.batch_size < 1):
            raise ConfigError(f"batch_size must be a positive integer, got {self.batch_size!r}")
        if self.device == "cpu":
            self._check_cpu()

    def _check_cpu(self) -> None:
        wrong = [  # each with the CLI's option where it has one
            setting
            for setting, bad in (
                (
                    "precision='bf16' (--precision bf16, or precision: bf16 in a config)",
                    self.precision == "bf16",
                ),
                ("compile=True", bool(self.compile)),
                ("fused=True", bool(self.fused)),
            )
            if bad
        ]
        if wrong:
            hint = (
                " (--precision or the config's precision: fp32 or auto)" if self.precision == "bf16" else ""
            )
            raise ConfigError(
                f"{' and '.join(wrong)} {'needs' if len(wrong) == 1 else 'need'} CUDA, got device 'cpu'; "
                f"on a CPU scoring runs in fp32, uncompiled{hint}"
            )

    def resolve(self, default_device: str = "auto") -> ScoringOptions:
        """These options with the device, batch size and (except ``auto``) precision settled.

        Raises:
            ConfigError: On ``bf16``, ``compile=True`` or ``fused=True`` on a CPU, or ``cuda`` without CUDA.
        """
        device = resolve_device(self.device or default_device)
        cuda = device.type == "cuda"
        if not cuda:
            self._check_cpu()
        return replace(
            self,
            device=device.type,
            batch_size=self.batch_size or (CUDA_BATCH if cuda else CPU_BATCH),
            precision=self.precision if cuda else "fp32",
            compile=self.compile if cuda else False,
            fused=self.fused if cuda else False,
        )


def fusable(model: nn.Module, device: torch.device) -> bool:
    """Whether the fused kernel would pool some of ``model``'s components on ``device``: a
    windowed K-NRM with exact match that :func:`~clir.rerankers.fused_knrm.fused_pooling_supported`
    takes (for documents longer than a window), in a model that switches kernels (``fused_kernel``)."""
    return hasattr(model, "fused_kernel") and any(
        isinstance(m, KNRM)
        and m.exact_match
        and fused_knrm.fused_pooling_supported(m.window, m.window + 1, device, False)
        for m in model.modules()
    )


_COMPILED: weakref.WeakKeyDictionary[nn.Module, nn.Module] = weakref.WeakKeyDictionary()


def _compiled(model: nn.Module) -> nn.Module:
    """``torch.compile(model)``, made once per model and process (shapes are few: see :data:`WIDTH_STEP`)."""
    if model not in _COMPILED:
        _COMPILED[model] = torch.compile(model, dynamic=False)
    return _COMPILED[model]


PairScorer = Callable[..., torch.Tensor]
"""Scores pairs as :func:`score_pairs` does, with its arguments (another one may spread the
pairs over workers, e.g. :func:`clir.pipeline.parallel.pair_scorer`)."""


@torch.inference_mode()
def score_pairs(
    model: nn.Module,
    tensorizer: Tensorizer,
    index: PairIndex,
    options: ScoringOptions,
    progress: bool = False,
    timings: dict[str, float] | None = None,
    cache: PooledCache | None = None,
) -> torch.Tensor:
    """The model's score of each pair of ``index``, left on the model's device (eval mode).

    On a CPU the pairs are scored in order, each batch padded to its longest sequences (the
    results of every earlier version). On CUDA the tables and the pairs' positions are copied to
    the device once and batches are gathered there (no batch waits for a copy from the host);
    pairs go in order of document length, each batch padded to a multiple of :data:`WIDTH_STEP`
    and filled to the full batch size, so a compiled model meets a few shapes; bf16 runs under
    autocast.

    Args:
        model: Maps a :class:`~clir.rerankers.batch.BilingualBatch` to scores (B,).
        tensorizer: Built over the data to score.
        index: The pairs.
        options: Resolved options (:meth:`ScoringOptions.resolve`); ``precision`` ``fp32`` or ``bf16``.
        progress: Show a progress bar.
        timings: When given, seconds are added under ``"tensorize"`` (gathering batches),
            ``"transfer"`` (copying tables) and ``"score"`` (the forward passes), synchronising
            the device between them (slower: for measurements only).
        cache: The pooled kernel features of ``tensorizer``'s pairs, kept between calls
            (training's dev scoring: the same candidates after every epoch); the model is then
            not compiled.

    Returns:
        Float32 scores (n,) on the model's device, aligned with ``index``.
    """
    device = torch.device(options.device or "cpu")
    if not len(index):  # no query has a candidate (e.g. only stopwords): nothing to score
        return torch.empty(0, dtype=torch.float32, device=device)
    cuda = device.type == "cuda"
    size = int(options.batch_size or CPU_BATCH)
    clock = _Clock(timings, device)
    order = np.arange(len(index))
    starts = list(range(0, len(index), size))
    if cuda:  # by width, then document length: a batch's longest document is its last
        widths = index.width if index.width is not None else batch_widths(tensorizer, index, size)
        order = _width_order(widths, tensorizer.doc_lengths(index), tensorizer.max_doc_width)
        widths = widths[order]
        starts = _batch_starts(widths, size)
        with clock("transfer"):  # the tables and the pairs' positions copied once: no batch waits
            tensorizer.prepare(device)
            on_device = PairIndex(
                *(torch.from_numpy(a).to(device) for a in (index.query, index.doc, index.row))
            )
            order_on_device = torch.from_numpy(order).to(device)
    runner = _compiled(model) if options.compile and not options.fused and cache is None else model
    out = torch.empty(len(index), dtype=torch.float32, device=device)
    was_training, was_fused = model.training, getattr(model, "fused_kernel", None)
    model.eval()
    if was_fused is not None:
        model.fused_kernel = bool(options.fused)
    try:
        batches = list(zip(starts, [*starts[1:], len(index)], strict=True))
        for start, end in progress_bar(batches, desc="scoring", unit="batch", enabled=progress):
            chosen = order[start:end]
            with clock("tensorize"):
                if cuda:  # the batch filled to its size with its last pair
                    positions = order_on_device[start:end]
                    filled = torch.cat([positions, positions[-1:].expand(size - len(chosen))])
                    shape = (tensorizer.max_query_width, int(widths[start]))
                    batch = tensorizer.gather(on_device.take(filled), device, shape)
                    if cache is not None:  # the same filling, on the host: the cache's keys
                        pairs = index.take(np.concatenate([chosen, chosen[-1:].repeat(size - len(chosen))]))
                else:
                    positions = torch.from_numpy(chosen)
                    pairs = index.take(chosen)
                    batch = tensorizer.gather(pairs)
            with (
                clock("score"),
                torch.autocast(device.type, torch.bfloat16, enabled=options.precision == "bf16"),
            ):
                scores = runner(batch) if cache is None else runner(batch, cache.lookup(pairs, model))
                out[positions] = scores[: len(chosen)].float()
    finally:
        model.train(was_training)
        if was_fused is not None:
            model.fused_kernel = was_fused
    return out


def batch_widths(tensorizer: Tensorizer, index: PairIndex, size: int) -> np.ndarray:
    """The padded document width of each pair of ``index`` as :func:`score_pairs` scores them
    on CUDA: the pairs in order of document length (stable), in batches of ``size``, each padded
    to its longest document rounded up to :data:`WIDTH_STEP` (at most the longest of all).
    Scoring a subset of the pairs at these widths (``PairIndex.width``) scores each pair in a
    batch of the same shape as scoring them all does."""
    lengths = tensorizer.doc_lengths(index)  # as 16-bit numbers where they fit: numpy's radix sort
    short = lengths.max(initial=0) < 2**16
    order = np.argsort(lengths.astype(np.uint16) if short else lengths, kind="stable")
    last = lengths[order][np.minimum(np.arange(size, len(index) + size, size), len(index)) - 1]
    per_batch = np.minimum(-(-np.maximum(last, 1) // WIDTH_STEP) * WIDTH_STEP, tensorizer.max_doc_width)
    widths = np.empty(len(index), dtype=np.int64)
    widths[order] = np.repeat(per_batch, size)[: len(index)]
    return widths


def _width_order(widths: np.ndarray, lengths: np.ndarray, most: int) -> np.ndarray:
    """Positions by width, then length, then position (a stable sort; for the widths of
    :func:`batch_widths` the order of length alone, which gives the widths in order)."""
    steps = -(-widths // WIDTH_STEP)  # in order of the widths: each at most ``most``
    if (int(steps.max(initial=0)) + 1) * (most + 1) < 2**16:
        return np.argsort((steps * (most + 1) + lengths).astype(np.uint16), kind="stable")
    return np.lexsort((lengths, widths))


def _batch_starts(widths: np.ndarray, size: int) -> list[int]:
    """Where each batch starts: every ``size`` pairs, and where the (sorted) width changes."""
    changes = [0, *(np.flatnonzero(np.diff(widths)) + 1).tolist(), len(widths)]
    return [start for first, end in itertools.pairwise(changes) for start in range(first, end, size)]


class _Clock:
    """Adds the seconds of ``with clock(name):`` blocks to ``timings`` (nothing when it is ``None``)."""

    def __init__(self, timings: dict[str, float] | None, device: torch.device) -> None:
        self.timings, self.device = timings, device

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        if self.timings is None:
            yield
            return
        _synchronize(self.device)
        start = time.perf_counter()
        yield
        _synchronize(self.device)
        self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - start


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def split_scores(flat: np.ndarray, counts: Sequence[int]) -> list[np.ndarray]:
    """``flat`` cut into consecutive arrays of ``counts`` elements (one per query)."""
    return np.split(np.asarray(flat, dtype=np.float64), np.cumsum(counts)[:-1]) if counts else []


def kendall_taus(reference: Sequence[np.ndarray], candidate: Sequence[np.ndarray]) -> np.ndarray:
    """Per query, Kendall's τ-b between two scorings of its candidates.

    A query with fewer than two candidates, or whose scores are constant in both scorings,
    gets 1.0; constant in one scoring only, 0.0.

    Args:
        reference: One array per query (e.g. fp32 scores).
        candidate: The same candidates scored another way (e.g. bf16).

    Returns:
        Float64 (n_queries,).
    """
    taus = []
    for ref, cand in zip(reference, candidate, strict=True):
        ref, cand = np.asarray(ref, np.float64), np.asarray(cand, np.float64)
        if len(ref) < 2:
            taus.append(1.0)
            continue
        flat_ref, flat_cand = np.ptp(ref) == 0, np.ptp(cand) == 0
        if flat_ref and flat_cand:
            taus.append(1.0)
        elif flat_ref or flat_cand:
            taus.append(0.0)
        else:
            taus.append(float(kendalltau(ref, cand).statistic))
    return np.asarray(taus, dtype=np.float64)


@dataclass(frozen=True)
class GuardResult:
    """What :func:`precision_guard` found.

    Attributes:
        passed: Every query's τ is at least ``min_tau`` and the measure moved at most ``max_delta``.
        min_tau: The smallest per-query Kendall τ.
        metric_delta: ``|metric(candidate) - metric(reference)|``, or ``None`` without a metric.
    """

    passed: bool
    min_tau: float
    metric_delta: float | None


def precision_guard(
    reference: Sequence[np.ndarray],
    candidate: Sequence[np.ndarray],
    metric: Callable[[Sequence[np.ndarray]], float] | None = None,
    min_tau: float = GUARD_MIN_TAU,
    max_delta: float = GUARD_MAX_METRIC_DELTA,
) -> GuardResult:
    """Whether a cheaper scoring (bf16) ranks as the reference (fp32) does.

    Args:
        reference: Per-query scores of the reference.
        candidate: Per-query scores of the same candidates, scored the cheaper way.
        metric: Maps per-query scores to a run measure (MAP of the reranked run); optional.
        min_tau: Least per-query Kendall τ.
        max_delta: Largest change of the measure.

    Returns:
        A :class:`GuardResult`.
    """
    taus = kendall_taus(reference, candidate)
    low = float(taus.min()) if taus.size else 1.0
    delta = None if metric is None else abs(float(metric(candidate)) - float(metric(reference)))
    return GuardResult(low >= min_tau and (delta is None or delta <= max_delta), low, delta)


def choose_precision(
    model: nn.Module, tensorizer: Tensorizer, index: PairIndex, counts: Sequence[int], options: ScoringOptions
) -> ScoringOptions:
    """Settle ``precision="auto"``: fp32 on a CPU or with the fused kernel (float32 sums, bf16-split
    products: no bf16 probe);
    else bf16 when it passes :func:`precision_guard` (τ only) against fp32 on the first
    :data:`GUARD_QUERIES` queries, else fp32 (with a warning).

    Args:
        model: The model.
        tensorizer: Its tensorizer.
        index: All pairs, query by query.
        counts: Pairs per query, in order.
        options: Resolved options.

    Returns:
        ``options`` with ``precision`` ``"fp32"`` or ``"bf16"``.
    """
    if options.precision != "auto":
        return options
    if options.device != "cuda" or options.fused:
        return replace(options, precision="fp32")
    probe = counts[:GUARD_QUERIES]
    part = index.take(slice(0, int(sum(probe))))
    reference = score_pairs(model, tensorizer, part, replace(options, precision="fp32", compile=False))
    cheap = score_pairs(model, tensorizer, part, replace(options, precision="bf16"))
    guard = precision_guard(
        split_scores(reference.cpu().numpy(), probe), split_scores(cheap.cpu().numpy(), probe)
    )
    if guard.passed:
        return replace(options, precision="bf16")
    warnings.warn(
        f"bf16 scores rank the first {len(probe)} queries' candidates unlike fp32 (Kendall tau "
        f"{guard.min_tau:.4f} < {GUARD_MIN_TAU}); scoring in fp32",
        stacklevel=2,
    )
    return replace(options, precision="fp32")


def score_candidates(
    model: nn.Module,
    tensorizer: Tensorizer,
    depth: int | None = None,
    options: ScoringOptions | None = None,
    progress: bool = False,
    timings: dict[str, float] | None = None,
    scorer: PairScorer = score_pairs,
    cache: PooledCache | None = None,
) -> list[np.ndarray]:
    """The model's score of each query's first ``depth`` candidates (eval mode, no autograd).

    Args:
        model: Maps a :class:`~clir.rerankers.batch.BilingualBatch` to scores (B,), on the
            device of ``options``.
        tensorizer: Built over the data to score.
        depth: Candidates scored per query (``None``: all).
        options: Resolved scoring options (default: the CPU's).
        progress: Show a progress bar.
        timings: When given, seconds are added per phase (see :func:`score_pairs`).
        scorer: Scores the pairs (default :func:`score_pairs`).
        cache: Pooled kernel features kept between calls (see :func:`score_pairs`).

    Returns:
        One float64 array per query, aligned with its first ``depth`` candidates.
    """
    options = options or ScoringOptions(device="cpu").resolve()
    index, counts = tensorizer.candidates(depth), tensorizer.counts(depth)
    options = settle_options(model, tensorizer, index, counts, options)
    extra = {} if cache is None else {"cache": cache}
    flat = scorer(model, tensorizer, index, options, progress=progress, timings=timings, **extra)
    return split_scores(flat.cpu().numpy(), counts)


def settle_options(
    model: nn.Module, tensorizer: Tensorizer, index: PairIndex, counts: Sequence[int], options: ScoringOptions
) -> ScoringOptions:
    """``options`` with compilation, the fused kernel and the precision decided for scoring the
    pairs of ``index`` with ``model`` (compiled from :data:`COMPILE_MIN_PAIRS` pairs on CUDA, the
    fused kernel where :func:`fusable` and not compiled, then :func:`choose_precision`).

    Args:
        model: The model (its frozen matrix lent).
        tensorizer: Its tensorizer.
        index: All pairs to score, query by query.
        counts: Pairs per query, in order.
        options: Resolved options (:meth:`ScoringOptions.resolve`).
    """
    if options.compile is None:
        options = replace(options, compile=options.device == "cuda" and len(index) >= COMPILE_MIN_PAIRS)
    if options.fused is None:
        options = replace(
            options, fused=not options.compile and fusable(model, torch.device(options.device or "cpu"))
        )
    return choose_precision(model, tensorizer, index, counts, options)


def to_host(scores: torch.Tensor) -> Callable[[], np.ndarray]:
    """Start copying ``scores`` to the host; the returned function waits for the copy and
    gives them as an array (from CUDA: into pinned memory, without waiting for the device, so
    that the host can queue more work meanwhile)."""
    if scores.device.type != "cuda":
        return scores.numpy
    host = torch.empty(scores.shape, dtype=scores.dtype, pin_memory=True)
    host.copy_(scores, non_blocking=True)
    done = torch.cuda.Event()
    done.record()

    def fetched() -> np.ndarray:
        done.synchronize()
        return host.numpy()

    return fetched


def scores_to_run(
    data: RerankData,
    scores: Sequence[np.ndarray],
    run: Mapping[str, Mapping[str, float]] | None = None,
) -> Run:
    """:func:`scores_to_arrays` as ``{qid: {docno: score}}``."""
    return scores_to_arrays(data, scores, run).to_run()


def scores_to_arrays(
    data: RerankData,
    scores: Sequence[np.ndarray],
    run: Mapping[str, Mapping[str, float]] | None = None,
    candidates: CandidateIndex | None = None,
    queries: Sequence[int] | None = None,
) -> RunArrays:
    """A run that ranks each query's scored candidates first and the rest beneath in first-stage order.

    The first ``len(scores[i])`` candidates of query ``i`` take their scores; the remaining
    candidates, then the documents of ``run`` that are not candidates (in ``run``'s order),
    follow with scores strictly below and strictly decreasing (``min - 1``, ``min - 2``, ...),
    so the order survives writing and evaluation (no ties).

    Args:
        data: The queries and their candidates.
        scores: One array per query of ``data`` (a prefix of its candidates), or of ``queries``.
        run: The full first-stage run (may be deeper than the candidates); optional.
        candidates: ``data.candidate_index()``, when it is at hand.
        queries: Positions in ``data.queries`` of the queries to give, in this order (``None``:
            all, in order).

    Returns:
        The run as arrays (:meth:`~clir.formats.runs.RunArrays.to_run` gives the dictionaries),
        each query's documents in that order. Its docnos are ``candidates.docnos`` itself
        where the run adds no document (parts of one rerank then share one list).

    Raises:
        ConfigError: If there are more score arrays or scores than queries or candidates.
        NonFiniteError: If a score is NaN or infinite.
    """
    queries = range(len(data.queries)) if queries is None else queries
    if len(scores) != len(queries):
        raise ConfigError(f"{len(scores)} score arrays for {len(queries)} queries")
    candidates = candidates or data.candidate_index()
    docnos = candidates.docnos
    index: dict[str, int] | None = None  # made when the run adds documents
    positions, values_of = [], []
    for qi, values in zip(queries, scores, strict=True):
        query, at = data.queries[qi], candidates.positions[qi]
        values = np.asarray(values, dtype=np.float64)
        check_finite(values, f"query {query.qid!r}: reranker scores")
        if len(values) > len(query.docnos):
            raise ConfigError(f"query {query.qid!r}: {len(values)} scores for {len(query.docnos)} candidates")
        first = run.get(query.qid) if run is not None else None
        extra: list[str] = []
        if first:  # trec_eval's order (score descending, then docno descending), as it is read
            scored = set(query.docnos)
            extra = [d for d, _ in ranked(first) if d not in scored]
        if extra:
            if docnos is candidates.docnos:
                docnos = list(docnos)
            index = index or {docno: i for i, docno in enumerate(docnos)}
            for docno in extra:
                if docno not in index:
                    index[docno] = len(docnos)
                    docnos.append(docno)
            at = np.concatenate([at, np.fromiter(map(index.__getitem__, extra), np.int64, len(extra))])
        positions.append(at)
        if len(values) < len(at):
            floor = float(values.min()) if len(values) else 0.0
            values = np.concatenate([values, floor - np.arange(1, len(at) - len(values) + 1)])
        values_of.append(values)
    return RunArrays(docnos, [data.queries[qi].qid for qi in queries], positions, values_of)
