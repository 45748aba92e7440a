"""Replay the tune's search on the surface a grid run measured (``pytest -m tune --tune-strategy grid``): each
candidate's score is the one the grid measured, in one run on one host spell, so what is compared is the search's
walk alone, free of the load that other processes put on a shared host between two live runs.

    python examples/tune_replay.py REPORTS_DIR [PROFILE MODEL]    # default: cpu tft
"""
import json, sys
from pathlib import Path
from tritonsuite.models import default_registry
from tritonsuite.profiles import load_profile
from tritonsuite.tune import Candidate, Evaluation, run_strategy, space_for, winner

rows = [json.loads(l) for f in Path(sys.argv[1]).glob("raw/tune-*.jsonl") for l in open(f)]
scores = {}
for r in rows:
    t = r["measurement"]["tune"]
    if t["role"] != "evidence":
        continue
    c = t["candidate"]
    key = Candidate(c["instance_count"], c["max_batch_size"], tuple(c["preferred_batch_sizes"]),
                    c["max_queue_delay_microseconds"], c["intra_op_threads"], c.get("scheduler", "dynamic"))
    stopped = (r["measurement"].get("stopped_early") or "").startswith("dominated")
    if t["within"] and not stopped:
        scores[key] = r["result"]["Inferences/Second"]
    else:
        scores.setdefault(key, 0.0)
profile, model = (sys.argv[2], sys.argv[3]) if len(sys.argv) > 3 else ("cpu", "tft")
mp = load_profile(profile).models[model]
space = space_for(mp)
start = Candidate.of(mp.model_config("online", model, default_registry().get(model, mp.size), mp.formats[0]))
found = run_strategy("search", space, start, lambda c, inc: Evaluation(c, scores[c]),
                     lambda n: n >= space.budget.configurations)
best_grid = max(scores.values())
best = winner(found)
print(f"grid: {len(scores)} configurations, best {best_grid:.1f} inf/s "
      f"({max(scores, key=scores.get).label()})")
print(f"search replayed on the grid's scores: {len(found)} configurations, best {best.score:.1f} inf/s "
      f"({best.candidate.label()}) = {best.score / best_grid:.1%} of the grid's best")
for e in found:
    print(f"  {e.order}. {e.candidate.label()}: {e.score:.1f}")
