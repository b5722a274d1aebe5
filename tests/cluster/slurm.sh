#!/usr/bin/env bash
# A real single-node SLURM on this machine, for the cluster test (tests/test_cluster.py).
#
#   tests/cluster/slurm.sh start    install (when missing), configure and start; waits until the node is idle
#   tests/cluster/slurm.sh status   exit 0 when the cluster answers and its node is usable
#   tests/cluster/slurm.sh stop     cancel its jobs, stop the daemons this script started
#   tests/cluster/slurm.sh controller-down | controller-up
#                                   stop slurmctld alone / start it again, its state (jobs) kept: an outage
#
# Debian's packages (slurm-wlm, munge; SLURM 22.05 on Debian 12), installed with apt-get when
# missing. Root is required. Partitions: `cpu` (default) and `gpu`, both on this host, whose
# node advertises one fake GPU through gres (File=/dev/null): jobs asking for --gpus=1 are
# scheduled and accounted for as GPU jobs, while the software in them sees no CUDA device.
# No accounting database: Snakemake's executor polls squeue, so finished jobs stay visible
# to squeue/scontrol for MinJobAge (an hour). Start and stop are idempotent.
#
# The configuration is written to /etc/slurm (where job steps look for it); a slurm.conf there
# that this script did not write is never overwritten. Daemon state and logs live under
# $REPRSIM_SLURM_DIR (default /var/lib/reprsim-slurm).
set -euo pipefail

state=${REPRSIM_SLURM_DIR:-/var/lib/reprsim-slurm}
conf_dir=/etc/slurm
conf=$conf_dir/slurm.conf
marker="# written by reprsim tests/cluster/slurm.sh"
host=$(hostname -s)

say() { echo "slurm.sh: $*" >&2; }
die() { say "$*"; exit 1; }

running() {  # pid file -> is that process alive?
    [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null
}

install_packages() {
    if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v sbatch >/dev/null \
        && command -v munged >/dev/null; then
        return
    fi
    command -v apt-get >/dev/null || die "SLURM is not installed and apt-get is not available to install it"
    say "installing slurm-wlm and munge with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null || die "apt-get update failed"
    apt-get install -y -q --no-install-recommends slurm-wlm munge >/dev/null \
        || die "apt-get install slurm-wlm munge failed"
}

write_config() {
    if [ -f "$conf" ] && ! grep -qF "$marker" "$conf"; then
        die "$conf exists and was not written by this script; refusing to overwrite a real SLURM configuration"
    fi
    mkdir -p "$conf_dir" "$state/slurmctld" "$state/slurmd" "$state/log"
    # The node as slurmd sees the hardware (CPUs, sockets, cores, memory), plus the fake GPU.
    local hardware
    hardware=$(slurmd -C | head -n 1 | sed -e "s/^NodeName=[^ ]*//")
    [ -n "$hardware" ] || die "slurmd -C could not describe this machine"
    cat > "$conf.tmp" <<EOF
$marker (single-node test cluster; stop it with: tests/cluster/slurm.sh stop)
ClusterName=reprsim-test
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$state/slurmctld
SlurmdSpoolDir=$state/slurmd
SlurmctldPidFile=$state/slurmctld.pid
SlurmdPidFile=$state/slurmd.pid
SlurmctldLogFile=$state/log/slurmctld.log
SlurmdLogFile=$state/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
GresTypes=gpu
AccountingStorageType=accounting_storage/none
# Memory is enforced by polling (no cgroups in a container): every second each job's processes'
# RSS is summed, and a job above its --mem is killed (OUT_OF_MEMORY), as on a cluster that enforces it.
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=1
JobAcctGatherParams=OverMemoryKill
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/backfill
ReturnToService=2
# A job on a node that fails is not requeued by SLURM itself (its default, JobRequeue=1, requeues it after
# two minutes, unseen by Snakemake): the executor sees NODE_FAIL and the profile's retries resubmit it.
JobRequeue=0
# Finished jobs stay in slurmctld's memory for an hour: squeue-based status checks and
# scontrol show job (partition, GPUs allocated) see them without an accounting database.
MinJobAge=3600
KillWait=5
InactiveLimit=0
NodeName=$host NodeAddr=127.0.0.1$hardware Gres=gpu:1 State=UNKNOWN
PartitionName=cpu Nodes=$host Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=$host Default=NO MaxTime=INFINITE State=UP
EOF
    mv "$conf.tmp" "$conf"
    cat > "$conf_dir/gres.conf" <<EOF
$marker
AutoDetect=off
NodeName=$host Name=gpu File=/dev/null
EOF
}

start_munge() {
    if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
        return
    fi
    if [ ! -s /etc/munge/munge.key ]; then
        mungekey --create --keyfile /etc/munge/munge.key 2>/dev/null \
            || dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
        chown munge:munge /etc/munge/munge.key
        chmod 0400 /etc/munge/munge.key
    fi
    install -d -o munge -g munge -m 0755 /run/munge
    install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge
    runuser -u munge -- /usr/sbin/munged
    touch "$state/munged.started-here"
    for _ in $(seq 50); do
        munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && return
        sleep 0.2
    done
    die "munged did not start"
}

node_state() {
    sinfo -h -N -n "$host" -o "%t" 2>/dev/null | head -n 1
}

wait_idle() {
    local node=""
    for _ in $(seq 120); do
        node=$(node_state)
        case "$node" in
            idle|mix|alloc) return 0 ;;
            drain*|down*|inval) scontrol update nodename="$host" state=resume 2>/dev/null || true ;;
        esac
        sleep 0.5
    done
    say "node $host did not become idle (state: ${node:-no answer}); logs in $state/log"
    tail -n 20 "$state/log/slurmctld.log" "$state/log/slurmd.log" >&2 2>/dev/null || true
    return 1
}

cmd_start() {
    [ "$(id -u)" = 0 ] || die "root is required to start SLURM"
    install_packages
    if running "$state/slurmctld.pid" && running "$state/slurmd.pid"; then
        wait_idle && { say "already running"; return 0; }
    fi
    cmd_stop quiet
    write_config
    start_munge
    rm -rf "${state:?}/slurmctld/"* "${state:?}/slurmd/"*
    /usr/sbin/slurmctld -c || die "slurmctld failed to start; see $state/log/slurmctld.log"
    for _ in $(seq 60); do scontrol ping >/dev/null 2>&1 && break; sleep 0.5; done
    scontrol ping >/dev/null 2>&1 || die "slurmctld does not answer; see $state/log/slurmctld.log"
    /usr/sbin/slurmd || die "slurmd failed to start; see $state/log/slurmd.log"
    wait_idle || die "the node never became usable"
    sinfo >&2
}

cmd_status() {
    running "$state/slurmctld.pid" || { say "slurmctld is not running"; return 1; }
    running "$state/slurmd.pid" || { say "slurmd is not running"; return 1; }
    local node
    node=$(node_state)
    case "$node" in
        idle|mix|alloc) sinfo; return 0 ;;
        *) say "node $host is ${node:-not answering}"; return 1 ;;
    esac
}

stop_pid() {  # pid file, name
    local pidfile=$1 pid
    running "$pidfile" || { rm -f "$pidfile"; return 0; }
    pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
    rm -f "$pidfile"
}

cmd_stop() {
    if running "$state/slurmctld.pid"; then
        local jobs
        jobs=$(squeue -h -o %i 2>/dev/null || true)
        [ -z "$jobs" ] || scancel $jobs 2>/dev/null || true
    fi
    stop_pid "$state/slurmd.pid"
    stop_pid "$state/slurmctld.pid"
    if [ -f "$state/munged.started-here" ]; then
        stop_pid /run/munge/munged.pid
        rm -f "$state/munged.started-here"
    fi
    [ "${1:-}" = quiet ] || say "stopped"
}

controller_down() {
    running "$state/slurmctld.pid" || die "slurmctld is not running"
    stop_pid "$state/slurmctld.pid"
}

controller_up() {
    running "$state/slurmctld.pid" && return 0
    /usr/sbin/slurmctld || die "slurmctld failed to start; see $state/log/slurmctld.log"  # no -c: jobs kept
    for _ in $(seq 60); do scontrol ping >/dev/null 2>&1 && return 0; sleep 0.5; done
    die "slurmctld does not answer; see $state/log/slurmctld.log"
}

case "${1:-}" in
    start) cmd_start ;;
    controller-down) controller_down ;;
    controller-up) controller_up ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    *) echo "usage: $0 start|stop|status|controller-down|controller-up" >&2; exit 2 ;;
esac
