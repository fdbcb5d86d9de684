# HDFS devstack settings, sourced by up/down/status/env (after ../../_common.sh).
# A Hadoop MiniDFSCluster (one NameNode + one DataNode in one JVM) from Maven Central jars.
HADOOP_VERSION="${TFK8S_HADOOP_VERSION:-3.5.0}"
HDFS_HTTP_PORT="${TFK8S_HDFS_HTTP_PORT:-9870}"   # NameNode HTTP: WebHDFS at /webhdfs/v1
HDFS_RPC_PORT="${TFK8S_HDFS_RPC_PORT:-8020}"     # NameNode RPC (hdfs://127.0.0.1:8020)
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

# webhdfs_ok: the NameNode answers WebHDFS (any JSON FileStatus of /).
webhdfs_ok() {
  curl -sf --max-time 3 "$HDFS_URL/webhdfs/v1/?op=GETFILESTATUS&user.name=$HDFS_SUPERUSER" \
    | grep -q '"FileStatus"'
}

# hdfs_running: our minicluster JVM is alive and serving WebHDFS.
hdfs_running() { pid_alive "$HDFS_PIDFILE" && webhdfs_ok; }
