"""Engines that run the parallel steps: in this process (``local``) or as Ray tasks (``ray``).

An engine knows nothing of clir's stages: :meth:`Engine.map` cuts a list of items into
contiguous chunks, calls a function on each chunk and returns the chunks' results in input
order. The pipeline hands it the work (:mod:`clir.pipeline.parallel`); the stages never see it.
The local engine makes one chunk of everything and calls the function here, so its output is
exactly that of calling the stage directly. Ray is imported only when a Ray engine is built
(the ``ray`` extra).

Moritz et al. (2018). Ray: A Distributed Framework for Emerging AI Applications. OSDI.
"""

from __future__ import annotations

import logging
import os
import socket
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from clir.config import NonEmpty, OmitWhenNone, OneOf, PositiveInt, Section, Where
from clir.errors import ClirError, MissingDependencyError, TermlessQueriesWarning
from clir.progress import QUIET, set_verbosity

R = TypeVar("R")
Chunked = Callable[[Any, Sequence[Any]], R]
"""``fn(shared, chunk) -> result``: the work of one chunk (a module-level function, so that Ray
pickles it by reference)."""


ADDRESS_TIMEOUT = 5.0
"""Seconds to wait for a cluster's address to answer."""


class EngineError(ClirError, RuntimeError):
    """An engine could not start (e.g. no Ray cluster at the address given)."""


def chunk_bounds(n: int, parts: int, align: int = 1) -> list[tuple[int, int]]:
    """At most ``parts`` contiguous ``(start, stop)`` ranges covering ``range(n)``, every start a
    multiple of ``align`` (so that batches of ``align`` items stay whole); ``[(0, 0)]`` for none."""
    size = -(-max(-(-n // parts), 1) // align) * align
    return [(start, min(start + size, n)) for start in range(0, n, size)] or [(0, 0)]


class Engine(ABC):
    """Runs ``fn(shared, chunk)`` over chunks of items.

    Attributes:
        name: The engine's name.
        workers: Chunks per :meth:`map` (and processes working at once).
        in_process: Whether the chunks run in this process (they can use its GPU).
    """

    name: str
    workers: int = 1
    in_process: bool = False

    def map(self, fn: Chunked[R], items: Sequence[Any], *, shared: Any = None, align: int = 1) -> list[R]:
        """``fn(shared, chunk)`` for each of :attr:`workers` contiguous chunks of ``items``.

        Args:
            fn: The work of one chunk; it must not depend on where the chunks are cut (only
                on each item, or on whole runs of ``align`` items).
            items: A sequence that slices (a list, a NumPy array).
            shared: What every chunk reads (sent to the workers once per call).
            align: Every chunk but the last holds a multiple of this many items.

        Returns:
            One result per chunk, in input order (a single one on the local engine).
        """
        chunks = [items[start:stop] for start, stop in chunk_bounds(len(items), self.workers, align)]
        return self._run(fn, shared, chunks)

    @abstractmethod
    def _run(self, fn: Chunked[R], shared: Any, chunks: list[Sequence[Any]]) -> list[R]:
        """The results of ``fn(shared, chunk)``, in the order of ``chunks``."""

    @classmethod
    @abstractmethod
    def from_config(cls, config: EngineConfig) -> Engine:
        """The engine of a config."""

    @abstractmethod
    def close(self) -> None:
        """Release what the engine started."""

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LocalEngine(Engine):
    """Everything in this process, as one chunk: exactly the stages' own output."""

    name = "local"
    in_process = True

    @classmethod
    def from_config(cls, config: EngineConfig) -> LocalEngine:
        return cls()

    def close(self) -> None:
        """Nothing to release."""

    def _run(self, fn: Chunked[R], shared: Any, chunks: list[Sequence[Any]]) -> list[R]:
        return [fn(shared, chunk) for chunk in chunks]


def _task(fn: Chunked[R], shared: Any, chunk: Sequence[Any]) -> tuple[R, list[tuple[Any, type[Warning]]]]:
    """One chunk on a Ray worker: no progress bars; its warnings are sent back to be shown here
    (as text, but for :class:`~clir.errors.TermlessQueriesWarning`, whole, to be joined)."""
    set_verbosity(QUIET)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn(shared, chunk)
    return result, [
        (w.message if isinstance(w.message, TermlessQueriesWarning) else str(w.message), w.category)
        for w in caught
    ]


_EXPECTED_ADDRESS = "the host:port of a running Ray cluster's head node (as `ray start --head` prints)"


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
"""An HTTP/2 client's preface and empty SETTINGS frame: a gRPC server (Ray's GCS, or its client
server for ``ray://``) answers with a SETTINGS frame of its own."""
_HTTP2_SETTINGS = 4
"""The type of a SETTINGS frame (the fourth byte of a frame's header)."""


def _check_address(address: str) -> None:
    """Refuse an address where nothing listens, at once (Ray itself would wait for minutes).

    Raises:
        EngineError: Naming the address, why, and what was expected.
    """
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not (sep and host and port.isdigit()):
        raise EngineError(f"--address {address!r} is invalid; expected {_EXPECTED_ADDRESS}")
    if host.startswith("[") and host.endswith("]"):  # an IPv6 address, [::1]:6379
        host = host[1:-1]
    try:
        with socket.create_connection((host, int(port)), timeout=ADDRESS_TIMEOUT) as connection:
            connection.sendall(_HTTP2_PREFACE)
            answer = connection.recv(9)
    except OSError as error:
        reason = error.strerror or _first_line(error)
        raise EngineError(
            f"--address {address!r}: no Ray cluster answered ({reason}); expected {_EXPECTED_ADDRESS}"
        ) from None
    if len(answer) < 4 or answer[3] != _HTTP2_SETTINGS:  # e.g. the dashboard's port (HTTP/1.1)
        raise EngineError(
            f"--address {address!r}: what answers there is not a Ray cluster (no gRPC server: "
            f"the dashboard's port?); expected {_EXPECTED_ADDRESS}"
        )


class RayEngine(Engine):
    """Ray tasks of one CPU each (Ray sets ``OMP_NUM_THREADS=1`` in them, so torch uses one
    thread per worker). The workers of a local instance run at the command's own priority
    (Ray's default would lower them to niceness 15, starved by any other work on the machine).

    Args:
        workers: Chunks per job, and a new local instance's CPUs (at most the machine's: more
            chunks than CPUs wait for one; default: the CPUs of the machine, or of the cluster).
        address: A running cluster; ``None``: a local instance of ``workers`` CPUs, stopped by
            :meth:`close`. When this process has started Ray already (a notebook, the tests),
            that Ray is used and ``address`` is not read.

    Raises:
        MissingDependencyError: Without the ``ray`` extra.
        EngineError: If no cluster answers at ``address``; (from :meth:`map`) when a task fails
            other than by an exception of its own (its worker killed, its node lost).
    """

    name = "ray"

    def __init__(self, workers: int | None = None, address: str | None = None) -> None:
        try:
            import ray
        except ImportError:
            raise MissingDependencyError("ray", "ray", "The Ray engine") from None
        self._ray = ray
        self._owned = not ray.is_initialized()
        if self._owned:
            if address and address != "auto":  # auto: the cluster `ray start` began on this machine
                _check_address(address)
            options: dict[str, Any] = {"address": address}
            if not address:  # workers at this command's priority (Ray's default niceness is 15)
                cpus = os.cpu_count() or 1  # more would start a process per chunk (~0.4 GB each)
                options = {"num_cpus": min(workers or cpus, cpus), "_system_config": {"worker_niceness": 0}}
            try:
                ray.init(**options, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
            except Exception as error:  # Ray raises ConnectionError, ValueError, RuntimeError, ...
                where = f"--address {address!r}" if address else "a local Ray instance"
                raise EngineError(f"{where}: Ray did not start ({_first_line(error)})") from None
        self.workers = workers or max(int(ray.cluster_resources().get("CPU", 1)), 1)
        self._remote = ray.remote(num_cpus=1, max_retries=0)(_task)

    @classmethod
    def from_config(cls, config: EngineConfig) -> RayEngine:
        return cls(config.workers, config.address)

    def _run(self, fn: Chunked[R], shared: Any, chunks: list[Sequence[Any]]) -> list[R]:
        ray = self._ray
        ref = ray.put(shared)
        try:
            outputs = ray.get([self._remote.remote(fn, ref, chunk) for chunk in chunks])
        except ray.exceptions.RayTaskError as error:  # the worker's own exception, as if raised here
            raise error.cause from None
        except ray.exceptions.RayError as error:  # a worker killed (e.g. for memory), a node lost, ...
            raise EngineError(
                f"a Ray task of {fn.__name__} failed, not by an error of its own ({_first_line(error)})"
            ) from None
        results, termless = [], []
        for result, caught in outputs:
            for message, category in caught:
                if isinstance(message, TermlessQueriesWarning):  # one for the job, as locally
                    termless.append(message)
                else:
                    warnings.warn(message, category, stacklevel=3)
            results.append(result)
        for warning in TermlessQueriesWarning.joined(termless):
            warnings.warn(warning, stacklevel=3)
        return results

    def close(self) -> None:
        if self._owned and self._ray.is_initialized():
            self._ray.shutdown()


ENGINES: dict[str, type[Engine]] = {"local": LocalEngine, "ray": RayEngine}
"""The engines by config name."""


@dataclass(frozen=True)
class EngineConfig(Section):
    """Where the parallel steps run (the ``engine`` section of an experiment; ``--engine``,
    ``--workers`` and ``--address`` on the command line). Never part of a step's key: every
    engine writes the same output.

    Attributes:
        name: ``"local"`` (this process) or ``"ray"`` (Ray tasks).
        workers: Ray workers, one CPU each, and chunks per job (default: a local instance's CPU
            count, or the cluster's CPUs).
        address: A running Ray cluster (``host:port``, ``ray://host:port`` with ``ray[client]``,
            or ``auto``: the one ``ray start`` began on this machine); unset: a local Ray
            instance with ``workers`` CPUs, started for the command and stopped after it.
    """

    name: Annotated[str, OneOf(ENGINES)] = "local"
    workers: Annotated[PositiveInt | None, OmitWhenNone()] = None
    address: Annotated[Annotated[str, NonEmpty()] | None, OmitWhenNone()] = None

    def check(self, where: Where) -> None:
        for key in ("workers", "address"):
            if self.name == "local" and getattr(self, key) is not None:
                expected = "no value with the local engine (only the ray engine reads it)"
                raise where.error(key, getattr(self, key), expected)


def build_engine(config: EngineConfig | None = None) -> Engine:
    """The engine a config names (default: the local engine).

    Raises:
        MissingDependencyError: For ``ray`` without the ``ray`` extra.
        EngineError: If no Ray cluster answers at the configured address.
    """
    config = config or EngineConfig()
    return ENGINES[config.name].from_config(config)
