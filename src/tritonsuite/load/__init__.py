"""Load: everything that sends requests to a served model and measures it. ``sources`` (the load sources behind one
interface, named by ``--loadgen`` in one registry: the engine, perf_analyzer), ``client`` (request tensors, system
shared memory, single inferences), the engine (``http`` transport, ``generator`` closed and open loop, ``windows``
stability and row summary, ``engine.measure`` for one point), ``search`` (max load within a latency bound),
``mix`` (deployments measured alone and together), ``perfanalyzer`` (perf_analyzer 2.51 as a second load
generator), ``hostload``/``busyhost`` (other CPU on the host), ``telemetry`` (GPU sampling). Accuracy under load is
``tritonsuite.judge.underload``; the self-benchmark ``tritonsuite.run.selfbench``."""
