#!/usr/bin/env bash
# Makes the Python virtualenv the gRPC-client tests (tests/grpc_client/*.py) run with, and prints
# the path of its python on stdout (everything else goes to stderr).
#
# The venv holds rocketmq-python-client, the official RocketMQ 5 Python SDK (pure Python on
# grpcio + protobuf). Its top-level package is named `rocketmq`, the same name as the C++-client
# binding in scripts/python-env.sh, so the two cannot share a venv: this one lives in RINGMQ_VENV5
# (default ~/.cache/ringmq/venv5), outside the clone, so runs reuse it. When the pinned version is
# already installed and its clients import, the script only checks that and exits. Every
# dependency is taken from PyPI as a binary wheel (--only-binary=:all:): nothing is compiled.
# A fresh machine needs python3 (3.8+) with the venv module, and reaches PyPI.
#
#   export RINGMQ_PYTHON5="$(scripts/python5-env.sh)"
set -euo pipefail
# shellcheck source=scripts/venv.sh
source "$(dirname "$0")/venv.sh"

readonly package="rocketmq-python-client"
readonly version="5.1.2"
venv="${RINGMQ_VENV5:-$HOME/.cache/ringmq/venv5}"
python_bin="${RINGMQ_SYSTEM_PYTHON:-python3}"

log() { echo "python5-env: $*" >&2; }

# Imports the clients the way the test scripts do; fails when the SDK or one of its dependencies
# (grpcio, protobuf, opentelemetry) is missing or broken. Importing `rocketmq` normally creates
# ~/logs/rocketmq_python/ (the SDK's log_config module); a stand-in for that module, as
# tests/grpc_client/harness.py installs, keeps the check from touching ~/logs.
sdk_imports() {
  "$venv/bin/python" - "$version" <<'EOF' >/dev/null 2>&1
import logging, sys, types
from importlib.metadata import version
assert version("rocketmq-python-client") == sys.argv[1]
log_config = types.ModuleType("rocketmq.v5.log.log_config")
log_config.logger = logging.getLogger("rocketmq-python-client")
sys.modules[log_config.__name__] = log_config
from rocketmq import (ClientConfiguration, Credentials, FilterExpression, Message, Producer,
                      PushConsumer, SimpleConsumer)
import grpc
EOF
}

if [[ -x "$venv/bin/python" ]] && sdk_imports; then
  echo "$venv/bin/python"
  exit 0
fi

make_venv "$venv" "$python_bin"
log "installing $package==$version"
"$venv/bin/python" -m pip install --disable-pip-version-check -q --only-binary=:all: \
  "$package==$version" >&2
if ! sdk_imports; then
  log "$package==$version is installed in $venv but does not import:"
  "$venv/bin/python" -c 'from rocketmq import Producer, SimpleConsumer, PushConsumer' >&2 || true
  exit 1
fi
echo "$venv/bin/python"
