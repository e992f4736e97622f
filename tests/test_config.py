"""The typed configuration tree (clir.config) and the experiment config built on it: every bad
value is a ConfigError naming the file and the dotted key, raised at load, before any step."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import re
import string
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from clir.config import (
    AllowNonFinite,
    Name,
    NonEmpty,
    OneOf,
    PositiveInt,
    Range,
    Section,
    Unique,
    Where,
    build,
)
from clir.datasets import Collection
from clir.datasets.bible import BibleCollectionBuilder
from clir.embeddings import EmbeddingConfig
from clir.errors import ClirError, ConfigError, FormatError
from clir.pipeline import experiment as experiment_module
from clir.pipeline.baselines import BaselineConfig
from clir.pipeline.cache import StepResult, step_key
from clir.pipeline.config import ExperimentConfig, load_experiment
from clir.training import TrainConfig, load_config

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


# ----------------------------------------------------------------------------- the generic builder


@dataclass(frozen=True)
class Inner(Section):
    rate: Annotated[float, Range(gt=0, le=1)] = 0.5
    names: Annotated[list[Name], Unique()] = field(default_factory=list)


@dataclass(frozen=True)
class Outer(Section):
    count: PositiveInt = 1
    flag: bool = False
    label: str = "x"
    weight: float = 1.0
    unbounded: Annotated[float, AllowNonFinite()] = 0.0
    pair: tuple[int, str] = (0, "a")
    seeds: Annotated[tuple[int, ...], NonEmpty()] = (0,)
    maybe: Annotated[int, Range(ge=0)] | None = None
    table: dict[str, int] = field(default_factory=dict)
    choice: Annotated[str, OneOf(("a", "b"))] = "a"
    inner: Inner = field(default_factory=Inner)
    anything: Any = None

    def check(self, where: Where) -> None:
        if self.flag and self.count > 3:
            raise where.error("count", self.count, "at most 3 when flag is on")


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"count": True}, "f.yaml: count must be an integer, got bool True"),
        ({"count": 1.0}, "f.yaml: count must be an integer, got float 1.0"),
        ({"count": 0}, "f.yaml: count=0 is invalid; expected a value >= 1"),
        ({"flag": 1}, "f.yaml: flag must be true or false, got int 1"),
        ({"label": 5}, "f.yaml: label must be a string, got int 5"),
        ({"weight": "1"}, "f.yaml: weight must be a number, got str '1'"),
        ({"weight": math.nan}, "f.yaml: weight must be a finite number, got float nan"),
        ({"weight": -math.inf}, "f.yaml: weight must be a finite number, got float -inf"),
        ({"weight": 10**400}, "f.yaml: weight must be a finite number, got int"),
        ({"pair": [1]}, r"f.yaml: pair must be a list of 2 items, got list \[1\]"),
        ({"pair": [1, 2]}, "f.yaml: pair\\[1\\] must be a string, got int 2"),
        ({"seeds": 5}, "f.yaml: seeds must be a list, got int 5"),
        ({"seeds": "05"}, "f.yaml: seeds must be a list, got str '05'"),
        ({"seeds": []}, r"f.yaml: seeds=\(\) is invalid; expected at least one item"),
        ({"seeds": [0, "1"]}, r"f.yaml: seeds\[1\] must be an integer, got str '1'"),
        ({"maybe": -1}, "f.yaml: maybe=-1 is invalid; expected a value >= 0"),
        ({"table": [1]}, "f.yaml: table must be a mapping"),
        ({"table": {"a": "b"}}, "f.yaml: table.a must be an integer, got str 'b'"),
        ({"table": {1: 1}}, "f.yaml: table.1 must be a string, got int 1"),
        ({"choice": "c"}, r"f.yaml: choice='c' is invalid; expected one of \['a', 'b'\]"),
        ({"inner": 3}, "f.yaml: inner must be a mapping, got int 3"),
        ({"inner": {"rate": 0}}, r"f.yaml: inner.rate=0.0 is invalid; expected a value > 0 and <= 1"),
        (
            {"inner": {"rat": 0}},
            r"f.yaml: unknown key\(s\) \['inner.rat'\] in inner; known keys: \['names', ",
        ),
        ({"inner": {"names": ["a", "a"]}}, r"inner.names=\['a', 'a'\] is invalid; expected distinct items"),
        ({"inner": {"names": ["../x"]}}, r"f.yaml: inner.names\[0\]='../x' is invalid; expected a name"),
        ({"inner": {"names": ["a/b"]}}, r"inner.names\[0\]='a/b' is invalid"),
        ({"inner": {"names": ["a..b"]}}, r"inner.names\[0\]='a..b' is invalid"),
        ({"flag": True, "count": 4}, "f.yaml: count=4 is invalid; expected at most 3 when flag is on"),
    ],
)
def test_build_names_source_key_value_and_expectation(values, message):
    with pytest.raises(ConfigError, match=message):
        build(Outer, values, "f.yaml")


def test_build_converts_defaults_and_accepts_what_is_valid():
    built = build(
        Outer,
        {
            "weight": 2,
            "unbounded": math.inf,
            "pair": [3, "b"],
            "seeds": [4, 5],
            "inner": {"names": ["full+e5", "en_src", "a.b-c"]},
            "anything": {"k": [1]},
        },
        "f.yaml",
    )
    assert built.weight == 2.0 and isinstance(built.weight, float)
    assert built.unbounded == math.inf
    assert built.pair == (3, "b") and built.seeds == (4, 5)
    assert built.inner == Inner(names=["full+e5", "en_src", "a.b-c"])
    assert build(Outer, None, "f.yaml") == Outer()
    with pytest.raises(ConfigError, match=r"f.yaml: unknown key\(s\) \['cont'\] in top level"):
        build(Outer, {"cont": 1}, "f.yaml")
    with pytest.raises(ConfigError, match=r"f.yaml: top level must be a mapping, got list"):
        build(Outer, [1], "f.yaml")


def test_sections_built_in_python_are_checked_and_name_their_class():
    with pytest.raises(ConfigError, match="Outer: count=0 is invalid"):
        Outer(count=0)
    inner = Inner()
    object.__setattr__(inner, "rate", math.nan)  # changed after its own check
    with pytest.raises(ConfigError, match=r"Outer: inner.rate must be a finite number, got float nan"):
        Outer(inner=inner)  # checked again as part of its parent
    assert Outer(seeds=[1, 2]).seeds == (1, 2)  # stored as the hinted tuple
    with pytest.raises(ConfigError, match="EmbeddingConfig: sample must be a finite number, got float nan"):
        EmbeddingConfig(sample=math.nan)
    with pytest.raises(ConfigError, match=r"BaselineConfig: model_params.bm25: b must be in"):
        BaselineConfig(model_params={"bm25": {"b": 2}})
    with pytest.raises(ConfigError, match=r"unknown key\(s\) \['model_params.ql.mu2'\]"):
        BaselineConfig(model_params={"ql": {"mu2": 2}})


def test_canonical_form_has_every_default():
    assert (
        build(Outer, {}, "a").canonical()
        == build(Outer, {"count": 1, "inner": {"rate": 0.5}}, "b").canonical()
    )
    assert json.loads(Outer().canonical())["pair"] == [0, "a"]
    assert Outer().canonical() != Outer(count=2).canonical()


def test_mutable_train_config_is_checked_again_by_validate():
    config = TrainConfig()
    config.optim.lr = math.inf
    with pytest.raises(ConfigError, match=r"run.yaml: optim.lr must be a finite number, got float inf"):
        config.validate("run.yaml")
    config.optim.lr = 0.01
    config.model.interaction_kwargs = {"n_kernels": "11"}
    with pytest.raises(ConfigError, match=r"model.interaction_kwargs.n_kernels must be an integer"):
        config.validate()


@pytest.mark.parametrize(
    ("optim", "message"),
    [
        ("{lr: .inf}", "optim.lr must be a finite number, got float inf"),
        ("{lr: .nan}", "optim.lr must be a finite number, got float nan"),
        ("{margin: .nan}", "optim.margin must be a finite number, got float nan"),
        ("{weight_decay: -1}", r"optim.weight_decay=-1.0 is invalid; expected a value >= 0"),
    ],
)
def test_training_config_rejects_non_finite_numbers(tmp_path, optim, message):
    path = tmp_path / "r.yaml"
    path.write_text(f"optim: {optim}\n")
    with pytest.raises(ConfigError, match=rf"r\.yaml: {message}"):
        load_config(path)


def test_training_config_checks_the_first_stage_name():
    with pytest.raises(
        ConfigError, match=r"r.yaml: data.first_stage='psq' is invalid; expected '<mode>-<model>'"
    ):
        TrainConfig.from_dict({"data": {"first_stage": "psq"}}, "r.yaml")
    assert TrainConfig.from_dict({"data": {"first_stage": "dt-bm25"}}).data.first_stage == "dt-bm25"


# ----------------------------------------------------------------------------- experiment configs

FAST = yaml.safe_load((CONFIGS / "experiment-fast.yaml").read_text())
TINY = yaml.safe_load((CONFIGS / "reranker-tiny.yaml").read_text())
BASE = {**FAST, "reranker": TINY}
"""The fast experiment with its reranker inline: a valid config every bad one below changes."""


def _write(tmp_path: Path, values: dict[str, Any], name: str = "exp.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(values))
    return path


def _with(path: str, value: Any) -> dict[str, Any]:
    """BASE with the dotted ``path`` set to ``value``."""
    values = copy.deepcopy(BASE)
    *parents, last = path.split(".")
    node = values
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return values


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("collection.passage_verse", 5, r"unknown key\(s\) \['collection.passage_verse'\] in collection"),
        ("tables.iteration", 5, r"unknown key\(s\) \['tables.iteration'\] in tables"),
        ("embeddings.dims", 5, r"unknown key\(s\) \['embeddings.dims'\] in embeddings"),
        ("baselines.modelz", ["ql"], r"unknown key\(s\) \['baselines.modelz'\] in baselines"),
        ("baselines.split", "dev", r"unknown key\(s\) \['baselines.split'\] in baselines"),
        # the reports' and model card's title: two lines had stopped the run at the bundle
        ("name", "two\nlines", r"name='two\\nlines' is invalid; expected one line of text"),
        ("name", "  ", r"name='  ' is invalid; expected one line of text"),
        ("ensemble_seeds", 5, "ensemble_seeds must be a list, got int 5"),
        ("ensemble_seeds", [], r"ensemble_seeds=\(\) is invalid; expected at least one item"),
        ("train_pair", 5, "train_pair must be a string, got int 5"),
        ("train_pair", "en-xx", "train_pair='en-xx': doc_lang must be a language with a Bible other than"),
        ("train_pair", "en-../x", r"train_pair='en-../x' is invalid; expected 'en-' and a document language"),
        ("zero_shot_pairs", "en-tl", "zero_shot_pairs must be a list, got str 'en-tl'"),
        ("zero_shot_pairs", ["en-tl", "en-tl"], "zero_shot_pairs=.* is invalid; expected distinct items"),
        ("zero_shot_pairs", ["en-ny", "sw-en"], r"zero_shot_pairs\[1\]='sw-en' is invalid"),
        ("systems", {}, "systems={} is invalid; expected at least one item"),
        ("systems", {"../../x": {}}, r"systems.../../x='../../x' is invalid; expected a name"),
        ("systems", {"a/b": {}}, r"systems.a/b='a/b' is invalid"),
        ("systems", [], "systems must be a mapping, got list"),
        ("significance.permutations", 0, "significance.permutations=0 is invalid; expected a value >= 1"),
        ("significance.permutations", "many", "significance.permutations must be an integer, got str 'many'"),
        (
            "significance.correction",
            "fdr",
            r"significance.correction='fdr' is invalid; expected one of \['bonferroni'",
        ),
        (
            "significance.confidence",
            1.0,
            r"significance.confidence=1.0 is invalid; expected a value > 0 and < 1",
        ),
        (
            "significance.interval",
            "bca",
            r"significance.interval='bca' is invalid; expected one of \['bootstrap', 't'\]",
        ),
        ("dense", "yes", "dense must be true or false, got str 'yes'"),
        ("split", "valid", r"split='valid' is invalid; expected one of \['dev', 'test', 'train'\]"),
        ("tables.iterations", 2.5, "tables.iterations must be an integer, got float 2.5"),
        ("tables.iterations", 0, "tables.iterations=0 is invalid"),
        (
            "tables.iterations",
            10**20,
            r"tables.iterations=100000000000000000000 is invalid; expected a value >= 1 and <= 10000",
        ),
        ("embeddings.dim", True, "embeddings.dim must be an integer, got bool True"),
        ("embeddings.copies", 0, "embeddings.copies=0 is invalid"),
        # gensim refused it at the space step, after the tables and baselines: "unexpected ValueError"
        ("embeddings.negative", 0, r"embeddings.negative=0 is invalid; expected a value >= 1"),
        ("embeddings.sample", math.nan, "embeddings.sample must be a finite number, got float nan"),
        ("collection.n_test", "30", "collection.n_test must be an integer, got str '30'"),
        ("collection.passage_verses", 0, "collection.passage_verses must be a positive integer, got 0"),
        ("collection.collection_books", [8, 43], r"collection.books \[43\] are in both parallel_books"),
        ("collection.parallel_books", [70], r"collection.parallel_books must hold book numbers 1-66"),
        # the tables step had failed, naming options of other commands (--tables, --parallel)
        ("collection.parallel_books", [], r"collection.parallel_books=\[\] is invalid; expected at least"),
        ("baselines.models", ["bm26"], r"baselines.models\[0\]='bm26' is invalid; expected one of"),
        ("baselines.model_params", {"ql": {"mu": -1}}, "baselines.model_params.ql: mu must be > 0, got -1"),
        ("baselines.psq_cumulative", math.inf, "baselines.psq_cumulative must be a finite number"),
        ("reranker.optim.lr", math.inf, "reranker.optim.lr must be a finite number, got float inf"),
        ("reranker.optim.lr", math.nan, "reranker.optim.lr must be a finite number, got float nan"),
        ("reranker.optim.margin", math.nan, "reranker.optim.margin must be a finite number"),
        ("reranker.modle", {}, r"unknown key\(s\) \['reranker.modle'\] in reranker"),
        ("systems.full.optim", {"lr": math.inf}, "systems.full.optim.lr must be a finite number"),
        ("systems.full.data", {"depth": 5}, "systems.full.data: system 'full' overrides 'data'"),
        # full's seeds are ensemble_seeds: an override of them had been replaced by those, silently
        ("systems.full.ensemble", {"seeds": [3, 4]}, r"systems.full.ensemble: the seeds of system"),
        ("systems.full.with_dense", True, "systems.full.with_dense=True is invalid; expected false, as"),
        ("systems.full.with_dense", 1, "systems.full.with_dense=1 is invalid; expected true or false"),
        ("systems.full", 3, "systems.full must be a mapping, got int 3"),
        # `model:` with its keys commented out had replaced the base's model with the defaults
        ("systems.full.model", None, r"systems.full.model=None is invalid; expected a mapping of the keys"),
        ("systems.lexical-fusion.optim", None, r"systems.lexical-fusion.optim=None is invalid; expected a"),
        ("systems.full.model", {"interaction": "bert"}, r"systems.full.model.interaction='bert' is invalid"),
        ("weak.first_stage", "qt-foo", r"weak.first_stage='qt-foo' is invalid; expected '<mode>-<model>'"),
        ("weak.first_stage", ["qt-bm25", "x"], r"weak.first_stage\[1\]='x' is invalid"),
        # seeds out of numpy's range failed with "unexpected ValueError" once steps had run
        ("tables.seed", -1, r"tables.seed=-1 is invalid; expected a value >= 0 and <= 4294967295"),
        # it changed no probability (the EM starts uniform), only made the tables be learned again
        ("tables.seed", 3, r"tables.seed=3 is invalid; expected 0: IBM Model 1's EM starts from uniform"),
        ("embeddings.seed", -1, r"embeddings.seed=-1 is invalid; expected a value >= 0"),
        ("significance.seed", -1, r"significance.seed=-1 is invalid; expected a value >= 0"),
        ("collection.seed", 2**32, r"collection.seed=4294967296 is invalid; expected a value >= 0"),
        ("weak.seed", -1, r"weak.seed=-1 is invalid; expected a value >= 0"),
        ("distractors.seed", -1, r"distractors.seed=-1 is invalid; expected a value >= 0"),
    ],
)
def test_bad_experiment_configs_fail_at_load_naming_file_and_key(tmp_path, path, value, message):
    config_file = _write(tmp_path, _with(path, value))
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(tmp_path))}/exp\.yaml: {message}"):
        load_experiment(config_file)


def test_settings_that_mislead_are_warned_about(tmp_path):
    """`split: train` was accepted without a word (the report's numbers were of the queries the
    rerankers had trained on), and so were ensemble_seeds without a `full` system."""
    with pytest.warns(UserWarning, match=r"exp\.yaml: split 'train': the report evaluates the queries the"):
        load_experiment(_write(tmp_path, _with("split", "train")))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_experiment(_write(tmp_path, _with("split", "dev")))  # the dev queries: a user's choice
    # ensemble_seeds are full's: without it, a five-seed ensemble asked for trained nothing
    values = _with("systems", {"lexical-fusion": {"model": {"components": []}}})
    values["ensemble_seeds"] = [0, 1, 2]
    with pytest.warns(
        UserWarning, match=r"exp\.yaml: ensemble_seeds \[0, 1, 2\] are the seeds of system 'full'"
    ):
        load_experiment(_write(tmp_path, values))


def test_a_space_of_unaligned_vectors_is_refused_for_components_across_languages(tmp_path):
    """``embeddings.joint: false`` trains each language's vectors alone and no step aligns them:
    en_src and src_en had compared an English vector with a Swahili one of another space."""
    values = _with("embeddings.joint", False)
    assert not load_experiment(_write(tmp_path, values)).embeddings.joint  # en_en, src_src: one language each
    values["systems"]["full"] = {"model": {"components": ["en_en", "en_src"]}}
    message = (
        r"exp\.yaml: embeddings\.joint=False is invalid; expected true while system 'full' compares "
        r"languages \(model\.components \['en_src'\]\)"
    )
    with pytest.raises(ConfigError, match=message):
        load_experiment(_write(tmp_path, values))


@pytest.mark.parametrize(("key", "value"), [("copies", 3), ("centre", False)])
def test_joint_space_settings_beside_joint_false_are_refused(tmp_path, key, value):
    # a monolingual space has no verse-pair copies and is not centred (no step aligns it): the
    # setting had been ignored, silently, and keyed the space (and every system reading it) anew
    values = _with("embeddings.joint", False)
    values["embeddings"][key] = value
    message = (
        rf"exp\.yaml: embeddings\.{key}={value} is invalid; expected .* \(the default\) with joint false"
    )
    with pytest.raises(ConfigError, match=message):
        load_experiment(_write(tmp_path, values))
    values["embeddings"]["joint"] = True
    assert getattr(load_experiment(_write(tmp_path, values)).embeddings, key) == value


def test_a_bad_override_in_the_last_system_is_reported_at_load(tmp_path):
    values = _with("systems", {"full": {}, "lexical-fusion": {"model": {"components": []}}, "last": {}})
    values["systems"]["last"] = {"optim": {"epochs": 0}}
    with pytest.raises(ConfigError, match=r"exp\.yaml: systems\.last\.optim\.epochs=0 is invalid"):
        load_experiment(_write(tmp_path, values))
    values["systems"]["last"] = {"model": {"interaction_kwargs": {"n_bins": 30}}}  # drmm's, not knrm's
    with pytest.raises(
        ConfigError, match=r"unknown key\(s\) \['systems.last.model.interaction_kwargs.n_bins'\]"
    ):
        load_experiment(_write(tmp_path, values))


def test_errors_inside_a_named_reranker_file_name_that_file(tmp_path):
    (tmp_path / "r.yaml").write_text("optim: {lr: .nan}\n")
    config_file = _write(tmp_path, {**BASE, "reranker": "r.yaml"})
    with pytest.raises(ConfigError, match=r"r\.yaml: optim\.lr must be a finite number"):
        load_experiment(config_file)
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(TINY))
    assert load_experiment(config_file).reranker == TrainConfig.from_dict(TINY)


def test_an_experiment_config_built_in_python_is_checked_too():
    with pytest.raises(ConfigError, match=r"ExperimentConfig: systems={} is invalid"):
        ExperimentConfig(systems={})
    config = ExperimentConfig(zero_shot_pairs=["en-tl"])
    assert config.zero_shot_pairs == ("en-tl",)
    with pytest.raises(ConfigError, match=r"ExperimentConfig: systems\.x\.optim\.lr must be a finite number"):
        dataclasses.replace(config, systems={"x": {"optim": {"lr": math.nan}}})


@pytest.mark.parametrize("file", sorted(CONFIGS.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_shipped_config_loads(file):
    if file.stem.startswith("reranker-"):
        assert isinstance(load_config(file), TrainConfig)
        return
    config = load_experiment(file)
    for system in config.systems:
        assert config.train_config(system).to_dict() == config.reranker_config(system)
    assert config.baseline_config().split == config.split


class _Stop(Exception):
    pass


def _step_keys(config: ExperimentConfig, tmp_path: Path, monkeypatch) -> dict[str, str]:
    """The key of every step up to reranking, without running any (a recording StepRunner)."""
    keys: dict[str, str] = {}

    class Recorder:
        def __init__(self, out: Path, log: Any = None, **options: Any) -> None:
            self.timings: dict[str, float] = {}

        def __enter__(self) -> Recorder:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

        def run(self, name, params, build, inputs=(), *, resumable=False):
            if name.startswith("rerank-"):
                raise _Stop
            keys[name] = step_key(name, params, inputs)
            return StepResult(name, keys[name], tmp_path / name, True, 0.0)

    monkeypatch.setattr(experiment_module, "StepRunner", Recorder)
    with pytest.raises(_Stop):
        experiment_module.run_experiment(config, tmp_path / "out", progress=False, log=lambda line: None)
    return keys


def test_a_default_left_out_or_written_gives_the_same_step_keys(tmp_path, monkeypatch):
    explicit = copy.deepcopy(BASE)
    explicit["tables"] = {"iterations": 3, "seed": 0}
    explicit["collection"]["passage_verses"] = 5
    explicit["embeddings"]["sample"] = 0.001
    explicit["baselines"] = {"psq_top_k": 10, "spelling": 0.5, "model_params": {}}
    explicit["reranker"]["optim"]["dropout"] = 0.0
    explicit["systems"]["full"] = {"optim": {"lr": 0.05}, "cv": {"folds": 1}}  # tiny's lr, the default folds
    implicit = _step_keys(load_experiment(_write(tmp_path, BASE)), tmp_path, monkeypatch)
    written = _step_keys(load_experiment(_write(tmp_path, explicit, "explicit.yaml")), tmp_path, monkeypatch)
    assert written == implicit
    assert {"collection-en-sw", "tables-en-tl", "baselines-en-sw", "space", "train-full"} <= set(implicit)
    changed = copy.deepcopy(BASE)
    changed["systems"]["full"] = {"optim": {"lr": 0.04}}
    other = _step_keys(load_experiment(_write(tmp_path, changed, "changed.yaml")), tmp_path, monkeypatch)
    assert other["train-full"] != implicit["train-full"]
    assert other["train-lexical-fusion"] == implicit["train-lexical-fusion"]


def test_the_reranker_s_progress_is_part_of_no_step_key(tmp_path, monkeypatch):
    # progress shows bars and trains nothing else: a reranker config's progress: true beside the
    # tiny one's false had keyed every train step anew (and so every rerank step), training again
    quiet = _step_keys(
        load_experiment(_write(tmp_path, _with("reranker.progress", False))), tmp_path, monkeypatch
    )
    shown = _step_keys(
        load_experiment(_write(tmp_path, _with("reranker.progress", True), "shown.yaml")),
        tmp_path,
        monkeypatch,
    )
    assert shown == quiet
    assert {"train-full", "train-lexical-fusion"} <= set(quiet)
    values = _with("reranker.progress", False)
    values["systems"]["full"] = {"progress": True}  # a system's own
    assert _step_keys(load_experiment(_write(tmp_path, values, "own.yaml")), tmp_path, monkeypatch) == quiet


def test_collection_json_with_a_non_string_language_names_file_and_key(tmp_path):
    (tmp_path / "collection.json").write_text(json.dumps({"name": "x", "doc_lang": 5}))
    with pytest.raises(FormatError, match=r"collection\.json: 'doc_lang' must be a string, got int 5"):
        Collection.load(tmp_path)


def test_bible_builder_options_are_the_bible_config():
    builder = BibleCollectionBuilder("sw", parallel_books=[62, 43, 43], collection_books=[8], progress=False)
    assert (builder.parallel_books, builder.collection_books) == ([43, 62], [8])
    assert builder.config.n_test == 500
    with pytest.raises(ConfigError, match=r"BibleCollectionBuilder: unknown key\(s\) \['n_tests'\]"):
        BibleCollectionBuilder("sw", n_tests=5)


# ----------------------------------------------------------------------------- property

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(alphabet=string.ascii_letters + string.digits + "-_./+ ", max_size=12)
)
_VALUES = st.recursive(
    _SCALARS,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=6,
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(node, dict):
        items = list(node.items())
    elif isinstance(node, list):
        items = list(enumerate(node))
    else:
        return []
    return [p for key, child in items for p in [(*prefix, key), *_paths(child, (*prefix, key))]]


_BASE_PATHS = _paths(BASE)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(_BASE_PATHS), _VALUES)
def test_any_value_at_any_key_loads_or_is_a_clir_error_naming_the_file(path, value):
    values = copy.deepcopy(BASE)
    node = values
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with tempfile.TemporaryDirectory() as tmp:
        config_file = Path(tmp) / "exp.yaml"
        config_file.write_text(yaml.safe_dump(values))
        try:
            config = load_experiment(config_file)
        except ClirError as error:
            assert str(error).startswith(str(config_file))
        else:
            assert isinstance(config, ExperimentConfig)
            json.loads(config.canonical())
            for system in config.systems:
                config.train_config(system)


def test_yaml_errors_are_one_line_naming_the_place_and_repeated_keys_are_refused(tmp_path):
    """A repeated key was kept silently (the last one won: ``optim:`` twice dropped the first
    section), and a YAML syntax error printed PyYAML's message over five lines."""
    from clir.config import load_yaml

    duplicate = "not valid YAML: duplicate key"
    cases = {
        "optim:\n  lr: 1\nmodel: {}\noptim: {}\n": rf"x\.yaml:4:1: {duplicate} 'optim' \(first on line 1\)$",
        "a:\n  c: 1\n  c: 2\n": rf"x\.yaml:3:3: {duplicate} 'c' \(first on line 2\)$",
        "x: {a: 1, a: 2}\n": rf"x\.yaml:1:11: {duplicate} 'a'",
        "model: [\n": r"x\.yaml:2:1: not valid YAML: expected the node content, but found '<stream end>'$",
    }
    for text, message in cases.items():
        (tmp_path / "x.yaml").write_text(text)
        with pytest.raises(ConfigError, match=message):
            load_yaml(tmp_path / "x.yaml")
    (tmp_path / "x.yaml").write_text("base: &b {lr: 1, epochs: 3}\nx:\n  <<: *b\n  lr: 2\n")
    assert load_yaml(tmp_path / "x.yaml") == {"base": {"lr": 1, "epochs": 3}, "x": {"lr": 2, "epochs": 3}}


@pytest.mark.parametrize("text", ["", "# lr: 0.1\n", "null\n", "---\n~\n"])
def test_an_empty_config_file_is_an_error_not_the_defaults(text, tmp_path, capsys):
    """A config file saved empty (or holding only comments, or null) trained with every default,
    silently; ``{}`` still asks for them."""
    from clir.cli import main
    from clir.pipeline.config import load_experiment
    from clir.training import TrainConfig, load_config

    path = tmp_path / "x.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}: empty config file \(no key set\)"):
        load_config(path)
    with pytest.raises(ConfigError, match=r"x\.yaml: empty experiment config \(no key set\); write \{\}"):
        load_experiment(path)
    argv = [
        "train",
        "--config",
        str(path),
        "--collection",
        str(tmp_path / "c"),
        "--space",
        str(tmp_path / "s"),
    ]
    assert main([*argv, "--out", str(tmp_path / "m")]) == 2
    assert capsys.readouterr().err.startswith(f"clir: error: {path}: empty config file")
    path.write_text("{}\n")
    assert load_config(path) == TrainConfig()


def test_a_directory_given_as_a_config_file_is_named_as_one(tmp_path, capsys):
    """clir train --config . said ".: no such config file"."""
    from clir.cli import main

    argv = ["train", "--config", str(tmp_path), "--collection", str(tmp_path / "c"), "--space", "s"]
    assert main([*argv, "--out", str(tmp_path / "m")]) == 2
    expected = f"clir: error: {tmp_path}: is a directory, not a YAML file (the config file expected)"
    assert capsys.readouterr().err.startswith(expected)
    with pytest.raises(
        ConfigError, match=r": is a directory, not a YAML file \(the experiment config expected\)"
    ):
        load_experiment(tmp_path)


def test_a_range_is_spelled_the_same_with_int_or_float_bounds():
    """typing caches ``Annotated[float, Range(ge=0, lt=1)]`` and the equal ``Range(ge=0.0, lt=1.0)``
    as one object, so a message's spelling had depended on which module was imported first."""
    assert Range(ge=0.0, lt=1.0).expected() == Range(ge=0, lt=1).expected() == "a value >= 0 and < 1"
    assert Range(gt=0.5, le=2**32 - 1).expected() == "a value > 0.5 and <= 4294967295"


def test_mt_model_paths_are_read_beside_the_experiment_file(tmp_path, monkeypatch):
    """translation.models paths were read from the working directory, the reranker file beside
    the experiment file: the same relative path meant two places in one config."""
    from clir.pipeline.config import load_experiment

    fast = Path(__file__).resolve().parents[1] / "configs" / "experiment-fast.yaml"
    folder = tmp_path / "configs"
    for name in ("sw-en", "en-sw", "tl-en"):
        (folder / "models" / name).mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere" / "tl-en"
    elsewhere.mkdir(parents=True)
    section = (
        "translation:\n  mode: mt\n  models:\n    sw: {to_en: models/sw-en, from_en: ./models/en-sw}\n"
        f"    tl: {{to_en: {elsewhere}}}\n"
    )
    base = fast.read_text().replace("reranker-tiny.yaml", str(fast.parent / "reranker-tiny.yaml"))
    (folder / "mt.yaml").write_text(base + section)
    monkeypatch.chdir(tmp_path)  # models/sw-en is no directory here
    models = load_experiment(Path("configs") / "mt.yaml").translation.models
    assert Path(models["sw"].to_en).resolve() == folder / "models" / "sw-en"
    assert Path(models["sw"].from_en).resolve() == folder / "models" / "en-sw"
    assert models["tl"].to_en == str(elsewhere)  # an absolute path as it is
    (tmp_path / "models" / "sw-en").mkdir(parents=True)  # the working directory's is not taken
    (folder / "models" / "sw-en").rmdir()
    with pytest.raises(
        ConfigError, match=r"translation\.models\.sw\.to_en='configs/models/sw-en' is invalid"
    ):
        load_experiment(Path("configs") / "mt.yaml")


def test_an_integer_too_long_to_write_is_a_yaml_error_naming_its_place(tmp_path, capsys):
    """An integer of more than 4,300 digits had been an "unexpected ValueError" naming no file
    (decimal), or been read (hexadecimal) and failed when its error message wrote it."""
    from clir.cli import main
    from clir.config import load_yaml

    path = tmp_path / "x.yaml"
    problem = "not valid YAML: an integer of more than 4300 digits"
    for text, place in (
        (f"optim: {{seed: 1{'0' * 5000}}}\n", "1:15"),
        (f"optim:\n  seed: 0x{'f' * 5000}\n", "2:9"),
    ):
        path.write_text(text)
        with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}:{place}: {problem}$"):
            load_yaml(path)
    argv = ["train", "--config", str(path), "--collection", "c", "--space", "s", "--out", str(tmp_path / "m")]
    assert main(argv) == 2
    assert capsys.readouterr().err == f"clir: error: {path}:2:9: {problem}\n"


def test_a_number_with_an_exponent_is_a_float_so_a_config_saved_as_json_loads(tmp_path):
    """YAML 1.1 reads 1e-05 as a string: a config that save_config wrote as JSON (json.dump writes
    1e-05) failed to load ("optim.lr must be a number"), and so did 1e-3 written by hand."""
    from clir.training import OptimConfig, save_config

    config = TrainConfig(optim=OptimConfig(lr=1e-5, weight_decay=2e-7))
    assert load_config(save_config(config, tmp_path / "saved.json")) == config
    (tmp_path / "x.yaml").write_text("optim: {lr: 1e-3, weight_decay: 1.0e2, margin: .5E+1}\n")
    optim = load_config(tmp_path / "x.yaml").optim
    assert (optim.lr, optim.weight_decay, optim.margin) == (0.001, 100.0, 5.0)
    (tmp_path / "x.yaml").write_text("optim: {lr: '1e-3'}\n")  # a string, quoted, is still one
    with pytest.raises(ConfigError, match=r"optim\.lr must be a number \(YAML reads 1e-3 as a string"):
        load_config(tmp_path / "x.yaml")


def test_an_error_names_a_nest_of_yaml_aliases_in_a_few_words(tmp_path):
    """Aliases nest 10**k items in a file of a few hundred bytes (the "billion laughs"): an
    error's repr of the value had run for minutes, taking gigabytes, with k = 9."""
    nest = "&a0 [x, x, x, x, x, x, x, x, x, x]"
    for k in range(1, 6):  # 10**6 items: a repr of 5 MB
        nest = f"&a{k} [{nest}, " + ", ".join([f"*a{k - 1}"] * 9) + "]"
    path = tmp_path / "x.yaml"
    for text in (f"optim: {{lr: {nest}}}\n", f"optim: {nest}\n", f"optim: {{loss: {nest}}}\n"):
        path.write_text(text)
        with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}: optim") as error:
            load_config(path)
        assert len(str(error.value)) < 1000
    config = _with("systems.full", {"pretrain": "x"})
    path = _write(tmp_path, config)
    path.write_text(path.read_text().replace("pretrain: x", f"pretrain: {nest}"))
    with pytest.raises(ConfigError, match=r"systems\.full\.pretrain: no system \[\[\[\.\.\.\], ") as error:
        load_experiment(path)
    assert len(str(error.value)) < 1000
