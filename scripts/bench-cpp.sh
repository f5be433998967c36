#!/usr/bin/env bash
# The C++ drop-in's parse entry points against protobuf's generated code (not a test):
# c_tests/cpp_compat/parse_bench.cpp built twice from one source (-O2), against protobuf 3.21's
# onnx.pb.h (protoc on the onnx wheel's .proto) and against <onnx_light/onnx_pb.h>, run in
# alternating fresh processes on real models: the three ONNX models of the rapidocr-onnxruntime
# 1.4.4 wheel from PyPI (PP-OCRv4 detection 4.7 MB, recognition 10.9 MB, classifier 0.6 MB; sha256
# checked), the largest model of the onnx wheel's test data (light_densenet121) and the 200 000
# node model of bench/'s generator (c). Prints a markdown table: per model and entry point the
# cold time (the first parse in the process) and the warm time (best of the others), for both
# libraries, each the best over BENCH_RUNS processes, and the ratio onnx_light / protobuf.
#
# environment: BENCH_RUNS=5 processes per side, BENCH_PARSES=20 parses per process,
#              BENCH_OUT (default target/bench-cpp.md)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CXX=${CXX:-g++}
PY="$ROOT/.venv/bin/python"
die() { echo "bench-cpp: $*" >&2; exit 1; }
[ -x "$PY" ] || die "$PY is missing (run scripts/test-all.sh or create .venv)"
. scripts/lib/protobuf-onnx.sh
require_protobuf
RUNS=${BENCH_RUNS:-5}
PARSES=${BENCH_PARSES:-20}
W="$ROOT/target/bench-cpp"
mkdir -p "$W"
ONNX_DIR=$("$PY" -c "import onnx, os; print(os.path.dirname(onnx.__file__))")

# ---- models
WHEEL="$W/rapidocr_onnxruntime-1.4.4-py3-none-any.whl"
WHEEL_SHA256=971d7d5f223a7a808662229df1ef69893809d8457d834e6373d3854bc1782cbf
if ! echo "$WHEEL_SHA256  $WHEEL" | sha256sum -c --status - 2>/dev/null; then
  "$PY" -m pip download --quiet --disable-pip-version-check --no-deps rapidocr-onnxruntime==1.4.4 -d "$W"
  echo "$WHEEL_SHA256  $WHEEL" | sha256sum -c - >/dev/null || die "checksum of $WHEEL"
fi
"$PY" - "$WHEEL" "$W/models" <<'PYEOF'
import os, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
os.makedirs(sys.argv[2], exist_ok=True)
for n in z.namelist():
    if n.endswith(".onnx"):
        open(os.path.join(sys.argv[2], os.path.basename(n)), "wb").write(z.read(n))
PYEOF
cargo build --release --quiet -p onnx_light_bench
[ -f "$W/models/c_200k_nodes.onnx" ] || target/release/onnx-bench gen metadata "$W/models/c_200k_nodes.onnx" --scale 1 >/dev/null
cp "$ONNX_DIR/backend/test/data/light/light_densenet121.onnx" "$W/models/"
MODELS=("$W"/models/ch_PP-OCRv4_det_infer.onnx "$W"/models/ch_PP-OCRv4_rec_infer.onnx
        "$W"/models/ch_ppocr_mobile_v2.0_cls_infer.onnx "$W"/models/light_densenet121.onnx "$W"/models/c_200k_nodes.onnx)

# ---- the two programs
onnx_protos_for_protoc "$ONNX_DIR" "$W/proto"
mkdir -p "$W/gen"
(cd "$W/proto" && protoc --cpp_out="$W/gen" onnx/onnx.proto onnx/onnx-data.proto)
cargo build --release -p onnx_light --lib -q
LIB="$ROOT/target/release/libonnx_light.so"
ln -sf "$LIB" "$W/$(readelf -d "$LIB" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')"
FLAGS=(-std=c++17 -O2 -DNDEBUG -w -Ic_tests/cpp_compat -I"$W/gen")
"$CXX" "${FLAGS[@]}" -isystem "$W/gen" -o "$W/parse_bench-protobuf" c_tests/cpp_compat/parse_bench.cpp \
  "$W/gen/onnx/onnx.pb.cc" "$W/gen/onnx/onnx-data.pb.cc" -lprotobuf -pthread
"$CXX" "${FLAGS[@]}" -DONNXL_SIDE=1 -Iinclude -o "$W/parse_bench-onnxl" c_tests/cpp_compat/parse_bench.cpp \
  -L"$ROOT/target/release" -lonnx_light -pthread -Wl,-rpath,"$W"

# ---- runs, alternating
rm -f "$W"/run-*.txt
for r in $(seq "$RUNS"); do
  for side in protobuf onnxl; do
    "$W/parse_bench-$side" "$PARSES" "${MODELS[@]}" >"$W/run-$side-$r.txt"
  done
done
OUT=${BENCH_OUT:-$ROOT/target/bench-cpp.md}
mkdir -p "$(dirname "$OUT")"
"$PY" - "$W" "$RUNS" "$PARSES" "$(protoc --version)" >"$OUT" <<'PYEOF'
import collections, glob, os, platform, sys, datetime
w, runs, parses, protoc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
best = collections.defaultdict(lambda: [1e300, 1e300])
order = []
for side in ("protobuf", "onnxl"):
    for f in glob.glob(f"{w}/run-{side}-*.txt"):
        for line in open(f):
            path, entry, cold, warm, _ = line.split()
            key = (os.path.basename(path), entry)
            if key not in order:
                order.append(key)
            b = best[key + (side,)]
            b[0], b[1] = min(b[0], float(cold)), min(b[1], float(warm))
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
print(f"C++ parse entry points, onnx_light vs protobuf ({protoc}), {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC,")
print(f"{os.cpu_count()} cores ({cpu}), best of {runs} processes x {parses} parses; times in ms\n")
print("| model | size | entry point | protobuf cold | onnx_light cold | cold ratio | protobuf warm | onnx_light warm | warm ratio |")
print("|---|---|---|---|---|---|---|---|---|")
for name, entry in order:
    p, o = best[(name, entry, "protobuf")], best[(name, entry, "onnxl")]
    size = os.path.getsize(f"{w}/models/{name}") / 1e6
    print(f"| {name} | {size:.1f} MB | {entry} | {p[0]/1e3:.2f} | {o[0]/1e3:.2f} | {o[0]/p[0]:.2f} | "
          f"{p[1]/1e3:.2f} | {o[1]/1e3:.2f} | {o[1]/p[1]:.2f} |")
PYEOF
cat "$OUT"
