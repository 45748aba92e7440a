"""A mix of the profile run by the suite (``pytest -m mix``, :meth:`tritonsuite.run.suite.Suite.run_mix`): each
deployment deployed as its online one, its traffic (the profile's concurrency, request rate or share of a total
rate), accuracy probes in its own traffic, the interleaved rounds of :func:`tritonsuite.load.mix.run_mix`, one row
per deployment per measurement (scenario ``mix``, recorded the moment it exists), and each deployment's
interference ratio (:mod:`tritonsuite.judge.interference`) from those rows."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from tritonsuite.core.rows import Row
from tritonsuite.judge.interference import Interference, interference
from tritonsuite.load.engine import LoadPoint, Progress, Traffic
from tritonsuite.load.kinds import driver_for
from tritonsuite.load.mix import Step, run_mix
from tritonsuite.profiles.mix import MixProfile


@dataclass
class MixResult:
    name: str
    rows: list[Row] = field(default_factory=list)
    ratios: list[Interference] = field(default_factory=list)
    accuracy: dict[str, Any] = field(default_factory=dict)  # deployment -> its last UnderLoadResult under the mix

    @property
    def invalid(self) -> list[Row]:
        return [r for r in self.rows if not r.valid]

    def describe(self) -> str:
        return f"mix {self.name}: " + "; ".join(r.describe() for r in self.ratios)


def _probes(suite, member, deployment, point: LoadPoint):
    """(ProbeSet, one-at-a-time answers) of a member with an accuracy task, else (None, None)."""
    from tritonsuite.load.client import served_infer
    from tritonsuite.judge.underload import probe_set, run_alone

    spec = deployment.spec
    if suite.load_probe_share <= 0 or spec.accuracy_data is None:
        return None, None
    data = spec.accuracy_data(suite.datasets.get(member.model), suite.checkpoint(member.model))
    probes = probe_set({t.name: data.inputs[t.name] for t in spec.inputs}, point.batch_size)
    client = suite.server.grpc_client() if suite.protocol == "grpc" else suite.server.client()
    try:
        return (probes, data), run_alone(served_infer(client, deployment.name, spec, batched=deployment.batched), probes)
    finally:
        client.close()


def _setup(suite, name: str, progress: Progress | None, probes: bool = True):
    """(the mix, its deployments, their traffic, their accuracy references) on the suite's server; without
    ``probes``, load only (the searches)."""
    mixes = suite.profile.mixes
    if name not in mixes:
        raise ValueError(f"mix {name!r}: not in profile {suite.profile.name!r}; valid choices: {', '.join(mixes)}")
    mix: MixProfile = mixes[name]
    deployments, traffic, references = [], [], []
    for i, member in enumerate(mix.members):
        if progress is not None and not suite.deployed(member.model, member.format, member.precision, "online"):
            progress(f"deploying {member.model} as {member.format} {member.precision} (online)")
        dep = suite.deployment(member.model, member.format, member.precision, "online")
        online = suite.model_profile(member.model).online
        rate = member.rate(mix.total_rate)
        point = LoadPoint(online.batch_size, member.concurrency or 1, request_rate=rate,
                          distribution=online.distribution, seed=online.seed + i, protocol=suite.protocol)
        driver = driver_for(dep.description)
        point, _ = driver.point(point)
        found, alone = _probes(suite, member, dep, point) if probes and driver.probes else (None, None)
        deployments.append(dep)
        references.append((found, alone))
        traffic.append(Traffic(dep.name, dep.spec.example_inputs(point.batch_size, 0), dep.spec.outputs, point,
                               dep.description, found[0].requests if found else (),
                               suite.load_probe_share if found else 0.0, suite.load_probe_seed))
    return mix, deployments, traffic, references


def _row(suite, mix: MixProfile, i: int, dep, m, **where) -> Row:
    member = mix.members[i]
    row = m.to_row(scenario="mix", model=member.model, title=dep.spec.title or member.model, format=member.format,
                   precision=member.precision, deployment=dep.name, parameters=suite.parameters(dep))
    row.extra["mix"] = {"name": mix.name, "rounds": mix.rounds, "traffic": member.describe(mix.total_rate), **where}
    return row


def _failed(suite, name: str, exc: Exception) -> None:
    first_line = (str(exc).strip().splitlines() or [""])[0]
    suite.record(Row.failed(reason=f"{type(exc).__name__}: {first_line}", scenario="mix", model=name,
                            deployment=name, extra={"mix": {"name": name, "role": "failed"}}))


def run_mix_case(suite, name: str, progress: Progress | None = None) -> MixResult:
    result = MixResult(name)
    mix, deployments, traffic, references = _setup(suite, name, progress)

    def on_measured(step: Step) -> None:
        members = [step.index] if step.role == "alone" else range(len(mix.members))
        for i, m in zip(members, step.measurements):
            member, dep = mix.members[i], deployments[i]
            row = _row(suite, mix, i, dep, m, role=step.role, round=step.round, start_s=round(step.start_s, 3),
                       end_s=round(step.end_s, 3), deployments=[d.name for d in deployments])
            found, alone = references[i]
            if found is not None and step.role == "together":  # accuracy under the mixed load
                from tritonsuite.judge.underload import judge

                verdict = judge(dep.spec, member.precision, found[1], found[0], alone, m.probe_responses,
                                deployment=dep.name, batch_size=m.point.batch_size,
                                concurrency=m.point.concurrency, share=traffic[i].probe_share,
                                seed=traffic[i].probe_seed)
                m.accuracy_under_load = result.accuracy[dep.name] = verdict
                row.extra["accuracy_under_load"] = verdict.to_dict()
            suite.record(row)
            result.rows.append(row)

    try:
        run_mix(suite.server, traffic, mix.settings(suite.profile.measurement), mix.rounds, progress, on_measured)
    except Exception as exc:
        _failed(suite, name, exc)
        raise
    for dep in deployments:
        mine = [r for r in result.rows if r.deployment == dep.name]
        result.ratios.append(interference(dep.name, [r for r in mine if r.extra["mix"]["role"] == "alone"],
                                          [r for r in mine if r.extra["mix"]["role"] == "together"]))
    return result


def run_mix_search(suite, name: str, progress: Progress | None = None):
    """The most mixed load within every bound (:func:`tritonsuite.load.mix.max_mix`): each deployment judged
    against its model's ``online.latency_bound``. Every point's rows are recorded as evidence (role ``search``,
    ``factor``, ``within``, ``why``), then the answer's rows again with role ``search-answer`` and the answer line.
    Returns the MixSearch."""
    import copy

    from tritonsuite.load.search import judge

    mix, deployments, traffic, _ = _setup(suite, name, progress, probes=False)
    bounds = [suite.model_profile(m.model).online.latency_bound for m in mix.members]
    rows: dict[float, list[Row]] = {}
    began = time.perf_counter()

    def on_point(factor: float, found) -> None:
        step = len(rows) + 1
        for i, m in enumerate(found):
            within, why = judge(m, bounds[i]) if bounds[i] is not None else (True, "no bound")
            row = _row(suite, mix, i, deployments[i], m, role="search", step=step, factor=round(factor, 4),
                       bound=str(bounds[i]) if bounds[i] else None, within=within, why=why,
                       end_s=round(time.perf_counter() - began, 3))
            suite.record(row)
            rows.setdefault(factor, []).append(row)

    from tritonsuite.load.mix import max_mix

    try:
        found = max_mix(suite.server, traffic, bounds, mix.settings(suite.profile.measurement), progress, on_point)
    except Exception as exc:
        _failed(suite, name, exc)
        raise
    answer = found.describe()
    for row in (rows.get(found.factor) or rows[max(rows)] if rows else [])[-len(mix.members):]:  # the last
        final = copy.deepcopy(row)
        final.extra["mix"].update(role="search-answer", answer=answer, bound_by=found.bound_by,
                                  points=found.result.points)
        suite.record(final)
    return found


def run_mix_tune(suite, name: str, progress: Progress | None = None):
    """The configuration search for the set (:func:`tritonsuite.tune.mix.tune_set`): every joint configuration
    measured is recorded (role ``tune-evidence``, then ``tune-abab-default`` / ``tune-abab-winner``), the configuration
    to ship goes to ``reports/mix/<mix>/tune/<deployment>/config.pbtxt``, and the answer is recorded on a copy of the
    last row (role ``tune-answer``). Returns the MixTuneResult."""
    import copy

    from tritonsuite.tune.mix import tune_set, write_configs
    from tritonsuite.tune.runner import TuneTarget
    from tritonsuite.profiles.tunespace import Budget, Candidate, space_for

    mix, deployments, traffic, _ = _setup(suite, name, progress, probes=False)
    targets = [TuneTarget(suite.server, d, suite.repository_dir, t.point.batch_size).check()
               for d, t in zip(deployments, traffic)]
    spaces = [space_for(suite.model_profile(m.model), Candidate.of(d.config)) for d, m in zip(deployments, mix.members)]
    bounds = [suite.model_profile(m.model).online.latency_bound for m in mix.members]
    rows: list[Row] = []

    def record(m, role, candidate, i, meta):
        if progress is not None and i == 0:
            progress(f"{role} {len(rows) // len(targets) + 1}: {meta['label']}: weighted {meta['weighted_score']:g} "
                     f"inf/s, {'within' if meta['within'] else 'not within'} every bound")
        row = _row(suite, mix, i, deployments[i], m, role=role, candidate=candidate.members[i].to_dict(),
                   **{k: v for k, v in meta.items()})
        suite.record(row)
        rows.append(row)
        return row

    budget = Budget(int(mix.tune.get("budget", 6)), float(mix.tune.get("minutes", 15)))
    try:
        result = tune_set(targets, spaces, traffic, bounds, mix.weights(), mix.settings(suite.profile.measurement),
                          record, budget)
    except Exception as exc:
        _failed(suite, name, exc)
        raise
    out = suite.reports_dir / "mix" / name / "tune"
    written = write_configs(out, targets, result.shipped)
    for row in rows[-len(targets):]:
        final = copy.deepcopy(row)
        final.extra["mix"].update(role="tune-answer", answer=result.describe(), recommended=result.recommended,
                                  configs=[str(p.relative_to(suite.reports_dir)) for p in written])
        suite.record(final)
    return result
