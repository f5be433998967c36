# onnx's source distribution from PyPI, for the steps that build onnx's C++ library
# (15-onnx-component.sh, 16-onnx-cxx.sh); sourced, not run. The caller defines die() and ROOT.
# The version is the one components/onnx/CMakeLists.txt pins, with its SHA-256.
ONNX_VERSION=$(sed -n 's/^set(ONNXL_ONNX_VERSION \(.*\))$/\1/p' "$ROOT/components/onnx/CMakeLists.txt")
ONNX_SHA256=$(sed -n 's/^set(ONNXL_ONNX_SHA256 \(.*\))$/\1/p' "$ROOT/components/onnx/CMakeLists.txt")
ONNX_SDIST="$ROOT/target/onnx-sdist/onnx-$ONNX_VERSION.tar.gz"

# Downloads onnx-$ONNX_VERSION.tar.gz into target/onnx-sdist/ unless a verified copy is there.
fetch_onnx_sdist() {
  [ -n "$ONNX_VERSION" ] && [ -n "$ONNX_SHA256" ] || die "no onnx version pinned in components/onnx/CMakeLists.txt"
  if echo "$ONNX_SHA256  $ONNX_SDIST" | sha256sum -c --status - 2>/dev/null; then
    return
  fi
  local py="$ROOT/.venv/bin/python" dir
  dir=$(dirname "$ONNX_SDIST")
  # pip prepares the sdist's metadata, which needs onnx's build backend (scikit-build-core) and
  # cmake >= 3.26 (both in the venv); nothing is built.
  "$py" -m pip install --quiet --disable-pip-version-check scikit-build-core==1.1.2
  rm -rf "$dir"
  PATH="$ROOT/.venv/bin:$PATH" "$py" -m pip download --quiet --disable-pip-version-check \
    --no-binary :all: --no-deps --no-build-isolation "onnx==$ONNX_VERSION" -d "$dir"
  echo "$ONNX_SHA256  $ONNX_SDIST" | sha256sum -c - || die "checksum of $ONNX_SDIST"
}

# Writes onnx's LICENSE from the source distribution (fetched first) to $ONNX_LICENSE, for the
# licence files of artifacts that carry onnx's C++ library.
ONNX_LICENSE="$ROOT/target/onnx-sdist/LICENSE"
extract_onnx_license() {
  fetch_onnx_sdist
  tar -xzf "$ONNX_SDIST" -O "onnx-$ONNX_VERSION/LICENSE" >"$ONNX_LICENSE" || die "no LICENSE in $ONNX_SDIST"
}
