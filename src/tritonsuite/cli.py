"""tritonsuite: what runs outside pytest (the scenarios themselves run as pytest -m offline|online|accuracy).

Each subcommand lives beside the code it drives and exposes ``add_arguments(parser)`` and ``run(args, parser) ->
int`` (or ``add_<name>_arguments``/``run_<name>`` where one module holds several); this module only lists them.

    tritonsuite compare THEN NOW [--perf-gate PCT]     two stored runs, point by point, with significance
    tritonsuite crosscheck [REPORTS_DIR]               perf_analyzer side by side with the engine
    tritonsuite report [REPORTS_DIR] [--run RUN_ID]    (re)write the pages, plots and index.html of stored rows
    tritonsuite selfbench [--gpu cpu]                  what serving through Triton and measuring cost
    tritonsuite busyhost -- pytest ...                 a command beside a bursty CPU burner
    tritonsuite fp16-diagnose [--models M:S,..]        fp16 against CPU fp32, module by module
    tritonsuite build-local-image [TAG]                the empty-root image that runs the wheel's tritonserver
"""
from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from tritonsuite.load.interrupt import end_like_ctrl_c_on_sigterm

#: subcommand -> (module holding add_arguments/run, one line of help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "compare": ("tritonsuite.report.commands", "compare two stored runs point by point; --perf-gate fails on a "
                                             "significant regression"),
    "crosscheck": ("tritonsuite.report.commands", "perf_analyzer side by side with the suite's engine, per point"),
    "report": ("tritonsuite.report.commands", "write the tables, plots and index.html of stored rows "
                                            "(reports/raw/*.jsonl)"),
    "selfbench": ("tritonsuite.run.selfbench", "the cost of serving through Triton and of measuring with the "
                                                "suite"),
    "busyhost": ("tritonsuite.load.busyhost", "run a command beside a bursty CPU burner, then summarise its points"),
    "fp16-diagnose": ("tritonsuite.judge.diagnose", "where fp16 departs from CPU fp32, module by module (forward hooks; "
                                                   "on a GPU also cuDNN off and GPU fp32)"),
    "build-local-image": ("tritonsuite.server.docker", "import the empty-root image that runs the wheel's "
                                                       "tritonserver in a container"),
}


def _handlers(name: str):
    module = importlib.import_module(SUBCOMMANDS[name][0])
    suffix = name.replace("-", "_")
    add = getattr(module, f"add_{suffix}_arguments", None) or module.add_arguments
    run = getattr(module, f"run_{suffix}", None) or module.run
    return add, run


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tritonsuite", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", required=True)
    for name, (_, help_text) in SUBCOMMANDS.items():
        add, _run = _handlers(name)
        sub = commands.add_parser(name, help=help_text, description=help_text)
        add(sub)
        sub.set_defaults(_run=_run, _parser=sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    end_like_ctrl_c_on_sigterm()  # a command stopped by SIGTERM stops its server and reports what it measured
    return args._run(args, args._parser)


if __name__ == "__main__":
    sys.exit(main())
