# GlusterFS devstack settings, sourced by up/down/status/env (after ../../_common.sh).
# One glusterd, one single-brick volume, mounted over FUSE. Needs root and /dev/fuse.
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

glusterd_ok() { GCLI_TIMEOUT=10 gcli volume list >/dev/null 2>&1; }
volume_started() { gcli volume info "$GLUSTER_VOLUME" 2>/dev/null | grep -q '^Status: Started'; }
brick_online() { gcli volume status "$GLUSTER_VOLUME" --xml 2>/dev/null | grep -q '<status>1</status>'; }
# mounted_here: our volume is FUSE-mounted at the mount point (reads /proc only: never hangs).
mounted_here() {
  findmnt -n -M "$GLUSTER_MOUNT" -o SOURCE,FSTYPE 2>/dev/null \
    | grep -q "^$GLUSTER_HOST:/$GLUSTER_VOLUME *fuse.glusterfs"
}
mount_ok() { mounted_here && timeout 5 stat -f "$GLUSTER_MOUNT" >/dev/null 2>&1 && timeout 5 ls "$GLUSTER_MOUNT" >/dev/null 2>&1; }
gluster_running() { glusterd_ok && volume_started && brick_online && mount_ok; }
