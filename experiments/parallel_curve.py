"""MAP against the amount of parallel text: the learning curve of issue 13 (README).

Reads finished ``clir experiment`` directories that differ only in their parallel side
(``configs/default.yaml``, ``configs/parallel-half.yaml``, ``configs/parallel-fifth.yaml``: the
same collection side, so the same documents, queries and judgements), and prints, per pair and
run, the verse pairs of the parallel side, the best lexical run's MAP, the lexical fusion's and
`full`'s, `full` − fusion with its Holm-corrected p, and `full` over the best lexical run; with
``--plot`` it draws MAP against the verse pairs, one panel a pair.

    python experiments/parallel_curve.py runs/parallel-fifth runs/parallel-half runs/default \\
        --plot docs/parallel_curve.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

SYSTEMS = {"best lexical run": None, "lexical fusion": "lexical-fusion", "full": "full"}


def point(experiment: Path, pair: str) -> dict[str, float]:
    """One run's numbers for one pair."""
    results = json.loads((experiment / "results.json").read_text())
    index = json.loads((experiment / "steps" / "index.json").read_text())
    stats = json.loads(
        (experiment / "steps" / index[f"collection-{pair}"] / "collection" / "stats.json").read_text()
    )
    rows, tests = results["systems"][pair], results["significance"][pair]
    best = tests["best_baseline"]
    test = tests["full"]["lexical-fusion"]["AP"]
    return {
        "parallel_pairs": stats["parallel_pairs"],
        "best_lexical": best,
        "best lexical run": rows[best]["AP"],
        "lexical fusion": rows["lexical-fusion"]["AP"],
        "full": rows["full"]["AP"],
        "full_minus_fusion": test["diff"],
        "holm_p": test["p_randomization_corrected"],
        "full_over_best_lexical": rows["full"]["AP"] / rows[best]["AP"] - 1,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("experiments", type=Path, nargs="+", help="finished clir experiment directories")
    parser.add_argument("--pairs", nargs="+", default=["en-sw", "en-tl", "en-ny"])
    parser.add_argument("--plot", type=Path, help="write the curves to this PNG")
    args = parser.parse_args()
    curves = {
        pair: sorted((point(e, pair) for e in args.experiments), key=lambda p: p["parallel_pairs"])
        for pair in args.pairs
    }
    print(json.dumps(curves, indent=1))
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, len(args.pairs), figsize=(4 * len(args.pairs), 3.4), sharey=True)
        for ax, pair in zip(axes, args.pairs, strict=True):
            x = [p["parallel_pairs"] for p in curves[pair]]
            for name, style in zip(SYSTEMS, ("s--", "o-", "^-"), strict=True):
                ax.plot(x, [p[name] for p in curves[pair]], style, label=name)
            ax.set_title(pair + (" (trained)" if pair == args.pairs[0] else " (zero-shot)"))
            ax.set_xlabel("parallel verse pairs")
            ax.grid(alpha=0.3)
        axes[0].set_ylabel("MAP (500 test queries)")
        axes[0].legend(loc="lower right", fontsize=8)
        fig.tight_layout()
        fig.savefig(args.plot, dpi=110)


if __name__ == "__main__":
    main()
