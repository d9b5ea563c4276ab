# Sourced by scripts/python-env.sh and scripts/python5-env.sh: makes a Python virtualenv.
# Expects a `log` function from the sourcing script.

# make_venv VENV PYTHON: creates VENV with PYTHON unless it has an interpreter already; Debian's
# system python3 ships the venv module separately, so it is installed with apt-get when missing.
make_venv() {
  local venv="$1" python_bin="$2"
  [[ -x "$venv/bin/python" ]] && return 0
  log "creating $venv"
  mkdir -p "$(dirname "$venv")"
  if ! "$python_bin" -m venv "$venv" >&2; then
    command -v apt-get >/dev/null || return 1
    log "installing python3-venv with apt-get"
    rm -rf "$venv"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >&2
    "$python_bin" -m venv "$venv" >&2
  fi
}
