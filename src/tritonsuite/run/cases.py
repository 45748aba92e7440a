"""The cases a profile asks for: one per test point (a deployment and a load point, a latency-bound search, or an
accuracy check), in a stable order. Plain data: the pytest glue parametrises over them, a script iterates them."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

from tritonsuite.core.settings import LatencyBound
from tritonsuite.judge.conformance import OFFLINE_CHECKS
from tritonsuite.load import sources as load_sources
from tritonsuite.profiles import Profile

SCENARIOS = ("offline", "online", "accuracy", "tune", "conformance", "mix")
#: the size of a --model-repository deployment (tritonsuite.deploy.userrepo.SIZE): served once, as given
USER_SIZE = "repository"


@dataclass(frozen=True)
class Case:
    """One test point: a deployment (model, format, precision, scenario) and, for performance, a load point (a
    concurrency, or a request rate), or online a search for the most load within the profile's latency bound."""

    model: str
    format: str
    precision: str
    scenario: str
    batch_size: int = 0
    concurrency: int = 0
    request_rate: float = 0.0
    search: str = ""  # "request_rate" or "concurrency": the latency-bound search of this deployment
    bound: str = ""  # its bound, e.g. "p99 <= 50 ms"
    loadgen: str = "suite"  # who measures a closed-loop point (load.sources); request rates and searches: suite
    round: int = 0  # --repeat N: which of the N interleaved rounds this measurement is (0: measured once)
    rounds: int = 0
    order: str = ""  # --order of the sweep's points within a round
    stream: bool = False  # online: the streaming example of the deployment (deploy.streaming), at this concurrency
    check: str = ""  # conformance: which check (tritonsuite.judge.conformance.CHECKS)
    serving: str = ""  # conformance: which deployment of the model, "online" or "offline" ("" for a user's)

    @property
    def id(self) -> str:
        if self.scenario == "mix":  # a mix of the profile, by its name (model holds the name)
            return f"{self.model}-{'maxscale' if self.search == 'scale' else self.search}" if self.search else self.model
        parts = [self.model, self.format, self.precision]
        if self.scenario == "offline":
            parts.append(f"batch{self.batch_size}")
        elif self.search:
            parts.append(f"max{'rate' if self.search == 'request_rate' else 'concurrency'}-"
                         f"{LatencyBound.parse(self.bound).slug}")
        elif self.request_rate:
            parts.append(f"rate{self.request_rate:g}")
        elif self.scenario == "online":
            parts.append(f"{'stream-' if self.stream else ''}concurrency{self.concurrency}")
        elif self.scenario == "tune":
            parts.append(f"tune-{LatencyBound.parse(self.bound).slug}")
        elif self.scenario == "conformance":
            parts += [p for p in (self.serving, self.check) if p]
        if self.loadgen != "suite":
            parts.append(self.loadgen)
        if self.round:
            parts.append(f"round{self.round}")
        return "-".join(parts)


def profile_cases(profile: Profile, scenario: str, loadgens: Sequence[str] = ("suite",),
                  checks: Sequence[str] = ()) -> list[Case]:
    """The cases a profile asks for in a scenario, in a stable order (model, format, precision, sweep value, load
    generator: with several, they measure each point back to back, so a busy spell hits both alike). Conformance:
    one case per check in ``checks`` (:data:`tritonsuite.judge.conformance.CHECKS`) and deployment."""
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; valid choices: {', '.join(SCENARIOS)}")
    for g in loadgens or [""]:
        load_sources.get(g)  # an UnknownSource (a ValueError) naming the valid choices
    if scenario == "mix":  # one case per mix of the profile's mix: section, named by the mix
        # and, when a deployment of it has a latency bound, the most mixed load within every bound (a search)
        # and, when it has a tune: block, the configuration search for the set (both take minutes: --searches)
        return [c for name, mix in profile.mixes.items() for c in [Case(name, "", "", scenario)] + (
            [Case(name, "", "", scenario, search="scale")] if any(
                profile.models[m].online.latency_bound is not None for m in mix.models if m in profile.models) else [])
            + ([Case(name, "", "", scenario, search="tune")] if mix.tune else [])]
    cases = []
    for model, mp in profile.models.items():
        for fmt in mp.formats[:1] if scenario == "conformance" else mp.formats:
            for precision in mp.scenario_precisions(scenario)[:1] if scenario == "conformance" else \
                    mp.scenario_precisions(scenario):
                if scenario == "offline":
                    cases += [Case(model, fmt, precision, scenario, batch_size=b, loadgen=g)
                              for b in mp.offline.batch_sizes for g in loadgens]
                elif scenario == "online":
                    on = mp.online
                    cases += [Case(model, fmt, precision, scenario, batch_size=on.batch_size, concurrency=c,
                                   loadgen=g) for c in on.concurrency for g in loadgens]
                    cases += [Case(model, fmt, precision, scenario, batch_size=on.batch_size, concurrency=c,
                                   stream=True) for c in on.stream]
                    cases += [Case(model, fmt, precision, scenario, batch_size=on.batch_size, request_rate=r)
                              for r in on.request_rates]
                    if on.latency_bound is not None:
                        cases += [Case(model, fmt, precision, scenario, batch_size=on.batch_size, search=kind,
                                       bound=str(on.latency_bound)) for kind in on.search]
                elif scenario == "conformance":
                    cases += _conformance_cases(mp, model, fmt, precision, checks)
                elif scenario == "tune":  # one per online deployment with a latency bound: its configuration search
                    on = mp.online
                    if on.latency_bound is not None and (on.concurrency or on.request_rates):
                        cases.append(Case(model, fmt, precision, scenario, batch_size=on.batch_size,
                                          bound=str(on.latency_bound)))
                else:
                    cases.append(Case(model, fmt, precision, scenario, batch_size=mp.max_batch_size))
    return cases


def _conformance_cases(mp, model: str, fmt: str, precision: str, checks: Sequence[str]) -> list[Case]:
    """One case per check of each deployment a model's performance scenarios serve (its online one with dynamic
    batching, its offline one without), in the first format and precision (``--formats`` chooses another); a
    user's deployment once, as given. A model the profile only checks for accuracy has none. The offline deployment
    differs from the online one only by its scheduler: it runs the checks that read it (:data:`OFFLINE_CHECKS`);
    instances and reload, the same model file and backend over again, run on the online one."""
    if mp.size == USER_SIZE:
        servings = [("", 1, checks)]
    else:
        servings = ([("online", mp.online.batch_size, checks)] if mp.online.concurrency or mp.online.request_rates
                    else []) + ([("offline", 1, [c for c in checks if c in OFFLINE_CHECKS])]
                                if mp.offline.batch_sizes else [])
    return [Case(model, fmt, precision, "conformance", batch_size=b, check=c, serving=s)
            for s, b, wanted in servings for c in wanted]


#: Orders of a sweep's points within a round (``--order``).
ORDERS = ("ascending", "descending", "shuffled")


def ordered_cases(cases: Sequence[Case], repeat: int = 1, order: str = "ascending", seed: int = 0) -> list[Case]:
    """The performance cases of each deployment (first-seen order) as ``repeat`` interleaved rounds of its sweep
    (A B C, A B C, ... not A A A, B B B: drift then shows as a trend across rounds, not as a difference between
    points), the points of a round in ``order`` (ascending load, descending, or shuffled from ``seed``, one
    shuffle per round); a deployment's latency-bound searches follow its rounds, once. ``repeat`` 1 with ascending
    order leaves the cases as they were."""
    import random

    if order not in ORDERS or repeat < 1:
        raise ValueError(f"order {order!r}, repeat {repeat!r}: valid orders {', '.join(ORDERS)}; repeat >= 1")
    if repeat == 1 and order == "ascending":
        return list(cases)
    groups: dict[tuple, list[Case]] = {}
    for case in cases:
        groups.setdefault((case.model, case.format, case.precision, case.scenario, case.loadgen), []).append(case)
    rng = random.Random(seed)
    out: list[Case] = []
    for group in groups.values():
        points = sorted((c for c in group if not c.search), key=lambda c: (c.batch_size, c.request_rate > 0,
                                                                           c.concurrency, c.request_rate))
        for r in range(1, repeat + 1):
            round_points = list(points)
            if order == "descending":
                round_points.reverse()
            elif order == "shuffled":
                rng.shuffle(round_points)
            out += [replace(c, round=r if repeat > 1 else 0, rounds=repeat if repeat > 1 else 0, order=order)
                    for c in round_points]
        out += [c for c in group if c.search]
    return out
