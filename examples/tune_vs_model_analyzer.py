"""Which configuration to ship, side by side with Triton Model Analyzer: the same deployments on one server, the same
latency bound, both tools' answers verified by perf_analyzer (docs/tune.md, "Side by side with Model Analyzer").

    PYTHONPATH=src python examples/tune_vs_model_analyzer.py [--models tft,bert] [--model-analyzer PATH]
        [--backend-directory DIR] [--tools walk,grid,ma-quick,ma-brute] [--rounds 3] [--out DIR]
        [--model-repository DIR --profiles-dir DIR --profile NAME]

Per model (its online deployment of the profile in the first format, onnx for the cpu profile; or a deployment of a
team's ``--model-repository``, as given, its latency bound and ``tune:`` block from the team's profile, which names
it: ``models: <deployment>: {size: repository, ...}``), on one embedded server (the stand-ins, or the backends of
``--backend-directory``). A sequence model's space is its own sequence batcher's (Triton refuses dynamic batching
beside it), for Model Analyzer's brute search too:

1. the suite's tune: the walk within the profile's budget (``--budget``, default its ``tune:`` block's), and the grid
   (the whole space, Model Analyzer's brute force);
2. Model Analyzer (``model-analyzer profile``, remote mode on the same running server, explicit model control, its
   perf_analyzer the suite's 2.51 binary, the suite's input tensors): its quick search (instance count and max batch
   size, its own space, bounded by the suite's instance counts, max batch size and highest concurrency) and its
   brute search over the suite's space (``model_config_parameters``: the same instance counts, preferred batch
   sizes, queue delays; ``concurrency``: the same loads); objective ``perf_throughput`` under
   ``perf_latency_<statistic>`` at most the bound;
3. each distinct answer, and the deployment's own configuration, loaded beside one another and measured by
   perf_analyzer at the bound: the most concurrency within it up to ``--max-concurrency`` (default twice the
   space's highest: perf_analyzer runs a thread per request in flight, and past the server's saturation more add only
   latency and load on the client's cores), found by the suite's search with every point perf_analyzer's, then at
   that load in ``--rounds`` interleaved rounds (a step lower in a round where that load is over the bound then:
   :func:`tritonsuite.judge.compare.at_the_bound`); each answer judged against the deployment's own
   configuration and against the walk's by throughput within the bound
   (:func:`tritonsuite.judge.compare.compare_within_bound`).

It writes ``OUT/comparison.md`` (the table), ``OUT/comparison.json`` and every verification row
(``OUT/verify-<model>.jsonl``); each tool's own output stays under ``OUT/<model>/<tool>/``. Model Analyzer belongs in a
virtual environment of its own (``python3 -m venv VENV && VENV/bin/pip install triton-model-analyzer``; pass
``--model-analyzer VENV/bin/model-analyzer``): it pins other versions of the packages the suite uses.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from tritonsuite.core.settings import LatencyBound
from tritonsuite.deploy.repository import config_of, copy_deployment
from tritonsuite.judge.compare import at_the_bound, compare_within_bound, within_bound
from tritonsuite.load import perfanalyzer
from tritonsuite.load import sources as load_sources
from tritonsuite.load.engine import LoadPoint, Measurement, Traffic
from tritonsuite.load.point import MeasurementError
from tritonsuite.load.search import search
from tritonsuite.models import default_registry
from tritonsuite.profiles import load_profile, narrow
from tritonsuite.profiles.repooptions import add_repositories
from tritonsuite.profiles.tunespace import Budget, Candidate, space_for
from tritonsuite.run.suite import Suite
from tritonsuite.server import EmbeddedServer

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ("walk", "grid", "ma-quick", "ma-brute")
MA_STATISTICS = {"p50": "perf_latency_p50", "p90": "perf_latency_p90", "p95": "perf_latency_p95",
                 "p99": "perf_latency_p99", "avg": "perf_latency_avg"}
VERIFY_SEARCH_STEPS = 8  # points of the search for each answer's load at the bound (then re-measured)


@dataclass
class Answer:
    """One tool's answer for one deployment: what it measured, how long it took, what it recommends."""

    tool: str
    configurations: int = 0  # model configurations measured
    points: int = 0  # measurements (a configuration at a load)
    seconds: float = 0.0
    config: dict | None = None  # the recommended configuration (Triton's ModelConfig as JSON)
    load: int = 0  # the concurrency the tool measured it best at
    throughput: float = 0.0  # as the tool measured it
    note: str = ""  # the tool's own words (the tune's answer; Model Analyzer's error)
    verified: dict = field(default_factory=dict)


def model_analyzer_unavailable(path: str) -> str | None:
    """None when ``path`` (or ``model-analyzer`` on PATH) runs, else the one line saying why."""
    found = shutil.which(path)
    if found is None:
        return (f"Model Analyzer is not installed: no {path!r} (pip install triton-model-analyzer in a virtual "
                f"environment of its own, then --model-analyzer VENV/bin/model-analyzer)")
    try:
        proc = subprocess.run([found, "--version"], capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"Model Analyzer at {found} does not start: {exc}"
    if proc.returncode != 0:
        return f"Model Analyzer at {found} does not start: {(proc.stderr or proc.stdout).strip().splitlines()[-1:]}"
    return None


# -------------------------------------------------------------------------------------------- the suite's tune
def suite_answer(tool: str, suite: Suite, case, budget: str) -> Answer:
    strategy, limit = ("search", budget) if tool == "walk" else ("grid", f"{10 ** 6},{10 ** 6}m")
    result = suite.run_tune(case, strategy, limit)
    deployment = suite.deployment(case.model, case.format, case.precision, "online")
    shipped = result.shipped
    best = result.best
    return Answer(tool, len(result.evaluations), sum(len(e.points) for e in result.evaluations), result.seconds,
                  shipped.config(deployment.config),
                  best.load if best and result.recommended else 0, best.score if best and result.recommended else 0.0,
                  result.describe())


# ----------------------------------------------------------------------------------------------- Model Analyzer
def ma_profile_config(tool: str, deployment, server, space, bound: LatencyBound, input_data: Path, out: Path,
                      pa: perfanalyzer.PerfAnalyzer) -> dict:
    """Model Analyzer's ``profile`` configuration: remote mode on ``server``, the suite's perf_analyzer and inputs."""
    ports = server.ports
    spec = {"cpu_only": True, "perf_analyzer_flags": {"input-data": str(input_data)}}
    config = {
        "triton_launch_mode": "remote", "client_protocol": "http",
        "triton_http_endpoint": f"127.0.0.1:{ports['http']}", "triton_grpc_endpoint": f"127.0.0.1:{ports['grpc']}",
        "triton_metrics_url": f"http://127.0.0.1:{ports['metrics']}/metrics",
        "perf_analyzer_path": str(pa.binary), "dcgm_disable": True,
        "output_model_repository_path": str(out / "output_model_repository"), "override_output_model_repository": True,
        "export_path": str(out), "checkpoint_directory": str(out / "checkpoints"),
        "skip_summary_reports": False, "skip_detailed_reports": True,  # the summary exports its tables
        "objectives": {"perf_throughput": 10},
        "constraints": {MA_STATISTICS[bound.statistic]: {"max": bound.ms}},
    }
    if tool == "ma-quick":  # its own space (instance count x max batch size), bounded by the suite's
        config.update({"run_config_search_mode": "quick",
                       "run_config_search_min_instance_count": min(space.instance_count),
                       "run_config_search_max_instance_count": max(space.instance_count),
                       "run_config_search_max_model_batch_size": max(space.max_batch_size),
                       "run_config_search_max_concurrency": max(space.concurrency)})
    else:  # brute over the suite's space, at the suite's loads
        batcher = {"max_queue_delay_microseconds": list(space.max_queue_delay_microseconds)}
        if space.scheduler != "direct":  # the sequence batcher's direct strategy has no preferred sizes
            batcher["preferred_batch_size"] = [list(p) for p in space.preferred_batch_sizes]
        spec["model_config_parameters"] = {
            "max_batch_size": list(space.max_batch_size),
            "instance_group": [[{"kind": "KIND_CPU", "count": list(space.instance_count)}]],
            # the batcher the suite's space varies: Triton's dynamic one, or a sequence model's own (Model Analyzer
            # sets these keys in the deployment's configuration, its control inputs kept)
            **({"dynamic_batching": batcher} if space.scheduler == "dynamic" else
               {"sequence_batching": {space.scheduler: batcher}})}
        spec["parameters"] = {"concurrency": sorted(space.concurrency), "batch_sizes": [1]}
        config["run_config_search_mode"] = "brute"
    config["profile_models"] = {deployment.name: spec}
    return config


def _last_error(log: Path) -> str:
    lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error" in ln.lower() or "exception" in ln.lower() or "failed" in ln.lower()]
    return (errors or lines or ["no output"])[-1][:400]


def ma_answer(tool: str, ma: str, deployment, server, space, bound, inputs, out: Path, timeout_s: float) -> Answer:
    """Run Model Analyzer's profile step and read its best measurement within the bound from its own results."""
    out.mkdir(parents=True, exist_ok=True)
    for leftover in ("checkpoints", "output_model_repository", "results"):
        shutil.rmtree(out / leftover, ignore_errors=True)
    pa = perfanalyzer.default()
    data = perfanalyzer.write_input_data(inputs, out / "input_data.json")
    path = out / "config.yaml"
    path.write_text(yaml.safe_dump(ma_profile_config(tool, deployment, server, space, bound, data, out, pa)))
    log = out / "model_analyzer.log"
    env = pa.environment()  # perf_analyzer's libraries, for the perf_analyzer Model Analyzer starts
    started = time.monotonic()
    with open(log, "wb") as sink:
        proc = subprocess.Popen([ma, "profile", "-f", str(path)], stdout=sink, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env, cwd=out, start_new_session=True)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait(timeout=30)
    seconds = time.monotonic() - started
    server.load(deployment.directory)  # Model Analyzer reloaded it under its own configurations: back to its own
    answer = Answer(tool, seconds=seconds)
    rows = _ma_rows(out / "results" / "metrics-model-inference.csv")
    answer.configurations = len({r["variant"] for r in rows})
    answer.points = len(rows)
    if proc.returncode != 0:
        answer.note = (f"exit {proc.returncode}" if proc.returncode is not None else "timed out") + \
            f": {_last_error(log)}"
    passing = [r for r in rows if r["passing"]]
    if not passing:
        answer.note = answer.note or f"no measurement within {bound}: {_last_error(log)}"
        return answer
    best = passing[0]  # Model Analyzer's own order: its best configuration's best measurement first
    answer.config = config_of(out / "output_model_repository" / best["variant"])
    answer.load, answer.throughput = best["concurrency"], best["throughput"]
    answer.note = answer.note or f"best within the bound: {best['variant']} at concurrency {best['concurrency']}"
    return answer


def _ma_rows(path: Path) -> list[dict]:
    """Model Analyzer's inference table (``results/metrics-model-inference.csv``, in its own order: best first):
    each measurement's variant, concurrency, throughput and whether it satisfies the constraints."""
    if not path.is_file():
        return []
    found = []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            keyed = {k.strip().lower(): (v or "").strip() for k, v in row.items() if k}
            found.append({"variant": keyed["model config path"], "concurrency": int(keyed["concurrency"]),
                          "throughput": float(keyed["throughput (infer/sec)"]),
                          "passing": keyed["satisfies constraints"].lower() == "yes"})
    return found


# ------------------------------------------------------------------------------------------ the third party
def verify(suite: Suite, case, deployment, space, bound: LatencyBound, answers: list[Answer], rounds: int,
           rows_out: Path, highest: int) -> list[dict]:
    """Every distinct configuration (the deployment's own first) loaded beside the others, its most concurrency
    within ``bound`` found by the suite's search with perf_analyzer measuring, then measured at that load in
    ``rounds`` interleaved rounds. Returns one entry per configuration: its tools, load and rows."""
    source = load_sources.get("perf_analyzer")
    settings = replace(suite.profile.measurement, search_max_steps=VERIFY_SEARCH_STEPS)
    inputs = deployment.spec.example_inputs(case.batch_size, 0)
    arms: list[dict] = []
    for tool, config, load in [("own", dict(deployment.config), 0)] + [
            (a.tool, a.config, a.load) for a in answers if a.config is not None]:
        candidate = Candidate.of(config)
        same = next((arm for arm in arms if arm["candidate"] == candidate), None)
        if same is not None:
            same["tools"].append(tool)
            continue
        name = f"{deployment.name}_v{len(arms)}"
        suite.server.load(copy_deployment(deployment.directory, suite.repository_dir, {**config, "name": name}))
        arms.append({"name": name, "tools": [tool], "candidate": candidate, "start": load or space.concurrency[0],
                     "description": suite.server.model_description(name), "rows": []})

    def measure(arm: dict, concurrency: int):
        point = LoadPoint(case.batch_size, concurrency)
        try:
            return source.measure(suite.server, Traffic(arm["name"], inputs, deployment.spec.outputs, point,
                                                        arm["description"]), settings)
        except MeasurementError as exc:  # a point perf_analyzer could not measure: not within the bound
            suite.server.check_alive()
            return Measurement(point, {"Inferences/Second": None}, {"loadgen": "perf_analyzer 2.51"},
                               status="FAILED", reasons=[str(exc)])

    try:
        with open(rows_out, "a") as sink:
            def keep(arm, m, role):
                row = m.to_row(scenario="tune", model=case.model, deployment=arm["name"], loadgen="perf_analyzer")
                row.measurement["verify"] = {"role": role, "tools": arm["tools"], "label": arm["candidate"].label()}
                sink.write(json.dumps(row.to_dict()) + "\n")
                sink.flush()
                return row

            for arm in arms:
                found = search(lambda c, arm=arm: measure(arm, c), "concurrency", bound, arm["start"], settings,
                               highest=highest)
                for step in found.steps:
                    keep(arm, step.measurement, f"search {step.role}")
                arm["load"] = int(found.best.load) if found.best else 1
                arm["search"] = found.describe()
                print(f"  {arm['name']} ({', '.join(arm['tools'])}): {found.describe()}", flush=True)
            for r in range(rounds):  # A B C ..., each round starting one further along
                for arm in arms[r % len(arms):] + arms[:r % len(arms)]:
                    # a step lower where the load found is over the bound now (judge.compare.at_the_bound)
                    arm["rows"].append(at_the_bound(lambda c: keep(arm, measure(arm, c), f"round {r + 1}"),
                                                    arm["load"], bound)[-1])
    finally:
        for arm in arms:
            suite.server.unload(arm["name"])
    return arms


# -------------------------------------------------------------------------------------------------- the table
def judged(arms: list[dict], bound: LatencyBound, tool: str, against: str) -> str:
    mine = next(a for a in arms if tool in a["tools"])
    other = next((a for a in arms if against in a["tools"]), None)
    if other is None:
        return "-"
    if other is mine:
        return "the same configuration"
    return compare_within_bound(other["rows"], mine["rows"], bound).describe()


def verified_figure(arm: dict, bound: LatencyBound) -> str:
    within = [r for r in arm["rows"] if within_bound(r, bound)[0]]
    mean = sum(float(r.result["Inferences/Second"]) for r in within) / len(arm["rows"]) if arm["rows"] else 0.0
    lower = [r.concurrency for r in arm["rows"] if r.concurrency != arm["load"]]  # rounds that stepped down
    stepped = f"; {len(lower)} at {', '.join(map(str, lower))}" if lower else ""
    return (f"{mean:.1f} inf/s at concurrency {arm['load']} ({len(within)} of {len(arm['rows'])} rounds within "
            f"the bound{stepped})")


def table(model: str, deployment: str, bound: LatencyBound, budget: Budget, answers: list[Answer],
          arms: list[dict]) -> list[str]:
    lines = [f"**{deployment}**, {bound}; the walk's budget {budget.configurations} configurations and "
             f"{budget.minutes:g} minutes", "",
             "| tool | configurations (points) | wall | recommended configuration | verified by perf_analyzer at the "
             "bound (mean over the rounds) | against the deployment's own | against the walk's |",
             "|:--|--:|--:|:--|:--|:--|:--|"]
    for answer in answers:
        arm = next((a for a in arms if answer.tool in a["tools"]), None)
        if arm is None:
            lines.append(f"| {answer.tool} | {answer.configurations} ({answer.points}) | {answer.seconds:.0f} s | "
                         f"none: {answer.note} | - | - | - |")
            continue
        own = "own" in arm["tools"]
        lines.append(f"| {answer.tool} | {answer.configurations} ({answer.points}) | {answer.seconds:.0f} s | "
                     f"{arm['candidate'].label()}{' (the deployment own)' if own else ''} | "
                     f"{verified_figure(arm, bound)} | {judged(arms, bound, answer.tool, 'own')} | "
                     f"{judged(arms, bound, answer.tool, 'walk') if answer.tool != 'walk' else '-'} |")
    own = arms[0]
    lines.append(f"| (the deployment's own) | - | - | {own['candidate'].label()} | {verified_figure(own, bound)} | - "
                 f"| - |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="tft,bert")
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--profiles-dir", default=None, help="where --profile is (a team's own profiles)")
    parser.add_argument("--model-repository", action="append", default=[], metavar="DIR",
                        help="a team's repository: its deployments named in --models, as pytest runs them")
    parser.add_argument("--tools", default=",".join(TOOLS))
    parser.add_argument("--model-analyzer", default="model-analyzer", help="the model-analyzer command")
    parser.add_argument("--backend-directory", default=None, help="Triton's own backends (stand-ins for the rest)")
    parser.add_argument("--budget", default="", help="the walk's budget, as --tune-budget (default: the profile's)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ma-timeout-minutes", type=float, default=30.0)
    parser.add_argument("--answers-from", default=None, metavar="DIR",
                        help="verify the answers of an earlier run (its DIR/comparison.json) again, running no tool")
    parser.add_argument("--max-concurrency", type=int, default=0,
                        help="the verification's highest concurrency (default: twice the space's highest)")
    parser.add_argument("--cache-dir", default=str(ROOT / "model_repos" / ".cache"))
    parser.add_argument("--out", default=str(ROOT / "reports" / "tune-vs-model-analyzer"))
    args = parser.parse_args(argv)
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    bad = [t for t in tools if t not in TOOLS]
    if bad:
        parser.error(f"--tools {bad[0]!r}: valid choices: {', '.join(TOOLS)}")
    if args.rounds < 2:
        parser.error(f"--rounds {args.rounds}: at least 2 (a comparison needs 2 rounds with both points valid)")
    earlier = {}
    if args.answers_from:
        earlier = {entry["deployment"]: [Answer(**{k: v for k, v in a.items() if k != "verified"})
                                         for a in entry.get("answers", [])]
                   for entry in json.loads((Path(args.answers_from) / "comparison.json").read_text())}
    elif any(t.startswith("ma-") for t in tools) and (why := model_analyzer_unavailable(args.model_analyzer)):
        print(why)
        return 2
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    registry = default_registry()
    profile, _ = add_repositories(registry, load_profile(args.profile, args.profiles_dir),
                                  [str(Path(r).resolve()) for r in args.model_repository], only=models,
                                  user_profile=args.profiles_dir is not None)
    profile = narrow(profile, models=models, formats=[profile.models[models[0]].formats[0]])
    summary, sections = [], []
    repo = out / "model_repository"
    with EmbeddedServer(repo, out / "logs", backend_directory=args.backend_directory) as server:
        suites = {tool: Suite(profile, registry, server, repo, Path(args.cache_dir), out / tool, run_id=tool)
                  for tool in ("walk", "grid", "verify")}
        for case in suites["verify"].cases("tune"):
            suite = suites["verify"]
            try:
                deployment = suite.deployment(case.model, case.format, case.precision, "online")
            except Exception as exc:  # refused at load (a backend of --backend-directory), export unsupported
                line = f"{case.model} {case.format} {case.precision}: not deployed: {str(exc).splitlines()[0]}"
                print(line, flush=True)
                sections += [line, ""]
                summary.append({"deployment": f"{case.model} {case.format} {case.precision}", "refused": str(exc)})
                continue
            bound = LatencyBound.parse(case.bound)
            space = space_for(suite.model_profile(case.model), Candidate.of(deployment.config))
            budget = Budget.parse(args.budget, space.budget) if args.budget else space.budget
            print(f"{deployment.name}: {bound}, {space.size()} configurations in the space", flush=True)
            answers = earlier.get(deployment.name, []) if args.answers_from else []
            for tool in tools if not args.answers_from else ():
                if tool in ("walk", "grid"):
                    answer = suite_answer(tool, suites[tool], case, args.budget)
                else:
                    answer = ma_answer(tool, args.model_analyzer, deployment, server, space, bound,
                                       deployment.spec.example_inputs(case.batch_size, 0),
                                       out / case.model / tool, args.ma_timeout_minutes * 60)
                print(f"  {tool}: {answer.configurations} configurations ({answer.points} points), "
                      f"{answer.seconds:.0f} s: {answer.note}", flush=True)
                answers.append(answer)
            arms = verify(suite, case, deployment, space, bound, answers, args.rounds,
                          out / f"verify-{case.model}.jsonl", args.max_concurrency or 2 * max(space.concurrency))
            sections += table(case.model, deployment.name, bound, budget, answers, arms) + [""]
            summary.append({"deployment": deployment.name, "bound": str(bound),
                            "answers": [{**a.__dict__, "verified": next(
                                (arm["search"] for arm in arms if a.tool in arm["tools"]), "")} for a in answers],
                            "arms": [{"tools": a["tools"], "label": a["candidate"].label(), "load": a["load"],
                                      "search": a["search"], "verified": verified_figure(a, bound)} for a in arms]})
    (out / "comparison.md").write_text("\n".join(sections))
    (out / "comparison.json").write_text(json.dumps(summary, indent=1, default=str))
    print("\n".join(sections))
    return 0


if __name__ == "__main__":
    sys.exit(main())
