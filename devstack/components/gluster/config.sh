# GlusterFS devstack settings, sourced by up/down/status/env (after ../../_common.sh).
# One glusterd, one single-brick volume, mounted over FUSE. Needs root and /dev/fuse.
# Knobs (environment): TFK8S_GLUSTER_VOLUME (tfdata), TFK8S_GLUSTER_MOUNT
# (/mnt/tfk8s-gluster), TFK8S_GLUSTER_HOST (the brick host name; default `hostname`).
GLUSTER_VOLUME="${TFK8S_GLUSTER_VOLUME:-tfdata}"
GLUSTER_MOUNT="${TFK8S_GLUSTER_MOUNT:-/mnt/tfk8s-gluster}"
GLUSTER_HOME="$TFK8S_DEVSTACK_HOME/gluster"
GLUSTER_BRICK="$GLUSTER_HOME/brick"
GLUSTERD_PIDFILE="$GLUSTER_HOME/glusterd.pid"
GLUSTERD_LOG="$GLUSTER_HOME/glusterd.log"
GLUSTER_MOUNT_LOG="$GLUSTER_HOME/mount.log"
# The gluster CLI refuses localhost/127.0.0.1 as a brick host: use a name that resolves
# to this machine (up adds "127.0.0.1 <name>" to /etc/hosts when it does not resolve).
GLUSTER_HOST="${TFK8S_GLUSTER_HOST:-$(hostname)}"
case "$GLUSTER_HOST" in ""|localhost|localhost.*|127.*) GLUSTER_HOST=tfk8s-gluster ;; esac

# gcli ARGS...: the gluster CLI, non-interactive and bounded (it can hang on a sick glusterd).
gcli() { timeout "${GCLI_TIMEOUT:-30}" gluster --mode=script "$@"; }

# proc_live PID: exists and is not a zombie (kill -0 succeeds on zombies too).
proc_live() {
  kill -0 "$1" 2>/dev/null || return 1
  [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]
}
# glusterd_pid_alive: the pid file names a live glusterd (not a reused pid).
glusterd_pid_alive() {
  [ -f "$GLUSTERD_PIDFILE" ] && proc_live "$(cat "$GLUSTERD_PIDFILE")" \
    && [ "$(cat "/proc/$(cat "$GLUSTERD_PIDFILE")/comm" 2>/dev/null)" = glusterd ]
}

glusterd_ok() { GCLI_TIMEOUT=10 gcli volume list >/dev/null 2>&1; }
# (Outputs are captured, not piped into grep -q: with pipefail an early grep exit can turn
# a match into a failure through SIGPIPE.)
volume_started() {
  local out; out="$(gcli volume info "$GLUSTER_VOLUME" 2>/dev/null)" && grep -q '^Status: Started' <<<"$out"
}
brick_online() {
  local out; out="$(gcli volume status "$GLUSTER_VOLUME" --xml 2>/dev/null)" && grep -q '<status>1</status>' <<<"$out"
}
# mounted_here: our volume is FUSE-mounted at the mount point (reads /proc only: never hangs).
mounted_here() {
  local out; out="$(findmnt -n -M "$GLUSTER_MOUNT" -o SOURCE,FSTYPE 2>/dev/null)" \
    && grep -q "^$GLUSTER_HOST:/$GLUSTER_VOLUME *fuse.glusterfs" <<<"$out"
}
mount_ok() { mounted_here && timeout 5 stat -f "$GLUSTER_MOUNT" >/dev/null 2>&1 && timeout 5 ls "$GLUSTER_MOUNT" >/dev/null 2>&1; }
gluster_running() { glusterd_ok && volume_started && brick_online && mount_ok; }

# gluster_stop: unmount, stop the volume, stop our glusterd; each step bounded.
# The caller holds $GLUSTER_HOME/lock.
gluster_stop() {
  local rc=0 out pf pid _

  if findmnt -n -M "$GLUSTER_MOUNT" >/dev/null 2>&1; then
    if timeout 20 umount "$GLUSTER_MOUNT" 2>/dev/null; then
      log "gluster: unmounted $GLUSTER_MOUNT"
    else
      log "gluster: umount $GLUSTER_MOUNT busy or hung; detaching it lazily"
      umount -l "$GLUSTER_MOUNT" || rc=1
    fi
  fi

  if glusterd_ok; then
    if volume_started; then
      out="$(GCLI_TIMEOUT=60 gcli volume stop "$GLUSTER_VOLUME" 2>&1)" \
        && log "gluster: volume $GLUSTER_VOLUME stopped" \
        || { log "gluster: volume stop failed: $out"; rc=1; }
    fi
  fi

  # A brick process that outlived its volume (e.g. glusterd was hung): stop it by its pid file.
  for pf in /var/run/gluster/vols/"$GLUSTER_VOLUME"/*.pid; do
    [ -f "$pf" ] || continue
    pid="$(cat "$pf")"
    if proc_live "$pid" && [ "$(cat /proc/"$pid"/comm 2>/dev/null)" = glusterfsd ]; then
      log "gluster: stopping leftover brick process $pid"
      kill -TERM "$pid" 2>/dev/null || true
    fi
  done

  if glusterd_pid_alive; then
    pid="$(cat "$GLUSTERD_PIDFILE")"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 40); do proc_live "$pid" || break; sleep 0.25; done
    if proc_live "$pid"; then
      log "gluster: glusterd $pid ignored SIGTERM for 10s, sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$GLUSTERD_PIDFILE"
    log "gluster: glusterd stopped (pid $pid)"
  elif glusterd_ok; then
    log "gluster: glusterd is running but was not started by devstack; leaving it"
  fi
  return $rc
}
