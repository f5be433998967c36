# Shared by scripts/test.d/45-size-budget.sh and scripts/bench.sh: builds the shipping C library
# (cargo profile `dist`: LTO, one codegen unit; `dist-min` for the minimal one) in its full and
# minimal (`--no-default-features`) variants and measures them stripped. Sourced, not run; the
# caller defines die() and runs from the repository root.
. scripts/lib/apt.sh

# build_library_variants OUT [VARIANT...]: builds the variants (default: full remote minimal) and
# copies each to OUT/VARIANT/ as libonnx_light.so (plus the SONAME name, so that programs linked
# against them run with an rpath). `remote` is the full library with the opt-in `remote` feature (its client stack more
# than triples the size, so it has a budget of its own). The full one is
# target/dist/libonnx_light.so (what CMake's `-DONNXL_CARGO_PROFILE=dist` stages); the minimal one
# (profile `dist-min`: `dist` optimized for size; CMake `-DONNXL_MINIMAL=ON
# -DONNXL_CARGO_PROFILE=dist-min`) and the remote one are built in target directories of their
# own (target/minimal-variant, target/remote-variant), so that the three builds run at once
# (cargo locks a target directory for the whole of a build; each ends in a fat-LTO link in one
# codegen unit, on one core). (One directory would not do for the remote variant
# anyway: a cdylib's file name does not depend on the features, so each of the two builds of the
# `dist` profile would replace the other's library and the next call rebuild both with LTO.)
build_library_variants() {
  local out=$1 variant soname
  local -A pids=() libs=()
  shift
  local variants=(full remote minimal)
  [ $# -eq 0 ] || variants=("$@")
  soname=$(awk -F'"' '/^version = / { split($2, v, "."); print (v[1] == "0") ? "0." v[2] : v[1]; exit }' Cargo.toml)
  mkdir -p "$out"
  for variant in "${variants[@]}"; do
    case $variant in
      minimal) set -- --profile dist-min --no-default-features --target-dir target/minimal-variant
        libs[$variant]=target/minimal-variant/dist-min/libonnx_light.so ;;
      remote) set -- --profile dist --features remote --target-dir target/remote-variant
        libs[$variant]=target/remote-variant/dist/libonnx_light.so ;;
      *) set -- --profile dist
        libs[$variant]=target/dist/libonnx_light.so ;;
    esac
    cargo build -p onnx_light --lib "$@" >"$out/build-$variant.log" 2>&1 &
    pids[$variant]=$!
  done
  for variant in "${variants[@]}"; do
    if ! wait "${pids[$variant]}"; then
      cat "$out/build-$variant.log" >&2
      die "the $variant library did not build"
    fi
    mkdir -p "$out/$variant"
    cp "${libs[$variant]}" "$out/$variant/libonnx_light.so"
    cp "${libs[$variant]}" "$out/$variant/libonnx_light.so.$soname"
  done
}

# Size in bytes of FILE once stripped (a stripped copy; FILE is not changed).
stripped_size() {
  local tmp
  tmp=$(mktemp)
  strip -o "$tmp" "$1" || { rm -f "$tmp"; die "strip $1 failed"; }
  stat -c %s "$tmp"
  rm -f "$tmp"
}

# The real file of Debian's libprotobuf.so / libprotobuf-lite.so (installing libprotobuf-dev when
# missing: the caller runs as root), or nothing when no package manager can provide it.
debian_protobuf_library() {
  local name=$1 f
  f=$(ls /usr/lib/*/"$name".so 2>/dev/null | head -1 || true)
  if [ -z "$f" ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing libprotobuf-dev (for the size of $name.so)" >&2
    apt_install libprotobuf-dev >&2
    f=$(ls /usr/lib/*/"$name".so 2>/dev/null | head -1 || true)
  fi
  [ -n "$f" ] && readlink -f "$f"
}
