# Shared by the test steps that install Debian packages or Rust targets (the test command runs as
# root); sourced, not run. Steps run side by side (scripts/test-all.sh, BACKGROUND): each
# installer runs alone, under one lock.

# apt_install PACKAGE...: installs the packages from Debian (`apt-get update` first). One call at
# a time: scripts/test-all.sh runs a step in the background, and two apt-get runs at once would
# fail on apt's lock, so each waits here for the other.
apt_install() {
  command -v apt-get >/dev/null 2>&1 || { echo "apt-get is missing to install $*" >&2; return 1; }
  (
    flock 9
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
  ) 9>/run/lock/onnx-light-apt.lock
}

# apt_download ARCH DIR PACKAGE...: downloads the Debian packages of architecture ARCH (for
# example arm64, added to dpkg's foreign architectures first) into DIR, without installing them.
apt_download() {
  local arch=$1 dir=$2
  shift 2
  (
    flock 9
    if ! dpkg --print-foreign-architectures | grep -qx "$arch"; then
      dpkg --add-architecture "$arch"
      apt-get update -qq
    fi
    mkdir -p "$dir"
    # (As root, apt warns that its sandbox user cannot write DIR: harmless.)
    cd "$dir" && apt-get download -qq "${@/%/:$arch}" 2>/dev/null
  ) 9>/run/lock/onnx-light-apt.lock
}

# rustup_target_add TRIPLE...: adds Rust targets, one rustup at a time (steps run side by side).
rustup_target_add() {
  ( flock 9; rustup target add "$@" ) 9>/run/lock/onnx-light-apt.lock
}
