"""Throughput of the rerankers: pairs scored per second and training seconds per epoch.

Prints one JSON object. CPU numbers use 2 threads; when CUDA is present (and ``--device``
allows it) GPU numbers are added, eager and ``torch.compile`` under bf16 autocast.

    python experiments/bench_rerank.py --device cpu --quick
    python experiments/bench_rerank.py --device cuda --compile-models bilingual_knrm,knrm
    python experiments/bench_rerank.py --device cuda --models bilingual_knrm --gpu-profile --no-train
    python experiments/bench_rerank.py --end-to-end --device all --sizes 100x50000,300x100000
    python experiments/bench_rerank.py --device cuda --models bilingual_knrm --knrm-window 10 --fused
    python experiments/bench_rerank.py --compile-warmup --dim 100 --vocab 50000
    python experiments/bench_rerank.py --trainer --device cuda --vocab 20000 --train-epochs 3,15

``--end-to-end`` times what ``clir rerank`` does after analysis and translation (cached steps of
the pipeline), with the documents' id tables read from a cache an earlier run filled (``clir
rerank --index-cache``; the ``no-id-cache`` rows build them): from the analysed collection (a
SYNTHETIC one, the size of the Bible's: 6,220 passages of ``--doc-length`` tokens per view,
random words of a vocabulary of ``V`` words per language, random vectors of dimension ``dim``)
and a first-stage run of ``--queries`` × ``--depth`` candidates to the written run file, with
the split: tensorize (vocabulary, tables, batches), transfer (the frozen matrix made where it
is used, tables to the GPU), score, write (the rest: normalise, rank, write the TREC file). It
runs what ``clir rerank`` runs: ``write_run`` of ``rerank_parts`` (on CUDA the queries scored in
chunks of 125,000 pairs while the parts before are written; ``--chunk-pairs 0``: one part); the split
synchronises the device between phases, so it shows each phase's work, not the overlap. The stand-in
space gives its rows as ``SharedSpace`` does (``matrix`` and ``matrix_sources``), so the matrix
is made on the GPU as ``clir rerank`` makes it. The model is the default config's (four
components, K-NRM with 10-token windows, two features), untrained (speed does not depend on the
weights); ``--members N`` makes it an ensemble of N seeds, which on a CPU pool each pair once
between them (``--no-shared-pooling``: each for itself, as before). Every other mode's run is
checked against the eager fp32 one (the ``fp32`` mode, when ``--e2e-modes`` keeps it):
``kendall_tau_vs_fp32``, the min and median over queries of the Kendall tau-b of the candidates'
order.

Model names: the interaction models (``knrm``, ``drmm``, ``pacrr_drmm``, ``posit_drmm``:
one component on one (query, document) pair) and ``bilingual_<model>`` (the four-component
model with 2 extra features and linear fusion).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from clir.rerankers import (
    INTERACTION_MODELS,
    BilingualBatch,
    BilingualReranker,
    PairBatch,
    TokenView,
    build_interaction_model,
    hinge_loss,
)

ALL_MODELS = [*sorted(INTERACTION_MODELS), *(f"bilingual_{m}" for m in sorted(INTERACTION_MODELS))]


def make_model(name: str, embeddings: torch.Tensor, window: int = 0) -> torch.nn.Module:
    """A model by bench name; K-NRM models pool windows of ``window`` document tokens (0: whole)."""
    dim = embeddings.shape[1]
    model = name.removeprefix("bilingual_")
    kwargs = {"window": window} if model == "knrm" else {}
    if name.startswith("bilingual_"):
        return BilingualReranker(dim, embeddings, model=model, n_features=2, model_kwargs=kwargs)
    return build_interaction_model(name, dim, embeddings, **kwargs)


def make_batch(name: str, size: int, q_len: int, d_len: int, vocab: int, gen: torch.Generator) -> Any:
    def ids(length: int) -> torch.Tensor:
        return torch.randint(1, vocab, (size, length), generator=gen)

    def idf() -> torch.Tensor:
        return torch.rand(size, q_len, generator=gen) * 5

    if name.startswith("bilingual_"):
        q_en = TokenView(ids(q_len), idf=idf())
        q_src = TokenView(ids(q_len), idf=idf())
        d_src, d_en = TokenView(ids(d_len)), TokenView(ids(d_len))
        return BilingualBatch(q_en, q_src, d_src, d_en, torch.randn(size, 2, generator=gen))
    return PairBatch(ids(q_len), ids(d_len), idf())


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def throughput(model: Any, batch: Any, device: str, min_time: float, autocast: bool = False) -> float:
    """Pairs per second of inference (after one warm-up call)."""
    size = len(batch)
    with torch.inference_mode(), torch.autocast(device, dtype=torch.bfloat16, enabled=autocast):
        model(batch)
        sync(device)
        calls, start = 0, time.perf_counter()
        while True:
            model(batch)
            calls += 1
            sync(device)
            elapsed = time.perf_counter() - start
            if elapsed >= min_time and calls >= 2:
                return calls * size / elapsed


def train_epoch(
    name: str,
    embeddings: torch.Tensor,
    device: str,
    queries: int,
    pairs_per_query: int,
    batch_size: int,
    q_len: int,
    d_len: int,
    max_time: float,
    window: int = 0,
) -> dict[str, Any]:
    """Seconds per synthetic epoch of (positive, negative) pairs with the hinge loss and Adam."""
    gen = torch.Generator().manual_seed(1)
    model = make_model(name, embeddings, window).to(device).train()
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    total = queries * pairs_per_query
    n_batches = -(-total // batch_size)
    done, start = 0, time.perf_counter()
    for _ in range(n_batches):
        pos = make_batch(name, batch_size, q_len, d_len, embeddings.shape[0], gen).to(device)
        neg = make_batch(name, batch_size, q_len, d_len, embeddings.shape[0], gen).to(device)
        opt.zero_grad()
        hinge_loss(model(pos), model(neg)).backward()
        opt.step()
        done += 1
        sync(device)
        if time.perf_counter() - start > max_time:
            break
    elapsed = time.perf_counter() - start
    return {
        "seconds_per_epoch": round(elapsed * n_batches / done, 3),
        "training_pairs": total,
        "batch_size": batch_size,
        "extrapolated_from_batches": done if done < n_batches else None,
    }


def profile_summary(
    model: Any, batch: Any, device: str = "cpu", autocast: bool = False, rows: int = 12
) -> list[dict[str, Any]]:
    """Top operators (CPU) or kernels (CUDA) by self time over a few inference calls."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with torch.inference_mode(), torch.autocast(device, dtype=torch.bfloat16, enabled=autocast):
        model(batch)
        sync(device)
        with profile(activities=activities) as prof:
            for _ in range(3):
                model(batch)
            sync(device)

    def self_time(e: Any) -> float:
        return e.self_device_time_total if device == "cuda" else e.self_cpu_time_total

    def counted(e: Any) -> bool:  # on CUDA the kernels alone (their launching ops repeat them)
        return self_time(e) > 0 and (device != "cuda" or e.device_type == torch.autograd.DeviceType.CUDA)

    events = sorted(filter(counted, prof.key_averages()), key=self_time, reverse=True)
    total = sum(self_time(e) for e in events) or 1.0
    return [
        {
            "op": e.key[:120],
            "self_ms_per_call": round(self_time(e) / 1000 / 3, 3),
            "share": round(self_time(e) / total, 3),
        }
        for e in events[:rows]
    ]


class RandomSpace:
    """A stand-in for a shared space: word ``<lang>:w<i>`` has row ``i`` of one random matrix."""

    def __init__(self, vocab: int, dim: int, seed: int = 0) -> None:
        self.dim = dim
        self.vectors = np.random.default_rng(seed).normal(size=(2 * vocab, dim)).astype(np.float32)
        self.vocab = vocab

    def matrix(self, entries: list[tuple[str, str]]) -> np.ndarray:
        return self.vectors[self._rows(entries)]

    def matrix_sources(self, entries: list[tuple[str, str]]) -> Any:
        """As SharedSpace's: one table (both languages), gathered where the matrix goes."""
        from clir.types import MatrixSources

        rows = self._rows(entries)
        return MatrixSources([self.vectors], np.zeros(len(rows), np.int64), rows, {}, self.dim)

    def _rows(self, entries: list[tuple[str, str]]) -> np.ndarray:
        rows = [int(token[1:]) + (self.vocab if lang == "en" else 0) for lang, token in entries]
        return np.asarray(rows, dtype=np.int64)


def synthetic_data(
    queries: int,
    depth: int,
    docs: int,
    doc_len: int,
    q_len: int,
    vocab: int,
    seed: int,
    n_features: int = 2,
    prefix: str = "Q",
) -> Any:
    """A RerankData of ``queries`` × ``depth`` candidates over ``docs`` documents (and its run)."""
    from clir.training import RerankData, RerankQuery

    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(vocab)]

    def text(n: int) -> list[str]:
        return [words[i] for i in rng.integers(0, vocab, size=n)]

    docnos = [f"D{i}" for i in range(docs)]
    doc_src = {d: text(doc_len) for d in docnos}
    doc_en = {d: text(doc_len) for d in docnos}
    records = []
    for qi in range(queries):
        chosen = [docnos[i] for i in rng.choice(docs, size=depth, replace=False)]
        scores = np.sort(rng.normal(size=depth))[::-1].copy()
        records.append(
            RerankQuery(
                f"{prefix}{qi}", text(q_len), text(q_len), list(rng.uniform(0.5, 5, q_len)),
                list(rng.uniform(0.5, 5, q_len)), chosen, scores, rng.normal(size=(depth, n_features)),
            )
        )  # fmt: skip
    data = RerankData("xx", records, doc_src, doc_en, [f"f{i + 1}" for i in range(n_features)])
    # the documents' key, as `clir rerank --index-cache` has its index step's for the tables' cache
    data.documents_key = f"synthetic documents {docs} {doc_len} {vocab} {seed}"
    return data, data.first_stage_run()


def end_to_end(args: argparse.Namespace, devices: list[str]) -> dict[str, Any]:
    """Seconds and pairs per second of reranking and writing a run, per device and size (see above)."""
    from clir.formats import write_run
    from clir.rerankers import fused_knrm
    from clir.training import ScoringOptions, TrainedReranker, load_config, pooled, rerank_parts
    from clir.training.scoring import kendall_taus
    from clir.training.trainer import build_reranker

    config = load_config(Path(__file__).resolve().parents[1] / "configs" / "reranker-knrm.yaml")
    config.data.depth = args.depth
    config.data.max_doc_len = max(config.data.max_doc_len, args.doc_length)
    out: dict[str, Any] = {
        "collection": f"synthetic (random words and vectors), {args.docs:,} passages (the Bible's: 6,220)",
        "docs": args.docs,
        "model": "reranker-knrm.yaml: four components, K-NRM window 10, 2 features, untrained",
        "date": time.strftime("%Y-%m-%d"),
        "doc_length": args.doc_length,
        "query_length": args.query_length,
        "depth": args.depth,
        "cpu_threads": args.threads,
        "batch": args.e2e_batch or "clir rerank's default",
        "members": args.members,
        "shared_pooling": not args.no_shared_pooling,
        "runs": {},
    }
    if args.no_shared_pooling:
        pooled.POOLED_CACHE_BYTES = 0  # every cache off: each member pools for itself
    if torch.cuda.is_available():
        out["gpu"] = torch.cuda.get_device_name()
    for size in args.sizes.split(","):
        dim, vocab = (int(x) for x in size.split("x"))
        space = RandomSpace(vocab, dim, args.seed)
        for device in devices:
            n_queries = args.queries if device == "cuda" else args.cpu_queries
            data, run = synthetic_data(
                n_queries, args.depth, args.docs, args.doc_length, args.query_length, vocab, args.seed
            )
            matrix = np.zeros((2, dim), np.float32)  # replaced by rerank with the data's matrix
            members = [
                TrainedReranker(build_reranker(config, matrix, 2, seed=seed), config, ["f1", "f2"])
                for seed in range(args.members)
            ]
            # (precision, compiled, fused, id tables cached); every run but the uncached ones reads
            # the documents' id tables from one cache, filled by the first run
            modes: list[tuple[str, bool | None, bool | None, bool]] = [("fp32", False, False, True)]
            if device == "cuda":  # the default last: below 20M pairs uncompiled, the fused kernel (fp32)
                modes += [
                    ("bf16", False, False, True),
                    ("bf16", True, False, True),
                    ("fp32", False, True, True),
                    ("bf16", False, True, True),  # the fused kernel's one bf16 product
                    ("auto", None, None, False),
                    ("auto", None, None, True),
                ]
            else:
                modes += [("fp32", False, False, False)]
            cache = Path(tempfile.mkdtemp(prefix="id-tables."))
            reference = None
            for precision, compiled, fused, cached in modes:
                how = precision + ("/compiled" if compiled else "") + ("/fused" if fused else "")
                how = ("default" if compiled is None else how) + ("" if cached else "/no-id-cache")
                if (fused and fused_knrm.triton is None) or (args.e2e_modes and how not in args.e2e_modes):
                    continue
                options = ScoringOptions(device, args.e2e_batch, precision, compiled, fused)
                key = f"{device}/{how}/d{dim}/V{vocab}"
                record: dict[str, Any] = {"dim": dim, "vocab": vocab, "pairs": n_queries * args.depth}
                seconds: dict[str, list[float]] = {}
                splits: list[dict[str, float]] = []
                with tempfile.TemporaryDirectory() as tmp:
                    target = Path(tmp) / "reranked.run"
                    for attempt in ("first", *["warm"] * args.repeats, *["split"] * args.repeats):
                        timings: dict[str, float] | None = {} if attempt == "split" else None
                        kept: list[Any] = []
                        start = time.perf_counter()
                        parts = rerank_parts(
                            members,
                            data,
                            space=space,
                            run=run,
                            options=options,
                            timings=timings,
                            cache=cache if cached else None,
                            chunk_pairs=args.chunk_pairs,
                        )
                        write_run(target, (kept.append(part) or part for part in parts), tag="bench")
                        done = time.perf_counter()
                        seconds.setdefault(attempt, []).append(done - start)
                        if timings is not None:  # "write": the rest (combining, ranking, the file)
                            phases = ("tensorize", "transfer", "score")
                            timings["write"] = done - start - sum(timings.get(k, 0.0) for k in phases)
                            splits.append(timings)
                        if attempt == "first":
                            record["run_sha256"] = hashlib.sha256(target.read_bytes()).hexdigest()
                            record["parts"] = len(kept)
                for attempt, values in seconds.items():  # the median of the repeats
                    record[f"{attempt}_seconds"] = round(float(np.median(values)), 3)
                    if len(values) > 1:
                        record[f"{attempt}_seconds_each"] = [round(v, 3) for v in values]
                record["split_seconds"] = {
                    k: round(float(np.median([t[k] for t in splits])), 3) for k in splits[0]
                }
                reranked = {qid: docs for part in kept for qid, docs in part.to_run().items()}
                if how == "fp32":  # eager fp32 PyTorch, the reference (fp32/fused had replaced it)
                    reference = reranked
                elif (
                    reference is not None
                ):  # the ranking of each query's candidates against eager fp32's (Kendall tau-b)
                    taus = kendall_taus(*(
                        [np.array([r[q.qid][d] for d in q.docnos]) for q in data.queries]
                        for r in (reference, reranked)
                    ))  # fmt: skip
                    record["kendall_tau_vs_fp32"] = {"min": round(float(taus.min()), 5),
                                                     "median": round(float(np.median(taus)), 5)}  # fmt: skip
                record["pairs_per_second_end_to_end"] = round(record["pairs"] / record["warm_seconds"])
                record["pairs_per_second_scoring"] = round(record["pairs"] / record["split_seconds"]["score"])
                out["runs"][key] = record
                print(f"{key}: {record}", file=sys.stderr, flush=True)
            shutil.rmtree(cache)
    return out


def trainer_cost(args: argparse.Namespace, devices: list[str]) -> dict[str, Any]:
    """Seconds per epoch of the trainer (:class:`~clir.training.Trainer`, the dev scoring and the
    checkpoint of each epoch included) on synthetic data of ``make run``'s sizes, per device: the
    pretraining on the pseudo-queries (``weak-full``) and the fine-tuning on the labels (``full``),
    each with the default reranker (configs/reranker-knrm-union.yaml, the listwise softmax loss).
    Each query has one relevant candidate (its first); the per-epoch seconds are extrapolated to
    ``optim.epochs`` (what ``make run`` trains: 15 epochs each, no early stop there)."""
    from clir.formats import ranked
    from clir.training import Trainer, load_config

    def map_metric(run: dict[str, dict[str, float]], qrels: dict[str, dict[str, int]]) -> float:
        """MAP (as ``make run``'s early stopping reads it; here with no evaluation package)."""
        precisions = []
        for qid, judged in qrels.items():
            order = [docno for docno, _ in ranked(run.get(qid, {}))]
            hits = [i + 1 for i, docno in enumerate(order) if judged.get(docno, 0) >= 1]
            found = sum((k + 1) / at for k, at in enumerate(hits))
            precisions.append(found / max(1, sum(1 for v in judged.values() if v >= 1)))
        return float(np.mean(precisions)) if precisions else 0.0

    config = load_config(Path(__file__).resolve().parents[1] / "configs" / "reranker-knrm-union.yaml")
    config.optim.loss = "softmax"
    config.progress = False
    candidates = config.data.max_candidates - 10  # about 190: the union's candidates a query
    space = RandomSpace(args.vocab, args.dim, args.seed)
    stages = {  # name: (train queries, dev queries, epochs run here)
        "weak-full": (args.train_queries, 200, args.train_epochs[0]),
        "full": (150, 100, args.train_epochs[1]),
    }
    out: dict[str, Any] = {
        "collection": f"synthetic (random words and vectors), {args.docs:,} passages (the Bible's: 6,220)",
        "docs": args.docs,
        "model": "reranker-knrm-union.yaml, loss softmax, 14 features, untrained",
        "date": time.strftime("%Y-%m-%d"),
        "dim": args.dim,
        "vocab": args.vocab,
        "candidates": candidates,
        "doc_length": args.doc_length,
        "query_length": args.query_length,
        "torch": torch.__version__,
        "runs": {},
    }
    if torch.cuda.is_available():
        out["gpu"] = torch.cuda.get_device_name()
    for device in devices:
        config.device = device
        for name, (n_train, n_dev, epochs) in stages.items():
            data, _ = synthetic_data(
                n_train + n_dev, candidates, args.docs, args.doc_length, args.query_length, args.vocab,
                args.seed, n_features=14,
            )  # fmt: skip
            train, dev = data.subset(data.qids[:n_train]), data.subset(data.qids[n_train:])
            qrels = {q.qid: {q.docnos[0]: 1} for q in data.queries}
            config.optim.epochs = epochs
            with tempfile.TemporaryDirectory() as tmp:
                start = time.perf_counter()
                trainer = Trainer(config, metric=map_metric, seed=0)
                trainer.fit(train, dev, qrels, Path(tmp) / "model", space=space)
                total = time.perf_counter() - start
            curve = trainer.state_.curve if trainer.state_ is not None else []
            seconds = [entry["seconds"] for entry in curve]
            steady = float(np.median(seconds[1:] if len(seconds) > 1 else seconds))
            record = {
                "train_queries": n_train,
                "dev_queries": n_dev,
                "groups_per_epoch": curve[0]["pairs"] if curve else 0,
                "epochs_run": len(seconds),
                "epoch_seconds": seconds,
                "fit_seconds": round(total, 3),
                "setup_seconds": round(total - sum(seconds), 3),
                "steady_epoch_seconds": round(steady, 3),
                "seconds_for_15_epochs": round(total - sum(seconds) + seconds[0] + 14 * steady, 1),
            }
            out["runs"][f"{device}/{name}"] = record
            print(f"train {device}/{name}: {record}", file=sys.stderr, flush=True)
    return out


def compile_probe(args: argparse.Namespace) -> dict[str, Any]:
    """Seconds of the first and second call of the compiled default model (bf16) in this process."""
    gen = torch.Generator().manual_seed(args.seed)
    embeddings = torch.randn(args.vocab, args.dim, generator=gen)
    model = torch.compile(make_model("bilingual_knrm", embeddings, 10).cuda().eval(), dynamic=False)
    batch = make_batch("bilingual_knrm", args.gpu_batch, args.query_length, 160, args.vocab, gen).to("cuda")
    seconds = []
    with torch.inference_mode(), torch.autocast("cuda", dtype=torch.bfloat16):
        for _ in range(2):
            start = time.perf_counter()
            model(batch)
            torch.cuda.synchronize()
            seconds.append(round(time.perf_counter() - start, 3))
    return {"first_call_seconds": seconds[0], "second_call_seconds": seconds[1]}


def compile_warmup(args: argparse.Namespace) -> dict[str, Any]:
    """:func:`compile_probe` in two fresh processes that share one inductor cache directory
    (``TORCHINDUCTOR_CACHE_DIR``): what compiling costs a process when an earlier one compiled."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}
        argv = [
            sys.executable,
            __file__,
            "--compile-probe",
            "--dim",
            str(args.dim),
            "--vocab",
            str(args.vocab),
            "--gpu-batch",
            str(args.gpu_batch),
        ]
        runs = []
        for _ in range(2):
            start = time.perf_counter()
            done = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
            runs.append({**json.loads(done.stdout), "process_seconds": round(time.perf_counter() - start, 3)})
    return {"dim": args.dim, "vocab": args.vocab, "batch": args.gpu_batch, "doc_width": 160, "runs": runs}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", choices=["cpu", "cuda", "all"], default="all")
    parser.add_argument("--quick", action="store_true", help="short timings, fewer models, partial epochs")
    parser.add_argument("--models", default=None, help=f"comma-separated, from {ALL_MODELS}")
    parser.add_argument(
        "--compile-models", default="knrm,bilingual_knrm", help="models to torch.compile on GPU"
    )
    parser.add_argument("--doc-lengths", default="150,500")
    parser.add_argument("--query-length", type=int, default=8)
    parser.add_argument("--vocab", type=int, default=50_000)
    parser.add_argument("--dim", type=int, default=100)
    parser.add_argument("--cpu-batch", type=int, default=256)
    parser.add_argument("--gpu-batch", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--no-train", action="store_true")
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument(
        "--gpu-profile", action="store_true", help="add the kernel profile of each compiled model on the GPU"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--fused", action="store_true", help="add the fused Triton K-NRM kernel and compiled fp32 on the GPU"
    )
    parser.add_argument("--end-to-end", action="store_true", help="time reranking to a written run file")
    parser.add_argument("--sizes", default="100x50000,300x100000", help="DIMxVOCAB,... (--end-to-end)")
    parser.add_argument("--queries", type=int, default=500, help="queries on CUDA (--end-to-end)")
    parser.add_argument("--cpu-queries", type=int, default=50, help="queries on the CPU (--end-to-end)")
    parser.add_argument("--depth", type=int, default=1000, help="candidates per query (--end-to-end)")
    parser.add_argument(
        "--docs", type=int, default=6220, help="passages in the collection (--end-to-end, --trainer)"
    )
    parser.add_argument("--doc-length", type=int, default=150, help="tokens per passage (--end-to-end)")
    parser.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="warm and split runs of each mode, medians reported (--end-to-end)",
    )
    parser.add_argument(
        "--e2e-batch", type=int, default=None, help="scoring batch (--end-to-end; default: clir rerank's)"
    )
    parser.add_argument(
        "--chunk-pairs",
        type=int,
        default=None,
        help="pairs a chunk of the rerank's parts (--end-to-end; default: clir rerank's, chunks of "
        "clir.training.ensemble.CHUNK_PAIRS on CUDA, one part on a CPU; 0: one part)",
    )
    parser.add_argument(
        "--members",
        type=int,
        default=1,
        help="ensemble members of one configuration, seeds 0..N-1 (--end-to-end; on a CPU they pool "
        "each pair once between them)",
    )
    parser.add_argument(
        "--no-shared-pooling",
        action="store_true",
        help="each member pools every pair itself (--end-to-end; the path before the shared pooling)",
    )
    parser.add_argument(
        "--e2e-modes",
        type=lambda text: text.split(","),
        default=None,
        help="only these modes, e.g. default,default/no-id-cache (--end-to-end; default: all)",
    )
    parser.add_argument(
        "--trainer",
        action="store_true",
        help="seconds per epoch of the trainer at make run's sizes (pretraining, fine-tuning)",
    )
    parser.add_argument(
        "--train-queries", type=int, default=6735, help="pseudo-queries of the pretraining (--trainer)"
    )
    parser.add_argument(
        "--train-epochs",
        type=lambda text: [int(x) for x in text.split(",")],
        default=[3, 15],
        help="epochs run of the pretraining and of the fine-tuning (--trainer)",
    )
    parser.add_argument("--json", type=Path, help="also write the JSON here")
    parser.add_argument(
        "--compile-warmup",
        action="store_true",
        help="seconds of the first compiled call in two fresh processes sharing an inductor cache",
    )
    parser.add_argument("--compile-probe", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--knrm-window",
        type=int,
        default=0,
        help="K-NRM pools windows of this many tokens (0: whole document)",
    )
    args = parser.parse_args(argv)

    models = (
        args.models.split(",") if args.models else (["knrm", "bilingual_knrm"] if args.quick else ALL_MODELS)
    )
    unknown = sorted(set(models) - set(ALL_MODELS))
    if unknown:
        parser.error(f"unknown models {unknown}; expected from {ALL_MODELS}")
    min_time = 1.0 if args.quick else 3.0
    doc_lengths = [int(x) for x in args.doc_lengths.split(",")]
    devices = ["cpu", "cuda"] if args.device == "all" else [args.device]
    if "cuda" in devices and not torch.cuda.is_available():
        if args.device == "cuda":
            parser.error("--device cuda but CUDA is not available")
        devices.remove("cuda")

    torch.set_num_threads(args.threads)
    if args.compile_probe or args.compile_warmup:
        report = json.dumps(compile_probe(args) if args.compile_probe else compile_warmup(args))
        print(report)
        if args.json is not None:
            args.json.write_text(report + "\n", encoding="utf-8")
        return 0
    if args.end_to_end or args.trainer:
        report = json.dumps((end_to_end if args.end_to_end else trainer_cost)(args, devices), indent=2)
        print(report)
        if args.json is not None:
            args.json.write_text(report + "\n", encoding="utf-8")
        return 0
    gen = torch.Generator().manual_seed(args.seed)
    embeddings = torch.randn(args.vocab, args.dim, generator=gen)
    embeddings[0] = 0.0
    result: dict[str, Any] = {
        "torch": torch.__version__,
        "knrm_window": args.knrm_window,
        "cpu_threads": args.threads,
        "query_length": args.query_length,
        "vocab": args.vocab,
        "dim": args.dim,
        "pairs_per_second": {},
    }
    for device in devices:
        size = args.cpu_batch if device == "cpu" else args.gpu_batch
        modes = ["eager"] if device == "cpu" else ["eager", "compile_bf16"]
        if device == "cuda" and args.fused:
            modes += ["compile_fp32", "fused", "fused_bf16"]  # fused_bf16: one bf16 product (autocast)
        if device == "cuda":
            result["gpu"] = torch.cuda.get_device_name()
        for name in models:
            model = make_model(name, embeddings, args.knrm_window).to(device).eval()
            for mode in modes:
                if mode.startswith("compile") and name not in args.compile_models.split(","):
                    continue
                if mode.startswith("fused") and not name.startswith("bilingual_knrm"):
                    continue
                runner = torch.compile(model) if mode.startswith("compile") else model
                model.fused_kernel = mode.startswith("fused")
                for d_len in doc_lengths:
                    batch = make_batch(name, size, args.query_length, d_len, args.vocab, gen).to(device)
                    bf16 = mode in ("compile_bf16", "fused_bf16")
                    rate = throughput(runner, batch, device, min_time, autocast=bf16)
                    key = f"{device}/{mode}/{name}/d{d_len}"
                    result["pairs_per_second"][key] = round(rate)
                    print(f"{key}: {rate:,.0f} pairs/s (batch {size})", file=sys.stderr, flush=True)
                    if mode.startswith("fused"):  # against the eager fp32 PyTorch scores of the same batch
                        with torch.inference_mode(), torch.autocast("cuda", torch.bfloat16, enabled=bf16):
                            fast = model(batch).float()
                        with torch.inference_mode():
                            model.fused_kernel = False
                            reference = model(batch)
                            model.fused_kernel = True
                        error = float((fast - reference).norm() / reference.norm())
                        result.setdefault("fused_relative_error", {})[key] = error
                        print(f"{key}: relative error {error:.2e}", file=sys.stderr, flush=True)
                    if args.gpu_profile and mode == "compile_bf16":
                        result[f"cuda_profile/{key}"] = profile_summary(runner, batch, device, autocast=True)

    if "cpu" in devices and not args.no_profile and "bilingual_knrm" in models:
        model = make_model("bilingual_knrm", embeddings, args.knrm_window).eval()
        batch = make_batch(
            "bilingual_knrm", args.cpu_batch, args.query_length, doc_lengths[0], args.vocab, gen
        )
        result[f"cpu_profile/bilingual_knrm/d{doc_lengths[0]}"] = profile_summary(model, batch)

    if not args.no_train:
        result["train"] = {}
        train_models = [m for m in models if m.startswith("bilingual_")] or models
        for device in devices:
            for name in train_models:
                stats = train_epoch(
                    name,
                    embeddings,
                    device,
                    queries=150,
                    pairs_per_query=20,
                    batch_size=64 if device == "cpu" else 256,
                    q_len=args.query_length,
                    d_len=doc_lengths[0],
                    max_time=10.0 if args.quick else 60.0,
                    window=args.knrm_window,
                )
                key = f"{device}/{name}/d{doc_lengths[0]}"
                result["train"][key] = stats
                print(f"train {key}: {stats}", file=sys.stderr, flush=True)

    report = json.dumps(result, indent=2)
    print(report)
    if args.json is not None:
        args.json.write_text(report + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
