#!/usr/bin/env bash
# fp16 on a lent GPU, in one command (docs/precision.md): the module-by-module diagnosis, then the a100 profile's
# accuracy (fp32 and fp16) and one offline and one online point per model, all five seed models, with the rows in
# "$OUT" (the device tool's result folder; default ./gpu-fp16). Seeded and suite-trained weights need nothing
# carried. Usage: bash examples/gpu/fp16.sh [PROFILE]   (PROFILE defaults to a100; `cpu` runs the same steps here)
set -uo pipefail
cd "$(dirname "$0")/../.."
profile="${1:-a100}"
out="${OUT:-gpu-fp16}"
mkdir -p "$out"
status=0
python3 -m tritonsuite.cli fp16-diagnose --out "$out/fp16-diagnosis.jsonl" || status=1
models=bert,wide_deep,fastpitch,nnunet,tft
common=(--gpu "$profile" --models "$models" --precisions fp32,fp16 -p no:randomly -q --stability-percentage 100)
python3 -m pytest -m accuracy "${common[@]}" --reports-dir "$out/reports" || status=1
python3 -m pytest -m offline "${common[@]}" --batch-sizes 1 --reports-dir "$out/reports" || status=1
python3 -m pytest -m online "${common[@]}" --concurrency 1 -k "concurrency1" --reports-dir "$out/reports" || status=1
cp -r "$out/reports/raw" "$out/rows" 2>/dev/null
exit $status
