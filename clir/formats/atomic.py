"""Atomic writes that never destroy data: an interrupted save leaves no half-written artefact
behind, and a save never replaces what clir did not write.

Every directory written through :func:`atomic_directory` carries a marker file,
:data:`MARKER` (JSON ``{"kind": ..., "clir_version": ...}``), that names what kind of artefact it
is. A later save replaces the directory only when its marker names the same kind and it holds
nothing but what clir writes into that kind (:data:`CONTENTS`); a user's directory (or a user's
file inside a clir output), a file, a symbolic link or another kind of clir output is left
untouched and the save raises :class:`~clir.errors.OutputExistsError` (with ``force=True`` such
a directory is moved aside to a new name, whole, never deleted). Loading never needs the
marker, so artefacts saved by an older clir still load. A file output (a run, a PNG) replaces
only a file of its own format.

A directory is built as ``.<name>.<pid>.<random>.tmp`` beside its final name, and one it
replaces is moved aside to ``.<name>.<pid>.<random>.old`` until the new one is in place: a save
killed on the way (``kill -9``, a power cut) leaves them behind, which the next save of the same
directory (and a resumed training) finishes or removes (:func:`tidy_interrupted`). A file is
written as ``.<name>.<pid>.<random>.tmp`` (:func:`atomic_file`), which the next write of the same
file removes when its process is gone.

Files and directories written get the usual permissions (``0o666`` / ``0o777`` less the umask),
whatever the writer used: ``tempfile`` makes ``0o600`` / ``0o700`` and safetensors ``0o600``.
"""

from __future__ import annotations

import errno
import fcntl
import fnmatch
import json
import os
import re
import shutil
import tempfile
import threading
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO

from clir._version import __version__
from clir.errors import ClirError, ConfigError, OutputExistsError, OutputLockedError

MARKER = ".clir-artefact.json"
"""The marker file of a directory written by :func:`atomic_directory`."""


def _umask() -> int:
    """The process's umask, read without changing it where Linux allows (thread-safe)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0)
    os.umask(mask)
    return mask


def system_path(path: str | Path) -> Path:
    """``path`` made absolute as the operating system resolves it, its last part kept (a link
    there is for the caller to refuse, not followed).

    A ``..`` is resolved after the link it follows, as the system does (``link/../x`` is ``x``
    beside the link's target): :func:`os.path.abspath` cuts ``link/..`` out of the text, which
    named another path than the one written, so an output was checked, or a directory saved, at
    ``./x`` (``clir data pad C --out link/../C`` had replaced the input ``C``). Without ``..``
    it is :func:`os.path.abspath` (a path's links are kept in what is shown).
    """
    joined = os.path.join(os.getcwd(), os.fspath(path))
    if ".." not in Path(joined).parts:
        return Path(os.path.abspath(joined))
    head, name = os.path.split(joined.rstrip(os.sep) or os.sep)
    if name in ("", ".", ".."):  # names the directory itself
        return Path(os.path.realpath(joined))
    return Path(os.path.realpath(head), name)


@contextmanager
def atomic_file(path: str | Path) -> Iterator[Path]:
    """A temporary file name beside ``path`` (the file exists, empty) for a writer that takes a
    name; renamed onto ``path`` only on success, removed on failure.

    The name is ``.<name>.<pid>.<random>.tmp``: a write killed on the way leaves it behind, which
    the next write of ``path`` removes.

    Raises:
        OutputExistsError: If ``path`` is a directory or a special file (a device, a pipe or a
            socket: ``/dev/null`` had been replaced by a regular file).
    """
    path = Path(path)
    if path.is_dir():
        raise OutputExistsError(path, "a directory (clir writes a file here)", force_helps=False)
    if _special(path):
        raise OutputExistsError(path, SPECIAL, force_helps=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    _tidy_files(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException as error:
        Path(tmp).unlink(missing_ok=True)
        named = _naming_output(error, path, Path(tmp))
        if named is not error:
            raise named from error
        raise


SPECIAL = "a special file (a device, a pipe or a socket), which clir never replaces"
"""What :func:`atomic_file` and :func:`check_output` say of a special file at a file output."""


def _special(path: Path) -> bool:
    """Whether ``path`` is a special file (a device, a pipe, a socket; not a link): a write's
    rename would put a regular file in its place (as root, ``--out /dev/null`` had replaced the
    system's ``/dev/null``)."""
    return os.path.lexists(path) and not path.is_symlink() and not (path.is_file() or path.is_dir())


_WRITE_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
"""The OS's errors that only a write gives (a full disk or quota, a file-size limit): one of them
that names no file is a save's."""

_SHORT_WRITE = re.compile(r"\d+ requested and \d+ written")
"""numpy's error for a write that fell short (a full disk), with neither error number nor file."""

_OS_ERROR_TEXT = re.compile(r"\(os error (\d+)\)")
"""How safetensors' ``SafetensorError`` gives the OS's error number: in its text only."""


def _naming_output(error: BaseException, path: str | Path, tmp: Path) -> BaseException:
    """The error of a failed save, as an :class:`OSError` that names its output ``path``.

    A full disk or a file-size limit names no file (clir had said "No space left on device"
    alone), numpy's short write and safetensors' error give no file and no error number (both had
    been reported as a bug in clir), and a file inside the temporary ``tmp``, which is gone, is
    named as under ``path``. Any other error is returned as it is.
    """
    if isinstance(error, ClirError) or not isinstance(error, Exception):
        return error
    filename, filename2 = None, None
    if isinstance(error, OSError):
        number, reason = error.errno, error.strerror
        filename, filename2 = error.filename, error.filename2
        if number is None and reason is None and _SHORT_WRITE.fullmatch(str(error)):
            reason = f"a write fell short ({error}): is the disk full?"
        elif filename is None and number not in _WRITE_ERRORS:
            return error  # a read's, perhaps: not known to be the output's
    elif (match := _OS_ERROR_TEXT.search(str(error))) and int(match[1]) in _WRITE_ERRORS:
        number = int(match[1])
        reason = os.strerror(number)
    else:
        return error
    if filename is None:
        filename = str(path)
    else:
        inside = os.fsdecode(filename)
        if inside != str(tmp) and not inside.startswith(f"{tmp}{os.sep}"):
            return error  # another file's error (an input's)
        filename = str(path) + inside[len(str(tmp)) :]
    return OSError(number, reason, filename, None, filename2)


@contextmanager
def atomic_write(path: str | Path, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO]:
    """Open a temporary file beside ``path``; rename it onto ``path`` only on success
    (:func:`atomic_file`).

    An existing file at ``path`` is replaced; an existing directory is not.

    Args:
        path: The final file name.
        mode: ``"w"`` for text or ``"wb"`` for bytes.
        encoding: Text encoding (ignored in binary mode).

    Yields:
        The open temporary file.

    Raises:
        OutputExistsError: If ``path`` is a directory.
    """
    with atomic_file(path) as tmp, open(tmp, mode, encoding=None if "b" in mode else encoding) as handle:
        yield handle


def _tidy_files(path: Path) -> None:
    """Remove the temporary files (``.<name>.<pid>.<random>.tmp``) that writes of ``path``
    killed on the way left beside it: those of processes that are gone, never a running one's,
    and only plain files of that name, which clir made."""
    name = re.compile(rf"\.{re.escape(path.name)}\.(\d+)\.[a-z0-9_]{{8}}\.tmp")
    with suppress(OSError), os.scandir(path.parent) as entries:
        for entry in entries:
            match = name.fullmatch(entry.name)
            if match and entry.is_file(follow_symlinks=False) and not _running(int(match[1])):
                with suppress(OSError):
                    os.unlink(entry.path)


def artefact_kind(path: str | Path) -> str | None:
    """The kind recorded in the marker of a directory written by :func:`atomic_directory`.

    Returns:
        The kind, or ``None`` when ``path`` has no readable marker (not a clir output, or one
        saved by a clir older than the marker).
    """
    try:
        kind = json.loads((Path(path) / MARKER).read_text(encoding="utf-8")).get("kind")
    except (OSError, ValueError, AttributeError):
        return None
    return kind if isinstance(kind, str) else None


_INDEX_FILES = tuple(f"{name}.npy" for name in ("docnos", "indptr", "doc_ids", "tf", "doc_len", "df", "cf"))
_SHARD_FILES = tuple(f"{name}.npy" for name in ("docnos", "indptr", "doc_ids", "tf", "doc_len"))

CONTENTS: dict[str, dict[str, str | None]] = {
    "aligner-input": {"en.txt": None, "doc.txt": None},
    "bundle": {
        "config.json": None,
        "README.md": None,
        "reranker": None,
        "reranker/**": None,  # a copy of a checkpoint or an ensemble (its members whole)
        "space": "space",
        "tables": None,
        "tables/en-doc": "translation-table",
        "tables/doc-en": "translation-table",
    },
    "checkpoint": {
        "checkpoint.json": None,
        "curve.json": None,
        "manifest.json": None,
        "train_config.yaml": None,
        "model": "model",
        "last": None,
        **{
            f"last/{name}": None
            for name in ("model.safetensors", "optimizer.safetensors", "optimizer.json", "rng.safetensors")
        },
    },
    "collection": {
        "collection.json": None,
        "stats.json": None,
        "documents.jsonl": None,
        "topics.*.tsv": None,
        "topics.*.xml": None,
        "qrels.txt": None,
        "qrels.*.txt": None,
        "parallel.tsv": None,
    },
    "dense-retriever": {"dense.json": None, "vectors.npy": None},
    "first-stage": {
        "first_stage.json": None,
        "retriever": "retriever",
        "shards": "sharded-index",
        "table_en_doc": "translation-table",
    },
    "index": {"index.json": None, "vocab.json": None, **dict.fromkeys(_INDEX_FILES)},
    "model": {"config.json": None, "model.safetensors": None},
    "rerank-data": {"rerank_data.json": None, "scores.npy": None, "features.npy": None},
    "retriever": {
        "retriever.json": None,
        "weights.npy": None,
        "index": None,
        **{f"index/{name}": None for name in ("index.json", "vocab.json", *_INDEX_FILES)},
    },
    "sharded-index": {
        "sharded.json": None,
        "vocab.json": None,
        "df.npy": None,
        "cf.npy": None,
        "shards": None,
        "shards/*": None,
        **{f"shards/*/{name}": None for name in _SHARD_FILES},
    },
    "space": {
        "space.json": None,
        "step.json": None,  # the record of an experiment's space step, which a bundle copies whole
        "*.bin": None,
        "*.ngrams.npy": None,
        "*.mean.npy": None,
        "seeds.*.tsv": None,  # clir embed align's, written beside the space
        "heldout.*.tsv": None,
    },
    "translation-table": dict.fromkeys(
        ("meta.json", "source_vocab.json", "target_vocab.json", "data.npy", "indices.npy", "indptr.npy")
    ),
}
"""What clir writes into each kind of directory that :func:`atomic_directory` replaces whole:
``kind -> {pattern: nested kind}``. A pattern is a path relative to the directory, matched one
``/``-separated part at a time (:func:`fnmatch.fnmatchcase`; a last part ``**`` takes all that
lies below); a nested kind names a directory of that kind, checked against that kind's
contents; the :data:`MARKER` goes anywhere. A directory of its kind that holds anything else
(a user's ``notes.txt``) is not replaced, so as not to delete it (:func:`foreign_entry`). A
kind not listed (a caller's own) is replaced whatever it holds."""


def _matches(parts: Sequence[str], pattern: str) -> bool:
    """Whether the parts of a relative path match a :data:`CONTENTS` pattern."""
    wanted = pattern.split("/")
    if wanted[-1] == "**":
        wanted = wanted[:-1]
        if len(parts) <= len(wanted):
            return False
        parts = parts[: len(wanted)]
    return len(parts) == len(wanted) and all(map(fnmatch.fnmatchcase, parts, wanted))


def foreign_entry(path: str | Path, kind: str) -> Path | None:
    """The first file or directory under ``path`` (sorted by name, depth first) that clir does not
    write in a directory of ``kind`` (:data:`CONTENTS`): replacing ``path`` would delete it.

    Returns:
        Its path, or ``None``: everything is clir's (or ``kind`` has no :data:`CONTENTS`).
    """
    known = CONTENTS.get(kind)
    if known is None:
        return None
    root = Path(path)

    def first(directory: Path) -> Path | None:
        with os.scandir(directory) as scanned:
            entries = sorted(scanned, key=lambda entry: entry.name)
        for entry in entries:
            if entry.name == MARKER:
                continue
            child = Path(entry.path)
            parts = child.relative_to(root).parts
            pattern = next((pattern for pattern in known if _matches(parts, pattern)), None)
            if pattern is None:
                return child
            if pattern.endswith("/**") or not entry.is_dir(follow_symlinks=False):
                if known[pattern] is not None:
                    return child  # a file or a link where clir writes a directory
                continue
            found = first(child) if known[pattern] is None else foreign_entry(child, known[pattern])
            if found is not None:
                return found
        return None

    return first(root)


def _protected(path: Path) -> bool:
    """Whether ``path`` is a directory that clir never replaces: the filesystem root, the home
    directory, or the working directory or one of its parents."""
    cwd = Path.cwd().resolve()
    return path.resolve() in (Path.home().resolve(), cwd, *cwd.parents)  # the root is a parent


def writing_marker(name: str) -> bool:
    """Whether a file name is :func:`atomic_write`'s temporary file of a :data:`MARKER`: a
    directory that holds only that is being claimed by another process right now (two runs
    started at once on a new ``--out``), not a user's directory."""
    return name.startswith(f".{MARKER}.") and name.endswith(".tmp")


def _replaceable(path: Path, kind: str, force: bool, option: str = "--out") -> str | None:
    """Check what lies at ``path`` before a directory of ``kind`` is written there.

    Returns:
        What to do with the directory in place: ``None``, nothing (no directory, or an empty
        one, which a rename replaces); ``"ours"``, a clir ``kind`` output holding only what clir
        writes there, moved aside and removed; ``"kept"`` (with ``force``), anything else,
        moved aside whole to :func:`kept_name`.

    Raises:
        OutputExistsError: If ``path`` holds what clir must not replace.
    """
    if not os.path.lexists(path):
        return None
    if path.is_symlink():
        raise OutputExistsError(path, "a symbolic link", force_helps=False, option=option)
    if not path.is_dir():
        raise OutputExistsError(
            path, "a file (clir writes a directory here)", force_helps=False, option=option
        )
    if _protected(path):
        raise OutputExistsError(
            path,
            "the root, home or working directory (or a parent of it)",
            force_helps=False,
            option=option,
        )
    with os.scandir(path) as entries:
        # only the marker that another process's claim is writing (its temporary file): as empty
        if all(writing_marker(entry.name) for entry in entries):
            return None
    found = artefact_kind(path)
    foreign = foreign_entry(path, kind) if found == kind else None
    if found == kind and foreign is None:
        if (fixed := _write_protected(path)) is not None:
            raise OutputExistsError(
                path,
                f"a clir {kind!r} output whose directory {fixed} is write-protected, so clir cannot "
                "delete it to replace it",
                remedy=f"make it writable (chmod -R u+w {path}) or choose another {option}",
            )
        return "ours"
    if force:
        return "kept"
    if found == kind:
        raise OutputExistsError(
            path,
            f"a clir {kind!r} output holding {foreign}, which clir does not write there (replacing "
            "the output would delete it)",
            remedy=f"move that out of it, choose another {option}, or pass --force to move the old "
            f"output aside whole (to {kept_name(path)})",
        )
    what = "a directory that clir did not write" if found is None else f"a clir {found!r} output"
    raise OutputExistsError(path, f"{what} (expected nothing, or a clir {kind!r} output)", option=option)


def _write_protected(path: Path) -> Path | None:
    """The first directory of the tree ``path`` (itself included, links not followed) whose
    entries this process may not delete, or ``None``. A replacement removes the old tree: a
    write-protected one had been moved aside to ``.<name>.<pid>.<random>.old`` and deleted only
    in part (the files of its writable subdirectories), the rest left there for good."""
    for parent, dirs, _ in os.walk(path):
        if not os.access(parent, os.W_OK | os.X_OK):
            return Path(parent)
        dirs.sort()
    return None


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether two existing paths name one file or directory, however each is written."""
    return os.path.exists(a) and os.path.exists(b) and os.path.samefile(a, b)


def _overlap(out: str | Path, source: str | Path) -> str | None:
    """How an output overlaps an existing input, in words (``None``: not at all): the same
    file or directory, inside an input directory, or a directory holding the input (which
    writing it would replace or move aside)."""
    if not os.path.exists(source):
        return None
    if same_file(out, source):
        return "one of"
    out_path, source_path = os.path.realpath(out), os.path.realpath(source)
    common = os.path.commonpath([out_path, source_path])
    if common == source_path and os.path.isdir(source_path):
        return "inside one of"
    if common == out_path:
        return "a directory holding one of"
    return None


def kept_name(path: Path) -> Path:
    """The first free sibling name ``<name>.before-clir``, ``<name>.before-clir-2``, ... to which
    ``force=True`` moves a directory that is not a clir output of the kind being written."""
    kept = path.with_name(f"{path.name}.before-clir")
    number = 2
    while os.path.lexists(kept):
        kept = path.with_name(f"{path.name}.before-clir-{number}")
        number += 1
    return kept


def _is_run_file(path: Path) -> bool:
    """Whether a file's first non-blank line (within its first 64 KiB) looks like a TREC run
    line, ``qid Q0 docno rank score tag``."""
    with open(path, "rb") as handle:
        head = handle.read(1 << 16)
    line = next((fields for fields in map(bytes.split, head.splitlines()) if fields), None)
    if line is None:
        return True  # blank lines only
    try:
        int(line[3]), float(line[4])
    except (ValueError, IndexError):
        return False
    return len(line) == 6


def _is_png(path: Path) -> bool:
    with open(path, "rb") as handle:
        return handle.read(8) == b"\x89PNG\r\n\x1a\n"


FILE_FORMATS = {"run": ("a TREC run", _is_run_file), "png": ("a PNG image", _is_png)}
"""The file outputs :func:`check_output` knows: ``name -> (description, sniffer)``. An existing
file is replaced only when it is empty or its sniffer accepts it."""


def output_directory(path: str | Path, *, kind: str, force: bool = False) -> Path:
    """Claim a directory that clir fills file by file (an experiment, baselines, tables, an
    ensemble): create it and write its :data:`MARKER`.

    Unlike :func:`atomic_directory` nothing is replaced: the files already there stay, and the
    new ones are written beside them (each atomically). So the directory must be new, empty, or
    already marked with ``kind``; ``force=True`` claims a directory that is not (its files stay
    until clir writes a file of the same name).

    Args:
        path: The directory.
        kind: What it holds, recorded in its marker.
        force: Claim a directory that is neither empty nor of this kind.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        OutputExistsError: As :func:`atomic_directory`.
    """
    path = Path(path)
    check_output(path, kind=kind, force=force)
    path.mkdir(parents=True, exist_ok=True)
    if artefact_kind(path) != kind:
        marker = {"kind": kind, "clir_version": __version__}
        with atomic_write(path / MARKER) as handle:
            handle.write(json.dumps(marker) + "\n")
    return path


@contextmanager
def claimed_directory(path: str | Path, *, kind: str, force: bool = False) -> Iterator[Path]:
    """:func:`output_directory`, undone if the command filling the directory fails before it
    writes anything there: what the claim created goes again (its marker, a marker it replaced
    put back, and the directory with the parents it made), so a failed first run leaves no empty
    directory behind. Never anything else: a directory that holds more than before is kept
    whole, marker included, and only empty directories are removed; nor a directory that
    another run holds (:class:`~clir.errors.OutputLockedError`), whose marker is that run's.

    Yields:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        OutputExistsError: As :func:`output_directory`.
    """
    path = Path(path)
    absolute = system_path(path)
    made = [p for p in (absolute, *absolute.parents) if not os.path.lexists(p)]  # deepest first
    before = set(os.listdir(path)) if path.is_dir() else set()
    try:
        old = (path / MARKER).read_bytes()
    except OSError:
        old = None
    try:
        output_directory(path, kind=kind, force=force)  # its marker may fail too (a full disk)
        yield path
    except OutputLockedError:  # another run's directory, claimed by it meanwhile perhaps
        raise
    except BaseException:
        try:
            if set(os.listdir(path)) - {MARKER} == before - {MARKER}:  # nothing written: unclaimed
                if old is None:
                    (path / MARKER).unlink(missing_ok=True)
                elif (path / MARKER).read_bytes() != old:
                    with atomic_write(path / MARKER, "wb") as handle:
                        handle.write(old)
                for directory in made:
                    os.rmdir(directory)  # only an empty one
        except OSError:
            pass  # written to meanwhile, or gone: left as it is
        raise


def check_not_input(path: str | Path, inputs: Sequence[str | Path | None], option: str) -> None:
    """Refuse an output that is one of ``inputs``, lies inside one or holds one (``None``: an
    input not given), ``--force`` or not.

    Raises:
        OutputExistsError: Naming ``option``, the command's option that names ``path``.
    """
    for source in inputs:
        overlap = None if source is None else _overlap(path, source)
        if overlap is not None:
            raise OutputExistsError(
                path, f"{overlap} this command's inputs ({source})", force_helps=False, option=option
            )


def check_output(
    path: str | Path,
    *,
    kind: str | None = None,
    force: bool = False,
    inputs: Sequence[str | Path | None] = (),
    option: str = "--out",
    file_format: str | None = None,
) -> None:
    """Check, before any work, that an output can be written at ``path``.

    Args:
        path: Where a file (``kind=None``) or a directory of ``kind`` will be saved.
        kind: The artefact kind of a directory output (see :func:`atomic_directory`).
        force: As in :func:`atomic_directory`.
        inputs: The files and directories the command reads (``None``: an input not given):
            ``path`` must be none of them, or the save would replace what it was made from.
        option: The command's option that names ``path`` (``--out``, ``--png``), which a
            refusal tells the user to change.
        file_format: For a file output, its format (a key of :data:`FILE_FORMATS`): an existing
            file at ``path`` is replaced only when it is empty or of that format (a run over a
            run, never over a user's notes or a collection's topics). ``None``: any file.

    Raises:
        OutputExistsError: If ``path`` holds what the save must not replace (a symbolic link, a
            directory where a file goes, a special or write-protected file, a file of another format; see
            :func:`atomic_directory` for directories; one of ``inputs``, even with ``force``), or
            a file lies where one of its parent directories would be.
        ConfigError: If the nearest existing parent is not writable.
    """
    check_not_input(path, inputs, option)
    path = system_path(path)
    if kind is not None:
        _replaceable(path, kind, force, option)
    elif path.is_symlink():  # replacing it would drop the link (never its target): refused as for directories
        raise OutputExistsError(path, "a symbolic link", force_helps=False, option=option)
    elif path.is_dir():
        raise OutputExistsError(
            path, "a directory (clir writes a file here)", force_helps=False, option=option
        )
    elif _special(path):
        raise OutputExistsError(path, SPECIAL, force_helps=False, option=option)
    elif path.is_file() and not os.access(path, os.W_OK):  # as `>` would refuse it (`mv` asks)
        raise OutputExistsError(
            path, "a write-protected file, which clir does not replace", force_helps=False, option=option
        )
    elif file_format is not None and path.is_file() and path.stat().st_size:
        what, sniff = FILE_FORMATS[file_format]
        if not sniff(path):
            raise OutputExistsError(
                path,
                f"a file that is not {what} (clir replaces only {what} here)",
                force_helps=False,
                option=option,
            )
    parent = path.parent
    while not os.path.lexists(parent):
        parent = parent.parent
    if not parent.is_dir():
        raise OutputExistsError(
            parent, f"a file, so {path} cannot be written below it", force_helps=False, option=option
        )
    if not os.access(parent, os.W_OK | os.X_OK):
        read_only = os.statvfs(parent).f_flag & os.ST_RDONLY  # access() says no for both
        why = "a read-only file system" if read_only else "permission denied"
        raise ConfigError(f"{path}: cannot write into {parent} ({why})")


def _usual_permissions(root: Path) -> None:
    """Give ``root`` and everything under it ``0o777`` (directories) or ``0o666`` (files) less
    the umask."""
    umask = _umask()
    os.chmod(root, 0o777 & ~umask)
    for parent, dirs, files in os.walk(root):
        for name in dirs:
            if not os.path.islink(os.path.join(parent, name)):
                os.chmod(os.path.join(parent, name), 0o777 & ~umask)
        for name in files:
            if not os.path.islink(os.path.join(parent, name)):
                os.chmod(os.path.join(parent, name), 0o666 & ~umask)


def _scratch(path: Path, role: str) -> Path:
    """A new empty directory beside ``path``, named ``.<name>.<pid>.<random>.<role>`` so that
    :func:`tidy_interrupted` knows it for a save's own (``tmp``: the directory being built;
    ``old``: the one it replaces, until removed) and which process made it."""
    return Path(tempfile.mkdtemp(prefix=f".{path.name}.{os.getpid()}.", suffix=f".{role}", dir=path.parent))


SCRATCH_NAME = re.compile(r"\..+\.(?:\d+\.)?[a-z0-9_]{8}\.(?:tmp|old)")
"""The names of what a save builds or moves aside beside its output, which only a killed save
leaves behind: :func:`atomic_directory`'s ``.<name>.<pid>.<random>.tmp`` / ``.old`` (without the
PID before clir recorded it) and :func:`atomic_write`'s ``.<name>.<random>.tmp``."""


def is_scratch(name: str) -> bool:
    """Whether a file or directory name is one of :data:`SCRATCH_NAME` (a killed save's
    leftover, never part of an artefact: a copy of the artefact leaves it out)."""
    return SCRATCH_NAME.fullmatch(name) is not None


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists (this one included; another user's too)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OverflowError, ValueError):  # no such process can exist
        return False
    return True


def tidy_interrupted(path: str | Path, kind: str) -> None:
    """Finish or clear what a save of the directory ``path`` left beside it when it was killed.

    :func:`atomic_directory` builds ``.<name>.<pid>.<random>.tmp`` and, over a directory of the
    same kind, first moves that one to ``.<name>.<pid>.<random>.old``: a kill between the two
    renames leaves no ``path`` at all (a resumed training had started again from its first
    epoch), and a kill at any other moment leaves one of them behind, to pile up. Of the
    leftovers of processes that are gone (never those of a running one): a complete ``tmp`` with
    its ``old`` where ``path`` is missing is renamed into place, with a warning (the save it
    finishes); every other one is removed. Nothing else is touched: only directories (not links)
    of those names, which clir made.

    Args:
        path: The directory a save writes.
        kind: Its kind (see :func:`atomic_directory`); only a ``tmp`` of that kind is put in place.
    """
    path = system_path(path)
    name = re.compile(rf"\.{re.escape(path.name)}\.(\d+)\.[a-z0-9_]{{8}}\.(tmp|old)")
    left: dict[int, dict[str, Path]] = {}  # by process
    try:
        with os.scandir(path.parent) as entries:
            for entry in entries:
                match = name.fullmatch(entry.name)
                if match and entry.is_dir(follow_symlinks=False) and not _running(int(match[1])):
                    left.setdefault(int(match[1]), {})[match[2]] = Path(entry.path)
    except OSError:  # no parent yet: nothing left there
        return
    for pid in sorted(left):
        tmp, old = left[pid].get("tmp"), left[pid].get("old")
        swapping = tmp is not None and old is not None and not os.path.lexists(path)
        if swapping and artefact_kind(tmp) == kind and artefact_kind(old) == kind:
            try:
                _usual_permissions(tmp)
                os.replace(tmp, path)
            except OSError:  # put in place meanwhile (another run tidying), or not ours to move
                pass
            else:
                warnings.warn(
                    f"{path}: a save of it was killed as it swapped the new {kind} in; that one is in "
                    "place now (the one it replaced is removed)",
                    stacklevel=2,
                )
        for leftover in left[pid].values():
            shutil.rmtree(leftover, ignore_errors=True)


_HELD = threading.local()
"""The directories this thread holds a :func:`directory_lock` on: ``(device, inode)`` -> depth."""


def lock_holder(path: str | Path) -> int | None:
    """The PID of the process holding an ``flock`` on ``path``, read from Linux's
    ``/proc/locks`` (``None`` where that cannot tell)."""
    try:
        stat = os.stat(path)
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return None
    where = f"{os.major(stat.st_dev):02x}:{os.minor(stat.st_dev):02x}:{stat.st_ino}"
    for fields in map(str.split, lines):
        if len(fields) > 5 and fields[1] == "FLOCK" and fields[5] == where and fields[4].isdigit():
            return int(fields[4])
    return None


@contextmanager
def directory_lock(parent: str | Path, *, wait: bool = True) -> Iterator[None]:
    """Hold an exclusive ``flock`` on the directory ``parent`` itself (no lock file is left
    behind; processes take turns). :func:`atomic_directory` holds it on the parent while it swaps
    a new directory in, so that two saves of the same directory at once do not find each other's
    half-done swap (no directory at ``path`` between its two renames, which made the other's
    rename in fail, or its new directory moved aside as a user's). A thread that already holds
    the lock of ``parent`` holds it again at once (a training holds its ``--out`` while its
    checkpoints swap themselves in there). Where the directory cannot be opened or the filesystem
    has no ``flock``, it runs unlocked.

    Args:
        parent: The directory.
        wait: Wait for another process's lock; ``False``: raise instead.

    Raises:
        OutputLockedError: If ``wait`` is false and another process (or thread) holds the lock;
            the message names the directory and, where Linux tells, the holder's PID.
    """
    try:
        fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        yield
        return
    held: dict[tuple[int, int], int] = _HELD.__dict__.setdefault("dirs", {})
    stat = os.fstat(fd)
    key = (stat.st_dev, stat.st_ino)
    if key in held:
        os.close(fd)
        held[key] += 1
        try:
            yield
        finally:
            held[key] -= 1
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            pid = lock_holder(parent)
            holder = "" if pid is None else f" (PID {pid})"
            raise OutputLockedError(
                f"{parent} is in use by another clir run{holder}; wait for it to finish, or "
                "choose another output directory"
            ) from None
        except OSError:
            pass
        held[key] = 1
        try:
            yield
        finally:
            del held[key]
    finally:
        os.close(fd)  # closing releases the lock


@contextmanager
def atomic_directory(path: str | Path, *, kind: str = "directory", force: bool = False) -> Iterator[Path]:
    """Build a directory under a temporary name; swap it into place only on success.

    What may be at ``path``:

    - nothing, or an empty directory: the new directory is renamed into place;
    - a directory whose marker names the same ``kind`` and that holds only what clir writes
      there (:data:`CONTENTS`): it stays untouched until the new one is complete, is then moved
      aside under a fresh temporary name and removed;
    - such a directory that holds more (a user's ``notes.txt``): refused as below, naming the
      first such file; with ``force=True`` moved aside whole to :func:`kept_name`;
    - anything else (a directory without the marker or of another kind, a file, a symbolic
      link): :class:`~clir.errors.OutputExistsError`, checked before the build and again before
      the swap. ``force=True`` writes over such a *directory* too, which is first moved aside to
      :func:`kept_name` (``<name>.before-clir``), with a warning, never deleted; never a file or
      a symbolic link (a file is never turned into a directory);
    - the filesystem root, the home directory, or the working directory or one of its parents
      (``--out .``): never replaced, even when empty, of the same kind or with ``force``.

    What a killed save of ``path`` left beside it is finished or removed first
    (:func:`tidy_interrupted`).

    Args:
        path: The final directory name.
        kind: What the directory holds (``"collection"``, ``"checkpoint"``, ...), recorded in its
            :data:`MARKER`; ``"directory"`` for a caller that names none.
        force: Write over a directory that is not a clir output of this kind (moved aside).

    Yields:
        The temporary directory to fill.

    Raises:
        OutputExistsError: If ``path`` holds what this save must not replace.
    """
    given = path
    path = system_path(path)  # "." has no name to build a sibling from
    tidy_interrupted(path, kind)
    with directory_lock(path.parent):  # not amid another save's swap (no marker to read)
        _replaceable(path, kind, force)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _scratch(path, "tmp")
    kept = False  # the new directory, complete, where no directory is in place
    try:
        yield tmp
        marker = {"kind": kind, "clir_version": __version__}
        (tmp / MARKER).write_text(json.dumps(marker) + "\n", encoding="utf-8")
        _usual_permissions(tmp)
        with directory_lock(path.parent):  # one save at a time swaps a directory in here
            if (disposition := _replaceable(path, kind, force)) is not None:
                ours = disposition == "ours"  # else forced: kept under a new name
                # what made a forced one not ours, for the warning (a file clir does not write)
                foreign = None if ours or artefact_kind(path) != kind else foreign_entry(path, kind)
                old = _scratch(path, "old") if ours else kept_name(path)
                os.replace(path, old)  # onto a fresh empty directory or a free name: never a user's
                try:
                    os.replace(tmp, path)
                except BaseException:
                    try:
                        os.replace(old, path)
                    except OSError as failed:  # both kept, as a kill between the renames leaves them
                        kept = ours  # the next save of path puts it in place (tidy_interrupted)
                        new = f", the new one {tmp}, which the next save of it puts in place" if ours else ""
                        warnings.warn(
                            f"{path}: neither the new {kind} nor the one it replaces could be put in "
                            f"place ({failed.strerror or failed}): the old one is {old}{new}",
                            stacklevel=3,
                        )
                    raise
                if ours:
                    shutil.rmtree(old, ignore_errors=True)
                else:
                    why = (
                        f"held {foreign}, which clir does not write in a {kind!r} output"
                        if foreign is not None
                        else f"was not a clir {kind!r} output"
                    )
                    warnings.warn(
                        f"{path} {why}: it was moved to {old} (nothing deleted)",
                        stacklevel=3,
                    )
            else:
                os.replace(tmp, path)
    except BaseException as error:
        if not kept:
            shutil.rmtree(tmp, ignore_errors=True)
        named = _naming_output(error, given, tmp)
        if named is not error:
            raise named from error
        if isinstance(error, ClirError) and len(error.args) == 1 and str(tmp) in str(error.args[0]):
            # name the directory the caller gave, not its temporary stand-in (which is gone)
            error.args = (str(error.args[0]).replace(str(tmp), str(given)),)
        raise
