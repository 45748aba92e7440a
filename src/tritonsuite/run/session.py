"""A session of the suite as a script or the plugin runs it: the server and the suite from the resolved options,
and at the end the manifest, the pages, the comparison with an earlier run and the lines a terminal shows."""
from __future__ import annotations

from pathlib import Path

from tritonsuite.core.store import fault_lines, load_rows, read_faults, write_manifest
from tritonsuite.judge.baselines import BaselineStore
from tritonsuite.judge.compare import compare_runs
from tritonsuite.report import write_reports
from tritonsuite.report.manifest import build_manifest
from tritonsuite.report.mix import mix_summary_lines
from tritonsuite.report.pages import not_measured_lines
from tritonsuite.run.options import Options
from tritonsuite.run.suite import Suite
from tritonsuite.server import make_server


#: the key under which an xdist worker reports to the controller what it loaded on a remote server
LOADED_OUTPUT = "tritonsuite_remote_loaded"


def server_for(options: Options):
    """The run's server, not started: embedded, a container or a remote one, as --server chose. A remote one on an
    xdist worker leaves what it loaded at its stop: the controller puts it back once every worker is done."""
    server = make_server(options.server, model_repository=options.repository_dir,
                         log_dir=options.reports_dir / "logs", triton_url=options.triton_url,
                         **options.launcher_options())
    if options.worker != "main" and hasattr(server, "put_back_on_stop"):
        server.put_back_on_stop = False
    return server


def server_lines(server) -> tuple[list[str], list[str]]:
    """What the run says at its start about a started server: the APIs it restricts to headers not given
    (:func:`tritonsuite.server.reach.survey`), how it is reached where TLS or headers are set; and those of them to
    warn of (restricted APIs, verification turned off)."""
    from tritonsuite.core.access import PLAIN
    from tritonsuite.server.reach import describe_restricted, survey

    restricted = describe_restricted(survey(server))
    lines = ([f"tritonsuite: {server.describe()}: {restricted}"] if restricted else []) + \
        ([f"tritonsuite: reached with {server.access.describe()}"] if server.access != PLAIN else [])
    return lines, [line for line in lines if "restricted" in line or server.access.unverified]


def suite_for(options: Options, server) -> Suite:
    """The suite of the run on ``server`` (started)."""
    o = options
    return Suite(profile=o.profile, registry=o.registry, server=server, repository_dir=o.repository_dir,
                 cache_dir=o.cache_dir, reports_dir=o.reports_dir, run_id=o.run_id, worker=o.worker,
                 checkpoints=o.checkpoints, datasets=o.datasets,
                 baselines=BaselineStore(o.baselines_dir, o.profile.name) if o.baselines_dir else None,
                 update_baselines=o.update_baselines, require_baselines=o.require_baselines, retrain=o.retrain,
                 compare_with=o.compare_rows, compare_label=o.compare_label,
                 load_probe_share=o.load_probe_share, load_probe_seed=o.load_probe_seed, protocol=o.protocol,
                 sequences=o.sequences, bls_composing=dict(o.bls_composing), workers=o.workers)


def undrivable_lines(options: Options | None) -> list[str]:
    """One line per deployment of --model-repository the suite cannot drive (refused or skipped), with the reason."""
    return [f"tritonsuite: {'refused' if refused else 'skipped'} {name} in {repo}: {reason}"
            for repo, name, reason, refused in (options.undrivable if options else ())]


def refused_deployments(options: Options, named: list[str]) -> list[tuple[str, str]]:
    """(name, line) for each deployment Triton refuses to load, of those ``named`` (--models) if any."""
    return [(name, f"{name} in {repo}: Triton refuses to load it: {why}")
            for repo, name, why, is_refused in options.undrivable
            if is_refused and (not named or any(n.split(":")[0] == name for n in named))]


def put_back_lines(options: Options, server, from_workers: list) -> list[str]:
    """How the run left a remote server (:meth:`~tritonsuite.server.RemoteServer.put_back`): ``server`` is this
    process's, put back at its stop; ``from_workers`` each xdist worker's models loaded there (its
    ``loaded_here()``), put back here once every worker is done: a worker must not unload what another measures. A
    model is taken as the run's where any worker found it not ready (another worker may have loaded it first)."""
    if server is not None:
        return [f"tritonsuite: {line}" for line in getattr(server, "put_back_lines", ())]
    loaded = loaded_by_workers(from_workers)
    if not loaded or options.server != "remote":
        return []
    return [f"tritonsuite: {line}" for line in server_for(options).put_back(loaded)]


def loaded_by_workers(from_workers: list) -> list[tuple[str, bool]]:
    """The workers' (model, ready before) lists as one, first loaded first: ready before only where every worker
    that loaded it found it ready (a worker finds ready what another loaded a moment earlier)."""
    loaded: dict[str, bool] = {}
    for reported in from_workers:
        for name, ready_before in reported:
            loaded[name] = loaded.get(name, True) and bool(ready_before)
    return list(loaded.items())


def write_session_reports(options: Options, source_dir: Path) -> tuple[list[Path], list[str]]:
    """This run's raw rows into the manifest, tables, plots and (with --compare) the comparison page; returns the
    pages written and the lines to show: points not measured, faults, mixes, baselines, the comparison."""
    rows = load_rows(options.reports_dir, options.run_id)
    manifest = None
    if rows:  # first: every page's header names the run from it
        manifest = build_manifest(run_id=options.run_id, profile=options.profile, rows=rows,
                                  repository_dir=options.repository_dir, source_dir=source_dir,
                                  reports_dir=options.reports_dir, access=options.access)
        write_manifest(options.reports_dir, manifest)
    comparison = None
    if options.compare_rows:
        comparison = compare_runs(options.compare_rows, rows, then_label=options.compare_label,
                                  now_label=f"run {options.run_id}", then_manifest=options.compare_manifest,
                                  now_manifest=manifest)
    written = write_reports(options.reports_dir, options.run_id, comparison=comparison,
                            gate_percent=options.perf_gate)
    lines = []
    if comparison is not None:
        verdicts = [p.verdict for p in comparison.points]
        lines.append(f"compared with {options.compare_label}: {len(verdicts)} points, "
                     f"{verdicts.count('regression')} significant regressions, {verdicts.count('improvement')} "
                     f"improvements" + "".join(f"; {d}" for d in comparison.differences)
                     + f" ({options.reports_dir / 'compare.md'})")
    missed = not_measured_lines(rows)
    if missed:
        lines.append(f"tritonsuite: {len(missed)} point{'s' if len(missed) > 1 else ''} could not be measured (every "
                     f"request answered, no valid figures; skipped, --strict-stability fails them):")
        lines += [f"  {line}" for line in missed]
    lines += [f"tritonsuite: {line}" for line in fault_lines(read_faults(options.reports_dir, options.run_id))]
    return written, lines + mix_summary_lines(rows) + baseline_notes(rows)


def baseline_notes(rows) -> list[str]:
    """One line per accuracy deployment whose baseline is missing, improved on, or rewritten in this run."""
    notes = []
    for row in rows:
        note = row.extra.get("baseline") if row.scenario == "accuracy" else None
        if not note:
            continue
        if note.get("refused") and not note.get("updated"):
            notes.append(note["refused"])
        if note.get("updated"):
            notes.append(f"baseline written: {row.deployment} -> {note['updated']}")
        elif note.get("missing"):
            notes.append(f"no baseline: {note['missing']} (write one with --update-baselines)")
        for line in note.get("improvements", []):
            notes.append(f"improved on its baseline: {row.deployment}: {line} (accept with --update-baselines)")
    return notes
