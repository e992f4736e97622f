"""Manifests: the size and SHA-256 of every file of a directory, to verify it before reuse.

A cached experiment step and a training checkpoint each record one when they are written; a
reader that finds a file missing, resized or changed rebuilds instead of trusting it. A saved
index and a saved translation table record one too (:func:`verify_files` refuses a damaged one,
naming the file).
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any, cast

from clir.errors import DataNotFoundError, FormatError

Manifest = dict[str, dict[str, Any]]
"""``{relative path: {"size": bytes, "sha256": hex digest}}``."""

HASH_BUDGET = 64 * 2**20
"""Bytes of an artefact's files (smallest first) whose SHA-256 a default verification computes:
about 0.1 s, and every metadata file, run and small array is covered; larger arrays get their
sizes checked (``verify=True`` hashes every file)."""


def sha256_of(path: Path) -> str:
    """The SHA-256 of a file, read in blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(2**20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_manifest_names(directory: Path) -> list[str]:
    """Every file under ``directory``, as its manifest names them (relative, with ``/``), sorted."""
    return sorted(p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file())


def file_manifest(directory: Path, exclude: tuple[str, ...] = ()) -> Manifest:
    """The manifest of every file under ``directory`` but those named in ``exclude`` (relative)."""
    return manifest_of(directory, [name for name in file_manifest_names(directory) if name not in exclude])


def manifest_of(directory: Path, names: Iterable[str]) -> Manifest:
    """The manifest of the named files (paths relative to ``directory``, with ``/``)."""
    return {
        name: {"size": (directory / name).stat().st_size, "sha256": sha256_of(directory / name)}
        for name in names
    }


def is_manifest(files: object) -> bool:
    """Whether ``files`` (read from JSON) has the shape of a :data:`Manifest`."""
    return isinstance(files, dict) and all(
        isinstance(entry, dict) and type(entry.get("size")) is int and isinstance(entry.get("sha256"), str)
        for entry in files.values()
    )


def manifest_problem(directory: Path, files: Manifest, hash_budget: int | None = None) -> str | None:
    """What is wrong with ``directory`` against its manifest, or ``None`` when it matches.

    Sizes are always checked; SHA-256 for the smallest files up to ``hash_budget`` bytes in all
    (``None``: every file).
    """
    damage = find_damage(directory, files, hash_budget)
    return None if damage is None else f"{damage[0]} {damage[1]}"


def find_damage(directory: Path, files: Manifest, hash_budget: int | None = None) -> tuple[str, str] | None:
    """The first file of ``directory`` that does not match its manifest and what is wrong with
    it (``"is missing"``, ...), or ``None``; checked as :func:`manifest_problem` says."""
    ordered = sorted(files.items(), key=lambda item: item[1]["size"])
    for name, entry in ordered:
        if not (directory / name).is_file():
            return name, "is missing"
        if (size := (directory / name).stat().st_size) != entry["size"]:
            return name, f"has {size} bytes, the manifest {entry['size']}"
    hashed = 0
    for name, entry in ordered:
        hashed += entry["size"]
        if hash_budget is not None and hashed > hash_budget:
            break
        if sha256_of(directory / name) != entry["sha256"]:
            return name, "differs from the manifest (SHA-256)"
    return None


def omission(files: Manifest, required: Iterable[str]) -> str | None:
    """How a manifest omits files that its reader will use, as a phrase (``"does not list 'x':
    it would be used unverified ..."``), or ``None`` when it lists every one of ``required``.

    An omission is never leave to use a file unverified: the manifest was emptied or cut by hand.
    """
    unlisted = [name for name in required if name not in files]
    if not unlisted:
        return None
    return (
        f"does not list {unlisted[0]!r}"
        + (f" and {len(unlisted) - 1} more of its files: they" if len(unlisted) > 1 else ": it")
        + " would be used unverified (a manifest edited by hand?)"
    )


def check_manifest(
    directory: Path, files: object, record: Path, *, verify: bool = False, required: Iterable[str] = ()
) -> None:
    """Refuse a saved artefact whose files do not match the manifest that ``record`` holds.

    Args:
        directory: The artefact's directory (the manifest's paths are relative to it).
        files: The manifest as read from ``record``.
        record: The JSON file that holds it (named when the manifest itself is malformed).
        verify: Hash every file, not only the smallest :data:`HASH_BUDGET` bytes.
        required: The files the reader will use: a manifest that omits one (emptied or cut by
            hand) is refused, never taken as leave to use that file unverified.

    Raises:
        DataNotFoundError: If a file of the manifest is missing.
        FormatError: Naming the file whose size or SHA-256 differs, or ``record`` if ``files``
            is no manifest (or names a path outside ``directory``, or omits one of ``required``).
    """
    if not is_manifest(files):
        raise FormatError(record, None, "'files' is not a manifest ({path: {size, sha256}})")
    files = cast(Manifest, files)
    for name in files:
        parts = PurePosixPath(name).parts
        if not parts or name.startswith("/") or ".." in parts or "\\" in name:
            raise FormatError(record, None, f"'files' names {name!r}, not a path inside {directory}")
    if (omitted := omission(files, required)) is not None:
        raise FormatError(record, None, f"'files' {omitted}; build it again")
    damage = find_damage(directory, files, None if verify else HASH_BUDGET)
    if damage is None:
        return
    name, what = damage
    if what == "is missing":
        raise DataNotFoundError(f"{directory / name} is missing (listed in {record})")
    raise FormatError(directory / name, None, f"damaged file, {what} ({record.name}); build it again")


def verify_files(
    directory: Path, meta: Mapping[str, Any], record: Path, verify: bool, required: Iterable[str] = ()
) -> None:
    """Check a saved directory's files against the manifest (``files``) of its description
    ``record`` (see :func:`check_manifest`); one saved by a clir that recorded none is used with
    a warning.

    Args:
        directory: The saved directory.
        meta: Its description, as read from ``record``.
        record: The JSON file that holds ``meta``.
        verify: Hash every file, not only the smallest :data:`HASH_BUDGET` bytes.
        required: The files the reader will use (see :func:`check_manifest`).

    Raises:
        DataNotFoundError: If a file of the manifest is missing.
        FormatError: As :func:`check_manifest` says.
    """
    if "files" not in meta:
        warnings.warn(
            f"{directory}: saved by clir {meta.get('clir_version', '?')} without a manifest of its files, "
            "so it is used unverified; build it again to have it verified",
            stacklevel=3,
        )
        return
    check_manifest(directory, meta["files"], record, verify=verify, required=required)
