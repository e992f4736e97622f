"""The experiment's report: ``results.json``, ``report.md`` and PNG plots."""

from __future__ import annotations

import json
import math
import re
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from clir.datasets import Collection
from clir.errors import ConfigError
from clir.evaluation import (
    AQWVConfig,
    Comparison,
    CoverageWarning,
    compare_per_query,
    evaluate_per_query,
    format_p,
    markdown_table,
    means,
)
from clir.formats import atomic_write
from clir.pipeline.html_report import ExplorerViews, seconds_text, write_html_report
from clir.types import Run

BASELINE = re.compile(r"^(qt|psq|dt)-(bm25|ql)$")
LEXICAL_FUSION = "lexical-fusion"
BEST_BASELINE = "best_baseline"
"""The key of a pair's best lexical baseline in ``results.json``'s ``significance``, beside its
runs' names: no run may take it (a system named so had crashed the report, after all training)."""


AP_DIFF_PLOT = "ap_diff_{pair}.png"
CURVES_PLOT = "training_curves.png"
BLI_PLOT = "bli_frequency.png"
"""The plots' file names (a rerun removes those of an earlier config that this one does not make)."""


def check_run_names(names: Iterable[str], key: str = "systems") -> None:
    """Refuse a run name the report cannot hold beside its own keys (:data:`BEST_BASELINE`).

    Raises:
        ConfigError: Naming ``key.<name>``.
    """
    for name in names:
        if name == BEST_BASELINE:
            raise ConfigError(
                f"{key}.{name}: a name other than {BEST_BASELINE!r} is needed (results.json's "
                "significance of each pair keeps its best lexical baseline under that key)"
            )


def is_baseline(name: str) -> bool:
    """Whether a system name is a lexical first-stage run."""
    return BASELINE.match(name) is not None


def system_order(names: Iterable[str], systems: Sequence[str]) -> list[str]:
    """Systems ordered by role, as a reader compares them: the lexical runs (QT, PSQ, DT; BM25
    before QL), any other first stage (the dense reference), the lexical fusion, the components
    and ablations (in the config's order), the full model and its variants (``full+e5``), and the
    ensembles (``full-ensemble``).

    Args:
        names: The systems of one pair.
        systems: The config's reranked systems, in its order.
    """
    position = {name: i for i, name in enumerate(systems)}

    def key(name: str) -> tuple[int, int, int]:
        if match := BASELINE.match(name):
            return (0, ("qt", "psq", "dt").index(match[1]), ("bm25", "ql").index(match[2]))
        if name == LEXICAL_FUSION:
            return (2, 0, 0)
        if name.endswith("-ensemble"):
            return (5, position.get(name.removesuffix("-ensemble"), len(position)), 0)
        if name not in position:
            return (1, 0, 0)
        return (4 if name == "full" or name.startswith("full+") else 3, position[name], 0)

    return sorted(names, key=key)


def write_report(
    out: Path,
    config: Any,
    runs: Mapping[str, Mapping[str, Run]],
    *,
    collections: Mapping[str, Collection],
    curves: Mapping[str, Path],
    bli: Mapping[str, Any],
    timings: Mapping[str, float],
    measures: Sequence[str],
    views: Mapping[str, ExplorerViews] | None = None,
    reused: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """Evaluate every run of every pair, test significance, write the report and plots.

    Significance: each system against the best lexical baseline of its pair (by MAP on the
    evaluated split, the strongest, i.e. most conservative, reference) and against the lexical
    fusion, with the paired randomization test (and t-test) per measure, each p-value also
    corrected over its family (every system against that reference on that measure, see
    :func:`clir.evaluation.compare_runs`), and a confidence interval of each difference.

    ``views`` (``pair -> DT translations and heatmaps``) go to the HTML report's explorer.
    ``timings`` are each step's seconds in this run, ``reused`` the build seconds of the steps this
    run reused (whose ``timings`` are 0): the report shows both.

    Returns:
        The ``results.json`` content.
    """
    for pair_runs in runs.values():
        check_run_names(pair_runs, key="runs")
    systems: dict[str, dict[str, dict[str, float]]] = {}
    significance: dict[str, dict[str, Any]] = {}
    per_query_ap: dict[str, dict[str, dict[str, float]]] = {}
    with warnings.catch_warnings():  # a query that retrieved nothing counts 0; its first stage warned
        warnings.simplefilter("ignore", CoverageWarning)
        for pair, unordered in runs.items():
            pair_runs = {name: unordered[name] for name in system_order(unordered, list(config.systems))}
            collection = collections[pair]
            qrels = collection.qrels_of(config.split)
            size = len(collection.documents)
            per_query = {  # each run evaluated once, for its means, its APs and every test
                name: evaluate_per_query(run, qrels, measures, collection_size=size)
                for name, run in pair_runs.items()
            }
            systems[pair] = {name: means(values) for name, values in per_query.items()}
            per_query_ap[pair] = {name: values["AP"] for name, values in per_query.items()}
            best = max((n for n in pair_runs if is_baseline(n)), key=lambda n: systems[pair][n]["AP"])
            references = [best] + ([LEXICAL_FUSION] if LEXICAL_FUSION in pair_runs else [])
            significance[pair] = {BEST_BASELINE: best}
            for reference in references:
                others = {n: r for n, r in pair_runs.items() if not is_baseline(n) and n != reference}
                if not others:
                    continue
                by_run = compare_per_query(
                    per_query[reference], {n: per_query[n] for n in others}, config.significance
                )
                for name, comparisons in by_run.items():
                    significance[pair].setdefault(name, {})[reference] = {
                        measure: _test_record(c) for measure, c in comparisons.items()
                    }
    results = {
        "systems": systems,
        "significance": significance,
        "bli": bli,
        "config": {key: value for key, value in config.to_dict().items() if key != "engine"},  # same on each
        "timings": dict(timings),
        "reused": dict(reused or {}),
    }
    with atomic_write(out / "results.json") as handle:
        json.dump(results, handle, indent=2)
    plots = _plots(out, config, per_query_ap, significance, curves, bli)
    for stale in _plot_files(out) - set(plots):  # an earlier config's (a pair or system since removed)
        (out / stale).unlink(missing_ok=True)
    with atomic_write(out / "report.md") as handle:
        handle.write(_markdown(config, results, measures, plots))
    write_html_report(
        out,
        results,
        runs,
        collections=collections,
        split=config.split,
        plots=plots,
        views=views,
        marks={pair: significance_marks(results, pair) for pair in results["systems"]},
        legend=_legend(config.significance) + _aqwv_note(measures),
    )
    return results


def _finite(value: float) -> float | None:
    return None if math.isnan(value) else value


def _test_record(c: Comparison) -> dict[str, Any]:
    """One comparison in ``results.json`` (JSON has no NaN: a test that could not run is null)."""
    return {
        "diff": c.diff,
        "ci": [_finite(c.ci_low), _finite(c.ci_high)],
        "p_ttest": _finite(c.p_ttest),
        "p_ttest_corrected": _finite(c.p_ttest_corrected),
        "p_randomization": c.p_randomization,
        "p_randomization_corrected": c.p_randomization_corrected,
    }


def significance_marks(results: Mapping[str, Any], pair: str) -> dict[str, dict[str, str]]:
    """The marks of one pair's significant improvements, ``system -> measure -> marks``: ``*``
    better than the best lexical baseline, ``†`` better than the lexical fusion (paired
    randomization test, corrected p below the config's alpha). Significant losses are not
    marked; ``results.json`` holds every p-value."""
    sig = results["significance"][pair]
    alpha = results["config"]["significance"]["alpha"]
    markers: dict[str, dict[str, str]] = {}
    for name in results["systems"][pair]:
        for reference, mark in ((sig[BEST_BASELINE], "*"), (LEXICAL_FUSION, "†")):
            tests = sig.get(name, {}).get(reference, {})
            for measure, test in tests.items():
                if test["p_randomization_corrected"] < alpha and test["diff"] > 0:
                    markers.setdefault(name, {})
                    markers[name][measure] = markers[name].get(measure, "") + mark
    return markers


def results_table(results: Mapping[str, Any], pair: str, measures: Sequence[str]) -> str:
    """The Markdown table of one pair with significant improvements marked
    (:func:`significance_marks`)."""
    return markdown_table(results["systems"][pair], list(measures), markers=significance_marks(results, pair))


def signed(diff: float) -> str:
    """A difference with its sign and three decimals, or its first digit where three decimals
    would print a non-zero difference as 0 (``+0.0004``, not ``+0.000`` beside a mark)."""
    text = f"{diff:+.3f}"
    return f"{diff:+.1g}" if diff != 0 and float(text) == 0 else text


def significance_table(results: Mapping[str, Any], pair: str, reference: str, measures: Sequence[str]) -> str:
    """The Markdown table of every system's difference from ``reference``: per measure the
    difference, its confidence interval, and the corrected randomization-test p-value with the
    uncorrected one in brackets (``**bold**`` when the corrected one is below alpha)."""
    sig = results["significance"][pair]
    alpha = results["config"]["significance"]["alpha"]
    lines = ["| system | " + " | ".join(measures) + " |", "| --- |" + " ---: |" * len(measures)]
    for name in results["systems"][pair]:
        tests = sig.get(name, {}).get(reference)
        if not tests:
            continue
        cells = []
        for measure in measures:
            test = tests[measure]
            low, high = test["ci"]
            interval = "" if low is None else f" [{low:+.3f}, {high:+.3f}]"
            p = format_p(test["p_randomization_corrected"], alpha=alpha)
            if test["p_randomization_corrected"] < alpha:
                p = f"**{p}**"
            cells.append(f"{signed(test['diff'])}{interval} p {p} ({format_p(test['p_randomization'])})")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _legend(test: Any, quote: str = "") -> str:
    """What the marks of the results tables say (``test``: the config's significance section;
    ``quote`` around each mark, e.g. Markdown's backtick)."""
    return (
        f"{quote}*{quote}: significantly better than the best lexical baseline, {quote}†{quote}: than "
        "the lexical fusion "
        f"(paired randomization test, p < {test.alpha:g} after {_CORRECTION_NAMES[test.correction]} "
        "over every system compared with that reference on that measure, per language pair)."
    )


def _aqwv_note(measures: Sequence[str]) -> str:
    """What the AQWV column is (its beta and returned set, which the value depends on), or
    nothing when the report has no AQWV column. The report evaluates with
    :func:`~clir.evaluation.evaluate_per_query`'s default :class:`AQWVConfig`."""
    if "AQWV" not in measures:
        return ""
    config = AQWVConfig()
    returned = "every retrieved document" if config.cutoff is None else f"the top {config.cutoff} documents"
    if config.threshold is not None:
        returned += f" scoring at least {config.threshold:g}"
    return (
        " AQWV: the mean over queries of 1 - P_miss - beta * P_FA (MATERIAL), beta = "
        f"{config.beta:g}, each query's returned set {returned}."
    )


def _markdown(config: Any, results: Mapping[str, Any], measures: Sequence[str], plots: list[str]) -> str:
    test = config.significance
    correction = _CORRECTION_NAMES[test.correction]
    interval = "paired bootstrap" if test.interval == "bootstrap" else "paired t"
    lines = [f"# {config.name}", ""]
    lines.append(
        f"Reranker trained on **{config.train_pair}** ({config.split} queries evaluated); "
        f"zero-shot on {', '.join(config.zero_shot_pairs) or 'no other pair'}. "
        + _legend(test, quote="`")
        + _aqwv_note(measures)
    )
    for pair in results["systems"]:
        best = results["significance"][pair][BEST_BASELINE]
        lines += ["", f"## {pair}" + (" (zero-shot)" if pair != config.train_pair else ""), ""]
        lines += [f"Best lexical baseline: `{best}`.", "", results_table(results, pair, measures)]
        for reference in dict.fromkeys([best, LEXICAL_FUSION]):
            table = significance_table(results, pair, reference, measures)
            if table.count("\n") < 2:
                continue
            lines += [
                "",
                f"Difference from `{reference}` [{test.confidence:.0%} {interval} interval, not "
                "corrected for the other comparisons: it may exclude 0 where the corrected p is not "
                "below alpha], "
                f"randomization-test p after {correction} (uncorrected in brackets):",
                "",
                table,
            ]
    if results["bli"].get("rows"):
        lines += ["", "## Shared space: bilingual lexicon induction (to English)", ""]
        lines += [
            "| dictionary | language | method | words | P@1 | P@5 |",
            "| --- | --- | --- | ---: | ---: | ---: |",
        ]
        for row in results["bli"]["rows"]:
            lines.append(
                f"| {row['dictionary']} | {row['source']} | {row['method']} | {row['queries']} "
                f"| {row['p_at_1']:.3f} | {row['p_at_5']:.3f} |"
            )
    timings, reused = results["timings"], results.get("reused", {})
    lines += ["", "## Timings", "", "| step | seconds | reused: built in (s) |", "| --- | ---: | ---: |"]
    lines += [f"| {step} | {took:.1f} | {seconds_text(reused.get(step))} |" for step, took in timings.items()]
    if plots:
        lines += ["", "## Plots", ""] + [f"![{p}]({p})" for p in plots]
    return "\n".join(lines) + "\n"


_CORRECTION_NAMES = {
    "holm": "Holm-Bonferroni correction",
    "bonferroni": "Bonferroni correction",
    "none": "no correction",
}


def _plots(
    out: Path,
    config: Any,
    per_query_ap: Mapping[str, Mapping[str, Mapping[str, float]]],
    significance: Mapping[str, Any],
    curves: Mapping[str, Path],
    bli: Mapping[str, Any],
) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = []
    for pair, by_system in per_query_ap.items():
        system = "full-ensemble" if "full-ensemble" in by_system else "full"
        if system not in by_system:
            continue
        best = significance[pair][BEST_BASELINE]
        diffs = sorted(by_system[system][q] - by_system[best][q] for q in by_system[best])
        fig, ax = plt.subplots(figsize=(8, 3.2))
        ax.bar(range(len(diffs)), diffs, width=1.0, color=["#c0392b" if d < 0 else "#2e86c1" for d in diffs])
        ax.axhline(0, color="black", linewidth=0.6)
        ax.set(xlabel="queries (sorted)", ylabel="AP difference", title=f"{pair}: {system} minus {best}")
        name = AP_DIFF_PLOT.format(pair=pair)
        _save(fig, out / name)
        names.append(name)
    by_system = {
        system: [json.loads(f.read_text()) for f in sorted(Path(path).glob("**/curve.json"))]
        for system, path in curves.items()
    }
    by_system = {system: seeds for system, seeds in by_system.items() if seeds}
    if by_system:
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        palette = plt.get_cmap("tab10" if len(by_system) <= 10 else "tab20").colors
        for i, (system, seeds) in enumerate(by_system.items()):
            style = {"color": palette[i % len(palette)], "linestyle": ("-", "--", ":")[i // len(palette) % 3]}
            label = f"{system}, {_loss_of(config, system)} loss"
            label += "" if len(seeds) == 1 else f" (mean ± sd, {len(seeds)} seeds)"
            for ax, column in zip(axes, ("loss", "dev"), strict=True):
                epochs, mean, sd = _over_seeds(seeds, column)
                ax.plot(epochs, mean, label=label, **style)
                if len(seeds) > 1:
                    ax.fill_between(
                        epochs, mean - sd, mean + sd, color=style["color"], alpha=0.2, linewidth=0
                    )
        axes[0].set(xlabel="epoch", ylabel="training loss (each system's, see legend)")
        axes[1].set(xlabel="epoch", ylabel="dev MAP")
        axes[1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
        _save(fig, out / CURVES_PLOT)
        names.append(CURVES_PLOT)
    if bli.get("by_frequency"):
        fig, ax = plt.subplots(figsize=(7, 4))
        golds = [
            ("IBM1 mutual", "-", bli["by_frequency"]),
            ("FreeDict", "--", bli.get("by_frequency_freedict", {})),
        ]
        for lang in bli["by_frequency"]:
            colour = None
            for gold, linestyle, by_lang in golds:
                if lang not in by_lang:
                    continue
                bins = by_lang[lang]
                labels = [f"{b['lo']}-{b['hi'] if b['hi'] < 10**8 else ''}" for b in bins]
                precision = [b["precision"] for b in bins]
                style = {"marker": "o", "linestyle": linestyle, "color": colour}
                (line,) = ax.plot(labels, precision, label=f"{lang}->en, gold {gold}", **style)
                colour = line.get_color()
                for x, b in zip(labels, bins, strict=True):  # each point's number of test words
                    ax.annotate(
                        f"n={b['words']}",
                        (x, b["precision"]),
                        textcoords="offset points",
                        xytext=(0, 5 if linestyle == "-" else -11),
                        ha="center",
                        fontsize=7,
                        color=colour,
                    )
        ax.set(
            xlabel="source-word frequency rank",
            ylabel="P@1 (CSLS)",
            title="BLI by word frequency\n(gold: IBM1 mutual pairs, and FreeDict where installed; "
            "n: test words in the bin)",
        )
        ax.margins(y=0.15)
        ax.tick_params(axis="x", labelrotation=30)
        ax.legend(fontsize=8)
        _save(fig, out / BLI_PLOT)
        names.append(BLI_PLOT)
    return names


def _plot_files(out: Path) -> set[str]:
    """The plots :func:`_plots` may have written into ``out`` (by this run or an earlier one)."""
    earlier = {path.name for path in out.glob(AP_DIFF_PLOT.format(pair="*"))}
    return earlier | {name for name in (CURVES_PLOT, BLI_PLOT) if (out / name).is_file()}


def _loss_of(config: Any, system: str) -> str:
    """The training loss a system's curve shows (``optim.loss``, hinge when unset): the systems
    of one experiment may train on different losses, whose values are not on one scale (a system
    the config does not list trains as its base reranker)."""
    train = config.train_config(system) if system in config.systems else config.reranker
    return train.optim.loss or "hinge"


def _over_seeds(seeds: Sequence[Sequence[Mapping[str, Any]]], column: str) -> tuple[Any, Any, Any]:
    """Per epoch, the mean and standard deviation of one curve column over the seeds that reached
    that epoch (early stopping ends seeds at different epochs; a missing dev score is NaN)."""
    import numpy as np

    epochs = sorted({row["epoch"] for curve in seeds for row in curve})
    values = [
        [row.get(column) for curve in seeds for row in curve if row["epoch"] == epoch] for epoch in epochs
    ]
    matrix = [np.array([np.nan if v is None else v for v in vs], dtype=float) for vs in values]
    mean = np.array([np.nanmean(v) if np.isfinite(v).any() else np.nan for v in matrix])
    sd = np.array([np.nanstd(v) if np.isfinite(v).sum() > 1 else 0.0 for v in matrix])
    return np.array(epochs), mean, sd


def _save(fig: Any, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    with atomic_write(path, "wb") as handle:
        fig.savefig(handle, format="png", dpi=120)
    plt.close(fig)
