"""The report subcommands of ``tritonsuite``: ``report`` (re)writes the pages and plots of stored rows, ``crosscheck``
prints perf_analyzer side by side with the engine, ``compare`` two stored runs point by point
(:mod:`tritonsuite.judge.compare` judges); both print the markdown presenter's page of the rows
(:func:`tritonsuite.report.presenters.markdown.render_page`), the page a run writes."""
from __future__ import annotations

import sys
from pathlib import Path

from tritonsuite.core.store import StoreError, load_rows, load_run
from tritonsuite.judge.compare import DEFAULT_MIN_EFFECT, compare_runs
from tritonsuite.report import DEFAULT_PRESENTERS, write_reports
from tritonsuite.report.presenters.markdown import render_page
from tritonsuite.report.records import group_run


def _reports_dir(parser, value: str) -> Path:
    path = Path(value)
    if not (path / "raw").is_dir():
        parser.error(f"{value}: no raw rows (expected {path / 'raw'}/*.jsonl): give a reports directory of a run")
    return path


def add_report_arguments(parser) -> None:
    parser.add_argument("reports_dir", nargs="*", default=["reports"], help="a reports directory (default: "
                        "reports); several (runs on several hosts, CI shards) merge into --out with a Host column")
    parser.add_argument("--run", default=None, metavar="RUN_ID",
                        help="only rows of this run (default: every run in the directory)")
    parser.add_argument("--out", default=None, metavar="DIR", help="with several reports directories: the "
                        "directory their merged rows, tables and plots go to")
    parser.add_argument("--html", action="store_true", help="write only the one-page HTML report (index.html), "
                        "not the markdown pages and plots (default: both)")


def _presenters(args) -> tuple[str, ...]:
    return ("html",) if args.html else DEFAULT_PRESENTERS


def run_report(args, parser) -> int:
    dirs = args.reports_dir or ["reports"]
    if len(dirs) > 1 or args.out:
        from tritonsuite.report.merge import MergeError, merge_reports

        if not args.out:
            parser.error(f"{len(dirs)} reports directories: give --out DIR for the merged report")
        try:
            per_host = merge_reports([_reports_dir(parser, d) for d in dirs], args.out)
        except MergeError as exc:
            parser.error(str(exc))
        print(f"merged {sum(per_host.values())} rows from {len(dirs)} directories: " +
              ", ".join(f"{host} ({n} rows)" for host, n in per_host.items()))
        written = write_reports(Path(args.out), args.run, presenters=_presenters(args))
        for path in written:
            print(path)
        return 0 if written else 1
    written = write_reports(_reports_dir(parser, dirs[0]), args.run, presenters=_presenters(args))
    for path in written:
        print(path)
    return 0 if written else 1


def add_crosscheck_arguments(parser) -> None:
    parser.add_argument("reports_dir", nargs="?", default="reports", help="a reports directory (default: reports)")
    parser.add_argument("--run", action="append", default=[], metavar="RUN_ID",
                        help="only rows of this run (repeatable; default: every run in the directory)")
    parser.add_argument("--out", default=None, help="write the page here instead of printing it")


def run_crosscheck(args, parser) -> int:
    reports_dir = _reports_dir(parser, args.reports_dir)
    run = group_run(reports_dir, [r for r in load_rows(reports_dir) if not args.run or r.run_id in args.run])
    page = render_page(run, "crosscheck.md")
    if args.out:
        Path(args.out).write_text(page, encoding="utf-8")
    else:
        sys.stdout.write(page)
    return 0 if run.cross else 1


def add_compare_arguments(parser) -> None:
    parser.add_argument("then", help="the earlier run: a raw rows file, a reports directory, or a run id")
    parser.add_argument("now", help="the later run, likewise")
    parser.add_argument("--reports-dir", default="reports", help="where run ids are looked up (default: reports)")
    parser.add_argument("--perf-gate", type=float, default=None, metavar="PCT",
                        help="exit 1 when a point regressed significantly by more than PCT percent")
    parser.add_argument("--min-effect", type=float, default=DEFAULT_MIN_EFFECT, metavar="PCT",
                        help=f"smallest change that counts (default {DEFAULT_MIN_EFFECT:g})")
    parser.add_argument("--out", default=None, help="also write the markdown page here")


def run_compare(args, parser) -> int:
    for name in ("perf_gate", "min_effect"):
        value = getattr(args, name)
        if value is not None and not (0 <= value < 1000):
            parser.error(f"--{name.replace('_', '-')} {value:g}: out of range; valid: 0 to 1000 (percent)")
    try:
        then_rows, then_label, then_manifest = load_run(args.then, args.reports_dir)
        now_rows, now_label, now_manifest = load_run(args.now, args.reports_dir)
    except StoreError as exc:
        parser.error(str(exc))
    comparison = compare_runs(then_rows, now_rows, then_label=then_label, now_label=now_label,
                              min_effect=args.min_effect, then_manifest=then_manifest, now_manifest=now_manifest)
    run = group_run(args.reports_dir, now_rows, comparison=comparison, gate_percent=args.perf_gate)
    page = render_page(run, "compare.md")
    sys.stdout.write(page)
    if args.out:
        Path(args.out).write_text(page, encoding="utf-8")
    failed = comparison.regressions(args.perf_gate) if args.perf_gate is not None else []
    for p in failed:
        sys.stderr.write(f"perf gate: {p.describe()}\n")
    return 1 if failed else 0
