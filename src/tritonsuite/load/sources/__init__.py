"""Load sources: who sends a point's requests and measures it, behind one interface.

Every caller that measures (offline and online points, open loop, the latency-bound searches, accuracy under load,
mixes, tune, the self-benchmark) asks a :class:`~tritonsuite.load.sources.base.LoadSource` for its
:class:`~tritonsuite.load.engine.Measurement`, never a load generator by name::

    from tritonsuite.load import sources

    source = sources.get("suite")                       # --loadgen's value; the row's loadgen
    m = source.measure(server, Traffic(model, inputs, spec.outputs, LoadPoint(1, 4), description), settings)
    if source.can(sources.TOGETHER): ...                # a capability, not a name

The sources, one module each, named here and nowhere else (:data:`SOURCES`):

- ``suite``: :mod:`~tritonsuite.load.sources.inprocess`, the suite's own asyncio engine in this process
  (:mod:`tritonsuite.load.engine`); every capability;
- ``perf_analyzer``: :mod:`~tritonsuite.load.sources.perf_analyzer`, perf_analyzer 2.51 in a child process;
  closed-loop points of one deployment only.

Capabilities (:data:`~tritonsuite.load.sources.base.CAPABILITIES`): ``probes`` (accuracy probes inside the load),
``together`` (several deployments over the same windows: a mix), ``open_loop`` (a request rate), ``stop_early``
(a search's or tune's stop check after each window), ``progress`` (told after each window). A source asked for one
it lacks raises :class:`~tritonsuite.load.sources.base.Unsupported`, one line.

- the engine over worker processes: :mod:`~tritonsuite.load.sources.workers`, chosen here by :func:`get` when
  ``--workers`` (or the profile's ``workers:``) asks for more than one process for ``suite``: the point's
  concurrency slots or request rate split over N processes on this host, their raw latencies merged into one row.

- the engine over Ray actors: :mod:`~tritonsuite.load.sources.raycluster`, chosen here by :func:`get` when
  ``--workers ray[:ADDRESS][@N]`` asks for it: the same workers on the hosts of a Ray cluster (an extra:
  ``pip install 'tritonsuite[distributed]'``).

A new source is one module here (a :class:`LoadSource` subclass and its ``SOURCE``), one line in :data:`SOURCES`
and its tests.
"""
from __future__ import annotations

from tritonsuite.core.settings import RayWorkers
from tritonsuite.load.sources import inprocess, perf_analyzer, workers as worker_processes
from tritonsuite.load.sources.base import (CAPABILITIES, OPEN_LOOP, PROBES, PROGRESS, STOP_EARLY, TOGETHER,
                                           LoadSource, Unsupported)

__all__ = ["CAPABILITIES", "OPEN_LOOP", "PROBES", "PROGRESS", "STOP_EARLY", "TOGETHER", "LoadSource", "SOURCES",
           "UnknownSource", "Unsupported", "DEFAULT", "get", "names", "parse", "unavailable"]

#: The registry: ``--loadgen`` value (and row ``loadgen``) -> its source. The one place a name becomes a source.
SOURCES: dict[str, LoadSource] = {source.name: source for source in (inprocess.SOURCE, perf_analyzer.SOURCE)}
DEFAULT = "suite"  # --loadgen's default and the source of every caller that names none


class UnknownSource(ValueError):
    """A load generator name that is not in :data:`SOURCES` (one line naming it and the valid choices)."""


def names() -> tuple[str, ...]:
    """The valid ``--loadgen`` values, in the registry's order."""
    return tuple(SOURCES)


def get(name: str = DEFAULT, workers: int | str = 1) -> LoadSource:
    """The source named ``name``; :class:`UnknownSource` (one line, the valid choices) for any other name.
    ``workers`` (``--workers``: a number of processes or ``"auto"``, see
    :func:`tritonsuite.core.settings.parse_workers`) other than 1 makes the engine (``suite``) the worker-process
    source; other sources run as they are (perf_analyzer has its own threads)."""
    try:
        source = SOURCES[name]
    except (KeyError, TypeError):
        raise UnknownSource(f"load generator {name!r}: valid choices: {', '.join(SOURCES)}") from None
    if name == DEFAULT and isinstance(workers, RayWorkers):
        from tritonsuite.load.sources.raycluster import RaySource  # Ray is an extra: imported only when asked

        return RaySource(workers)
    if name == DEFAULT and workers != 1:
        return worker_processes.WorkerSource(workers)
    return source


def parse(text: str, option: str = "--loadgen") -> tuple[str, ...]:
    """``--loadgen``'s comma-separated value as source names (in order, once each); :class:`UnknownSource`, one line
    naming the value and the valid choices, when one is not a source or none is given."""
    chosen = tuple(dict.fromkeys(g.strip() for g in str(text).split(",") if g.strip()))
    bad = [g for g in chosen if g not in SOURCES]
    if bad or not chosen:
        raise UnknownSource(f"{option} {text!r}: unknown load generator; valid choices: {', '.join(SOURCES)} "
                            f"(comma-separated for several)")
    return chosen


def unavailable(chosen, option: str = "--loadgen") -> str | None:
    """The first chosen source that cannot run on this host, as one line (``--loadgen perf_analyzer: why``), or None."""
    for name in chosen:
        if reason := get(name).unavailable():
            return f"{option} {name}: {reason}"
    return None
