#!/usr/bin/env bash
# Makes what the web console's browser test (tests/tools/browser.rs) drives a browser with, and
# prints the path of the node_modules directory that holds playwright-core on stdout (everything
# else goes to stderr).
#
# The browser is Debian's Chromium (/usr/bin/chromium, installed with apt-get when missing; the
# test never downloads a browser of its own). playwright-core, at the version pinned by
# tests/console/package.json and package-lock.json, is installed with `npm ci` into a directory
# outside the clone (RINGMQ_NODE_DIR, default ~/.cache/ringmq/node) so runs reuse it: when the
# pinned version is already there, the script only checks that and exits. A fresh machine needs
# node (18+) and npm, and reaches the npm registry and Debian's packages.
#
#   export RINGMQ_NODE_MODULES="$(scripts/browser-env.sh)"
set -euo pipefail
cd "$(dirname "$0")/.."

readonly chromium="/usr/bin/chromium"
node_dir="${RINGMQ_NODE_DIR:-$HOME/.cache/ringmq/node}"

log() { echo "browser-env: $*" >&2; }

apt_install() {
  if ! command -v apt-get >/dev/null; then
    log "no apt-get: install $* with the system's package manager"
    return 1
  fi
  log "installing $* with apt-get"
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >&2
}

if [[ ! -x "$chromium" ]]; then
  apt_install chromium
fi
if ! command -v npm >/dev/null; then
  apt_install nodejs npm
fi

# The installed playwright-core's version, or nothing.
installed_version() {
  node -e 'try { console.log(require(process.argv[1]).version) } catch (e) {}' \
    "$node_dir/node_modules/playwright-core/package.json" 2>/dev/null || true
}
wanted="$(node -e 'console.log(require(process.argv[1]).dependencies["playwright-core"])' \
  "$PWD/tests/console/package.json")"

if [[ "$(installed_version)" != "$wanted" ]] ||
  ! cmp -s tests/console/package-lock.json "$node_dir/package-lock.json"; then
  log "installing playwright-core $wanted into $node_dir"
  mkdir -p "$node_dir"
  cp tests/console/package.json tests/console/package-lock.json "$node_dir/"
  (cd "$node_dir" && npm ci --no-audit --no-fund --loglevel=error >&2)
fi
if [[ "$(installed_version)" != "$wanted" ]]; then
  log "playwright-core $wanted did not install into $node_dir"
  exit 1
fi
echo "$node_dir/node_modules"
