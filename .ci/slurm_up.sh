#!/usr/bin/env bash
# Start a single-node SLURM cluster with accounting (slurmdbd + MariaDB) on this machine, so that
# `snakemake --executor slurm` and tests/test_slurm.py run against a real sbatch/sacct.
#
# Target: Debian 12, run as root, no systemd (CI containers). Installs the Debian packages when
# missing (apt-get update only when the package lists lack them or are stale). Idempotent: a
# cluster that already answers (sinfo says idle/mix/alloc, sacctmgr lists a cluster and, for this
# script's own cluster, all five daemons are alive by their pid files) is left alone; otherwise
# only the daemons that are not running are started.
#
# Every file except /etc/slurm/slurm.conf and /etc/slurm/slurmdbd.conf (symlinks: SLURM looks only
# there inside jobs) lives in the scratch folder $TRAINTIME_SLURM_DIR (default /tmp/traintime-slurm).
# Stop with .ci/slurm_down.sh (add --purge to delete the scratch folder and the symlinks).
#
# Test cluster layout: one node (this host) in three partitions, debug (default) and cpu for CPU
# jobs, gpu for GPU jobs. The node advertises $TRAINTIME_SLURM_FAKE_GPUS (default 1) GRES of type
# gpu:$TRAINTIME_SLURM_GPU_TYPE (default "testgpu"), backed by empty stand-in files in the scratch
# folder (SLURM drops GPUs without a File=), so that GPU submissions (--gpus=1, --gpus=testgpu:1)
# are scheduled and accounted (sacct AllocTRES gres/gpu=1); no real device is bound to those jobs.
set -euo pipefail

SCRATCH=${TRAINTIME_SLURM_DIR:-/tmp/traintime-slurm}
CLUSTER=${TRAINTIME_SLURM_CLUSTER:-traintime}
DB_PORT=${TRAINTIME_SLURM_DB_PORT:-13306}
GPU_TYPE=${TRAINTIME_SLURM_GPU_TYPE:-testgpu}
FAKE_GPUS=${TRAINTIME_SLURM_FAKE_GPUS:-1}
WAIT_S=${TRAINTIME_SLURM_WAIT_S:-60}
PACKAGES=(slurmctld slurmd slurm-client munge slurmdbd mariadb-server-core mariadb-client-core)

log() { echo "slurm_up: $*" >&2; }
die() { echo "slurm_up: error: $*" >&2; exit 1; }

running() { # pid file -> 0 when its process is alive
    [[ -s "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null
}

wait_for() { # description, command...: retry the command every 0.5 s for WAIT_S seconds
    local what=$1; shift
    local deadline=$((SECONDS + WAIT_S))
    until "$@" >/dev/null 2>&1; do
        if ((SECONDS >= deadline)); then
            die "timed out after ${WAIT_S}s waiting for $what (logs: $SCRATCH/log)"
        fi
        sleep 0.5
    done
}

node_up() { sinfo -h -o %t 2>/dev/null | grep -Eq '^(idle|mix|alloc)'; }
cluster_registered() { sacctmgr -n -P show cluster format=cluster 2>/dev/null | grep -qx "$CLUSTER"; }
dbd_answers() { sacctmgr -n show cluster >/dev/null 2>&1; }

ours_all_running() { # when this script's cluster exists, all five daemons must be alive
    [[ -e $SCRATCH/etc/slurm.conf ]] || return 0
    local f
    for f in munge/munged.pid mysql/run/mariadbd.pid run/slurmdbd.pid run/slurmctld.pid run/slurmd.pid; do
        running "$SCRATCH/$f" || return 1
    done
}

if command -v sinfo >/dev/null && [[ -e /etc/slurm/slurm.conf ]] && ours_all_running && node_up \
        && sacctmgr -n -P show cluster format=cluster 2>/dev/null | grep -q .; then
    log "a SLURM cluster already answers (sinfo: $(sinfo -h -o %t | head -1)); nothing to do"
    exit 0
fi

[[ $(id -u) -eq 0 ]] || die "must run as root (it installs packages and starts daemons)"
mkdir -p "$SCRATCH/log"

# ---------------------------------------------------------------------------------- packages
missing=()
for bin in slurmctld slurmd sbatch sacct munged slurmdbd mariadbd mariadb-install-db; do
    command -v "$bin" >/dev/null || missing+=("$bin")
done
if ((${#missing[@]})); then
    command -v apt-get >/dev/null || die "missing ${missing[*]} and no apt-get to install them"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-cache show "${PACKAGES[@]}" >/dev/null 2>&1; then
        log "apt-get update"
        apt-get update -qq
    fi
    log "installing ${PACKAGES[*]}"
    if ! apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" > "$SCRATCH/log/apt.log" 2>&1; then
        log "apt-get install failed (stale package lists?); apt-get update and retry"
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" > "$SCRATCH/log/apt.log" 2>&1 \
            || die "apt-get install ${PACKAGES[*]} failed (see $SCRATCH/log/apt.log)"
    fi
fi

# ---------------------------------------------------------------------------------- layout
HOST=$(hostname -s)
mkdir -p "$SCRATCH"/{log,run,state,spool,etc,munge,dev}
chmod 755 "$SCRATCH"
id mysql >/dev/null 2>&1 || useradd --system --user-group --no-create-home \
    --home-dir /nonexistent --shell /usr/sbin/nologin mysql
mkdir -p "$SCRATCH/mysql/data" "$SCRATCH/mysql/run"
chown -R mysql:mysql "$SCRATCH/mysql"
chown munge:munge "$SCRATCH/munge"
chmod 700 "$SCRATCH/munge"

# /etc/slurm/*.conf must be the real paths (jobs ignore SLURM_CONF); never clobber a real cluster's.
mkdir -p /etc/slurm
for f in slurm.conf slurmdbd.conf gres.conf; do
    dest=/etc/slurm/$f
    if [[ -e $dest || -L $dest ]] && [[ $(readlink "$dest" || true) != "$SCRATCH/etc/$f" ]]; then
        die "$dest exists and is not this script's symlink to $SCRATCH/etc/$f; refusing to replace it"
    fi
done

# ---------------------------------------------------------------------------------- munge
if [[ ! -s /etc/munge/munge.key ]]; then
    mkdir -p /etc/munge
    if command -v mungekey >/dev/null; then mungekey --create --keyfile=/etc/munge/munge.key
    else dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none; fi
fi
chown munge:munge /etc/munge/munge.key
chmod 600 /etc/munge/munge.key
mkdir -p /run/munge
chown munge:munge /run/munge
chmod 755 /run/munge
MUNGE_PID=$SCRATCH/munge/munged.pid
if ! running "$MUNGE_PID"; then
    log "starting munged"
    su -s /bin/sh munge -c "munged --pid-file=$MUNGE_PID --log-file=$SCRATCH/munge/munged.log \
        --seed-file=$SCRATCH/munge/munged.seed"
fi
wait_for "munge" sh -c 'munge -n | unmunge'

# ---------------------------------------------------------------------------------- MariaDB
DB_PASS_FILE=$SCRATCH/etc/db.pass
[[ -s $DB_PASS_FILE ]] || (umask 077; od -An -tx1 -N16 /dev/urandom | tr -d ' \n' > "$DB_PASS_FILE")
DB_PASS=$(cat "$DB_PASS_FILE")
MYSQL_PID=$SCRATCH/mysql/run/mariadbd.pid
MYSQL_SOCK=$SCRATCH/mysql/run/mariadbd.sock
if ! running "$MYSQL_PID"; then
    if [[ ! -d $SCRATCH/mysql/data/mysql ]]; then
        log "initialising the accounting database"
        mariadb-install-db --no-defaults --user=mysql --datadir="$SCRATCH/mysql/data" \
            --auth-root-authentication-method=socket --skip-test-db \
            > "$SCRATCH/log/mariadb-install-db.log" 2>&1 \
            || die "mariadb-install-db failed (see $SCRATCH/log/mariadb-install-db.log)"
    fi
    (umask 077; cat > "$SCRATCH/mysql/run/init.sql" <<EOF
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$DB_PASS';
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$DB_PASS';
ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$DB_PASS';
ALTER USER 'slurm'@'localhost' IDENTIFIED BY '$DB_PASS';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
EOF
    )
    chown mysql:mysql "$SCRATCH/mysql/run/init.sql"
    log "starting mariadbd on 127.0.0.1:$DB_PORT"
    setsid mariadbd --no-defaults --user=mysql --datadir="$SCRATCH/mysql/data" \
        --socket="$MYSQL_SOCK" --pid-file="$MYSQL_PID" --log-error="$SCRATCH/mysql/run/error.log" \
        --bind-address=127.0.0.1 --port="$DB_PORT" --skip-name-resolve \
        --init-file="$SCRATCH/mysql/run/init.sql" --innodb-buffer-pool-size=64M \
        < /dev/null > /dev/null 2>&1 &
fi
wait_for "MariaDB" mariadb --no-defaults -h 127.0.0.1 -P "$DB_PORT" -u slurm -p"$DB_PASS" \
    -e 'SELECT 1'

# ---------------------------------------------------------------------------------- configs
NODE_LINE=$(slurmd -C | head -1)
[[ $NODE_LINE == NodeName=* ]] || die "slurmd -C printed no NodeName line: $NODE_LINE"
GRES=""
if ((FAKE_GPUS > 0)); then GRES="Gres=gpu:$GPU_TYPE:$FAKE_GPUS"; fi

cat > "$SCRATCH/etc/slurm.conf.new" <<EOF
# Written by .ci/slurm_up.sh: a single-node test cluster (scratch folder $SCRATCH).
ClusterName=$CLUSTER
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CryptoType=crypto/munge
StateSaveLocation=$SCRATCH/state
SlurmdSpoolDir=$SCRATCH/spool
SlurmctldPidFile=$SCRATCH/run/slurmctld.pid
SlurmdPidFile=$SCRATCH/run/slurmd.pid
SlurmctldLogFile=$SCRATCH/log/slurmctld.log
SlurmdLogFile=$SCRATCH/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=500
ReturnToService=2
MpiDefault=none
MinJobAge=600
SchedulerType=sched/backfill
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoreFlags=job_comment
AccountingStorageTRES=gres/gpu
GresTypes=gpu
$NODE_LINE NodeAddr=127.0.0.1 $GRES State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
PartitionName=cpu Nodes=$HOST MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=$HOST MaxTime=INFINITE State=UP
EOF
if ((FAKE_GPUS > 0)); then
    # SLURM drops GPUs without a device file; empty stand-in files (no device is bound: task/none).
    : > "$SCRATCH/etc/gres.conf"
    for ((i = 0; i < FAKE_GPUS; i++)); do
        : > "$SCRATCH/dev/fakegpu$i"
        echo "NodeName=$HOST Name=gpu Type=$GPU_TYPE File=$SCRATCH/dev/fakegpu$i" >> "$SCRATCH/etc/gres.conf"
    done
else
    : > "$SCRATCH/etc/gres.conf"
fi
mv "$SCRATCH/etc/slurm.conf.new" "$SCRATCH/etc/slurm.conf"
(umask 077; cat > "$SCRATCH/etc/slurmdbd.conf" <<EOF
# Written by .ci/slurm_up.sh
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
PidFile=$SCRATCH/run/slurmdbd.pid
LogFile=$SCRATCH/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=$DB_PASS
StorageLoc=slurm_acct_db
EOF
)
chmod 644 "$SCRATCH/etc/slurm.conf" "$SCRATCH/etc/gres.conf"
for f in slurm.conf slurmdbd.conf gres.conf; do ln -sfn "$SCRATCH/etc/$f" "/etc/slurm/$f"; done

# ---------------------------------------------------------------------------------- daemons
if ! running "$SCRATCH/run/slurmdbd.pid"; then
    log "starting slurmdbd"
    slurmdbd
fi
wait_for "slurmdbd (sacctmgr show cluster)" dbd_answers

if ! running "$SCRATCH/run/slurmctld.pid"; then
    log "starting slurmctld"
    slurmctld
fi
wait_for "slurmctld (squeue)" squeue -h

if ! running "$SCRATCH/run/slurmd.pid"; then
    log "starting slurmd"
    slurmd
fi
node_ready() { # a node drained by an earlier run (state is kept in $SCRATCH/state) is resumed
    node_up && return 0
    if sinfo -h -o %t 2>/dev/null | grep -Eq '^(drain|drng|down|inval)'; then
        scontrol update NodeName="$HOST" State=RESUME >/dev/null 2>&1 || true
    fi
    return 1
}
wait_for "the node to be idle (sinfo)" node_ready
wait_for "cluster $CLUSTER in the accounting database (sacctmgr)" cluster_registered
log "cluster $CLUSTER is up: node $HOST $(sinfo -h -o %t | head -1), partitions $(sinfo -h -o %P | tr '\n' ' ')"
