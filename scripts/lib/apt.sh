# Shared by the test steps that install Debian packages (the test command runs as root); sourced,
# not run.

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
