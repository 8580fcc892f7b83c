#!/usr/bin/env bash
# Stop what up.sh started: the two slurmd, slurmctld, slurmdbd, mariadb, munged.
# Only processes named in their own pid files are signalled. State (job ids,
# accounting database, munge key, packages) is kept; up.sh brings it all back.
set -uo pipefail
RUN=/run/slurm-local

say() { echo "slurm-down: $*"; }
# stop NAME:PIDFILE...: TERM them all at once, wait up to 15 s, then KILL
stop() {
  local item name f pid pids=()
  for item in "$@"; do
    name=${item%%:*} f=${item#*:}
    [ -s "$f" ] || continue
    pid=$(cat "$f" 2>/dev/null)
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
      say "stopping $name (pid $pid)"
      kill "$pid" 2>/dev/null && pids+=("$pid")
    fi
    rm -f "$f"
  done
  for _ in $(seq 150); do
    alive=()
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive+=("$pid"); done
    [ ${#alive[@]} -eq 0 ] && return 0
    sleep 0.1
  done
  say "still alive after TERM, sending KILL: ${alive[*]}"
  kill -9 "${alive[@]}" 2>/dev/null
  return 0
}

[ "$(id -u)" = 0 ] || { echo "slurm-down: must run as root" >&2; exit 1; }

stop "slurmd-n1:$RUN/slurmd-n1.pid" "slurmd-n2:$RUN/slurmd-n2.pid" "slurmctld:$RUN/slurmctld.pid"
stop "slurmdbd:$RUN/slurmdbd.pid"
# mariadb: a clean shutdown also ends its mysqld_safe wrapper
if command -v mysqladmin >/dev/null && mysqladmin --connect-timeout=2 ping >/dev/null 2>&1; then
  say "stopping mariadb"
  mysqladmin shutdown >/dev/null 2>&1 || stop "mariadb:/run/mysqld/mysqld.pid"
fi
stop "mariadb:/run/mysqld/mysqld.pid"
stop "munged:/run/munge/munged.pid"
say "done"
