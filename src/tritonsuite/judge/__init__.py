"""Judge: verdicts on what was measured. ``accuracy`` (served outputs against references and thresholds),
``baselines`` (committed accuracy baselines, the CI gate), ``compare`` (this run against a stored one, with
significance), ``crosscheck`` (the engine's rows beside perf_analyzer's)."""
