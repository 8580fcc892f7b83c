#!/usr/bin/env bash
# Stop what up.sh started: the two slurmd, slurmctld, slurmdbd, mariadb, munged.
# Only processes named in their own pid files are signalled. State (job ids,
# accounting database, munge key, packages) is kept; up.sh brings it all back.
set -uo pipefail
RUN=/run/slurm-local

say() { echo "slurm-down: $*"; }
# stop NAME PIDFILE: TERM, wait up to 10 s, then KILL
stop() {
  local name=$1 f=$2 pid
  [ -s "$f" ] || return 0
  pid=$(cat "$f" 2>/dev/null)
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    say "stopping $name (pid $pid)"
    kill "$pid" 2>/dev/null
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      say "$name did not stop on TERM: KILL"
      kill -9 "$pid" 2>/dev/null
    fi
  fi
  rm -f "$f"
}

[ "$(id -u)" = 0 ] || { echo "slurm-down: must run as root" >&2; exit 1; }

stop slurmd-n1 "$RUN/slurmd-n1.pid"
stop slurmd-n2 "$RUN/slurmd-n2.pid"
stop slurmctld "$RUN/slurmctld.pid"
stop slurmdbd "$RUN/slurmdbd.pid"
# mariadb: a clean shutdown also ends its mysqld_safe wrapper
if command -v mysqladmin >/dev/null && mysqladmin --connect-timeout=2 ping >/dev/null 2>&1; then
  say "stopping mariadb"
  mysqladmin shutdown >/dev/null 2>&1 || stop mariadb /run/mysqld/mysqld.pid
fi
stop mariadb /run/mysqld/mysqld.pid
stop munged /run/munge/munged.pid
say "done"
