# Secure (Kerberos) HDFS devstack settings, sourced by up/down/status/env (after ../../_common.sh).
# A KDC (Hadoop's MiniKdc) and a Kerberized MiniDFSCluster in one JVM, beside the insecure
# ../hdfs (other ports, its own data and state directory; the same Hadoop jars' version).
# Knobs (environment): TFK8S_HADOOP_VERSION (3.5.0), TFK8S_HDFS_SECURE_HTTP_PORT (9880),
# TFK8S_HDFS_SECURE_RPC_PORT (8022), TFK8S_HDFS_SECURE_DATANODE_HTTP_PORT (9884),
# TFK8S_KDC_PORT (16088), TFK8S_HDFS_BIND_HOST (0.0.0.0), TFK8S_HDFS_DATANODE_HOST (this
# machine's host name), TFK8S_HDFS_USER (tfk8s), TFK8S_HDFS_START_TIMEOUT (120 s), TFK8S_JAVA.
SHDFS_HADOOP_VERSION="${TFK8S_HADOOP_VERSION:-3.5.0}"
SHDFS_HTTP_PORT="${TFK8S_HDFS_SECURE_HTTP_PORT:-9880}"   # NameNode HTTP: WebHDFS with SPNEGO
SHDFS_RPC_PORT="${TFK8S_HDFS_SECURE_RPC_PORT:-8022}"     # NameNode RPC, loopback only
SHDFS_DN_HTTP_PORT="${TFK8S_HDFS_SECURE_DATANODE_HTTP_PORT:-9884}"
SHDFS_KDC_PORT="${TFK8S_KDC_PORT:-16088}"                 # the KDC, TCP on 127.0.0.1
SHDFS_REALM=EXAMPLE.COM
# As ../hdfs: HTTP on 0.0.0.0 (loopback and the real node's bridge), redirects by host name.
SHDFS_BIND_HOST="${TFK8S_HDFS_BIND_HOST:-0.0.0.0}"
if [ -n "${TFK8S_HDFS_DATANODE_HOST:-}" ]; then
  SHDFS_HOST="$TFK8S_HDFS_DATANODE_HOST"
elif [ "$SHDFS_BIND_HOST" = 0.0.0.0 ]; then
  SHDFS_HOST="$(hostname)"
else
  SHDFS_HOST="$SHDFS_BIND_HOST"
fi
SHDFS_USER="${TFK8S_HDFS_USER:-tfk8s}"
# Clients name the NameNode by host name: SPNEGO asks for HTTP/<that name>@EXAMPLE.COM.
SHDFS_URL="http://$SHDFS_HOST:${SHDFS_HTTP_PORT}"
SHDFS_JARS="$TFK8S_CACHE/hadoop-$SHDFS_HADOOP_VERSION/secure-lib"
SHDFS_HOME="$TFK8S_DEVSTACK_HOME/hdfs-secure"
SHDFS_DATA="$SHDFS_HOME/data"
SHDFS_PIDFILE="$SHDFS_HOME/minicluster.pid"
SHDFS_LOG="$SHDFS_HOME/minicluster.log"
SHDFS_DETAILS="$SHDFS_HOME/details.json"
SHDFS_KRB5_CONF="$SHDFS_HOME/krb5.conf"
SHDFS_USER_KEYTAB="$SHDFS_HOME/$SHDFS_USER.keytab"
SHDFS_SERVICE_KEYTAB="$SHDFS_HOME/hdfs.keytab"
SHDFS_START_TIMEOUT="${TFK8S_HDFS_START_TIMEOUT:-120}"
SHDFS_JVM_MARKER=SecureHdfsMiniCluster

# shdfs_webhdfs_ok: the NameNode answers WebHDFS and asks for SPNEGO (401 Negotiate).
shdfs_webhdfs_ok() {
  local out
  out="$(curl -s -i --max-time 3 "http://127.0.0.1:$SHDFS_HTTP_PORT/webhdfs/v1/?op=GETFILESTATUS" 2>/dev/null)" \
    && [[ "$out" == *"HTTP/1.1 401"* ]] && [[ "$out" == *"WWW-Authenticate: Negotiate"* ]]
}

shdfs_proc_live() {
  kill -0 "$1" 2>/dev/null || return 1
  [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]
}
shdfs_pid_alive() {
  [ -f "$SHDFS_PIDFILE" ] && shdfs_proc_live "$(cat "$SHDFS_PIDFILE")" \
    && grep -qa "$SHDFS_JVM_MARKER" "/proc/$(cat "$SHDFS_PIDFILE")/cmdline" 2>/dev/null
}
shdfs_datanode_url() {
  local details host port
  details="$(cat "$SHDFS_DETAILS" 2>/dev/null)" || return 1
  host="$(sed -n 's/.*"datanode_hostname":"\([^"]*\)".*/\1/p' <<<"$details")"
  port="$(sed -n 's/.*"datanode_http_port":\([0-9]*\).*/\1/p' <<<"$details")"
  [ -n "$host" ] && [ -n "$port" ] && echo "http://$host:$port"
}
shdfs_running() { shdfs_pid_alive && [ -s "$SHDFS_DETAILS" ] && shdfs_webhdfs_ok; }

# shdfs_stop: stop our JVM (TERM, then KILL after 10 s). Caller holds $SHDFS_HOME/lock.
shdfs_stop() {
  if ! shdfs_pid_alive; then rm -f "$SHDFS_PIDFILE"; return 0; fi
  local pid _
  pid="$(cat "$SHDFS_PIDFILE")"
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 40); do shdfs_proc_live "$pid" || break; sleep 0.25; done
  if shdfs_proc_live "$pid"; then
    log "hdfs-secure: pid $pid ignored SIGTERM for 10s, sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    for _ in $(seq 1 40); do shdfs_proc_live "$pid" || break; sleep 0.25; done
  fi
  shdfs_proc_live "$pid" && return 1
  rm -f "$SHDFS_PIDFILE"
  log "hdfs-secure: stopped (pid $pid)"
}
