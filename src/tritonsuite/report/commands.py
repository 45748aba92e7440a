"""The report subcommands of ``tritonsuite``: ``report`` (re)writes the pages and plots of stored rows, ``crosscheck``
prints perf_analyzer side by side with the engine."""
from __future__ import annotations

import sys
from pathlib import Path

from tritonsuite.core.access import redact
from tritonsuite.core.store import load_rows
from tritonsuite.judge.crosscheck import cross_points
from tritonsuite.report import write_reports
from tritonsuite.report.pages import render_crosscheck


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
        written = write_reports(Path(args.out), args.run)
        for path in written:
            print(path)
        return 0 if written else 1
    written = write_reports(_reports_dir(parser, dirs[0]), args.run)
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
    rows = [r for r in load_rows(reports_dir) if not args.run or r.run_id in args.run]
    page = render_crosscheck(rows)
    if args.out:
        Path(args.out).write_text(redact(page), encoding="utf-8")
    else:
        sys.stdout.write(page)
    return 0 if cross_points(rows) else 1
