#!/usr/bin/env bash
# Makes the Python virtualenv the C++-client tests (tests/cluster/cpp_client.rs) run their scripts with,
# and prints the path of its python on stdout (everything else goes to stderr).
#
# The venv holds rocketmq-python-cvs, a ctypes binding that ships librocketmq.so, the RocketMQ
# C++ client 2.1, built for x86-64 Linux. It lives outside the clone (RINGMQ_VENV, default
# ~/.cache/ringmq/venv) so runs reuse it: when the pinned version is already installed and its
# library loads, the script only checks that and exits. A fresh machine needs python3 (3.8+)
# with the venv module, and reaches PyPI; the library's system libraries (libstdc++, zlib) are
# installed with apt-get when missing.
#
#   export RINGMQ_PYTHON="$(scripts/python-env.sh)"
set -euo pipefail
# shellcheck source=scripts/venv.sh
source "$(dirname "$0")/venv.sh"

readonly package="rocketmq-python-cvs"
readonly version="2.1.0.3"
venv="${RINGMQ_VENV:-$HOME/.cache/ringmq/venv}"
python_bin="${RINGMQ_SYSTEM_PYTHON:-python3}"

log() { echo "python-env: $*" >&2; }

# Loads the client library the way the tests do; fails when the binding or a system library is
# missing.
library_loads() {
  "$venv/bin/python" - "$version" <<'EOF' >/dev/null 2>&1
import sys
from importlib.metadata import version
assert version("rocketmq-python-cvs") == sys.argv[1]
from rocketmq import ffi
assert ffi.dll.CreateTransactionProducer
EOF
}

# Installs with apt-get the system libraries librocketmq.so links to and ldd cannot find.
install_missing_system_libraries() {
  local lib
  lib="$("$venv/bin/python" -c 'import os, importlib.util as u; print(os.path.join(os.path.dirname(u.find_spec("rocketmq").origin), "librocketmq.so"))')"
  local missing
  missing="$(ldd "$lib" | awk '/not found/ {print $1}')"
  [[ -z "$missing" ]] && return 0
  log "librocketmq.so needs: $missing; installing them with apt-get"
  if ! command -v apt-get >/dev/null; then
    log "no apt-get: install these libraries with the system's package manager"
    return 1
  fi
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libstdc++6 zlib1g >&2
}

if [[ -x "$venv/bin/python" ]] && library_loads; then
  echo "$venv/bin/python"
  exit 0
fi

make_venv "$venv" "$python_bin"
log "installing $package==$version"
# The package is a source distribution that ships the prebuilt library; setuptools and wheel
# build it into a platform wheel.
"$venv/bin/python" -m pip install --disable-pip-version-check -q "$package==$version" >&2
install_missing_system_libraries
if ! library_loads; then
  log "$package==$version is installed in $venv but librocketmq.so does not load:"
  "$venv/bin/python" -c 'from rocketmq import ffi' >&2 || true
  exit 1
fi
echo "$venv/bin/python"
