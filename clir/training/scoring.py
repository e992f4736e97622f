"""Scoring candidates with a trained reranker and turning scores into runs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from clir.errors import ConfigError
from clir.rerankers.encoding import FrozenEmbedding
from clir.training.data import RerankData, Tensorizer, check_finite
from clir.types import Run


def set_embeddings(model: nn.Module, matrix: torch.Tensor | None) -> None:
    """Lend a frozen embedding matrix to a reranker (``None`` takes it back).

    The matrix is built for the vocabulary of the data being scored, so one trained model
    scores data of any vocabulary (and language) of the shared space.
    """
    if matrix is None:
        model.embedding = None
        return
    device = next(iter(model.parameters()), torch.empty(0)).device
    model.embedding = FrozenEmbedding(matrix).to(device)


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


@torch.inference_mode()
def score_candidates(
    model: nn.Module,
    tensorizer: Tensorizer,
    depth: int | None = None,
    batch_size: int = 256,
    device: torch.device | str = "cpu",
    progress: bool = False,
) -> list[np.ndarray]:
    """The model's score of each query's first ``depth`` candidates (eval mode, no autograd).

    Args:
        model: Maps a :class:`~clir.rerankers.batch.BilingualBatch` to scores (B,).
        tensorizer: Built over the data to score.
        depth: Candidates scored per query (``None``: all).
        batch_size: Pairs per forward pass.
        device: Where the model is.
        progress: Show a progress bar.

    Returns:
        One float64 array per query, aligned with its first ``depth`` candidates.
    """
    pairs = [p for qi in range(len(tensorizer.data.queries)) for p in tensorizer.query_pairs(qi, depth)]
    was_training = model.training
    model.eval()
    out: list[np.ndarray] = []
    try:
        starts = range(0, len(pairs), batch_size)
        for start in tqdm(starts, desc="scoring", unit="batch", disable=not progress):
            batch = tensorizer.batch(pairs[start : start + batch_size]).to(device)
            out.append(model(batch).detach().to("cpu", torch.float64).numpy())
    finally:
        model.train(was_training)
    flat = np.concatenate(out) if out else np.zeros(0)
    result, start = [], 0
    for qi in range(len(tensorizer.data.queries)):
        n = len(tensorizer.query_pairs(qi, depth))
        result.append(flat[start : start + n])
        start += n
    return result


def scores_to_run(
    data: RerankData,
    scores: Sequence[np.ndarray],
    run: Mapping[str, Mapping[str, float]] | None = None,
) -> Run:
    """A run that ranks each query's scored candidates first and the rest beneath in first-stage order.

    The first ``len(scores[i])`` candidates of query ``i`` take their scores; the remaining
    candidates, then the documents of ``run`` that are not candidates (in ``run``'s order),
    follow with scores strictly below and strictly decreasing (``min - 1``, ``min - 2``, ...),
    so the order survives writing and evaluation (no ties).

    Args:
        data: The queries and their candidates.
        scores: One array per query of ``data`` (a prefix of its candidates).
        run: The full first-stage run (may be deeper than the candidates); optional.

    Returns:
        The run ``{qid: {docno: score}}``.

    Raises:
        ConfigError: If there are more score arrays or scores than queries or candidates.
        NonFiniteError: If a score is NaN or infinite.
    """
    if len(scores) != len(data.queries):
        raise ConfigError(f"{len(scores)} score arrays for {len(data.queries)} queries")
    out: Run = {}
    for query, values in zip(data.queries, scores, strict=True):
        values = np.asarray(values, dtype=np.float64)
        check_finite(values, f"query {query.qid!r}: reranker scores")
        if len(values) > len(query.docnos):
            raise ConfigError(f"query {query.qid!r}: {len(values)} scores for {len(query.docnos)} candidates")
        ranking = {d: float(s) for d, s in zip(query.docnos, values, strict=False)}
        rest = list(query.docnos[len(values) :])
        if run is not None and query.qid in run:
            seen = set(query.docnos)
            extra = sorted(run[query.qid].items(), key=lambda item: (-item[1], item[0]))
            rest.extend(d for d, _ in extra if d not in seen)
        floor = float(values.min()) if len(values) else 0.0
        for j, docno in enumerate(rest, start=1):
            ranking[docno] = floor - j
        out[query.qid] = ranking
    return out
