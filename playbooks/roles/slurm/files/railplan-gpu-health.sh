#!/bin/bash
# GPU health check, installed by railplan's slurm role as slurm.conf's Prolog and Epilog.
# slurmd runs it as root before and after every job on the node. A node fails the check when
# nvidia-smi cannot read every GPU (a GPU off the bus, Xid 79; a hung or mismatched driver) or
# a GPU reports uncorrectable ECC errors since the driver loaded or a pending row remap (the
# memory must be repaired by a GPU reset or reboot before it is trusted again).
# A failing node drains itself with the reason, so no next job lands on it, and the script
# exits non-zero: as a Prolog that makes Slurm requeue the job that would have started on the
# bad GPU (slurm.conf(5), Prolog) instead of running it there; an operator resumes the node
# after the repair.
set -u

TIMEOUT_S=60
node="${SLURMD_NODENAME:-$(hostname -s)}"
context="${SLURM_SCRIPT_CONTEXT:-manual}"
context="${context%_slurmd}" # prolog_slurmd -> prolog

# The first failure's reason is the one an operator needs: the epilog of the job the prolog
# just refused fails too, and must not overwrite it.
already_drained() {
    scontrol show node "${node}" 2>/dev/null | grep -q 'Reason=railplan gpu health'
}

fail() {
    local reason="railplan gpu health (${context}): $1"
    logger -t railplan-gpu-health "${node}: ${reason}"
    if already_drained; then
        logger -t railplan-gpu-health "${node}: already drained by this check; reason kept"
    elif ! scontrol update NodeName="${node}" State=DRAIN Reason="${reason:0:200}"; then
        logger -t railplan-gpu-health "${node}: could not drain the node (scontrol failed)"
    fi
    exit 1
}

if ! command -v nvidia-smi >/dev/null 2>&1; then
    fail "nvidia-smi not found"
fi
query=index,pci.bus_id,ecc.errors.uncorrected.volatile.total,remapped_rows.pending
if ! out="$(timeout "${TIMEOUT_S}" nvidia-smi --query-gpu="${query}" --format=csv,noheader 2>&1)"; then
    fail "nvidia-smi failed: ${out//$'\n'/ }"
fi
bad=""
while IFS=', ' read -r index bus ecc remap; do
    # "[N/A]" where the GPU has no ECC or no row remapping: nothing to report
    if [[ "${ecc}" =~ ^[0-9]+$ ]] && [ "${ecc}" -gt 0 ]; then
        bad+="GPU ${index} (${bus}) ${ecc} uncorrectable ECC errors; "
    fi
    if [ "${remap}" = "Yes" ]; then
        bad+="GPU ${index} (${bus}) row remap pending; "
    fi
done <<<"${out}"
if [ -n "${bad}" ]; then
    fail "${bad%; }"
fi
exit 0
