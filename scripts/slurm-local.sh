#!/usr/bin/env bash
# A one-node Slurm cluster on localhost, for the tests that drive the workflow through the
# real executor plugin (tests/test_slurm_local.py). Root only; Slurm is machine-wide
# (/etc/slurm, ports 6817/6818), so there is one such cluster per machine.
#
#   bash scripts/slurm-local.sh start    # install (Debian packages) if needed, start, wait until idle
#   bash scripts/slurm-local.sh stop     # cancel jobs, stop the daemons by their recorded PIDs
#   bash scripts/slurm-local.sh status   # exit 0 if the node answers
#
# Settings measured on this machine kind: ../shared/notes/slurm-local.md. No accounting
# database: sacct does not work, so Snakemake must use `--slurm-status-command squeue`, and
# MinJobAge keeps finished jobs visible to squeue (it must be >= 3x the plugin's
# --slurm-init-seconds-before-status-checks, or the plugin silently falls back to sacct).
set -euo pipefail

STATE=${SLURM_LOCAL_DIR:-/var/tmp/nudgerl-slurm}
CONF=/etc/slurm/slurm.conf
GRES_CONF=/etc/slurm/gres.conf
MARK="# written by nudgerl scripts/slurm-local.sh"
PARTITION=${SLURM_LOCAL_PARTITION:-local}
# Fake GPUs: the node advertises GPU GRES of this type (no devices behind them), so GPU
# requests (--gpus=N, --gpus=<type>:N) are accepted, scheduled and visible in
# `scontrol show job`, while the jobs themselves see no CUDA (the fail-fast path).
GPU_TYPE=${SLURM_LOCAL_GPU_TYPE:-fake}
GPU_COUNT=2
DAEMONS=(slurmd slurmctld munged)  # stop order: the node, the controller, then authentication

die() { echo "slurm-local: $*" >&2; exit 1; }
log() { echo "slurm-local: $*"; }

alive() {  # alive NAME: its recorded PID is a running process
    local f="$STATE/$1.pid"
    [ -s "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null
}

wait_for() {  # wait_for SECONDS COMMAND...: poll until the command succeeds
    local deadline=$((SECONDS + $1)); shift
    until "$@" >/dev/null 2>&1; do
        [ $SECONDS -lt $deadline ] || return 1
        sleep 0.2
    done
}

install_packages() {
    command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null \
        && command -v sbatch >/dev/null && return 0
    command -v apt-get >/dev/null || die "Slurm is not installed and there is no apt-get to install it"
    log "installing slurmctld slurmd slurm-client munge (Debian packages)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        slurmctld slurmd slurm-client munge >/dev/null
}

write_conf() {
    local f
    for f in "$CONF" "$GRES_CONF"; do
        if [ -e "$f" ] && ! grep -qF "$MARK" "$f"; then
            die "$f exists and was not written by this script; refusing to replace another cluster's configuration"
        fi
    done
    local host cpus mem
    host=$(hostname -s)
    cpus=$(nproc)
    mem=$(awk '/MemTotal/ {printf "%d", $2 / 1024 * 0.85}' /proc/meminfo)  # leave the OS ~15 %
    mkdir -p /etc/slurm "$STATE/ctld" "$STATE/d"
    # The config must live at /etc/slurm/slurm.conf: the jobstep plugin strips SLURM_* variables
    # (SLURM_CONF included) before the srun inside each job.
    cat >"$CONF" <<EOF
$MARK
ClusterName=nudgerl-local
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/d
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/slurmctld.log
SlurmdLogFile=$STATE/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
MinJobAge=600
GresTypes=gpu
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem Gres=gpu:$GPU_TYPE:$GPU_COUNT State=UNKNOWN
PartitionName=$PARTITION Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
    # Slurm 22.05 drops a GPU GRES without File= ("Removing file-less GPU ... from final GRES
    # list": the node then registers 0 GPUs and is set INVAL), and a regular file is rejected ("not
    # a valid character or block device"). So each fake GPU is a character device: a copy of
    # /dev/null (1,3), harmless if opened; nothing restricts device access here (task/none). The
    # file's trailing number is the GPU's index: jobs get CUDA_VISIBLE_DEVICES=0 (or 0,1) and
    # yet find no CUDA, as on a node whose driver does not match the installed torch.
    local i
    for ((i = 0; i < GPU_COUNT; i++)); do
        [ -c "$STATE/gpu$i" ] || mknod -m 0666 "$STATE/gpu$i" c 1 3 \
            || die "cannot create the fake GPU device $STATE/gpu$i (mknod needs CAP_MKNOD)"
    done
    cat >"$GRES_CONF" <<EOF
$MARK
NodeName=$host Name=gpu Type=$GPU_TYPE File=$STATE/gpu[0-$((GPU_COUNT - 1))]
EOF
}

start_munge() {
    if munge -n >/dev/null 2>&1; then
        log "munged already running (not started here: left alone on stop)"
        return 0
    fi
    install -d -o munge -g munge -m 0755 /run/munge
    [ -s /etc/munge/munge.key ] || die "/etc/munge/munge.key is missing (the munge package creates it)"
    runuser -u munge -- /usr/sbin/munged
    wait_for 10 munge -n || die "munged did not come up"
    cp /run/munge/munged.pid "$STATE/munged.pid"
}

start() {
    [ "$(id -u)" = 0 ] || die "must run as root (Slurm's daemons and /etc/slurm are machine-wide)"
    if alive slurmctld && alive slurmd; then
        log "already running"
        return 0
    fi
    install_packages
    write_conf
    start_munge
    # Daemon mode: each writes its PID file (paths in slurm.conf), which stop reads.
    slurmctld
    slurmd
    # A drain is kept in StateSaveLocation across restarts: one set under an earlier configuration
    # (e.g. "gres/gpu count reported lower than configured") would keep the node from ever
    # running a job. Resume it once; a configuration that is still wrong drains it again at the
    # node's registration, and the wait below fails with the logs to read.
    wait_for 30 sh -c "sinfo -h -o %T | grep -qx -e idle -e 'drain.*'" || true
    if sinfo -h -o %T | grep -qx 'drain.*'; then
        log "node $(hostname -s) was drained ($(sinfo -h -o %E)); resuming it"
        scontrol update NodeName="$(hostname -s)" State=RESUME
    fi
    wait_for 30 sh -c "sinfo -h -o %T | grep -qx idle" \
        || die "the node did not become idle; logs: $STATE/slurmctld.log $STATE/slurmd.log"
    log "cluster up: partition '$PARTITION', node $(hostname -s) ($(nproc) CPUs, $GPU_COUNT fake GPUs of type '$GPU_TYPE'); state in $STATE"
}

stop() {
    # slurmstepd (a job's step daemon) outlives slurmd: cancel the jobs first.
    if alive slurmctld; then
        scancel --user=root 2>/dev/null || true
        wait_for 15 sh -c '[ -z "$(squeue -h -t running,pending,completing -o %i)" ]' || true
    fi
    local name pid
    for name in "${DAEMONS[@]}"; do
        alive "$name" || { rm -f "$STATE/$name.pid"; continue; }
        pid=$(cat "$STATE/$name.pid")
        kill -TERM "$pid"
        if ! wait_for 10 sh -c "! kill -0 $pid"; then
            log "$name ($pid) ignored SIGTERM; killing it"
            kill -KILL "$pid" 2>/dev/null || true
        fi
        rm -f "$STATE/$name.pid"
        log "stopped $name ($pid)"
    done
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status) sinfo -h -o "%P %T %c %m" ;;
    *) die "usage: $0 start|stop|status" ;;
esac
