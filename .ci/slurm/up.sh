#!/usr/bin/env bash
# Bring up a real two-node Slurm cluster (n1, n2) on this one machine, from
# Debian's packages: munge + mariadb + slurmdbd + slurmctld + two slurmd.
# Idempotent: on a machine where it already ran it only checks that every
# daemon ANSWERS, (re)starts the ones that do not, and re-runs the smoke test.
# Needs root. See README.md beside this file. Stop it all with down.sh.
set -euo pipefail

T0=$(date +%s.%N)
CLUSTER=${SLURM_LOCAL_CLUSTER:-local}
CPUS_PER_NODE=${SLURM_LOCAL_CPUS:-4}  # > real cores on purpose: lets 2x4 ranks run
NODES=(n1 n2)
declare -A PORT=([n1]=17001 [n2]=17002)
LOG=/var/log/slurm-local
RUN=/run/slurm-local
SPOOL=/var/spool/slurm-local
ETC=/etc/slurm
DBPASS=slurm-local-pw
WAIT=${SLURM_LOCAL_WAIT:-60}

say() { echo "slurm-up: $*"; }
die() {
  echo "slurm-up: ERROR: $*" >&2
  echo "slurm-up: logs are in $LOG/ (last lines below)" >&2
  for f in "$LOG"/*.log; do
    [ -f "$f" ] || continue
    echo "---- $f" >&2
    tail -n 15 "$f" >&2 || true
  done
  exit 1
}
# start "$name" cmd...: detached from our stdout/stderr/stdin and session
start() {
  local name=$1
  shift
  say "starting $name"
  # from /: a daemon keeps its working directory, and one started inside a clone that is
  # later deleted makes every job step fail ("Unable to get current working directory")
  # (setsid -f: the daemon's parent exits at once, so nothing holds the caller's output open)
  (cd / && exec setsid -f "$@" >>"$LOG/$name.out" 2>&1 </dev/null)
}
# in_deleted_dir PIDFILE: the daemon's working directory no longer exists
in_deleted_dir() {
  local pid
  pid=$(cat "$1" 2>/dev/null || true)
  [ -n "$pid" ] && [[ "$(readlink "/proc/$pid/cwd" 2>/dev/null)" == *" (deleted)" ]]
}
# wait_for SECONDS what cmd...: poll cmd until it succeeds
wait_for() {
  local secs=$1 what=$2
  shift 2
  local end=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$end" ] || return 1
    sleep 0.3
  done
}
# kill the process of a pid file (TERM, then KILL), if it is alive
kill_pidfile() {
  local f=$1 pid
  [ -s "$f" ] || return 0
  pid=$(cat "$f" 2>/dev/null || true)
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

[ "$(id -u)" = 0 ] || die "must run as root"

# ---------------------------------------------------------------- packages
PKGS=(slurm-wlm slurmdbd mariadb-server munge)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # keep the packages' init scripts from starting daemons attached to our pipe
  made_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod +x /usr/sbin/policy-rc.d
    made_policy=1
  fi
  { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${PKGS[@]}"; } \
    </dev/null >/tmp/slurm-local-apt.log 2>&1 || {
    [ "$made_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
    tail -n 30 /tmp/slurm-local-apt.log >&2
    die "apt-get install failed (full log /tmp/slurm-local-apt.log)"
  }
  [ "$made_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
fi

mkdir -p "$LOG" "$RUN" "$SPOOL/ctld" "$ETC"
for n in "${NODES[@]}"; do mkdir -p "$SPOOL/d-$n"; done

# ------------------------------------------------------------------- munge
if [ ! -s /etc/munge/munge.key ]; then
  say "creating /etc/munge/munge.key"
  mkdir -p /etc/munge
  if command -v mungekey >/dev/null; then
    mungekey --create --keyfile=/etc/munge/munge.key --force
  else
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
  fi
fi
chown munge:munge /etc/munge /etc/munge/munge.key
chmod 0700 /etc/munge
chmod 0400 /etc/munge/munge.key
mkdir -p /run/munge /var/lib/munge /var/log/munge
chown munge:munge /run/munge /var/lib/munge /var/log/munge
chmod 0755 /run/munge
munge_ok() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }
if ! munge_ok; then
  kill_pidfile /run/munge/munged.pid
  rm -f /run/munge/munge.socket.2 /run/munge/munge.socket.2.lock
  start munged runuser -u munge -- /usr/sbin/munged --foreground
  wait_for 15 munge munge_ok || die "munged does not answer (munge -n | unmunge)"
fi

# ----------------------------------------------------------------- mariadb
db_ok() { mysqladmin --connect-timeout=2 ping >/dev/null 2>&1; }
if ! db_ok; then
  mkdir -p /run/mysqld
  chown mysql:mysql /run/mysqld
  if [ ! -d /var/lib/mysql/mysql ]; then
    say "initialising the mariadb data directory"
    mariadb-install-db --user=mysql --datadir=/var/lib/mysql >"$LOG/mariadb-install.log" 2>&1 ||
      die "mariadb-install-db failed"
  fi
  touch "$LOG/mariadb.log"
  chown mysql:mysql "$LOG/mariadb.log"  # mysqld_safe's helper writes it as mysql
  start mariadb mysqld_safe --user=mysql --skip-syslog --log-error="$LOG/mariadb.log" \
    --innodb-lock-wait-timeout=900
  wait_for 60 mariadb db_ok || die "mariadb does not answer (mysqladmin ping)"
fi
mysql -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
  CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$DBPASS';
  GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';" ||
  die "could not create the slurm database/user in mariadb"

# ------------------------------------------------------------ config files
# install_conf FILE MODE: move FILE.new into place if it differs; returns 0
# when it changed
install_conf() {
  local f=$1 mode=$2
  chmod "$mode" "$f.new"
  if [ -f "$f" ] && cmp -s "$f" "$f.new"; then
    rm -f "$f.new"
    return 1
  fi
  mv -f "$f.new" "$f"
  return 0
}

cat >"$ETC/slurmdbd.conf.new" <<EOF
# written by .ci/slurm/up.sh
AuthType=auth/munge
DbdHost=localhost
DbdPort=6819
SlurmUser=root
LogFile=$LOG/slurmdbd.log
PidFile=$RUN/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=$DBPASS
StorageLoc=slurm_acct_db
EOF
dbd_conf_changed=0
install_conf "$ETC/slurmdbd.conf" 600 && dbd_conf_changed=1

{
  cat <<EOF
# written by .ci/slurm/up.sh: two slurmd (n1, n2) on this one host
ClusterName=$CLUSTER
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
SlurmctldPort=6817
StateSaveLocation=$SPOOL/ctld
SlurmdSpoolDir=$SPOOL/d-%n
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd-%n.pid
SlurmctldLogFile=$LOG/slurmctld.log
SlurmdLogFile=$LOG/slurmd-%n.log
SlurmdParameters=config_overrides
MpiDefault=pmi2
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=6819
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30
JobCompType=jobcomp/none
MailProg=/bin/true
ReturnToService=2
SlurmdTimeout=60
InactiveLimit=0
KillWait=5
MinJobAge=300
EOF
  for n in "${NODES[@]}"; do
    echo "NodeName=$n NodeHostname=localhost NodeAddr=127.0.0.1 Port=${PORT[$n]} CPUs=$CPUS_PER_NODE RealMemory=4000 State=UNKNOWN"
  done
  echo "PartitionName=debug Nodes=$(IFS=,; echo "${NODES[*]}") Default=YES MaxTime=INFINITE OverSubscribe=NO State=UP"
} >"$ETC/slurm.conf.new"
slurm_conf_changed=0
install_conf "$ETC/slurm.conf" 644 && slurm_conf_changed=1

# ---------------------------------------------------------------- slurmdbd
dbd_ok() { timeout 10 sacctmgr -n -i show cluster >/dev/null 2>&1; }
if [ "$dbd_conf_changed" = 1 ] || ! dbd_ok || in_deleted_dir "$RUN/slurmdbd.pid"; then
  kill_pidfile "$RUN/slurmdbd.pid"
  start slurmdbd /usr/sbin/slurmdbd -D
  wait_for 30 slurmdbd dbd_ok || die "slurmdbd does not answer (sacctmgr show cluster)"
fi
if ! timeout 10 sacctmgr -n -P show cluster format=cluster | grep -qx "$CLUSTER"; then
  say "registering cluster $CLUSTER in slurmdbd"
  timeout 20 sacctmgr -i add cluster "$CLUSTER" >/dev/null || die "sacctmgr add cluster $CLUSTER failed"
fi

# --------------------------------------------------------------- slurmctld
ctld_ok() { timeout 10 scontrol ping 2>/dev/null | grep -q 'is UP'; }
if [ "$slurm_conf_changed" = 1 ] || ! ctld_ok || in_deleted_dir "$RUN/slurmctld.pid"; then
  kill_pidfile "$RUN/slurmctld.pid"
  start slurmctld /usr/sbin/slurmctld -D
  wait_for 30 slurmctld ctld_ok || die "slurmctld does not answer (scontrol ping)"
fi

# ------------------------------------------------------------------ slurmd
# a slurmd answers when its port accepts a connection
slurmd_ok() { timeout 3 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }
for n in "${NODES[@]}"; do
  if [ "$slurm_conf_changed" = 1 ] || ! slurmd_ok "${PORT[$n]}" \
      || in_deleted_dir "$RUN/slurmd-$n.pid"; then
    kill_pidfile "$RUN/slurmd-$n.pid"
    start "slurmd-$n" /usr/sbin/slurmd -D -N "$n"
  fi
done
for n in "${NODES[@]}"; do
  wait_for 30 "slurmd $n" slurmd_ok "${PORT[$n]}" || die "slurmd -N $n does not listen on port ${PORT[$n]}"
done

# ------------------------------------------------- nodes idle, then a job
nodes_idle() {
  local out
  out=$(sinfo -h -N -o '%N %t' 2>/dev/null | sort -u)
  [ "$(grep -c ' idle$' <<<"$out")" -eq ${#NODES[@]} ]
}
# jobs an earlier, interrupted run of the suite left on this cluster (it is the tests' own):
# they would hold the nodes the smoke job and the tests need
scancel --quiet --user "$(id -un)" 2>/dev/null || true
end=$((SECONDS + WAIT))
until nodes_idle; do
  # a node left drained/down by an earlier run: put it back in service
  bad=$(sinfo -h -N -o '%N %t' 2>/dev/null | awk '$2 ~ /drain|drng|down|fail/ {print $1}' | sort -u | paste -sd, -)
  [ -n "$bad" ] && scontrol update NodeName="$bad" State=RESUME >/dev/null 2>&1 || true
  if [ "$SECONDS" -ge "$end" ]; then
    sinfo -N -l >&2 || true
    die "nodes not idle after ${WAIT}s"
  fi
  sleep 0.5
done

out=$(timeout 60 srun -N 2 -n 2 --mpi=none hostname 2>&1) || die "srun -N 2 -n 2 hostname failed: $out"
[ "$(wc -l <<<"$out")" -eq 2 ] || die "srun -N 2 -n 2 hostname printed: $out"
# let the smoke job finish completing, so the caller's first job is not queued
wait_for 10 idle nodes_idle || true

dt=$(awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
echo "slurm-up: cluster '$CLUSTER' up in ${dt}s: $(sinfo -h -N -o '%N:%t' | sort -u | paste -sd' ' -), partition debug, $(sinfo -V), srun -N 2 ok"
