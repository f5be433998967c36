#!/usr/bin/env bash
# The size budget of the C library and its minimal build (run by scripts/test-all.sh):
# 1. builds the shipping library (cargo profiles `dist` and `dist-min`) in its full (default
#    features) and minimal (`--no-default-features`: codec, external data, C ABI) variants;
#    clippy of the minimal one (the size of the library with the opt-in `remote` feature is
#    checked by 65-remote.sh, on the build that step tests);
# 2. fails when a stripped library exceeds its budget below (the numbers, and where the bytes go:
#    docs/benchmarks.md, "Library size");
# 3. the minimal library has none of the cipher code (no `ring`, `aes` symbols); both have full
#    RELRO (BIND_NOW and a RELRO segment);
# 4. c_tests/test_optional_features.c against each: onnxl_has_feature(), the codec, and the
#    functions of a missing part failing with ONNXL_STATUS_UNSUPPORTED;
# 5. the walker (c_tests/walk_main.c, generated/walk_copy.c) against the minimal library: the
#    onnx wheel's backend test models parsed three ways, every field read and the model rebuilt
#    with the setters, serialized byte-identical to the file. That library is built differently
#    from every other tested one (opt-level "s", `cfg(onnxl_small)`: a push into a repeated field
#    always takes the slow path; linked with packed relocations and identical code folding, see
#    build.rs), so its codec is checked here.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
die() { echo "45-size-budget: $*" >&2; exit 1; }
for tool in strip nm readelf "${CC:-cc}"; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool is required (binutils, a C compiler)"
done
PY="$ROOT/.venv/bin/python"
[ -x "$PY" ] || die "$PY is missing (scripts/test-all.sh creates the venv)"
BACKEND_DATA=$("$PY" -c "import onnx, os; print(os.path.join(os.path.dirname(onnx.__file__), 'backend', 'test', 'data'))")
[ -d "$BACKEND_DATA" ] || die "no onnx backend test data at $BACKEND_DATA"
# shellcheck source=scripts/lib/library-sizes.sh
source scripts/lib/library-sizes.sh

# Budgets in bytes of the stripped x86-64 Linux library: the sizes measured when they were set
# (full 2 520 480, minimal 1 482 992) plus ~2.5%, so that growth beyond that fails here and must be
# looked at; the minimal one was capped at its target, 1 500 000 (the full target, 3 000 000, is
# met). Both were raised by 2 000 for the C++ parse of a stream (ParseFromIstream)
# into memory kept from earlier parses and strings filled without a zero fill first (+1.6 kB; real
# models' stream parses 5-25% faster), which put the minimal library ~1.6 kB past its target.
FULL_BUDGET=2593000
MINIMAL_BUDGET=1502000

cargo clippy --release -p onnx_light --lib --no-default-features -- -D warnings

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
build_library_variants "$work" full minimal

full=$(stripped_size "$work/full/libonnx_light.so")
minimal=$(stripped_size "$work/minimal/libonnx_light.so")
printf 'stripped libonnx_light.so: full %d bytes (budget %d), minimal %d bytes (budget %d)\n' \
  "$full" "$FULL_BUDGET" "$minimal" "$MINIMAL_BUDGET"
[ "$full" -le "$FULL_BUDGET" ] || die "the full library grew to $full bytes (budget $FULL_BUDGET)"
[ "$minimal" -le "$MINIMAL_BUDGET" ] || die "the minimal library grew to $minimal bytes (budget $MINIMAL_BUDGET)"

# The minimal build has no cipher code; the full one has (so the check can fail).
# (Symbol lists in files: `nm | grep -q` would fail on nm's SIGPIPE under pipefail.)
nm "$work/full/libonnx_light.so" >"$work/full.syms"
nm "$work/minimal/libonnx_light.so" >"$work/minimal.syms"
grep -q 'ring_core_' "$work/full.syms" || die "no ring symbols in the full library: the check below proves nothing"
if grep -E 'ring_core_|[0-9]aes[0-9]|Aes256' "$work/minimal.syms"; then
  die "the minimal library contains cipher code (above)"
fi

# Full RELRO in each (the calls are compiled for partial RELRO and linked with `-z now`:
# .cargo/config.toml): bound at load time, GOT read-only.
for variant in full minimal; do
  readelf -dW "$work/$variant/libonnx_light.so" >"$work/$variant.dynamic"
  readelf -lW "$work/$variant/libonnx_light.so" >"$work/$variant.segments"
  grep -q 'BIND_NOW' "$work/$variant.dynamic" || die "the $variant library is not linked with -z now"
  grep -q 'GNU_RELRO' "$work/$variant.segments" || die "the $variant library has no RELRO segment"
done

for variant in full minimal; do
  dir="$work/$variant"
  "${CC:-cc}" -std=c11 -Wall -Wextra -Werror -Iinclude -Ic_tests c_tests/test_optional_features.c \
    -o "$dir/test_optional_features" -L"$dir" -lonnx_light -Wl,-rpath,"$dir"
  "$dir/test_optional_features" "$variant" "$ROOT/samples/mlp.onnx"
done

dir="$work/minimal"
"${CC:-cc}" -std=c11 -O1 -Wall -Werror -Iinclude -Ic_tests c_tests/walk_main.c c_tests/generated/walk_copy.c \
  -o "$dir/walk_copy" -L"$dir" -lonnx_light -Wl,-rpath,"$dir"
"$dir/walk_copy" --require-canonical --min-files 100 "$BACKEND_DATA" "$ROOT/samples/mlp.onnx"
echo "45-size-budget: ok"
