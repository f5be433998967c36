#!/usr/bin/env bash
# Builds onnx_light's release artifacts into dist/ (or $DIST_DIR), ready to publish:
#
#   onnx_light-V.tar.gz                                  the Python source distribution
#   onnx_light-V-cp39-abi3-manylinux_2_34_x86_64.whl     Python wheels (abi3: CPython 3.9 and
#   onnx_light-V-cp39-abi3-manylinux_2_34_aarch64.whl    later); the x86-64 one with onnx's C++
#   onnx_light-V-cp39-abi3-win_amd64.whl                 library (checker, shape inference, ...)
#   onnx_light-V-linux-x86_64.tar.gz                     C/C++ SDKs: headers, shared and static
#   onnx_light-V-linux-aarch64.tar.gz                    libraries, CMake package, pkg-config
#   onnx_light-V-windows-x86_64.zip                      file, the onnx-light tool, licences
#   onnx_light-V.crate                                   the Rust crate (cargo package)
#   SHA256SUMS
#
# Usage: scripts/dist.sh [PART...], PART one of sdist, crate, linux-x86_64, linux-aarch64,
# windows-x86_64 (a platform part makes its wheel and its SDK); all of them by default.
# Needs the test command's venv (.venv: maturin, cmake) and, for the cross-compiled parts, the
# Rust targets and Debian's cross compilers (gcc and g++ for aarch64 and MinGW; 56-dist.sh
# installs them). The builds
# are the test command's own (same target directories, features and build trees), so after a run
# of it only the packaging is left. The archives are reproducible: entries sorted, owners and
# modes normalised, every time the last commit's (SOURCE_DATE_EPOCH); the binaries in them are
# the same bytes for the same sources, toolchain, checkout directory and CARGO_HOME (absolute
# paths reach the binaries through panic locations and debug line tables).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DIST=${DIST_DIR:-$ROOT/dist}
PY="$ROOT/.venv/bin/python"
JOBS=$(nproc 2>/dev/null || echo 2)
die() { echo "dist: $*" >&2; exit 1; }
[ -x "$PY" ] || die "$PY is missing (scripts/test-all.sh creates the venv)"
export PATH="$ROOT/.venv/bin:$PATH"
VERSION=$(sed -n '/^\[workspace\.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)
[ -n "$VERSION" ] || die "no [workspace.package] version in Cargo.toml"
# (The same default as scripts/test-all.sh's: the `cc` crate's build scripts rebuild when it
# changes, so this reuses the test command's builds.)
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 315532800)}
export SOURCE_DATE_EPOCH
. scripts/lib/artifacts.sh
. scripts/lib/onnx-component.sh
HOST=x86_64-unknown-linux-gnu
AARCH64=aarch64-unknown-linux-gnu
WINDOWS=x86_64-pc-windows-gnu
[ "$(uname -m)" = x86_64 ] || die "the artifacts are built on Linux x86-64"

PARTS=("$@")
[ ${#PARTS[@]} -gt 0 ] || PARTS=(sdist crate linux-x86_64 linux-aarch64 windows-x86_64)
mkdir -p "$DIST"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

# pack DIR OUT: DIR (its name the archive's top directory) as OUT, a .tar.gz or a .zip.
pack() {
  "$PY" scripts/lib/pack.py "$1" "$2"
  echo "$(basename "$2"): $(stat -c %s "$2") bytes"
}

# sdk NAME TRIPLE TREE FLOOR LICENCE-ARGS...: the C/C++ SDK packed as NAME: the CMake build tree
# TREE installed (headers, libraries, CMake and pkg-config files), the tool for TRIPLE, debug
# information stripped; a README (the target, its floor FLOOR, the layout), the project's LICENSE
# and CHANGELOG, and the licences of every crate linked into the tool (a superset of the
# libraries'; LICENCE-ARGS are third_party_licenses.py's).
sdk() {
  local name=$1 triple=$2 tree=$3 floor=$4 root tool strip doc
  shift 4
  root="$stage/$name"
  cmake --install "$tree" --prefix "$root" >/dev/null
  tool=$(build_tool "$([ "$triple" = "$HOST" ] || echo "$triple")")
  mkdir -p "$root/bin"
  cp "$tool" "$root/bin/"
  case $triple in
    aarch64-*) strip=aarch64-linux-gnu-strip ;;
    *windows*) strip=x86_64-w64-mingw32-strip ;;
    *) strip=strip ;;
  esac
  find "$root/bin" "$root/lib" -type f \( -name 'onnx-light*' -o -name '*.so.*' -o -name '*.dll' -o -name 'lib*.a' \) \
    ! -name '*.dll.a' -exec "$strip" --strip-debug {} +
  doc="$root/share/doc/onnx_light"
  mkdir -p "$doc"
  cp LICENSE CHANGELOG.md "$doc/"
  sed -e "s|@VERSION@|$VERSION|g" -e "s|@TARGET@|$triple|g" -e "s|@FLOOR@|$floor|g" \
    scripts/lib/sdk-README.md >"$root/README.md"
  "$PY" scripts/lib/third_party_licenses.py "$doc/THIRD_PARTY_LICENSES.txt" --package onnx-light-cli "$@" >/dev/null
  pack "$root" "$DIST/$name.$([[ $triple == *windows* ]] && echo zip || echo tar.gz)"
}

# cross_sdk NAME TRIPLE TOOLCHAIN FLOOR: the SDK of a cross-compiled target: the CMake package
# built with the toolchain file cmake/toolchains/TOOLCHAIN (without the onnx component).
cross_sdk() {
  local name=$1 triple=$2 toolchain=$3 floor=$4 tree
  tree="$ROOT/build/dist-$triple"
  cmake -S . -B "$tree" -DCMAKE_TOOLCHAIN_FILE="$ROOT/cmake/toolchains/$toolchain" \
    -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$tree" -j "$JOBS" >/dev/null
  sdk "$name" "$triple" "$tree" "$floor" --target "$triple"
}

for part in "${PARTS[@]}"; do
  case $part in
    sdist)
      # (Its build backend stops at once, with a one-line message, on a machine without Rust. A
      # build from it has no onnx component: the licences are those of the default extension, for
      # every platform.)
      rm -f "$DIST"/onnx_light-"$VERSION".tar.gz
      package_licences --target all
      "$PY" -m maturin sdist -m python/Cargo.toml --out "$DIST" >"$stage/sdist.log" 2>&1 ||
        { cat "$stage/sdist.log" >&2; die "maturin sdist failed"; }
      ;;
    crate)
      cargo package -q -p onnx_light --locked --allow-dirty --no-verify
      cp "target/package/onnx_light-$VERSION.crate" "$DIST/"
      ;;
    linux-x86_64)
      export ONNX_LIGHT_ONNX_LIB_DIR="$ONNX_COMPONENT_PREFIX/lib"
      fetch_onnx_sdist
      build_onnx_component >/dev/null
      [ -f "$ONNX_COMPONENT_PREFIX/lib/libonnx_light_onnx.a" ] ||
        cmake --install "$ONNX_COMPONENT_TREE" --prefix "$ONNX_COMPONENT_PREFIX" >/dev/null
      build_wheel "$DIST"
      extract_onnx_license
      sdk "onnx_light-$VERSION-linux-x86_64" "$HOST" "$ONNX_COMPONENT_TREE" "glibc 2.34, libstdc++ of GCC 11" \
        --features onnx --extra "onnx $ONNX_VERSION (the onnx component: onnx's C++ library)=$ONNX_LICENSE"
      ;;
    linux-aarch64)
      build_wheel "$DIST" "$AARCH64"
      cross_sdk "onnx_light-$VERSION-linux-aarch64" "$AARCH64" aarch64-linux-gnu.cmake "glibc 2.34"
      ;;
    windows-x86_64)
      build_wheel "$DIST" "$WINDOWS"
      cross_sdk "onnx_light-$VERSION-windows-x86_64" "$WINDOWS" mingw-w64-x86_64.cmake "Windows 10"
      ;;
    *) die "unknown part '$part' (sdist, crate, linux-x86_64, linux-aarch64, windows-x86_64)" ;;
  esac
done
(cd "$DIST" && find . -maxdepth 1 -type f ! -name SHA256SUMS -printf '%f\n' | LC_ALL=C sort \
  | xargs sha256sum >SHA256SUMS)
ls -l "$DIST"
