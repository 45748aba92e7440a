"""The engine and perf_analyzer 2.51 side by side on a sequence model (direct, 2 ms per execution) and a decoupled
model (4 responses per request, 1 ms apart) and a BLS model calling an ONNX one, interleaved (engine, perf_analyzer, per point, ROUNDS times) on one
embedded server, over gRPC: ``PYTHONPATH=src:. python examples/kinds_side_by_side.py [ROUNDS] [FIRST_MODEL]``
(docs/measurements.md)."""
import tempfile
import shutil
import sys

import numpy as np
from pathlib import Path
from tests.kinds import bls_models, decoupled_model, sequence_model
from tritonsuite.server.embedded import EmbeddedServer
from tritonsuite.load.engine import measure, LoadPoint
from tritonsuite.load.perfanalyzer import measure_with_perf_analyzer
from tritonsuite.load.kinds import kind_arguments
from tritonsuite.load.sequences import SequenceSettings
from tritonsuite.settings import MeasurementSettings
from tritonsuite.judge.responses import described
repo = Path(tempfile.mkdtemp(prefix="kinds-"))
sequence_model(repo, "seq_direct", work_ms=2)
decoupled_model(repo)
bls_models(repo)
st = MeasurementSettings(window_ms=1000, warmup_ms=300)
seqs = SequenceSettings(length=20, variation_percent=20)
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 1
with EmbeddedServer(repo, repo / "logs") as s:
    for name in ("seq_direct", "stream_n", "add_onnx", "bls_add"):
        s.load(repo / name)
    cases = [("seq_direct", {"INPUT": np.ones((1, 1), np.int32)}), ("stream_n", {"COUNT": np.full((1, 1), 4, np.int32), "DATA": np.ones((1, 4), np.float32)}),
             ("bls_add", {"X": np.ones((1, 4), np.float32)})]
    for model, inputs in cases[int(sys.argv[2]) if len(sys.argv) > 2 else 0:]:
        d = described(s, model, ["add_onnx"] if model == "bls_add" else [])
        for c in (1, 2, 4):
            pt = LoadPoint(1, c, protocol="grpc")
            for r in range(rounds):
                e = measure(s, model, inputs, d.outputs, pt, st, description=d, sequences=seqs)
                p = measure_with_perf_analyzer(s, model, inputs, d.outputs, pt, st, extra=kind_arguments(d, seqs))
                pr, er = p.result, e.result
                print(model, "c%d" % c, "engine %.0f (%s, p50 %.2f)" % (er["Inferences/Second"], e.status, er["p50 latency"]),
                      "pa %s (%s %s, p50 %s)" % (pr["Inferences/Second"], p.status, p.reasons[:1], pr["p50 latency"]),
                      {k: {m: round(v.get("Server Compute Infer") or 0, 3) for m, v in x.meta.get("composing", {}).items()}
                       for k, x in (("engine", e), ("pa", p))}, flush=True)
shutil.rmtree(repo, ignore_errors=True)
