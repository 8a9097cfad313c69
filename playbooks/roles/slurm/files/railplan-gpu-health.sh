#!/bin/bash
# GPU health check, installed by railplan's slurm role as slurm.conf's Prolog and Epilog.
# slurmd runs it as root before and after every job on the node. When nvidia-smi cannot read
# every GPU (a GPU off the bus, a hung driver), the node drains itself
# with the reason, so no next job lands on it; an operator resumes it after the repair.
set -u

TIMEOUT_S=60
node="${SLURMD_NODENAME:-$(hostname -s)}"
context="${SLURM_SCRIPT_CONTEXT:-manual}"

drain() {
    local reason="railplan gpu health (${context}): $1"
    logger -t railplan-gpu-health "${node}: ${reason}"
    # A failed drain is reported through the exit code: Slurm drains on a failing script too.
    scontrol update NodeName="${node}" State=DRAIN Reason="${reason:0:200}" || exit 1
    exit 0
}

if ! command -v nvidia-smi >/dev/null 2>&1; then
    drain "nvidia-smi not found"
fi
if ! out="$(timeout "${TIMEOUT_S}" nvidia-smi --query-gpu=index,pci.bus_id --format=csv,noheader 2>&1)"; then
    drain "nvidia-smi failed: ${out//$'\n'/ }"
fi
exit 0
