#!/usr/bin/env bash
# Compile checks for the targets nothing here can link or run (run by scripts/test-all.sh, in the
# background): this crate's Rust code compiles, warnings denied, for
# - macOS (x86_64-apple-darwin): the minimal library;
# - Windows MSVC (x86_64-pc-windows-msvc): the library, default and minimal.
# (Linux aarch64 and Windows MinGW are built and tested by 70-cross.sh.) Installs what it needs:
# the Rust targets (rustup), Debian's clang, llvm (llvm-lib) and gcc-mingw-w64-x86-64. Each check
# has a target directory of its own, so that its RUSTFLAGS (-D warnings) touch no other build's
# fingerprints and it runs beside the other steps' cargo builds.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
MACOS=x86_64-apple-darwin
MSVC=x86_64-pc-windows-msvc
. scripts/lib/apt.sh

need=()
command -v clang >/dev/null 2>&1 || need+=(clang)
command -v llvm-lib >/dev/null 2>&1 || need+=(llvm)
command -v x86_64-w64-mingw32-gcc >/dev/null 2>&1 || need+=(gcc-mingw-w64-x86-64)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing ${need[*]}"
  apt_install "${need[@]}"
fi
rustup_target_add "$MACOS" "$MSVC"

# ---- macOS
# Without an Apple SDK nothing can be linked, and ring's C code needs the SDK's headers: the check
# is of the minimal library (--no-default-features: no ring), with Debian's clang assembling
# psm's (stacker's) assembly for the Apple target.
echo "macOS: cargo check of the minimal library (x86_64-apple-darwin, clang for the target)"
CC_x86_64_apple_darwin=clang RUSTFLAGS="-D warnings" CARGO_TARGET_DIR="$ROOT/target/macos-check" \
  cargo check -q -p onnx_light --lib --no-default-features --target "$MACOS"
echo "  compiles"

# ---- Windows MSVC
# No MSVC tools here (cl.exe, lib.exe, the Windows SDK): the C and assembly parts of the
# dependencies (ring, psm, stacker) are compiled by MinGW's gcc into COFF objects and archived by
# llvm-lib, which is enough for `cargo check` (nothing is linked); what is checked is that this
# crate's Rust code compiles for the MSVC target (target_env = "msvc"), warnings denied, in the
# default and the minimal build.
echo "Windows MSVC: cargo check of the library, default and minimal (x86_64-pc-windows-msvc)"
for features in "" --no-default-features; do
  # shellcheck disable=SC2086
  CC_x86_64_pc_windows_msvc=x86_64-w64-mingw32-gcc AR_x86_64_pc_windows_msvc=llvm-lib \
    RUSTFLAGS="-D warnings" CARGO_TARGET_DIR="$ROOT/target/msvc-check" \
    cargo check -q -p onnx_light --lib $features --target "$MSVC"
done
echo "  compiles"
echo "17-target-checks: ok"
