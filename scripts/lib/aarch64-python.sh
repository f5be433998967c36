#!/usr/bin/env bash
# An aarch64 CPython that runs under qemu-user, with a wheel installed: for testing aarch64
# wheels on an x86-64 machine (scripts/test.d/56-dist.sh).
#
#   aarch64-python.sh DIR WHEEL
#
# DIR/root: Debian's CPython 3.11 for arm64 and the libraries it needs, unpacked from their
# packages (dpkg -x; nothing is installed on the machine). DIR/site: WHEEL, with numpy and
# ml_dtypes at the versions of the test venv, from PyPI's aarch64 wheels. DIR/python: runs that
# interpreter under qemu-aarch64 with DIR/site on its path.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
DIR=$1
WHEEL=$2
. scripts/lib/apt.sh
command -v qemu-aarch64 >/dev/null 2>&1 || { echo "aarch64-python.sh: qemu-aarch64 is missing (qemu-user)" >&2; exit 1; }
mkdir -p "$DIR/root"
apt_download arm64 "$DIR/debs" libc6 libgcc-s1 python3.11-minimal libpython3.11-minimal libpython3.11-stdlib \
  libexpat1 zlib1g libffi8 libssl3 libbz2-1.0 liblzma5 libsqlite3-0 libncursesw6 libtinfo6 libuuid1 \
  libnsl2 libtirpc3 libcrypt1 libdb5.3 libgdbm6 libreadline8
for deb in "$DIR"/debs/*.deb; do dpkg -x "$deb" "$DIR/root"; done
pins=$("$ROOT/.venv/bin/python" -c 'import numpy, ml_dtypes; print(f"numpy=={numpy.__version__} ml_dtypes=={ml_dtypes.__version__}")')
# shellcheck disable=SC2086
"$ROOT/.venv/bin/python" -m pip install --quiet --disable-pip-version-check --target "$DIR/site" \
  --platform manylinux_2_34_aarch64 --only-binary=:all: --python-version 3.11 --implementation cp \
  $pins "$WHEEL"
cat >"$DIR/python" <<SH
#!/bin/sh
exec qemu-aarch64 -L "$DIR/root" -E PYTHONPATH="$DIR/site" "$DIR/root/usr/bin/python3.11" "\$@"
SH
chmod +x "$DIR/python"
"$DIR/python" -c 'import platform, sys; assert platform.machine() == "aarch64", platform.machine()'
