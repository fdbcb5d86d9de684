# HDFS devstack settings, sourced by up/down/status/env (after ../../_common.sh).
# A Hadoop MiniDFSCluster (one NameNode + one DataNode in one JVM) from Maven Central jars.
# Knobs (environment): TFK8S_HADOOP_VERSION (3.5.0), TFK8S_HDFS_HTTP_PORT (9870),
# TFK8S_HDFS_RPC_PORT (8020), TFK8S_HDFS_DATANODE_HTTP_PORT (9864), TFK8S_HDFS_BIND_HOST
# (0.0.0.0), TFK8S_HDFS_DATANODE_HOST (this machine's host name), TFK8S_HDFS_USER (tfk8s),
# TFK8S_HDFS_START_TIMEOUT (120 s), TFK8S_HDFS_FORMAT=1 (start empty),
# TFK8S_HDFS_JAVA_OPTS (extra JVM options), TFK8S_JAVA.
HADOOP_VERSION="${TFK8S_HADOOP_VERSION:-3.5.0}"
HDFS_HTTP_PORT="${TFK8S_HDFS_HTTP_PORT:-9870}"   # NameNode HTTP: WebHDFS at /webhdfs/v1
HDFS_RPC_PORT="${TFK8S_HDFS_RPC_PORT:-8020}"     # NameNode RPC (hdfs://127.0.0.1:8020), loopback only
HDFS_DN_HTTP_PORT="${TFK8S_HDFS_DATANODE_HTTP_PORT:-9864}"  # DataNode HTTP: where WebHDFS reads redirect
# Where the NameNode's and the DataNode's HTTP servers listen. 0.0.0.0: on loopback (the
# Airflow side, the tests) and on the real node's bridge (pods reach the host at its
# address, 10.214.0.1); 127.0.0.1 keeps HDFS on loopback and out of the pods' reach.
HDFS_BIND_HOST="${TFK8S_HDFS_BIND_HOST:-0.0.0.0}"
# The name the NameNode's WebHDFS redirects give the DataNode. This machine's host name
# resolves on the host (/etc/hosts) and, through the real node's CoreDNS (its `hosts` entry), to
# the host address inside every pod, so both follow the redirect.
if [ -n "${TFK8S_HDFS_DATANODE_HOST:-}" ]; then
  HDFS_DN_HOST="$TFK8S_HDFS_DATANODE_HOST"
elif [ "$HDFS_BIND_HOST" = 0.0.0.0 ]; then
  HDFS_DN_HOST="$(hostname)"
else
  HDFS_DN_HOST="$HDFS_BIND_HOST"
fi
# The NameNode's superuser is the OS user that starts it (root here). Tests and the
# Airflow connection act as an ordinary user so HDFS permission checks are real.
HDFS_SUPERUSER="$(id -un)"
HDFS_USER="${TFK8S_HDFS_USER:-tfk8s}"
HDFS_URL="http://127.0.0.1:${HDFS_HTTP_PORT}"
HDFS_JARS="$TFK8S_CACHE/hadoop-$HADOOP_VERSION/lib"
HDFS_HOME="$TFK8S_DEVSTACK_HOME/hdfs"
HDFS_DATA="$HDFS_HOME/data"
HDFS_PIDFILE="$HDFS_HOME/minicluster.pid"
HDFS_LOG="$HDFS_HOME/minicluster.log"
HDFS_DETAILS="$HDFS_HOME/details.json"
HDFS_START_TIMEOUT="${TFK8S_HDFS_START_TIMEOUT:-120}"
# The JVM runs HdfsMiniCluster.java. JVMs started before it ran Hadoop's
# MiniHadoopClusterManager; ./up also puts that name on the command line (a system property)
# so devstack scripts of either age recognise the running JVM as the devstack's.
HDFS_JVM_MARKER=MiniHadoopClusterManager

# webhdfs_ok: the NameNode answers WebHDFS (any JSON FileStatus of /).
# (Output is captured, not piped into grep -q: with pipefail an early grep exit can
# turn a match into a failure through SIGPIPE.)
webhdfs_ok() {
  local out
  out="$(curl -sf --max-time 3 "$HDFS_URL/webhdfs/v1/?op=GETFILESTATUS&user.name=$HDFS_SUPERUSER")" \
    && [[ "$out" == *'"FileStatus"'* ]]
}

# proc_live PID: the process exists and is not a zombie (a killed JVM whose parent is
# gone stays a zombie until init reaps it, and kill -0 still succeeds on it).
proc_live() {
  kill -0 "$1" 2>/dev/null || return 1
  [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]
}
# hdfs_pid_alive: the pid file names a live minicluster JVM (not a reused pid).
hdfs_pid_alive() {
  [ -f "$HDFS_PIDFILE" ] && proc_live "$(cat "$HDFS_PIDFILE")" \
    && grep -qa "$HDFS_JVM_MARKER" "/proc/$(cat "$HDFS_PIDFILE")/cmdline" 2>/dev/null
}

# hdfs_datanode_url: where WebHDFS redirects send reads (from the running JVM's details).
hdfs_datanode_url() {
  local details host port
  details="$(cat "$HDFS_DETAILS" 2>/dev/null)" || return 1
  host="$(sed -n 's/.*"datanode_hostname":"\([^"]*\)".*/\1/p' <<<"$details")"
  port="$(sed -n 's/.*"datanode_http_port":\([0-9]*\).*/\1/p' <<<"$details")"
  [ -n "$host" ] && [ -n "$port" ] && echo "http://$host:$port"
}

# hdfs_running: our minicluster JVM is alive and serving WebHDFS.
hdfs_running() { hdfs_pid_alive && webhdfs_ok; }

# hdfs_stop: stop our JVM (TERM, then KILL after 10 s). Caller holds $HDFS_HOME/lock.
hdfs_stop() {
  if ! hdfs_pid_alive; then rm -f "$HDFS_PIDFILE"; return 0; fi
  local pid _
  pid="$(cat "$HDFS_PIDFILE")"
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 40); do proc_live "$pid" || break; sleep 0.25; done
  if proc_live "$pid"; then
    log "hdfs: pid $pid ignored SIGTERM for 10s, sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    for _ in $(seq 1 40); do proc_live "$pid" || break; sleep 0.25; done
  fi
  proc_live "$pid" && return 1
  rm -f "$HDFS_PIDFILE"
  log "hdfs: stopped (pid $pid)"
}
