"""The engine and perf_analyzer 2.51 side by side, interleaved (engine, perf_analyzer, per point, ROUNDS times) on
one embedded server, over gRPC, at concurrency 1, 2 and 4: a sequence model (direct; the batcher waits up to 3 ms for
every live sequence's request, then each execution takes WORK_MS, 5 by default), a decoupled model (4 responses per
request, 1 ms apart), a BLS model calling an ONNX one, and an ensemble of two ONNX steps of about 2 ms each.

``PYTHONPATH=src:. python examples/kinds_side_by_side.py [ROUNDS [WORK_MS [MODEL ...]]]`` with MODEL among
seq_direct, stream_n, bls_add, dense_pipeline (all by default); docs/measurements.md has the figures."""
import tempfile
import shutil
import sys

import numpy as np
from pathlib import Path
from tests.kinds import bls_models, decoupled_model, dense_ensemble, sequence_model
from tritonsuite.core.settings import MeasurementSettings
from tritonsuite.load.engine import measure, LoadPoint
from tritonsuite.load.kinds import driver_for
from tritonsuite.load.perfanalyzer import measure_with_perf_analyzer
from tritonsuite.server.embedded import EmbeddedServer
repo = Path(tempfile.mkdtemp(prefix="kinds-"))
sequence_model(repo, "seq_direct", work_ms=float(sys.argv[2]) if len(sys.argv) > 2 else 5.0, direct_delay_us=3000)
decoupled_model(repo)
bls_models(repo)
dense_ensemble(repo)
st = MeasurementSettings(window_ms=1000, warmup_ms=300)
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 1
with EmbeddedServer(repo, repo / "logs") as s:
    for name in ("seq_direct", "stream_n", "add_onnx", "bls_add", "dense_a", "dense_b", "dense_pipeline"):
        s.load(repo / name)
    cases = [("seq_direct", {"INPUT": np.ones((1, 1), np.int32)}), ("stream_n", {"COUNT": np.full((1, 1), 4, np.int32), "DATA": np.ones((1, 4), np.float32)}),
             ("bls_add", {"X": np.ones((1, 4), np.float32)}), ("dense_pipeline", {"INPUT": np.ones((1, 4), np.float32)})]
    for model, inputs in (c for c in cases if len(sys.argv) < 4 or c[0] in sys.argv[3:]):
        d = s.model_description(model, ["add_onnx"] if model == "bls_add" else []).with_sequences(length=20,
                                                                                                  variation_percent=20)
        for c in (1, 2, 4):
            pt = LoadPoint(1, c, protocol="grpc")
            for r in range(rounds):
                e = measure(s, model, inputs, d.outputs, pt, st, description=d)
                p = measure_with_perf_analyzer(s, model, inputs, d.outputs, pt, st, extra=driver_for(d).arguments())
                pr, er = p.result, e.result
                print(model, "c%d" % c, "engine %.0f (%s, p50 %.2f)" % (er["Inferences/Second"], e.status, er["p50 latency"]),
                      "pa %s (%s %s, p50 %s)" % (pr["Inferences/Second"], p.status, p.reasons[:1], pr["p50 latency"]),
                      {k: {m: round(v.get("Server Compute Infer") or 0, 3) for m, v in x.meta.get("composing", {}).items()}
                       for k, x in (("engine", e), ("pa", p))}, flush=True)
shutil.rmtree(repo, ignore_errors=True)
