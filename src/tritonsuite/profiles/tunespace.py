"""The configuration space of a tune: what the profile's ``tune:`` block lets vary, with defaults.

A :class:`Candidate` is one point of the space in Triton's own vocabulary (instance count, max batch size,
preferred batch sizes, max queue delay, threads per instance); applied to the deployment's own
:class:`~tritonsuite.deploy.repository.DeploymentConfig` it is a stock configuration. A :class:`TuneSpace` holds the
values each of them may take, the closed-loop concurrencies each candidate is measured at (highest first), and the
budget. A leaf of the tune stage: plain data, no measuring.
"""
from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, replace
from typing import Any, Mapping

#: The keys of a profile's ``tune:`` block (per model)
TUNE_KEYS = ("instance_count", "max_batch_size", "preferred_batch_sizes", "max_queue_delay_microseconds",
             "intra_op_threads", "concurrency", "objective", "budget", "minutes")
#: The dimensions of the space, in the order a search walks them
DIMENSIONS = ("instance_count", "preferred_batch_sizes", "max_queue_delay_microseconds", "intra_op_threads",
              "max_batch_size")
OBJECTIVES = ("throughput",)  # the most inferences/s within the latency bound
DEFAULT_BUDGET = 9  # configurations: a third of a 3x3x3 space
DEFAULT_MINUTES = 15.0


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

    def config(self, base):
        """``base`` (a DeploymentConfig) with these settings and dynamic batching on."""
        return replace(base, instance_count=self.instance_count, max_batch_size=self.max_batch_size,
                       preferred_batch_sizes=self.preferred_batch_sizes, dynamic_batching=True,
                       max_queue_delay_microseconds=self.max_queue_delay_microseconds,
                       intra_op_threads=self.intra_op_threads)

    @classmethod
    def of(cls, config) -> "Candidate":
        return cls(config.instance_count, config.max_batch_size, tuple(config.preferred_batch_sizes),
                   config.max_queue_delay_microseconds, config.intra_op_threads)

    def label(self) -> str:
        preferred = " ".join(map(str, self.preferred_batch_sizes)) or "none"
        threads = self.intra_op_threads or "default"
        return (f"{self.instance_count} inst, max batch {self.max_batch_size}, preferred {preferred}, "
                f"delay {self.max_queue_delay_microseconds} us, threads {threads}")

    def to_dict(self) -> dict[str, Any]:
        return {d: list(getattr(self, d)) if d == "preferred_batch_sizes" else getattr(self, d)
                for d in ("instance_count", "max_batch_size", "preferred_batch_sizes", "max_queue_delay_microseconds",
                          "intra_op_threads")}


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

    def values(self, dimension: str) -> tuple:
        return getattr(self, dimension)

    def valid(self, candidate: Candidate) -> bool:
        return all(b <= candidate.max_batch_size for b in candidate.preferred_batch_sizes)

    def with_value(self, candidate: Candidate, dimension: str, value) -> Candidate:
        return replace(candidate, **{dimension: value})

    def grid(self) -> list[Candidate]:
        """Every valid candidate (the brute-force search's list)."""
        found = [Candidate(i, m, p, d, t) for i, m, p, d, t in itertools.product(
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
                concurrency: tuple[int, ...]) -> TuneSpace:
    """The space of a model's ``tune:`` block; every key left out takes its default around the profile's own online
    configuration (given as keywords): instance counts 1, 2, 3; preferred batch sizes none, the profile's, the max
    batch size; max queue delay 0, the profile's (or 1000 us), four times it; the profile's threads and max batch
    size; the profile's online concurrencies."""
    data = dict(data or {})
    unknown = [str(k) for k in data if k not in TUNE_KEYS]
    if unknown:
        raise TuneError(f"{where}: unknown key {', '.join(unknown)}; valid keys: {', '.join(TUNE_KEYS)}")
    delay = max_queue_delay_microseconds or 1000
    max_batch = _ints(data.get("max_batch_size", [max_batch_size]), f"{where}.max_batch_size", 1)
    raw_preferred = data.get("preferred_batch_sizes", [[], list(preferred_batch_sizes), [max_batch_size]])
    if not isinstance(raw_preferred, (list, tuple)) or not raw_preferred:
        raise TuneError(f"{where}.preferred_batch_sizes {raw_preferred!r}: expected a list of choices, each a list "
                        f"of batch sizes ([] for none), e.g. [[], [16], [64]]")
    preferred = tuple(dict.fromkeys(
        () if choice in ([], None) else _ints(choice, f"{where}.preferred_batch_sizes", 1) for choice in raw_preferred))
    too_big = [p for p in preferred if any(b > max(max_batch) for b in p)]
    if too_big:
        raise TuneError(f"{where}.preferred_batch_sizes {list(too_big[0])}: valid range 1..{max(max_batch)} "
                        f"(max_batch_size)")
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
        budget=Budget(_ints(data.get("budget", DEFAULT_BUDGET), f"{where}.budget", 1)[0], float(minutes)))


def space_for(model_profile) -> TuneSpace:
    """The tune space of a :class:`~tritonsuite.profiles.ModelProfile` (its ``tune:`` block, or the defaults)."""
    online = model_profile.online
    return parse_space(model_profile.tune, f"{model_profile.model}.tune", max_batch_size=model_profile.max_batch_size,
                       instance_count=online.instance_count, preferred_batch_sizes=online.preferred_batch_sizes,
                       max_queue_delay_microseconds=online.max_queue_delay_microseconds,
                       intra_op_threads=model_profile.intra_op_threads, concurrency=online.concurrency)
