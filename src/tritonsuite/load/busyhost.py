"""A reproducible busy host: run a command (a pytest run of the suite) beside a bursty CPU burner, then say how
the run's points fared and how busy the host was.

    tritonsuite busyhost [--on 2] [--off 2] [--cores 1] -- pytest -m offline --models bert

The burner is ``--cores`` processes (one by default), each spinning one core for ``--on`` seconds and sleeping
``--off`` seconds, over and over, started before the command and killed when it ends (also on Ctrl-C, or SIGTERM,
which the command is passed first);
``--cores 2 --off 0`` keeps both cores of a two-core host busy the whole run. The summary reads the run's rows
through its manifest (``<reports-dir>/manifest.json``): per point its status, throughput, the windows it took (and
how far they were lengthened) and the CPU other processes used meanwhile, which shows the burner.
"""
from __future__ import annotations

import argparse
import signal
import subprocess
import sys
from pathlib import Path
from typing import Sequence

from tritonsuite.core.rows import STATUSES
from tritonsuite.core.store import latest_manifest, load_rows

MAX_CORES = 64
CHILD_EXIT_S = 60.0  # the command's time to end after SIGTERM (a pytest run writes its report) before it is killed
BURNER = ("import sys, time\n"
          "on, off = float(sys.argv[1]), float(sys.argv[2])\n"
          "while True:\n"
          "    end = time.perf_counter() + on\n"
          "    while time.perf_counter() < end:\n"
          "        pass\n"
          "    time.sleep(off)\n")


def reports_dir_of(command: Sequence[str]) -> Path:
    for i, arg in enumerate(command):
        if arg.startswith("--reports-dir="):
            return Path(arg.split("=", 1)[1])
        if arg == "--reports-dir" and i + 1 < len(command):
            return Path(command[i + 1])
    return Path("reports")


def summary(reports_dir: Path) -> str:
    manifest = latest_manifest(reports_dir)
    if manifest is None:
        raise ValueError(f"no manifest in {reports_dir}")
    rows = [r for r in load_rows(reports_dir, manifest["run_id"]) if r.scenario in ("offline", "online")]
    lines = [f"run {manifest['run_id']}: {len(rows)} points, "
             + ", ".join(f"{sum(r.status == s for r in rows)} {s}" for s in STATUSES),
             "| deployment | batch | concurrency | status | inf/s | windows | longest window | other CPU (% of a core) |",
             "|:--|--:|--:|:--|--:|--:|--:|--:|"]
    for r in rows:
        m = r.measurement
        lines.append(f"| {r.deployment} | {r.batch} | {r.concurrency} | {r.status} | "
                     f"{r.result.get('Inferences/Second', float('nan')):.1f} | {m.get('windows', '-')} | "
                     f"x{max(m.get('window_factors') or [1])} | {m.get('host_other_cpu_percent', '-')} |")
    return "\n".join(lines)


def _terminated(signum, frame):
    raise SystemExit(128 + signum)


def add_arguments(parser) -> None:
    parser.add_argument("--on", type=float, default=2.0, help="seconds the burner spins (default 2)")
    parser.add_argument("--off", type=float, default=2.0, help="seconds it rests (default 2)")
    parser.add_argument("--cores", type=int, default=1, help="processes spinning, one core each (default 1)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to run beside it")


def run(args, parser) -> int:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command: give it after --, e.g. -- pytest -m offline --models bert")
    if args.on <= 0 or args.off < 0:
        parser.error(f"--on {args.on:g} --off {args.off:g}: valid: --on > 0, --off >= 0 (seconds)")
    if not 1 <= args.cores <= MAX_CORES:
        parser.error(f"--cores {args.cores}: valid: 1 to {MAX_CORES}")
    previous = signal.signal(signal.SIGTERM, _terminated)  # a CI job cancelled: the finally below still runs
    burners, child = [], None
    try:
        burners += [subprocess.Popen([sys.executable, "-c", BURNER, str(args.on), str(args.off)])
                    for _ in range(args.cores)]
        child = subprocess.Popen(command)
        code = child.wait()
    finally:
        if child is not None and child.poll() is None:  # the command is told to stop first, then made to
            child.terminate()
            try:
                child.wait(timeout=CHILD_EXIT_S)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        for burner in burners:
            burner.kill()
            burner.wait()
        signal.signal(signal.SIGTERM, previous)
    try:
        print(summary(reports_dir_of(command)))
    except (OSError, ValueError, KeyError) as exc:
        print(f"no summary: the run left no readable manifest ({type(exc).__name__}: {exc})")
    return code
