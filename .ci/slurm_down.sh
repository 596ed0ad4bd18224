#!/usr/bin/env bash
# Stop the single-node SLURM cluster started by .ci/slurm_up.sh: slurmd, slurmctld, slurmdbd,
# mariadbd, munged, in that order, each by its pid file, waiting for each to exit (stopping slurmdbd
# before slurmctld makes slurmctld slow to exit). Daemons that are not running are skipped.
#
#   .ci/slurm_down.sh           stop; keep $TRAINTIME_SLURM_DIR (logs, job accounting) for a restart
#   .ci/slurm_down.sh --purge   stop, then delete the scratch folder and the /etc/slurm symlinks
set -euo pipefail

SCRATCH=${TRAINTIME_SLURM_DIR:-/tmp/traintime-slurm}
WAIT_S=${TRAINTIME_SLURM_WAIT_S:-30}
PURGE=0
for arg in "$@"; do
    case $arg in
        --purge) PURGE=1 ;;
        *) echo "usage: $0 [--purge]" >&2; exit 2 ;;
    esac
done

log() { echo "slurm_down: $*" >&2; }

stop() { # name, pid file: SIGTERM, wait up to WAIT_S, then SIGKILL
    local name=$1 pidfile=$2 pid
    [[ -s $pidfile ]] || { log "$name: no pid file ($pidfile), not running"; return 0; }
    pid=$(cat "$pidfile")
    if ! kill -0 "$pid" 2>/dev/null; then
        log "$name: not running (stale pid $pid)"; rm -f "$pidfile"; return 0
    fi
    kill -TERM "$pid"
    local deadline=$((SECONDS + WAIT_S))
    while kill -0 "$pid" 2>/dev/null; do
        if ((SECONDS >= deadline)); then
            log "$name (pid $pid) ignored SIGTERM for ${WAIT_S}s; sending SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            break
        fi
        sleep 0.2
    done
    rm -f "$pidfile"
    log "$name stopped (pid $pid)"
}

stop slurmd "$SCRATCH/run/slurmd.pid"
stop slurmctld "$SCRATCH/run/slurmctld.pid"
stop slurmdbd "$SCRATCH/run/slurmdbd.pid"
stop mariadbd "$SCRATCH/mysql/run/mariadbd.pid"
stop munged "$SCRATCH/munge/munged.pid"

if ((PURGE)); then
    for f in slurm.conf slurmdbd.conf gres.conf; do
        if [[ -L /etc/slurm/$f && $(readlink "/etc/slurm/$f") == "$SCRATCH/etc/$f" ]]; then
            rm -f "/etc/slurm/$f"
        fi
    done
    case $SCRATCH in
        /|"") log "refusing to delete scratch folder '$SCRATCH'" ;;
        *) rm -rf "$SCRATCH"; log "removed $SCRATCH" ;;
    esac
fi
