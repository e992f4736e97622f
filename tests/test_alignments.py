"""Translation tables from an aligner's links (eflomal / fast_align Pharaoh format) and from other
toolkits' table files, as alternatives to IBM Model 1; through ``clir tables`` to the baselines."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_import import write_user_files

from clir.cli import main
from clir.errors import FormatError
from clir.pipeline.tables import load_tables
from clir.translation.alignments import read_links, read_table, tables_from_links, transpose


def _probs(table) -> dict[tuple[str, str], float]:
    coo = table.probs.tocoo()
    return {
        (table.source_vocab[i], table.target_vocab[j]): pytest.approx(p)
        for i, j, p in zip(coo.row, coo.col, coo.data, strict=True)
    }


def test_tables_from_links_by_hand(tmp_path):
    en, sw = [["dog", "eat"], ["dog"]], [["mbwa", "kula"], ["mbwa"]]
    (tmp_path / "a").write_text("0-0 1-1\n0-0\n")
    (tmp_path / "b").write_text("0-0 1-0\n\n")  # an empty line: a pair with no link
    files = [(tmp_path / name, read_links(tmp_path / name)) for name in ("a", "b")]
    assert files[1][1] == [[(0, 0), (1, 0)], []]
    forward, backward = tables_from_links(en, sw, files, "en", "sw")
    # counts: dog-mbwa 3, eat-kula 1, eat-mbwa 1
    assert _probs(forward) == {("dog", "mbwa"): 1.0, ("eat", "kula"): 0.5, ("eat", "mbwa"): 0.5}
    assert _probs(backward) == {("mbwa", "dog"): 0.75, ("mbwa", "eat"): 0.25, ("kula", "eat"): 1.0}
    assert forward.meta["method"] == "alignments" and (forward.source_lang, backward.source_lang) == (
        "en",
        "sw",
    )
    (tmp_path / "short").write_text("0-0\n")
    with pytest.raises(FormatError, match=r"short: has 1 lines, expected one per sentence pair \(2\)"):
        tables_from_links(en, sw, [(tmp_path / "short", read_links(tmp_path / "short"))], "en", "sw")
    (tmp_path / "past").write_text("0-0\n0-1\n")
    with pytest.raises(FormatError, match=r"past:2: link 0-1 is past the pair's 1 source / 1 target tokens"):
        tables_from_links(en, sw, [(tmp_path / "past", read_links(tmp_path / "past"))], "en", "sw")
    (tmp_path / "bad").write_text("0-0\n0:1\n")
    with pytest.raises(FormatError, match=r"bad:2: link '0:1' is not 'i-j'"):
        read_links(tmp_path / "bad")


def test_read_links_names_the_line_that_is_not_utf8(tmp_path):
    # it was an "unexpected UnicodeDecodeError" naming neither the file nor the line
    (tmp_path / "links").write_bytes(b"0-0 1-1\n0-\xff1\n")
    with pytest.raises(FormatError, match=r"links:2: not valid UTF-8"):
        read_links(tmp_path / "links")
    (tmp_path / "links").write_bytes(b"0-0 1-1\r\n\r\n1-0\r\n")  # CRLF lines read as before
    assert read_links(tmp_path / "links") == [[(0, 0), (1, 1)], [], [(1, 0)]]


def test_a_link_written_twice_on_a_line_is_refused_not_counted_twice(tmp_path):
    # "0-0 0-0" counted dog-mbwa twice in that pair, doubling its weight against eat-mbwa
    en, sw = [["dog", "eat"]], [["mbwa"]]
    (tmp_path / "links").write_text("0-0 1-0 0-0\n")
    with pytest.raises(FormatError, match=r"links:1: link 0-0 is written twice"):
        read_links(tmp_path / "links")
    with pytest.raises(FormatError, match=r"given:1: link 0-0 is written twice"):
        tables_from_links(en, sw, [("given", [[(0, 0), (1, 0), (0, 0)]])], "en", "sw")
    (tmp_path / "links").write_text("0-0 1-0\n")  # each link once: equal counts
    forward, _ = tables_from_links(en, sw, [(tmp_path / "links", read_links(tmp_path / "links"))], "en", "sw")
    assert _probs(forward) == {("dog", "mbwa"): 1.0, ("eat", "mbwa"): 1.0}


class _Lower:
    """An analyzer that lowercases and drops 'the'."""

    def analyze(self, text: str) -> list[str]:
        return [word for word in text.lower().split() if word != "the"]


def test_read_table_tsv_and_json_by_hand(tmp_path):
    (tmp_path / "t.tsv").write_text("Dog\tmbwa\t0.6\ndog\tkelb\t0.2\nthe\tya\t0.9\ncat\tpaka\t2\n")
    table = read_table(tmp_path / "t.tsv", "en", "sw", source_analyzer=_Lower())
    # "Dog" and "dog" share the term dog (0.6 + 0.2, renormalised); "the" analyzes to nothing
    assert _probs(table) == {("dog", "mbwa"): 0.75, ("dog", "kelb"): 0.25, ("cat", "paka"): 1.0}
    (tmp_path / "t.json").write_text(json.dumps({"dog": {"mbwa": 3, "kelb": 1}}))
    assert _probs(read_table(tmp_path / "t.json", "en", "sw")) == {
        ("dog", "mbwa"): 0.75,
        ("dog", "kelb"): 0.25,
    }
    reverse = transpose(read_table(tmp_path / "t.json", "en", "sw"))
    assert _probs(reverse) == {("mbwa", "dog"): 1.0, ("kelb", "dog"): 1.0}
    # a target phrase shares its weight among its terms, as Lexicon.to_table does (each term had
    # taken it whole: the phrase held two thirds of the row)
    (tmp_path / "p.tsv").write_text("capital\tmji mkuu\t0.5\ncapital\tjiji\t0.5\n")
    assert _probs(read_table(tmp_path / "p.tsv", "en", "sw", target_analyzer=_Lower())) == {
        ("capital", "mji"): 0.25,
        ("capital", "mkuu"): 0.25,
        ("capital", "jiji"): 0.5,
    }
    (tmp_path / "bad.tsv").write_text("dog\tmbwa\t0.5\ndog\tkelb\tnan\n")
    with pytest.raises(FormatError, match=r"bad\.tsv:2: probability must be a finite number >= 0, got 'nan'"):
        read_table(tmp_path / "bad.tsv", "en", "sw")
    (tmp_path / "latin1.tsv").write_bytes("dog\tmbwa\t0.5\ncafé\tkahawa\t1\n".encode("latin-1"))
    with pytest.raises(FormatError, match=r"latin1\.tsv:2: not valid UTF-8"):
        read_table(tmp_path / "latin1.tsv", "en", "sw")
    (tmp_path / "bom.json").write_text("\ufeff" + json.dumps({"dog": {"mbwa": 1}}), encoding="utf-8")
    assert _probs(read_table(tmp_path / "bom.json", "en", "sw")) == {("dog", "mbwa"): 1.0}
    (tmp_path / "bad.json").write_text('{"dog": ["mbwa"]}')
    with pytest.raises(FormatError, match=r"bad\.json: entry 'dog' must map target words to probabilities"):
        read_table(tmp_path / "bad.json", "en", "sw")


def test_read_table_at_the_ends_of_the_float_range_and_refusing_what_was_lost(tmp_path):
    """An audit of 2026-12-06: weights of 1e308 overflowed the row sum (the word lost every
    translation, with a numpy warning at most), 1e-320 underflowed its inverse (an error naming no
    file); a JSON key written twice kept its last value, an integer past float's range was an
    'unexpected OverflowError', and '1_000' was read as 1000 (Python's float(), not C's)."""
    for big in ("1e308", "1e-320"):  # "Dog" and "dog" share the term dog: their weights add up
        (tmp_path / "t.tsv").write_text(f"dog\tmbwa\t{big}\ndog\tpaka\t{big}\nDog\tpaka\t{big}\n")
        assert _probs(read_table(tmp_path / "t.tsv", "en", "sw", source_analyzer=_Lower())) == pytest.approx(
            {("dog", "mbwa"): 1 / 3, ("dog", "paka"): 2 / 3}
        )
    for text, expected in (
        ('{"dog": {"mbwa": 0.9}, "dog": {"paka": 1}}', "key 'dog' is written twice in one object"),
        ('{"dog": {"mbwa": 0.9, "mbwa": 0.1, "paka": 0.1}}', "key 'mbwa' is written twice in one object"),
        ('{"dog": {"mbwa": 1' + "0" * 330 + "}}", "probability must be a finite number >= 0"),
    ):
        (tmp_path / "bad.json").write_text(text)
        with pytest.raises(FormatError, match=rf"bad\.json: {expected}"):
            read_table(tmp_path / "bad.json", "en", "sw")
    (tmp_path / "bad.tsv").write_text("dog\tmbwa\t1_000\ndog\tpaka\t1000\n")
    with pytest.raises(FormatError, match=r"bad\.tsv:1: probability must be .*, got '1_000'"):
        read_table(tmp_path / "bad.tsv", "en", "sw")


def test_read_table_refuses_a_tsv_pair_written_twice_and_empty_json_words(tmp_path):
    """A TSV line repeated (a pair given two probabilities) had its weights added up before the
    renormalisation, silently (dog -> mbwa 2/3 here), as a JSON key written twice is refused; a
    JSON entry's empty word was kept (or, analyzed, dropped with its mass), as a TSV's is refused."""
    for text, word in (
        ('{"dog": {"mbwa": 1, " ": 1}}', "'dog' -> ' '"),
        ('{"": {"mbwa": 1}}', "'' -> 'mbwa'"),
    ):
        (tmp_path / "t.json").write_text(text)
        with pytest.raises(FormatError, match=rf"t\.json: entry {word}: an empty word"):
            read_table(tmp_path / "t.json", "en", "sw", source_analyzer=_Lower())
    (tmp_path / "t.tsv").write_text("dog\tmbwa\t0.5\ndog\tpaka\t0.5\n\ndog \tmbwa\t0.5\n")
    with pytest.raises(
        FormatError, match=r"t\.tsv:4: pair 'dog' -> 'mbwa' is written twice \(first on line 1\)"
    ):
        read_table(tmp_path / "t.tsv", "en", "sw")
    # a line ends at "\n" only (splitlines() had ended one at "\x0c": line 3 was named, not 2)
    (tmp_path / "t.tsv").write_bytes("dog\tmbwa\t0.5\x0c\r\nfish\tsa\u2028maki\tx\r\n".encode())
    with pytest.raises(FormatError, match=r"t\.tsv:2: probability must be .*, got 'x'"):
        read_table(tmp_path / "t.tsv", "en", "sw")
    # surface words that share a term still add up: only the same pair of words is refused
    (tmp_path / "t.tsv").write_text("dog\tmbwa\t0.5\ndog\tpaka\t0.5\nDog\tmbwa\t0.5\n")
    table = read_table(tmp_path / "t.tsv", "en", "sw", source_analyzer=_Lower())
    assert _probs(table) == {("dog", "mbwa"): 2 / 3, ("dog", "paka"): 1 / 3}


def _user_collection(tmp_path, capsys) -> tuple[dict[str, Path], Path]:
    files = write_user_files(tmp_path / "mine")
    out = tmp_path / "collection"
    argv = ["data", "import", "--documents", str(files["corpus.jsonl"]), "--docno-field", "_id"]
    argv += ["--topics", str(files["topics.txt"]), "--qrels", str(files["qrels.tsv"]), "--doc-lang", "sw"]
    assert main([*argv, "--parallel", str(files["parallel.tsv"]), "--out", str(out)]) == 0
    capsys.readouterr()
    return files, out


def test_clir_tables_from_links_and_imported_tables(tmp_path, capsys):
    _, collection = _user_collection(tmp_path, capsys)
    tokens = tmp_path / "tokens"
    assert main(["tables", "--collection", str(collection), "--write-tokens", str(tokens)]) == 0
    en = (tokens / "en.txt").read_text().splitlines()
    doc = (tokens / "doc.txt").read_text().splitlines()
    assert len(en) == len(doc) == 6 and en[0] == "dog eat" and doc[:2] == ["mbwa", "mtoto lala"]
    argv = ["tables", "--collection", str(collection), "--write-tokens", str(tmp_path / "t2"), "--quiet"]
    capsys.readouterr()
    assert main(argv) == 0  # clir's progress policy: tqdm's bar had been drawn, --quiet or not
    assert "analyze parallel text" not in capsys.readouterr().err
    # hand-made links: each English word to the Swahili word at the same position
    links = tmp_path / "links"
    links.write_text("".join(" ".join(f"{i}-{i}" for i in range(min(len(a.split()), len(b.split())))) + "\n"
                             for a, b in zip(en, doc, strict=True)))  # fmt: skip
    tables = tmp_path / "tables"
    argv = ["tables", "--collection", str(collection), "--alignments", str(links), "--out", str(tables)]
    assert main(argv) == 0
    en_doc, doc_en = load_tables(tables)
    assert en_doc.meta["method"] == "alignments"
    assert dict(_probs(en_doc))[("dog", "mbwa")] == 1.0  # dog is aligned to mbwa in both its pairs
    baselines = tmp_path / "baselines"
    argv = ["baselines", "--collection", str(collection), "--tables", str(tables), "--out", str(baselines)]
    assert main([*argv, "--modes", "qt", "--models", "bm25", "--quiet"]) == 0
    assert json.loads((baselines / "results.json").read_text())["systems"]["qt-bm25"]["AP"] == 1.0

    table = tmp_path / "psq.tsv"
    table.write_text("dogs\tmbwa\t0.9\ndogs\tpaka\t0.1\nchild\tmtoto\t1\n")
    imported = tmp_path / "imported"
    argv = ["tables", "--collection", str(collection), "--import-tables", str(table), "--out", str(imported)]
    assert main(argv) == 0
    en_doc, doc_en = load_tables(imported)
    assert _probs(en_doc) == {("dog", "mbwa"): 0.9, ("dog", "paka"): 0.1, ("child", "mtoto"): 1.0}
    assert _probs(doc_en) == {("mbwa", "dog"): 1.0, ("paka", "dog"): 1.0, ("mtoto", "child"): 1.0}


def test_eflomal_links_make_tables(tmp_path, capsys):
    pytest.importorskip("eflomal", reason="eflomal is not installed")
    aligner = shutil.which("eflomal-align") or str(Path(sys.executable).parent / "eflomal-align")
    _, collection = _user_collection(tmp_path, capsys)
    tokens = tmp_path / "tokens"
    assert main(["tables", "--collection", str(collection), "--write-tokens", str(tokens)]) == 0
    fwd, rev = tmp_path / "fwd.links", tmp_path / "rev.links"
    subprocess.run(
        [
            aligner,
            "-s",
            str(tokens / "en.txt"),
            "-t",
            str(tokens / "doc.txt"),
            "-f",
            str(fwd),
            "-r",
            str(rev),
        ],
        check=True,
        capture_output=True,
    )
    tables = tmp_path / "tables"
    argv = [
        "tables",
        "--collection",
        str(collection),
        "--alignments",
        str(fwd),
        str(rev),
        "--out",
        str(tables),
    ]
    assert main(argv) == 0
    for table in load_tables(tables):
        assert table.meta["files"] == [str(fwd), str(rev)]
        np.testing.assert_allclose(np.asarray(table.probs.sum(axis=1)).ravel(), 1.0)
