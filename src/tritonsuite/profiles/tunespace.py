"""The configuration space of a tune: what the profile's ``tune:`` block lets vary, with defaults.

A :class:`Candidate` is one point of the space in Triton's own vocabulary (instance count, max batch size,
preferred batch sizes, max queue delay, threads per instance); applied to the deployment's own configuration (Triton's
``ModelConfig`` as JSON) it is that configuration with the tuned fields set: the instance group's count, max batch
size, the batcher's preferred sizes and queue delay (the dynamic batcher's; a sequence model's own sequence batcher,
since Triton refuses dynamic batching beside it: ``direct`` has a queue delay and no preferred sizes, ``oldest`` both)
and the backend's thread parameters. A :class:`TuneSpace` holds the values each may take, the closed-loop
concurrencies each candidate is measured at (highest first), and the budget. A leaf of the tune stage: plain data,
no measuring.
"""
from __future__ import annotations

import copy
import itertools
import re
from dataclasses import dataclass, replace
from typing import Any, Mapping

from tritonsuite.core.description import describe
from tritonsuite.deploy.backends import backend_of

#: The keys of a profile's ``tune:`` block (per model)
TUNE_KEYS = ("instance_count", "max_batch_size", "preferred_batch_sizes", "max_queue_delay_microseconds",
             "intra_op_threads", "concurrency", "objective", "budget", "minutes")
#: The dimensions of the space, in the order a search walks them
DIMENSIONS = ("instance_count", "preferred_batch_sizes", "max_queue_delay_microseconds", "intra_op_threads",
              "max_batch_size")
OBJECTIVES = ("throughput",)  # the most inferences/s within the latency bound
DEFAULT_BUDGET = 9  # configurations: a third of a 3x3x3 space
DEFAULT_MINUTES = 15.0
#: Which batcher a candidate's preferred sizes and queue delay set: Triton's dynamic batcher, or a sequence model's
#: sequence batcher with its strategy
SCHEDULERS = ("dynamic", "direct", "oldest")


class TuneError(ValueError):
    """A tune block or budget that cannot be used; the message names the bad value and the valid choices."""


@dataclass(frozen=True)
class Candidate:
    """One configuration: the Triton settings a tune varies."""

    instance_count: int
    max_batch_size: int
    preferred_batch_sizes: tuple[int, ...]
    max_queue_delay_microseconds: int
    intra_op_threads: int
    scheduler: str = "dynamic"  # SCHEDULERS: the batcher the preferred sizes and the delay belong to

    def config(self, base: Mapping) -> dict:
        """``base`` (a configuration as JSON) with these settings: its instance groups' count (one group, of the first
        group's kind), max batch size, its batcher's preferred sizes and queue delay (dynamic batching turned on
        unless it has a sequence batcher) and its backend's thread parameters; everything else as it was."""
        found = copy.deepcopy(dict(base))
        group = dict((found.get("instance_group") or [{}])[0])
        group.pop("name", None)
        found["instance_group"] = [{**group, "count": self.instance_count}]
        found["max_batch_size"] = self.max_batch_size
        if "sequence_batching" in found:
            strategy = "oldest" if "oldest" in found["sequence_batching"] else "direct"
            if self.scheduler != strategy:
                raise TuneError(f"candidate for the {self.scheduler} batcher applied to a sequence model whose "
                                f"strategy is {strategy}")
            batcher = found["sequence_batching"].setdefault(strategy, {})
        else:
            batcher = found.setdefault("dynamic_batching", {})
        if self.preferred_batch_sizes or "preferred_batch_size" in batcher:
            batcher["preferred_batch_size"] = list(self.preferred_batch_sizes)
        batcher["max_queue_delay_microseconds"] = self.max_queue_delay_microseconds
        backend = backend_of(found)
        return backend.with_threads(found, self.intra_op_threads) if backend else found

    @classmethod
    def of(cls, config: Mapping) -> "Candidate":
        """The candidate a configuration (JSON) is: what :meth:`config` would set, read from its description."""
        found = describe(config)
        backend = backend_of(config)
        threads = backend.threads(config) if backend else 0
        sequence = found.sequence_batching
        batcher = sequence or found.dynamic_batching
        return cls(found.instance_count, found.max_batch_size, tuple(batcher.preferred_batch_sizes) if batcher else (),
                   batcher.max_queue_delay_microseconds if batcher else 0, threads,
                   sequence.strategy if sequence else "dynamic")

    def label(self) -> str:
        """The configuration in words, naming the batcher whose settings it varies."""
        threads = self.intra_op_threads or "default"
        preferred = " ".join(map(str, self.preferred_batch_sizes)) or "none"
        batcher = (f"preferred {preferred}, delay" if self.scheduler == "dynamic" else
                   "sequence batcher direct, delay" if self.scheduler == "direct" else
                   f"sequence batcher oldest, preferred {preferred}, delay")
        return (f"{self.instance_count} inst, max batch {self.max_batch_size}, {batcher} "
                f"{self.max_queue_delay_microseconds} us, threads {threads}")

    def to_dict(self) -> dict[str, Any]:
        found = {d: list(getattr(self, d)) if d == "preferred_batch_sizes" else getattr(self, d)
                 for d in ("instance_count", "max_batch_size", "preferred_batch_sizes", "max_queue_delay_microseconds",
                           "intra_op_threads")}
        return {**found, "scheduler": self.scheduler}


@dataclass(frozen=True)
class Budget:
    """How much a tune may measure: configurations, and minutes of wall clock."""

    configurations: int = DEFAULT_BUDGET
    minutes: float = DEFAULT_MINUTES

    @classmethod
    def parse(cls, text: str, default: "Budget") -> "Budget":
        """``--tune-budget``: "12" (configurations), "10m" / "10min" (minutes), or both "12,10m"."""
        budget = default
        for part in [p.strip() for p in str(text).split(",") if p.strip()]:
            minutes = re.fullmatch(r"(\d+(?:\.\d*)?)\s*(m|min|minutes)", part)
            if minutes and float(minutes.group(1)) > 0:
                budget = replace(budget, minutes=float(minutes.group(1)))
            elif part.isdigit() and int(part) >= 1:
                budget = replace(budget, configurations=int(part))
            else:
                raise TuneError(f"--tune-budget {text!r}: expected configurations (an integer >= 1), minutes "
                                f"('10m'), or both ('12,10m')")
        return budget


@dataclass(frozen=True)
class TuneSpace:
    instance_count: tuple[int, ...]
    max_batch_size: tuple[int, ...]
    preferred_batch_sizes: tuple[tuple[int, ...], ...]
    max_queue_delay_microseconds: tuple[int, ...]
    intra_op_threads: tuple[int, ...]
    concurrency: tuple[int, ...]  # closed-loop load each candidate is measured at, highest first
    objective: str = "throughput"
    budget: Budget = Budget()
    scheduler: str = "dynamic"  # SCHEDULERS: the batcher every candidate's preferred sizes and delay set

    def values(self, dimension: str) -> tuple:
        return getattr(self, dimension)

    def varied(self) -> list[str]:
        """The settings this space varies (more than one value), named as Triton names them for its batcher."""
        batcher = "dynamic_batching" if self.scheduler == "dynamic" else f"sequence_batching.{self.scheduler}"
        names = {"instance_count": "instance_group.count", "max_batch_size": "max_batch_size",
                 "preferred_batch_sizes": f"{batcher}.preferred_batch_size",
                 "max_queue_delay_microseconds": f"{batcher}.max_queue_delay_microseconds",
                 "intra_op_threads": "threads per instance"}
        return [names[d] for d in DIMENSIONS if len(self.values(d)) > 1]

    def valid(self, candidate: Candidate) -> bool:
        return all(b <= candidate.max_batch_size for b in candidate.preferred_batch_sizes)

    def with_value(self, candidate: Candidate, dimension: str, value) -> Candidate:
        return replace(candidate, **{dimension: value})

    def grid(self) -> list[Candidate]:
        """Every valid candidate (the brute-force search's list)."""
        found = [Candidate(i, m, p, d, t, self.scheduler) for i, m, p, d, t in itertools.product(
            self.instance_count, self.max_batch_size, self.preferred_batch_sizes, self.max_queue_delay_microseconds,
            self.intra_op_threads)]
        return [c for c in found if self.valid(c)]

    def size(self) -> int:
        return len(self.grid())


def _ints(value: Any, where: str, low: int) -> tuple[int, ...]:
    values = value if isinstance(value, (list, tuple)) else [value]
    bad = [v for v in values if isinstance(v, bool) or not isinstance(v, int) or v < low]
    if bad or not values:
        raise TuneError(f"{where} {bad[0] if bad else values!r}: expected integers >= {low}")
    return tuple(dict.fromkeys(values))


def parse_space(data: Mapping | None, where: str, *, max_batch_size: int, instance_count: int,
                preferred_batch_sizes: tuple[int, ...], max_queue_delay_microseconds: int, intra_op_threads: int,
                concurrency: tuple[int, ...], scheduler: str = "dynamic") -> TuneSpace:
    """The space of a model's ``tune:`` block; every key left out takes its default around the deployment's own
    configuration (given as keywords): instance counts 1, 2, 3; preferred batch sizes none, the profile's, the max
    batch size (none alone for a sequence batcher's ``direct`` strategy, which has none); max queue delay 0, the
    profile's (or 1000 us), four times it; the profile's threads and max batch size; the profile's online
    concurrencies."""
    data = dict(data or {})
    unknown = [str(k) for k in data if k not in TUNE_KEYS]
    if unknown:
        raise TuneError(f"{where}: unknown key {', '.join(unknown)}; valid keys: {', '.join(TUNE_KEYS)}")
    delay = max_queue_delay_microseconds or 1000
    max_batch = _ints(data.get("max_batch_size", [max_batch_size]), f"{where}.max_batch_size", 1)
    if scheduler not in SCHEDULERS:
        raise TuneError(f"{where}: scheduler {scheduler!r}; valid choices: {', '.join(SCHEDULERS)}")
    raw_preferred = data.get("preferred_batch_sizes", [[]] if scheduler == "direct" else
                             [[], list(preferred_batch_sizes), [max_batch_size]])
    if not isinstance(raw_preferred, (list, tuple)) or not raw_preferred:
        raise TuneError(f"{where}.preferred_batch_sizes {raw_preferred!r}: expected a list of choices, each a list "
                        f"of batch sizes ([] for none), e.g. [[], [16], [64]]")
    preferred = tuple(dict.fromkeys(
        () if choice in ([], None) else _ints(choice, f"{where}.preferred_batch_sizes", 1) for choice in raw_preferred))
    too_big = [p for p in preferred if any(b > max(max_batch) for b in p)]
    if too_big:
        raise TuneError(f"{where}.preferred_batch_sizes {list(too_big[0])}: valid range 1..{max(max_batch)} "
                        f"(max_batch_size)")
    if scheduler == "direct" and preferred != ((),):
        raise TuneError(f"{where}.preferred_batch_sizes {[list(p) for p in preferred]}: the sequence batcher's direct "
                        f"strategy has no preferred batch sizes; valid choices: [[]], or leave it out")
    objective = data.get("objective", "throughput")
    if objective not in OBJECTIVES:
        raise TuneError(f"{where}.objective {objective!r}: valid choices: {', '.join(OBJECTIVES)}")
    minutes = data.get("minutes", DEFAULT_MINUTES)
    if isinstance(minutes, bool) or not isinstance(minutes, (int, float)) or not minutes > 0:
        raise TuneError(f"{where}.minutes {minutes!r}: expected a number of minutes > 0")
    return TuneSpace(
        instance_count=_ints(data.get("instance_count", sorted({1, 2, 3, instance_count})), f"{where}.instance_count",
                             1),
        max_batch_size=max_batch, preferred_batch_sizes=preferred,
        max_queue_delay_microseconds=_ints(data.get("max_queue_delay_microseconds", [0, delay, 4 * delay]),
                                           f"{where}.max_queue_delay_microseconds", 0),
        intra_op_threads=_ints(data.get("intra_op_threads", [intra_op_threads]), f"{where}.intra_op_threads", 0),
        concurrency=tuple(sorted(_ints(data.get("concurrency", list(concurrency) or [1]), f"{where}.concurrency", 1),
                                 reverse=True)),
        objective=objective,
        budget=Budget(_ints(data.get("budget", DEFAULT_BUDGET), f"{where}.budget", 1)[0], float(minutes)),
        scheduler=scheduler)


def space_for(model_profile, base: Candidate | None = None) -> TuneSpace:
    """The tune space of a :class:`~tritonsuite.profiles.ModelProfile` (its ``tune:`` block, or the defaults) around
    ``base``, the deployment's own configuration as a candidate (``Candidate.of(config)``: its batcher decides what
    may vary); without it, around the profile's online settings."""
    online = model_profile.online
    base = base or Candidate(online.instance_count, model_profile.max_batch_size, online.preferred_batch_sizes,
                             online.max_queue_delay_microseconds, model_profile.intra_op_threads)
    return parse_space(model_profile.tune, f"{model_profile.model}.tune", max_batch_size=base.max_batch_size,
                       instance_count=base.instance_count, preferred_batch_sizes=base.preferred_batch_sizes,
                       max_queue_delay_microseconds=base.max_queue_delay_microseconds,
                       intra_op_threads=base.intra_op_threads, concurrency=online.concurrency,
                       scheduler=base.scheduler)
