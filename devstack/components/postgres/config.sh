# PostgreSQL for Airflow's scheduler + triggerer tests (backfills with LocalExecutor).
PG_HOME="$TFK8S_DEVSTACK_HOME/postgres"
PG_DATA="$PG_HOME/data"
PG_LOG="$PG_HOME/postgres.log"
PG_PORT="${TFK8S_POSTGRES_PORT:-15432}"
PG_USER=airflow
PG_DB=airflow
pg_bin() {
  local d
  for d in /usr/lib/postgresql/*/bin; do [ -x "$d/pg_ctl" ] && { echo "$d"; return 0; }; done
  return 1
}
as_postgres() { runuser -u postgres -- "$@"; }
pg_ready() { "$(pg_bin)/pg_isready" -h 127.0.0.1 -p "$PG_PORT" -q; }
