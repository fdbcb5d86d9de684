# Shared helpers for devstack scripts. Sourced, never executed.
# Why: every component must fail loudly with its log tail and never wait unbounded.
set -euo pipefail

DEVSTACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$DEVSTACK_DIR/.." && pwd)"
# Runtime state (pids, logs, data) lives outside the repository.
TFK8S_DEVSTACK_HOME="${TFK8S_DEVSTACK_HOME:-/var/tmp/tfk8s-devstack}"
# Built binaries and fetched jars are cached by version outside the repository.
TFK8S_CACHE="${TFK8S_CACHE:-$HOME/.cache/tfk8s-airflow}"
export TFK8S_DEVSTACK_HOME TFK8S_CACHE
mkdir -p "$TFK8S_DEVSTACK_HOME" "$TFK8S_CACHE"

log() { printf '[devstack %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# die MESSAGE [LOGFILE]: print the message and the tail of LOGFILE, exit 1.
die() {
  log "ERROR: $1"
  if [ -n "${2:-}" ] && [ -f "$2" ]; then
    echo "----- last 40 lines of $2 -----" >&2
    tail -n 40 "$2" >&2
    echo "-----" >&2
  fi
  exit 1
}

# wait_until SECONDS DESCRIPTION LOGFILE COMMAND...: poll COMMAND every 0.5 s, bounded.
wait_until() {
  local timeout="$1" what="$2" logfile="$3"; shift 3
  local deadline=$(( $(date +%s) + timeout ))
  until "$@" >/dev/null 2>&1; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      die "timed out after ${timeout}s waiting for $what" "$logfile"
    fi
    sleep 0.5
  done
}

# pid_alive PIDFILE: true when the pid file names a live process.
pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
