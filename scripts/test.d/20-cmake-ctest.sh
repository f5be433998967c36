#!/usr/bin/env bash
# The C ABI through CMake, the way C and C++ users meet it (run by scripts/test-all.sh, after the
# Rust tests and the release build; PATH has the venv's pinned cmake):
# 1. configure + build the top-level CMakeLists.txt (it drives `cargo build --release -p onnx_light --lib` in
#    the repository's target/, so nothing is compiled twice) with BUILD_TESTING=ON;
# 2. ctest: the C tests (entry points, ownership, error paths, accessors, streams), the C++
#    wrapper test, THE walker (every field of every message of the onnx wheel's backend test
#    models, rebuilt with the setters, byte-identical) and the examples (C, C++, Python/ctypes),
#    each C/C++ program plainly, under Valgrind and with ASan+UBSan, and the multi-threaded
#    ones (c_tests/test_threads.c, test_errors.c) also with ThreadSanitizer and Helgrind;
# 3. `cmake --install` into a temporary prefix: files, SONAME and symlink chain, exported symbols;
# 4. the consumer project (c_tests/consumer) finds the installed package with find_package,
#    builds against the shared and the static library and runs (loads, walks, saves and reloads);
#    again after moving the prefix (the package is relocatable);
# 5. pkg-config: flags of onnx_light.pc, and programs built with them (shared, static) run; without
#    pkg-config the .pc file is read directly.
# A missing tool fails the script; nothing is skipped. Build trees live under build/ (gitignored).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
JOBS=$(nproc 2>/dev/null || echo 2)
PY="$ROOT/.venv/bin/python"

die() { echo "20-cmake-ctest: $*" >&2; exit 1; }
need() { command -v "$1" >/dev/null 2>&1 || die "$1 is required ($2)"; }
need cmake "pip install -r scripts/requirements-test.txt puts it in .venv/bin"
need ctest "comes with cmake"
need cargo "install Rust"
need "${CC:-cc}" "a C compiler"
need "${CXX:-c++}" "a C++17 compiler"
need valgrind "apt-get install valgrind"
need readelf "binutils"
need nm "binutils"
[ -x "$PY" ] || die "$PY is missing (scripts/test-all.sh creates the venv)"
BACKEND_DATA=$("$PY" -c "import onnx, os; print(os.path.join(os.path.dirname(onnx.__file__), 'backend', 'test', 'data'))")
[ -d "$BACKEND_DATA" ] || die "no onnx backend test data at $BACKEND_DATA"
VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
SOVERSION=$(awk -F. '{ print ($1 == "0") ? "0." $2 : $1 }' <<<"$VERSION")
SONAME="libonnx_light.so.$SOVERSION"
echo "cmake $(cmake --version | head -1 | awk '{print $3}'), onnx_light $VERSION, SONAME $SONAME"

# ---- 1. configure and build ---------------------------------------------------------------------
BUILD="$ROOT/build/cmake"
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=ON \
  -DONNXL_TEST_VALGRIND=ON -DONNXL_TEST_SANITIZERS=ON -DONNXL_TEST_TSAN=ON -DONNXL_TEST_PYTHON=ON \
  -DPython3_EXECUTABLE="$PY" -DONNXL_BACKEND_DATA_DIR="$BACKEND_DATA"
cmake --build "$BUILD" -j "$JOBS"

# ---- 2. CTest -----------------------------------------------------------------------------------
ctest --test-dir "$BUILD" -j "$JOBS" --output-on-failure --timeout 900

# ---- 3. install into a temporary prefix ---------------------------------------------------------
WORK="$ROOT/build/install-test"
rm -rf "$WORK"
mkdir -p "$WORK"
PREFIX="$WORK/prefix"
cmake --install "$BUILD" --prefix "$PREFIX"
LIBDIR="$PREFIX/lib"
for f in "lib/libonnx_light.so.$VERSION" lib/libonnx_light.a include/onnx_light.h include/onnx_light.hpp \
         lib/cmake/onnx_light/onnx_lightConfig.cmake lib/cmake/onnx_light/onnx_lightConfigVersion.cmake \
         lib/pkgconfig/onnx_light.pc; do
  [ -f "$PREFIX/$f" ] && [ ! -L "$PREFIX/$f" ] || die "not installed as a file: $f"
done
[ "$(readlink "$LIBDIR/$SONAME")" = "libonnx_light.so.$VERSION" ] || die "$SONAME is not a link to libonnx_light.so.$VERSION"
[ "$(readlink "$LIBDIR/libonnx_light.so")" = "$SONAME" ] || die "libonnx_light.so is not a link to $SONAME"
soname=$(readelf -d "$LIBDIR/libonnx_light.so.$VERSION" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "$SONAME" ] || die "SONAME is '$soname', expected $SONAME"
foreign=$(nm -D --defined-only "$LIBDIR/libonnx_light.so.$VERSION" | awk 'NF >= 3 {print $NF}' | grep -v '^onnxl_' || true)
[ -z "$foreign" ] || die "the installed library exports symbols other than onnxl_*: $(head -5 <<<"$foreign")"
echo "installed: SONAME $soname, symlink chain libonnx_light.so -> $SONAME -> libonnx_light.so.$VERSION, only onnxl_* exported"

# ---- 4. the consumer project, against the installed package ---------------------------------------
consume() { # consume PREFIX BUILD_DIR
  cmake -S c_tests/consumer -B "$2" -DCMAKE_PREFIX_PATH="$1" -DCMAKE_BUILD_TYPE=Release
  cmake --build "$2" -j "$JOBS"
  local out
  out=$(valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect \
        --show-leak-kinds=definite,indirect "$2/consumer_c" samples/mlp.onnx "$2/saved.onnx")
  echo "$out"
  grep -q "graph mlp: 6 nodes, 4 initializers" <<<"$out" || die "unexpected consumer_c output"
  grep -q "loaded back: identical" <<<"$out" || die "consumer_c: the saved model differs"
  out=$("$2/consumer_static_cpp" samples/mlp.onnx)
  echo "$out"
  grep -q "6 nodes: MatMul Add Relu MatMul Add Softmax; round trip identical" <<<"$out" \
    || die "unexpected consumer_static_cpp output"
  readelf -d "$2/consumer_c" | grep -q "NEEDED.*\[$SONAME\]" || die "consumer_c does not need $SONAME"
  if readelf -d "$2/consumer_static_cpp" | grep -q "NEEDED.*onnx_light"; then
    die "consumer_static_cpp links libonnx_light dynamically"
  fi
}
consume "$PREFIX" "$WORK/consumer"
# Relocatable: the same package, moved elsewhere, still works.
mv "$PREFIX" "$WORK/moved-prefix"
PREFIX="$WORK/moved-prefix"
LIBDIR="$PREFIX/lib"
consume "$PREFIX" "$WORK/consumer-moved"
echo "consumer: find_package(onnx_light 0.2) works from the install prefix and after moving it"

# ---- 5. pkg-config ----------------------------------------------------------------------------------
PC="$LIBDIR/pkgconfig/onnx_light.pc"
if command -v pkg-config >/dev/null 2>&1 && [ "${ONNXL_PC_FALLBACK:-0}" != 1 ]; then
  export PKG_CONFIG_PATH="$LIBDIR/pkgconfig"
  [ "$(pkg-config --modversion onnx_light)" = "$VERSION" ] || die "pkg-config --modversion"
  cflags=$(pkg-config --cflags onnx_light)
  libs=$(pkg-config --libs onnx_light)
  static_libs=$(pkg-config --static --libs onnx_light)
else
  # No pkg-config (or ONNXL_PC_FALLBACK=1): expand the .pc file's variables as pkg-config does.
  echo "(pkg-config not used: reading $PC directly)"
  pc_query() { # pc_query FIELD: the field's value with ${variables} expanded
    local -A vars=([pcfiledir]="$(dirname "$PC")")
    local line name value k pat
    while IFS= read -r line; do
      if [[ $line =~ ^([A-Za-z_][A-Za-z0-9_.]*)=(.*)$ ]]; then
        name=${BASH_REMATCH[1]}
        value=${BASH_REMATCH[2]}
      elif [[ $line == "$1: "* ]]; then
        name=""
        value=${line#"$1: "}
      else
        continue
      fi
      for k in "${!vars[@]}"; do
        pat='${'"$k"'}'
        value=${value//"$pat"/"${vars[$k]}"}
      done
      if [ -z "$name" ]; then
        echo "$value"
        return
      fi
      vars[$name]=$value
    done <"$PC"
  }
  [ "$(pc_query Version)" = "$VERSION" ] || die ".pc Version"
  cflags=$(pc_query Cflags)
  libs=$(pc_query Libs)
  static_libs="$libs $(pc_query Libs.private)"
fi
echo "pkg-config --cflags --libs onnx_light: $cflags $libs"
echo "pkg-config --static --libs onnx_light: $static_libs"
[[ "$cflags" == -I*include* ]] || die "unexpected Cflags: $cflags"
[[ "$libs" == *-lonnx_light* ]] || die "unexpected Libs: $libs"
for lib in -lpthread -ldl -lm; do
  [[ "$static_libs" == *"$lib"* ]] || die "Libs.private lacks $lib: $static_libs"
done
# A program built with exactly those flags runs.
# shellcheck disable=SC2086
"${CC:-cc}" -std=c11 -Wall -Wextra -Wpedantic -Werror examples/c/print_graph.c $cflags $libs \
  -Wl,-rpath,"$LIBDIR" -o "$WORK/print_graph_pkgconfig"
"$WORK/print_graph_pkgconfig" samples/mlp.onnx | tail -2
# ... and statically, with Libs.private.
# shellcheck disable=SC2086
"${CC:-cc}" -std=c11 examples/c/print_graph.c $cflags "$LIBDIR/libonnx_light.a" \
  $(sed 's/-L[^ ]*//g; s/-lonnx_light//g' <<<"$static_libs") -o "$WORK/print_graph_static"
"$WORK/print_graph_static" samples/mlp.onnx >/dev/null
echo "pkg-config: flags work for shared and static linking"

echo "20-cmake-ctest: all passed"
