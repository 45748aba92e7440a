"""Self-benchmark: how much does serving through Triton, and measuring with this suite, cost?

One run prints, side by side:
(a) in-process onnxruntime throughput vs through-Triton offline throughput for the profile's BERT at its largest
    offline batch size, as a ratio (target >= 0.9);
(b) p50 latency at batch 1 in-process vs through Triton, and the difference (target <= 0.5 ms);
(c) the load generator's highest sustained request rate against a trivial model (identity), with its own CPU use
    (target >= 5,000 requests/s).

Usage: ``tritonsuite selfbench [--gpu cpu] [--seconds 5]``.
``--loadgen suite,perf_analyzer`` measures (c) with perf_analyzer 2.51 too, point by point, and prints both side by
side, with each side's client CPU per request; ``--workers 1,2,4`` measures (c) with the engine over each of those
numbers of worker processes (the scaling); ``--ceiling-only`` runs (c) alone. Every point is measured through a load source (:mod:`tritonsuite.load.sources`,
named by ``--loadgen``): (a) and (b) by the default one, the suite's engine.
"""
from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from tritonsuite.core.device import cpu_name
from tritonsuite.core.settings import MAX_WORKERS, parse_workers
from tritonsuite.deploy.export import artifact_session, export
from tritonsuite.deploy.repository import build_deployment, deployment_name, model_config
from tritonsuite.load import sources as load_sources
from tritonsuite.load.engine import LoadPoint, Measurement, MeasurementError, MeasurementSettings, Traffic
from tritonsuite.load.sources.workers import choose
from tritonsuite.models import default_registry
from tritonsuite.profiles import load_profile
from tritonsuite.server import EmbeddedServer

ROOT = Path.cwd()  # the checkout the command runs in: its model_repos/ and reports/
CEILING_CONCURRENCY = (1, 4, 8, 16, 32)


def in_process(runner, inputs: dict, seconds: float) -> tuple[float, float]:
    """(inferences/second, p50 latency ms) of the artifact called directly, after a short warm-up."""
    batch = len(next(iter(inputs.values())))
    for _ in range(3):
        runner(inputs)
    latencies = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end or len(latencies) < 10:
        t0 = time.perf_counter()
        runner(inputs)
        latencies.append(time.perf_counter() - t0)
    return batch * len(latencies) / sum(latencies), float(np.percentile(latencies, 50) * 1e3)


def add_arguments(parser) -> None:
    parser.add_argument("--gpu", default="cpu", help="profile (shipped: cpu, a100, a30, a40, t4, v100, h100; or "
                        "<name>.yaml in --profiles-dir)")
    parser.add_argument("--profiles-dir", default=None, help="a directory of your own profiles")
    parser.add_argument("--model", default="bert")
    parser.add_argument("--seconds", type=float, default=5.0, help="in-process timing per point")
    parser.add_argument("--cache-dir", default=str(ROOT / "model_repos" / ".cache"))
    parser.add_argument("--loadgen", default="suite", help="load generators for (c): suite, perf_analyzer, or both "
                        "(comma-separated)")
    parser.add_argument("--ceiling-only", action="store_true", help="measure (c) only")
    parser.add_argument("--workers", default="1", help="for (c): the engine over each of these numbers of worker "
                        "processes, comma-separated (default 1: in this process), e.g. 1,2,4")
    parser.add_argument("--rounds", type=int, default=3, choices=range(1, 21), metavar="1..20",
                        help="interleaved rounds of (a) and (b), alternating which side goes first (default 3)")


def run(args, parser) -> int:
    try:
        loadgens = load_sources.parse(args.loadgen)
    except load_sources.UnknownSource as exc:
        parser.error(str(exc))
    if reason := load_sources.unavailable(loadgens):
        parser.error(reason)
    try:
        workers = tuple(dict.fromkeys(parse_workers(w) for w in str(args.workers).split(",") if w.strip()))
    except ValueError as exc:
        parser.error(str(exc))
    if not workers or any(not isinstance(w, int) for w in workers):
        parser.error(f"--workers {args.workers!r}: valid choices: comma-separated whole numbers of worker processes "
                     f"from 1 to {MAX_WORKERS} (1: the engine in this process)")
    if args.ceiling_only:
        return _ceiling_only(args.cache_dir, loadgens, workers=workers)

    profile = load_profile(args.gpu, args.profiles_dir)
    if args.model not in profile.models:
        parser.error(f"--model {args.model!r} is not in profile {args.gpu!r}; valid choices: {', '.join(profile.models)}")
    mp = profile.models[args.model]
    registry = default_registry()
    spec = registry.get(args.model, mp.size)
    big = max(mp.offline.batch_sizes)
    print(f"tritonsuite self-benchmark on {cpu_name()} ({os.cpu_count()} cores), profile {args.gpu}: "
          f"{spec.key} onnx fp32, batch {big} and 1; {mp.intra_op_threads or 'default'} threads per instance")

    artifact = export(spec, "onnx", "fp32", args.cache_dir)
    name = deployment_name(spec, "onnx", "fp32", "offline")
    inputs_big, inputs_one = spec.example_inputs(big, 0), spec.example_inputs(1, 0)

    settings = profile.measurement
    # in-process = the artifact run as the deployment configures its backend (the same session the stand-in runs).
    # The two sides are measured interleaved, in rounds that alternate which goes first (served, in-process;
    # in-process, served; ...), while the server idles during the in-process turns: a host that slows down over
    # the run (onnxruntime's CPU arena, a neighbour) then shows in both sides alike, not in one ratio by order.
    rounds: list[tuple[Measurement, Measurement, float, float]] = []
    config = mp.model_config("offline", name, spec, "onnx")
    runner = artifact_session(spec, artifact.path, "onnx", config=config)
    with tempfile.TemporaryDirectory(prefix="tritonsuite-selfbench-") as tmp:
        with EmbeddedServer(Path(tmp) / "repo", ROOT / "reports" / "logs") as server:
            server.load(build_deployment(Path(tmp) / "repo", config, artifact))
            description, engine = server.model_description(name), load_sources.get()
            for r in range(args.rounds):
                def served():
                    return tuple(engine.measure(server, Traffic(name, inputs, spec.outputs, LoadPoint(b, 1, True),
                                                                description), settings)
                                 for b, inputs in ((big, inputs_big), (1, inputs_one)))

                def local():
                    return in_process(runner, inputs_big, args.seconds)[0], in_process(runner, inputs_one,
                                                                                     args.seconds)[1]
                if r % 2 == 0:
                    (big_m, one_m), (tput, p50) = served(), local()
                else:
                    (tput, p50), (big_m, one_m) = local(), served()
                rounds.append((big_m, one_m, tput, p50))
            server.unload(name)
            runner = None  # frees the in-process session before the ceiling points

            measured = ceiling_points(server, Path(tmp) / "repo", args.cache_dir, loadgens, workers=workers)
            ceiling = [m for g, m in measured if g == "suite"] or [m for _, m in measured]

    ratios = [b.result["Inferences/Second"] / t for b, _, t, _ in rounds]
    middle = sorted(range(len(rounds)), key=lambda i: ratios[i])[len(rounds) // 2]  # the median round's figures
    served_big, served_one, local_tput, local_p50 = rounds[middle]
    served_tput = served_big.result["Inferences/Second"]
    served_p50 = served_one.result["p50 latency"]
    print(f"{len(rounds)} interleaved rounds (served first in odd rounds, in-process first in even ones); "
          f"reported: the round with the median throughput ratio ({middle + 1}):")
    for i, (b, o, t, p) in enumerate(rounds, 1):
        print(f"  round {i}: batch {big} {t:.1f} in-process vs {b.result['Inferences/Second']:.1f} served inf/s "
              f"(ratio {ratios[i - 1]:.3f}); batch 1 p50 {p:.2f} vs {o.result['p50 latency']:.2f} ms")
    best = max((m for m in ceiling if m.valid), key=lambda m: m.result["Inferences/Second"], default=None)
    rows = [
        ("(a) throughput, batch %d (inf/s)" % big, f"{local_tput:.1f}", f"{served_tput:.1f}",
         f"ratio {served_tput / local_tput:.3f}", ">= 0.9"),
        ("(b) p50 latency, batch 1 (ms)", f"{local_p50:.2f}", f"{served_p50:.2f}",
         f"overhead {served_p50 - local_p50:+.2f} ms", "<= 0.5 ms"),
    ]
    if best is not None:
        rows.append(("(c) load generator vs identity (req/s)", "-", f"{best.result['Inferences/Second']:.0f}",
                     f"at concurrency {best.point.concurrency}, client CPU {best.meta['client_cpu_percent']:.0f}%",
                     ">= 5000"))
    print()
    print("| measure | in-process | through Triton | comparison | target |")
    print("|:--|--:|--:|:--|:--|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print()
    print("load generator against identity (batch 1, dynamic batching):")
    print("| concurrency | requests/s | p50 (ms) | client CPU (% of a core) | status |")
    print("|--:|--:|--:|--:|:--|")
    for m in ceiling:
        if m.status == "FAILED":
            print(f"| {m.point.concurrency} | - | - | - | FAILED {'; '.join(m.reasons)} |")
            continue
        print(f"| {m.point.concurrency} | {m.result['Inferences/Second']:.0f} | {m.result['p50 latency']:.2f} | "
              f"{m.meta['client_cpu_percent']:.0f} | {m.status} {'; '.join(m.reasons)} |")
    for label, m in (("batch %d" % big, served_big), ("batch 1", served_one)):
        if not m.valid:
            print(f"note: the through-Triton {label} row is {m.status}: {'; '.join(m.reasons)}")
    if len(loadgens) > 1:
        _print_side_by_side(measured)
    return 0


CEILING_SETTINGS = MeasurementSettings(window_ms=1000, stability_percentage=10, max_trials=10)


def ceiling_points(server, repo: Path, cache_dir, loadgens=("suite",), concurrency=CEILING_CONCURRENCY,
                   settings: MeasurementSettings = CEILING_SETTINGS, workers=(1,),
                   measured: list | None = None) -> list[tuple[str, object]]:
    """(c): the identity model behind dynamic batching, batch 1, each ``concurrency`` (CEILING_CONCURRENCY; a test
    passes fewer, with shorter ``settings``) measured by each load generator (a load source's name; the engine once
    per entry of ``workers``, its worker processes: 1 in this process) back to back; [(label, Measurement)], the
    label the source's name and, for the engine over N processes, ``suite xN``; each appended to ``measured`` as it
    ends, so an interrupted caller keeps what was measured."""
    trivial = default_registry().get("identity", "tiny")
    trivial_artifact = export(trivial, "onnx", "fp32", cache_dir)
    trivial_name = deployment_name(trivial, "onnx", "fp32", "online")
    config = model_config(trivial_name, trivial, "onnx", max_batch_size=64, dynamic_batching=True, intra_op_threads=1)
    server.load(build_deployment(repo, config, trivial_artifact))
    inputs, description = trivial.example_inputs(1, 0), server.model_description(trivial_name)
    measured = [] if measured is None else measured
    for c in concurrency:
        for g in loadgens:
            ran = set()  # each number of processes the workers source would run at this point, once
            for n in (workers if g == load_sources.DEFAULT else (1,)):
                if (processes := choose(n, LoadPoint(1, c), server.local)[0]) in ran:
                    continue
                ran.add(processes)
                label = g if n == 1 else f"{g} x{n}"
                traffic = Traffic(trivial_name, inputs, trivial.outputs, LoadPoint(1, c), description)
                try:
                    measured.append((label, load_sources.get(g, n).measure(server, traffic, settings)))
                except MeasurementError as exc:  # the point failed (a timeout, a refused request): a FAILED line
                    server.check_alive()
                    measured.append((label, Measurement(LoadPoint(1, c), {}, {}, "FAILED", [str(exc)])))
                m = measured[-1][1]
                print(f"measured: concurrency {c} by {label}: {m.result.get('Inferences/Second') or 0:.0f} req/s, "
                      f"{m.status}", file=sys.stderr, flush=True)  # progress; the table comes at the end
    return measured


def _ceiling_only(cache_dir, loadgens, concurrency=CEILING_CONCURRENCY, settings=CEILING_SETTINGS,
                  workers=(1,)) -> int:
    print(f"tritonsuite self-benchmark (c) on {cpu_name()} ({os.cpu_count()} cores): identity onnx, batch 1, "
          f"dynamic batching; load generators {', '.join(loadgens)}"
          + (f"; the engine over {', '.join(map(str, workers))} worker processes" if tuple(workers) != (1,) else ""))
    measured: list = []
    stopped = False
    try:
        with tempfile.TemporaryDirectory(prefix="tritonsuite-selfbench-") as tmp, \
                EmbeddedServer(Path(tmp) / "repo", ROOT / "reports" / "logs") as server:
            ceiling_points(server, Path(tmp) / "repo", cache_dir, loadgens, concurrency, settings, workers, measured)
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (a step's timeout): what was measured is still printed
        stopped = True
        print(f"stopped after {len(measured)} points (interrupted): the table holds what was measured")
    if len(loadgens) > 1 or tuple(workers) != (1,):
        _print_side_by_side(measured)
    else:
        for g, m in measured:
            if m.status == "FAILED":
                print(f"concurrency {m.point.concurrency}: FAILED: {'; '.join(m.reasons)}")
                continue
            print(f"concurrency {m.point.concurrency}: {m.result['Inferences/Second']:.0f} req/s, p50 "
                  f"{m.result['p50 latency']:.2f} ms, client CPU {m.meta['client_cpu_percent']:.0f}%, {m.status}")
    return 130 if stopped else 0


def _print_side_by_side(measured) -> None:
    """The identity ceiling by the engine (in process, and over each number of worker processes measured) and by
    perf_analyzer, per concurrency, with the ratio perf_analyzer / suite and each side's client CPU per request."""
    by = {(g, m.point.concurrency): m for g, m in measured}
    engines = [g for g in dict.fromkeys(g for g, _ in measured) if g.split(" x")[0] == load_sources.DEFAULT]

    def fig(m, column, fmt):
        value = m.result.get(column) if m is not None else None
        return fmt.format(value) if isinstance(value, (int, float)) else "-"

    def meta(m, key):
        return m.meta.get(key, "-") if m is not None else "-"

    def per_request(m):  # client CPU seconds per request, in microseconds
        cpu, rate = meta(m, "client_cpu_percent"), m.result.get("Inferences/Second") if m is not None else None
        ok = isinstance(cpu, (int, float)) and isinstance(rate, (int, float)) and rate > 0
        return f"{cpu / 100 / rate * 1e6:.0f}" if ok else "-"

    def ratio(a, b, column):
        x = a.result.get(column) if a is not None else None
        y = b.result.get(column) if b is not None else None
        return f"{y / x:.2f}" if isinstance(x, (int, float)) and isinstance(y, (int, float)) and x > 0 else "-"

    print()
    print("identity ceiling, the suite's engine and perf_analyzer 2.51 side by side (ratio = perf_analyzer / suite):")
    print("| concurrency | engine | req/s suite | req/s perf_analyzer | ratio | p50 suite (ms) | p50 pa (ms) "
          "| p99 suite (ms) | p99 pa (ms) | client CPU suite / pa (%) | client CPU per request suite / pa (us) "
          "| other CPU suite / pa (%) | status suite / pa |")
    print("|--:|:--|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|:--|")
    for c in dict.fromkeys(m.point.concurrency for _, m in measured):  # in the order measured
        a = by.get(("perf_analyzer", c))
        for engine in engines or ["-"]:
            s = by.get((engine, c))
            if s is None and engine != (engines or ["-"])[0]:
                continue  # more workers than this point's slots: measured once, at the slots
            asked = int(engine.split(" x")[1]) if " x" in engine else 1
            ran = (s.meta.get("workers") or {}).get("processes", asked) if s is not None else asked
            workers = (f"{ran} worker processes" if ran > 1 else "in process") + \
                (f" ({asked} asked: no more than the slots)" if ran != asked else "")
            print(f"| {c} | {workers if engines else '-'} | {fig(s, 'Inferences/Second', '{:.0f}')} | "
                  f"{fig(a, 'Inferences/Second', '{:.0f}')} | {ratio(s, a, 'Inferences/Second')} | "
                  f"{fig(s, 'p50 latency', '{:.2f}')} | {fig(a, 'p50 latency', '{:.2f}')} | "
                  f"{fig(s, 'p99 latency', '{:.2f}')} | {fig(a, 'p99 latency', '{:.2f}')} | "
                  f"{meta(s, 'client_cpu_percent')} / {meta(a, 'client_cpu_percent')} | "
                  f"{per_request(s)} / {per_request(a)} | {meta(s, 'host_other_cpu_percent')} / "
                  f"{meta(a, 'host_other_cpu_percent')} | {s.status if s else '-'} / {a.status if a else '-'} |")
    for g, m in measured:
        if not m.valid:
            print(f"note: {g} at concurrency {m.point.concurrency} is {m.status}: {'; '.join(m.reasons)}")
