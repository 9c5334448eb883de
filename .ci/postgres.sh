#!/usr/bin/env bash
# Install (if needed) and start a PostgreSQL server on loopback with an empty test database.
set -euo pipefail
if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi
service postgresql start >/dev/null
for _ in $(seq 30); do su postgres -c "pg_isready -q" && break; sleep 1; done
su postgres -c "psql -qtc \"SELECT 1 FROM pg_roles WHERE rolname='autotune'\"" | grep -q 1 \
    || su postgres -c "psql -qc \"CREATE USER autotune PASSWORD 'autotune'\""
su postgres -c "dropdb --if-exists autotune_test" && su postgres -c "createdb -O autotune autotune_test"
