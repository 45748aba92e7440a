"""The suite's command-line flags and markers, as pytest declares them (``pytest_addoption``); ``options``
resolves their values into one typed ``Options`` per session."""
from __future__ import annotations

from tritonsuite.core.spec import PRECISIONS
from tritonsuite.deploy.formats import FORMATS
from tritonsuite.judge.underload import DEFAULT_PROBE_SEED, DEFAULT_PROBE_SHARE
from tritonsuite.load import sources as load_sources
from tritonsuite.profiles import SEARCHES
from tritonsuite.run.serveroptions import SERVER_OPTIONS

MARKERS = {
    "offline": "offline performance scenario (static batching, shared memory, batch-size sweep)",
    "online": "online performance scenario (dynamic batching, HTTP or gRPC, concurrency sweep and request rates)",
    "accuracy": "accuracy of a deployment against its reference, with thresholds",
    "tune": "configuration search of each online deployment for the most throughput within its latency bound",
    "conformance": "the deployment, live on the server, does what its config.pbtxt declares, field by field "
                   "(docs/conformance.md), with the system checks (refusals, counters, reload, shutdown, MLPerf-style)",
    "mix": "deployments of a profile's mix: served together on one server, each measured alone and together in "
           "interleaved rounds, with its interference ratio",
    "smoke": "short end-to-end run on the embedded server with the tiny model",
    "search": "an online latency-bound search (the most load within the bound); deselected unless -m names it, "
              "or --searches / --latency-bound is given",
}


def add_options(parser) -> None:
    group = parser.getgroup("tritonsuite", "Triton benchmark and conformance suite")
    group.addoption("--gpu", default="cpu", help="profile to run: a profile shipped with tritonsuite (cpu; GPU: a100, "
                    "a30, a40, t4, v100, h100) or <name>.yaml in --profiles-dir (default: cpu)")
    group.addoption("--profiles-dir", default=None, help="a directory of your own profiles (searched first)")
    for name, declared in SERVER_OPTIONS:  # how the server is started or reached (tritonsuite.run.serveroptions)
        group.addoption(name, **declared)
    group.addoption("--models", default="", help="comma-separated models to run (default: all in the profile)")
    group.addoption("--formats", default="", help=f"comma-separated export formats ({', '.join(FORMATS)})")
    group.addoption("--precisions", default="", help=f"comma-separated precisions ({', '.join(PRECISIONS)}): "
                    "narrows the profile's precisions (and its accuracy precisions) as --formats narrows formats")
    group.addoption("--batch-sizes", default="", help="comma-separated offline batch sizes (narrows the profile)")
    group.addoption("--concurrency", default="", help="comma-separated online concurrency values")
    group.addoption("--request-rates", default="", help="comma-separated online request rates (requests/s, open "
                    "loop; arrivals as the profile's online.distribution, default poisson)")
    group.addoption("--latency-bound", default=None, metavar="BOUND", help="search each online deployment for the "
                    "most load within BOUND, e.g. 'p99<=50ms' (a percentile or avg; overrides the profile)")
    group.addoption("--search", default="", help=f"which latency-bound searches run: comma-separated "
                    f"{', '.join(SEARCHES)} (default: both)")
    group.addoption("--searches", action="store_true", default=False, help="also run the online latency-bound "
                    "searches (the maxrate/maxconcurrency cases, minutes each; also: -m search, or --latency-bound)")
    group.addoption("--model-spec", action="append", default=[], help="a python file defining SPECS (repeatable)")
    group.addoption("--checkpoint", action="append", default=[], help="MODEL=PATH of user weights (repeatable)")
    group.addoption("--retrain", action="store_true", default=False, help="train the suite's trained models "
                    "(TFT, nnU-Net, the Adult Wide & Deep) here, cached per host, instead of using the checkpoints "
                    "shipped with tritonsuite (baselines name the shipped ones)")
    group.addoption("--dataset", action="append", default=[], help="MODEL=PATH of a user dataset (repeatable)")
    group.addoption("--reports-dir", default=None, help="where tables, plots and raw rows go (default: reports/ "
                    "under pytest's rootdir as the test paths and ini file decide it, never an option's value)")
    group.addoption("--repository-dir", default=None, help="where model repositories go (default: model_repos/ "
                    "under pytest's rootdir, as --reports-dir)")
    group.addoption("--cache-dir", default=None, help="the artifact cache: exports (verified against eager) and "
                    "trained checkpoints, keyed by what made them, shared by every run pointed at it (default: "
                    "<--repository-dir>/.cache)")
    group.addoption("--baselines-dir", default=None, help="accuracy baselines, <dir>/<profile>/<model>.json "
                    "(default: fixtures/baselines under pytest's rootdir, as --reports-dir)")
    group.addoption("--update-baselines", action="store_true", help="rewrite the baselines of deployments that "
                    "passed their absolute accuracy checks")
    group.addoption("--require-baselines", action="store_true", help="fail a deployment that has no baseline")
    group.addoption("--compare", default=None, metavar="RUN_OR_FILE", help="compare each measured point with a "
                    "stored run: a raw rows file (.jsonl), a reports directory, or a run id in --reports-dir")
    group.addoption("--perf-gate", type=float, default=None, metavar="PCT", help="with --compare: fail a point that "
                    "regressed significantly by more than PCT percent (else the comparison is informational)")
    group.addoption("--load-probe-share", type=float, default=DEFAULT_PROBE_SHARE, metavar="SHARE",
                    help="accuracy under load: the share of the requests of each online deployment's highest-"
                    f"concurrency point that carry the model's accuracy samples (default {DEFAULT_PROBE_SHARE:g}; "
                    "0 turns it off)")
    group.addoption("--load-probe-seed", type=int, default=DEFAULT_PROBE_SEED, metavar="SEED",
                    help=f"seed choosing which requests carry accuracy samples, and in which order "
                    f"(default {DEFAULT_PROBE_SEED})")
    group.addoption("--loadgen", default=load_sources.DEFAULT, metavar="|".join(load_sources.names()),
                    help="load generator (tritonsuite.load.sources) of the offline/online points: suite (the "
                    "engine), perf_analyzer (2.51, fetched once), or both "
                    "(suite,perf_analyzer: each point measured by both, back to back; reports/crosscheck.md puts "
                    "them side by side)")
    group.addoption("--workers", default=None, metavar="N|auto|ray[:ADDRESS][@N]", help="split the engine's points "
                    "over N processes (1: this one; auto: from the load and the cores), or over Ray actors, N on "
                    "each node of the Ray cluster at ADDRESS (else RAY_ADDRESS); "
                    "default: the profile's workers, else 1")
    group.addoption("--protocol", default="http", choices=("http", "grpc"), help="how every load generator (the "
                    "engine, perf_analyzer's -i) and the accuracy run reach the server; shared memory on both "
                    "(default http)")
    group.addoption("--model-repository", action="append", default=[], metavar="DIR", help="a stock Triton model "
                    "repository: its deployments run, read from their config.pbtxt and served as given; the "
                    "profile's models join only when named (--models, or a profile of your own) (repeatable; the "
                    "profile's model_repository key too)")
    group.addoption("--input-data", action="append", default=[], metavar="[DEPLOYMENT=]random|zero|FILE.json|DIR",
                    help="input data of the --model-repository deployments, as perf_analyzer's --input-data (its "
                    "JSON layout, validation_data honoured); DEPLOYMENT= for one deployment (repeatable; default "
                    "random)")
    group.addoption("--shape", action="append", default=[], metavar="NAME:d1,d2", help="dims of a dynamic input "
                    "of a --model-repository deployment, without the batch dim, as perf_analyzer's --shape "
                    "(repeatable)")
    group.addoption("--reference", action="append", default=[], metavar="DEPLOYMENT=FILE", help="accuracy "
                    "reference of a --model-repository deployment: this model file (.onnx, .pt) run in-process "
                    "instead of the served file (e.g. the ONNX a plan was built from)")
    group.addoption("--tolerance", action="append", default=[], metavar="OUTPUT=atol,rtol", help="accuracy "
                    "tolerance of a --model-repository output against its in-process reference and validation_data "
                    "(repeatable; default 1e-4,1e-4)")
    group.addoption("--sequence-length", type=int, default=20, metavar="N", help="sequence models: requests per "
                    "sequence, as perf_analyzer's (default 20)")
    group.addoption("--sequence-length-variation", type=float, default=20.0, metavar="PCT", help="sequence models: "
                    "each sequence's length drawn uniformly within +-PCT%% of --sequence-length (default 20)")
    group.addoption("--sequence-id-range", default="1", metavar="START[:END]", help="sequence models: the ids "
                    "sequences take, wrapping at END (default 1, no end), as perf_analyzer's")
    group.addoption("--bls-composing-models", action="append", default=[], metavar="[DEPLOYMENT=]NAME[:VER],...",
                    help="the models a BLS (python) deployment calls, as perf_analyzer's: served before it, and "
                    "their time attributed in its rows (repeatable; without DEPLOYMENT= for every python one)")
    group.addoption("--tune-budget", default="", metavar="N|Mm|N,Mm", help="-m tune: at most N configurations "
                    "and/or M minutes per deployment (default: the profile's tune block, else 9 and 15m)")
    group.addoption("--tune-strategy", default="search", metavar="search|grid", help="-m tune: the coordinate "
                    "search (default) or the full grid of the tune space (to compare)")
    group.addoption("--checks", default="", metavar="CHECK,...", help="-m conformance: the checks to run "
                    "(tritonsuite.judge.conformance.CHECKS, listed in docs/conformance.md; default: all but shutdown; all: "
                    "every one)")
    group.addoption("--allow-reload", action="store_true", default=False, help="-m conformance with --server remote: "
                    "let the reload check add a version to and reload the remote server's deployments (never unasked)")
    group.addoption("--window-ms", type=float, default=None, help="measurement window length (overrides profile)")
    group.addoption("--window-requests", type=int, default=None, help="count-based windows of N requests")
    group.addoption("--stability-percentage", type=float, default=None, help="stability criterion (default 10)")
    group.addoption("--max-trials", type=int, default=None, help="maximum windows per point before UNSTABLE")
    group.addoption("--strict-stability", action="store_true", default=False, help="fail a performance point that "
                    "could not be measured (UNSTABLE windows, a client-bound or late load generator, another client "
                    "on the model) instead of skipping it with the reason; --perf-gate implies it")
    group.addoption("--repeat", type=int, default=1, metavar="N", help="measure each performance point N times in "
                    "interleaved rounds (A B C, A B C: drift shows); the report gives the median and spread")
    group.addoption("--order", default="ascending", metavar="ascending|descending|shuffled",
                    help="order of a sweep's points within a round (shuffled: seeded by --order-seed)")
    group.addoption("--order-seed", type=int, default=0, help="seed of --order shuffled")
    group.addoption("--max-window-factor", type=int, default=None, help="how far windows may lengthen (doubling) "
                    "on a busy host before a point is UNSTABLE (default 4)")
