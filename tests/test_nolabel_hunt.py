"""A user's parallel.tsv for 'clir data pseudo' with the mistakes a user makes (no-label hunt):
columns swapped, a header line, an empty document side, --doc-lang naming another language. Each
had made a collection silently (Swahili keyword queries against English passages; a header read
as a pair; a refusal of the sizes that named no cause)."""

from __future__ import annotations

import pytest

from clir.cli import main
from clir.types import ParallelPair

SUBJECTS = [
    ("the farmer", "mkulima"),
    ("the child", "mtoto"),
    ("the teacher", "mwalimu"),
    ("the king", "mfalme"),
]
OBJECTS = [("the water", "maji"), ("the bread", "mkate"), ("a house", "nyumba"), ("the field", "shamba")]
PLACES = [("in the village", "katika kijiji"), ("to the city", "kwa mji"), ("of the river", "ya mto")]


def _pairs() -> list[ParallelPair]:
    pairs = []
    for s_en, s_sw in SUBJECTS:
        for o_en, o_sw in OBJECTS:
            for p_en, p_sw in PLACES:
                n = len(pairs) + 1
                english = f"And {s_en} took {o_en} {p_en}, and he was with them there."
                swahili = f"Na {s_sw} akachukua {o_sw} {p_sw}, naye alikuwa pamoja nao huko."
                pairs.append(ParallelPair(f"p{n:06d}", english, swahili))
    return pairs


def _write(path, rows) -> None:
    path.write_text("".join("\t".join(row) + "\n" for row in rows), encoding="utf-8")


def _run(tmp_path, path, lang="sw"):
    out = tmp_path / "pseudo"
    argv = ["data", "pseudo", str(path), "--doc-lang", lang, "--out", str(out), "--n-dev", "2", "--quiet"]
    return main(argv), out


def test_swapped_columns_are_refused_naming_the_file_and_the_order(tmp_path, capsys):
    path = tmp_path / "parallel.tsv"
    _write(path, [(p.pair_id, p.target, p.source) for p in _pairs()])
    code, out = _run(tmp_path, path)
    err = capsys.readouterr().err
    assert code == 2 and not out.exists()
    assert err.startswith(f"clir: error: {path}: its third column reads as English")
    assert "pair_id, english, sw; swap them" in err and "Traceback" not in err


def test_the_right_order_passes_silently(tmp_path, capsys):
    path = tmp_path / "parallel.tsv"
    _write(path, [tuple(p) for p in _pairs()])
    code, out = _run(tmp_path, path)
    assert code == 0 and (out / "documents.jsonl").exists()
    assert "warning" not in capsys.readouterr().err


def test_a_header_line_is_named_in_a_warning(tmp_path, capsys):
    path = tmp_path / "parallel.tsv"
    _write(path, [("pair_id", "english", "swahili"), *(tuple(p) for p in _pairs())])
    code, _ = _run(tmp_path, path)
    err = capsys.readouterr().err
    assert code == 0
    assert f"clir: warning: {path}:1: 'pair_id\\tenglish\\tswahili' looks like a header" in err


def test_an_empty_document_side_is_named(tmp_path, capsys):
    path = tmp_path / "parallel.tsv"
    _write(path, [(p.pair_id, p.source, "") for p in _pairs()])
    code, out = _run(tmp_path, path)
    err = capsys.readouterr().err
    assert code == 2 and not out.exists()
    assert err.startswith(f"clir: error: {path}: every pair's third field (the sw side) is empty")


@pytest.mark.parametrize("lang", ["tl", "de"])
def test_a_doc_lang_of_another_language_is_warned_about(tmp_path, capsys, lang):
    path = tmp_path / "parallel.tsv"
    _write(path, [tuple(p) for p in _pairs()])
    code, _ = _run(tmp_path, path, lang)
    err = capsys.readouterr().err
    assert code == 0
    assert f"clir: warning: {path}: its third column does not read as {lang!r}" in err
    assert "'sw' stopwords): check --doc-lang" in err


def test_swapped_columns_given_as_parallel_to_any_command_are_refused(tmp_path, capsys):
    # `clir tables --parallel` (and every command taking --parallel) had learned tables from them
    right, swapped = tmp_path / "parallel.tsv", tmp_path / "swapped.tsv"
    _write(right, [tuple(p) for p in _pairs()])
    _write(swapped, [(p.pair_id, p.target, p.source) for p in _pairs()])
    code, collection = _run(tmp_path, right)
    assert code == 0
    capsys.readouterr()
    argv = ["tables", "--collection", str(collection), "--out", str(tmp_path / "t"), "--iterations", "1"]
    assert main([*argv, "--parallel", str(swapped)]) == 2
    assert capsys.readouterr().err.startswith(f"clir: error: {swapped}: its third column reads as English")
    assert not (tmp_path / "t").exists()
    assert main([*argv, "--parallel", str(right)]) == 0
