"""Load: everything that sends requests to a served model and measures it. ``client`` (request tensors, system
shared memory, single inferences), the engine (``http`` transport, ``generator`` closed and open loop, ``windows``
stability and row summary, ``engine.measure`` for one point), ``search`` (max load within a latency bound),
``underload`` (accuracy probes during load), ``perfanalyzer`` (perf_analyzer 2.51 as a second load generator),
``hostload``/``busyhost`` (other CPU on the host), ``telemetry`` (GPU sampling), ``selfbench`` (the engine against
in-process calls and perf_analyzer)."""
