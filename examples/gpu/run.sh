#!/usr/bin/env bash
# The whole GPU run, prepared on the CPU (docs/containers-and-gpus.md, "A lent GPU machine"): on the lent machine,
# from the repository root, with .gpu/ carried (bash examples/gpu/kit.sh makes .gpu/kit.tar.xz here first):
#
#   BUDGET_S=380 bash examples/gpu/run.sh diagnose accuracy                  # first call
#   BUDGET_S=... bash examples/gpu/run.sh offline online selfbench conformance crosscheck
#                                    # second call, same machine: what the session's device time leaves
#
# MODELS=tft,nnunet (of bert, wide_deep, fastpitch, nnunet, tft; default all five) narrows every step to those
# models: a lease spends itself on what an earlier one did not reach (docs/containers-and-gpus.md).
#
# Steps, in the order given: diagnose (fp16-diagnose: CPU fp32 against GPU fp16, GPU fp16 with cuDNN off and GPU
# fp32 with TF32 off, module by module), accuracy (fp32, fp16, mixed), offline and online (each deployment's first
# and last point of its sweep, concurrency up to 16), crosscheck (perf_analyzer beside the engine), selfbench (the
# identity ceiling: the engine in process and over 4 and 8 worker processes beside perf_analyzer) and conformance (each deployment against its config.pbtxt). All five seed models,
# TorchScript only: the lent machine's onnxruntime has no CUDA provider and TensorRT cannot be installed there. The
# reports put the seeds' published figures beside the measured ones, with ratios.
#
# The call ends inside BUDGET_S (default 540 s, under the device tool's 600 s a call): each step gets what is left
# (at most its own cap) and is stopped with SIGTERM, after which the suite reports what it measured; a step with
# under 30 s left is listed as not run. Everything comes back in 4 files under $OUT: log.txt (all output),
# steps.tsv (step, exit status, seconds), env.txt (GPU, driver, CUDA, cuDNN, torch, numpy, packages) and
# results.tar.gz (reports, raw rows, the diagnosis). PROFILE=cpu runs the same steps on a CPU host.
set -uo pipefail
cd "$(dirname "$0")/../.."
repo="$PWD"
export PROFILE="${PROFILE:-a100}"
profile="$PROFILE"
out="${OUT:-$repo/gpu-run}"
budget="${BUDGET_S:-540}"
kit="${KIT_DIR:-/tmp/tritonsuite-gpu-kit}"
python="$(python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
kit_python="$(head -1 .gpu/kit.txt 2>/dev/null | cut -d' ' -f2)"
all_models=bert,wide_deep,fastpitch,nnunet,tft
models="${MODELS:-$all_models}"
formats=ts-trace,ts-script
if [ "$profile" = cpu ]; then  # tried on a CPU host: its onnx too
    formats=onnx,ts-trace,ts-script
    # with a kit, no BERT: its cpu size loads the MiniLM weights the kit leaves out
    [ "$kit_python" = "$python" ] && [ -z "${MODELS:-}" ] && models=wide_deep,fastpitch,nnunet,tft
fi
# fp16-diagnose's sizes (the GPU profiles'); on a CPU host only the two whose large sizes take seconds there. On a
# GPU the emulated comparison is left out: CI's fp16 gate runs it on the CPU, and a call's minutes are the GPU's.
declare -A diagnosed=([bert]=large [wide_deep]=full [fastpitch]=large [nnunet]=large [tft]=large)
comparisons=cuda-fp16,cuda-fp16-no-cudnn,cuda-fp32-no-tf32
[ "$profile" = cpu ] && diagnosed=([fastpitch]=large [tft]=large) && comparisons=cpu-fp16-emulated
diagnose_models="" crosscheck_models=""
for m in ${models//,/ }; do
    [[ ",$all_models," == *",$m,"* ]] ||
        { echo "run.sh: unknown model '$m' in MODELS; valid choices: $all_models"; exit 2; }
    [ -n "${diagnosed[$m]:-}" ] && diagnose_models+="${diagnose_models:+,}$m:${diagnosed[$m]}"
    [[ $m == bert || $m == tft ]] && crosscheck_models+="${crosscheck_models:+,}$m"
done
order="diagnose accuracy offline online crosscheck selfbench conformance"
# caps that fit both calls, the machine's start and the transfers into the session's 15 minutes of device time
declare -A cap=([diagnose]=130 [accuracy]=230 [offline]=80 [online]=80 [crosscheck]=50 [selfbench]=110
                [conformance]=70)

finish() {
    tar -C "$RUN_WORK" -czf "$out/results.tar.gz" . 2>/dev/null
    rm -rf "$RUN_WORK"
    rm -f "${pth:-}"
    echo "run.sh: $((SECONDS - started)) s in all; results in $out"
}

setup() {
    if [ "$kit_python" = "$python" ]; then
        if [ ! -d "$kit/site" ]; then mkdir -p "$kit" && tar -C "$kit" -xJf .gpu/kit.tar.xz || exit 2; fi
        # a .pth in the interpreter's own site-packages: the python backend's stub runs Python isolated (it ignores
        # PYTHONPATH), and the stand-ins import from the same environment as the suite
        pth="$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/tritonsuite-gpu-kit.pth"
        printf '%s\n' "$kit/site" > "$pth"
        export TRITONSUITE_DATA_DIR="$kit/data"
        python3 -m pip install --quiet --no-index --no-deps --no-build-isolation -e . || exit 2
    elif [ "$profile" != cpu ]; then
        echo "run.sh: .gpu/kit.tar.xz is for Python ${kit_python:-(none)}, python3 here is $python: run" \
             "bash examples/gpu/kit.sh $python on a host that reaches PyPI, and carry .gpu"
        exit 2
    fi
    {
        nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 || true
        python3 - <<'EOF'
import platform, sys
import numpy, torch
print("python", platform.python_version(), "numpy", numpy.__version__, "torch", torch.__version__,
      "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version() if torch.cuda.is_available() else None)
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print("device", p.name, f"sm_{p.major}{p.minor}", p.multi_processor_count, "SMs", round(p.total_memory / 2**30), "GiB")
from importlib.metadata import version
print(*(f"{d} {version(d)}" for d in ("nvidia-pytriton", "tritonclient", "onnxruntime", "onnx", "transformers")))
EOF
        nproc; uname -r
    } > "$out/env.txt" 2>&1
    cat "$out/env.txt"
}

# pytest ids of the first and the last point of each deployment's sweep in the profile (offline: batch sizes;
# online: concurrency up to 16, a stream sweep's too, no request rates), so every model gets both ends in little time
ends() {
    local scenario="$1" axis="$2"; shift 2
    python3 -m pytest -m "$scenario" "$@" --collect-only 2>/dev/null | grep -E "::test_$scenario\[.*-$axis[0-9]+\]$" |
        awk -v axis="-$axis" '{ key = $0; sub(axis "[0-9]+\\]$", "", key); n = $0; sub(".*" axis, "", n); n += 0
            if (!(key in first)) { first[key] = $0; keys[++k] = key }
            if (axis != "-concurrency" || n <= 16) last[key] = $0 }
            END { for (i = 1; i <= k; i++) { print first[keys[i]]; if (last[keys[i]] != first[keys[i]]) print last[keys[i]] } }'
}

# one step; its last command is exec'd, so the step's timeout waits for that process (the suite reports what it
# measured when stopped with SIGTERM) rather than for a shell
step() {
    local name="$1" work="$RUN_WORK" reports="$RUN_WORK/reports" ids
    local common=(-p no:randomly -q -rs --gpu "$profile" --models "$models" --formats "$formats" --reports-dir "$reports")
    case "$name" in
        diagnose) [ -n "$diagnose_models" ] || { echo "run.sh: no model of MODELS=$models to diagnose here"; exit 0; }
                  exec python3 -m tritonsuite.cli fp16-diagnose --out "$reports/fp16-diagnosis.jsonl" \
                      --models "$diagnose_models" --comparisons "$comparisons" \
                      $([ "$profile" = cpu ] && echo --accuracy) ;;
        accuracy) exec python3 -m pytest -m accuracy "${common[@]}" --precisions fp32,fp16,mixed ;;
        offline|online)
            local axis=batch; [ "$name" = online ] && axis=concurrency
            mapfile -t ids < <(ends "$name" "$axis" "${common[@]}")
            echo "run.sh: $name points: ${ids[*]##*::}"
            exec python3 -m pytest -m "$name" "${common[@]}" "${ids[@]}" ;;
        crosscheck) [ -n "$crosscheck_models" ] ||
                        { echo "run.sh: crosscheck runs BERT and TFT, neither in MODELS=$models"; exit 0; }
                    exec python3 -m pytest -m "offline or online" "${common[@]}" --models "$crosscheck_models" \
                        --formats ts-trace --batch-sizes 1 --concurrency 1,8 -k "not rate and not stream" \
                        --loadgen suite,perf_analyzer --reports-dir "$work/crosscheck" ;;
        # selfbench's identity ceiling (ONNX on the CPUs: the lent machine's onnxruntime has no CUDA provider) by
        # the engine in process and over 4 and 8 worker processes, beside perf_analyzer, on that machine's cores
        selfbench) exec python3 -m tritonsuite.cli selfbench --ceiling-only --workers 1,4,8 \
                       --loadgen suite,perf_analyzer --cache-dir "$work/selfbench" ;;
        conformance) exec python3 -m pytest -m conformance "${common[@]}" --reports-dir "$work/conformance" ;;
    esac
}

if [ "${1:-}" = --step ]; then  # one step, under the caller's timeout
    step "$2"
    exit $?
fi
mkdir -p "$out"
export RUN_WORK="$(mktemp -d /tmp/tritonsuite-gpu-run.XXXXXX)"
exec > >(tee -a "$out/log.txt") 2>&1
started=$SECONDS
trap finish EXIT
for name in "$@"; do
    [ -n "${cap[$name]:-}" ] || { echo "run.sh: unknown step '$name'; valid steps: $order"; exit 2; }
done
setup
printf 'step\texit\tseconds\n' > "$out/steps.tsv"
for name in "$@"; do
    left=$((budget - (SECONDS - started) - 20))  # 20 s for the archive
    if [ "$left" -lt 30 ]; then
        printf '%s\tnot run\t0\n' "$name" >> "$out/steps.tsv"
        echo "run.sh: $name not run: $left s of the $budget s budget left"
        continue
    fi
    limit=$(( left < ${cap[$name]} ? left : ${cap[$name]} ))
    echo "run.sh: $name (at most $limit s)"
    begun=$SECONDS
    timeout --kill-after=15 "$limit" bash "$0" --step "$name" < /dev/null  # TERM to the step's process group
    status=$?
    printf '%s\t%s\t%s\n' "$name" "$status" "$((SECONDS - begun))" >> "$out/steps.tsv"
    # perf_analyzer's rows beside the engine's, per point (what was measured, if the step was stopped)
    [ "$name" = crosscheck ] && [ -d "$RUN_WORK/crosscheck/raw" ] && python3 -m tritonsuite.cli crosscheck "$RUN_WORK/crosscheck"
done
cat "$out/steps.tsv"
