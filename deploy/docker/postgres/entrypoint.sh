#!/bin/sh
# Makes the cluster on first start, then runs PostgreSQL as PID 1 (fast
# shutdown on SIGINT, the image's STOPSIGNAL). Extra arguments go to postgres.
set -eu
: "${PGDATA:=/var/lib/postgresql/data}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  [ -n "${POSTGRES_PASSWORD:-}" ] || { echo "judge-postgres: set POSTGRES_PASSWORD" >&2; exit 1; }
  pw=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" >"$pw"
  initdb -D "$PGDATA" -U postgres -E UTF8 --locale=C.UTF-8 -A scram-sha-256 --pwfile="$pw" >/dev/null
  printf 'host all all all scram-sha-256\n' >>"$PGDATA/pg_hba.conf"
  pg_ctl -D "$PGDATA" -w -o "-c listen_addresses=''" start >/dev/null
  PGPASSWORD=$POSTGRES_PASSWORD psql -q -v ON_ERROR_STOP=1 -U postgres -d postgres <<SQL
CREATE ROLE judge LOGIN PASSWORD '$(printf '%s' "$POSTGRES_PASSWORD" | sed "s/'/''/g")';
CREATE DATABASE judge OWNER judge;
SQL
  pg_ctl -D "$PGDATA" -w -m fast stop >/dev/null
  rm -f "$pw"
  echo "judge-postgres: cluster made in $PGDATA" >&2
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' -c max_connections=200 "$@"
