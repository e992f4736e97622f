"""Manifests: the size and SHA-256 of every file of a directory, to verify it before reuse.

A cached experiment step and a training checkpoint each record one when they are written; a
reader that finds a file missing, resized or changed rebuilds instead of trusting it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

Manifest = dict[str, dict[str, Any]]
"""``{relative path: {"size": bytes, "sha256": hex digest}}``."""


def sha256_of(path: Path) -> str:
    """The SHA-256 of a file, read in blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(2**20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_manifest(directory: Path, exclude: tuple[str, ...] = ()) -> Manifest:
    """The manifest of every file under ``directory`` but those named in ``exclude`` (relative)."""
    files = sorted(p for p in directory.rglob("*") if p.is_file())
    return {
        name: {"size": p.stat().st_size, "sha256": sha256_of(p)}
        for p in files
        if (name := p.relative_to(directory).as_posix()) not in exclude
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
    ordered = sorted(files.items(), key=lambda item: item[1]["size"])
    for name, entry in ordered:
        if not (directory / name).is_file():
            return f"{name} is missing"
        if (size := (directory / name).stat().st_size) != entry["size"]:
            return f"{name} has {size} bytes, the manifest {entry['size']}"
    hashed = 0
    for name, entry in ordered:
        hashed += entry["size"]
        if hash_budget is not None and hashed > hash_budget:
            break
        if sha256_of(directory / name) != entry["sha256"]:
            return f"{name} differs from the manifest (SHA-256)"
    return None
