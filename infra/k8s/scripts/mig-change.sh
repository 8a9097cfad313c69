#!/bin/sh
# railplan MIG schedule: move one node group's GPUs to one mig-parted config, one SU at a time.
#
# Run by the CronJob `mig-<group>-<N>` (infra/k8s/mig_schedule.py) with kubectl on PATH and
# the ServiceAccount railplan-mig-scheduler (nodes get/list/patch, pods list,
# pods/eviction create). Every input comes from the environment, never from this text:
#
#   GROUP          value of the node label railplan.dev/node-group
#   CONFIG         mig-parted config to apply (node label nvidia.com/mig.config)
#   SUS            space-separated SU names (label railplan.dev/su), in order; one batch each.
#                  Empty: the group has no SUs (no compute fabric) and is one batch.
#   DRAIN_TIMEOUT  seconds GPU pods of a batch get to leave before its nodes fail
#   MIG_TIMEOUT    seconds the GPU Operator's MIG manager gets to report success (default 900)
#   POLL_SECONDS   seconds between checks (default 10)
#
# For each batch: every node not already at CONFIG with state success is cordoned; its GPU
# pods (containers asking for nvidia.com/gpu or nvidia.com/mig-*) are evicted through the
# Eviction API, so PodDisruptionBudgets are respected (a refused eviction is retried until
# DRAIN_TIMEOUT); then nvidia.com/mig.config=CONFIG is set (and the old
# nvidia.com/mig.config.state removed in the same patch, so a stale "success" is not read as
# this change's) and the node is uncordoned once the MIG manager reports success.
# Pods without GPUs stay: they do not hold a GPU the MIG manager must free.
#
# A node that fails (cordon or label refused, GPU pods still there at DRAIN_TIMEOUT, state
# failed or no success within MIG_TIMEOUT) stays cordoned and gets the label
# railplan.dev/mig-change=failed and the annotation railplan.dev/mig-change-reason; nothing
# is forced past a PodDisruptionBudget. The other nodes of its batch finish, but no later SU
# is touched, so a bad config or a stuck workload does not spread across the group; the
# script then exits 1 (the Job fails and alerts).

set -u

NODE_GROUP_LABEL=railplan.dev/node-group
SU_LABEL=railplan.dev/su
FAILED_LABEL=railplan.dev/mig-change
REASON_ANNOTATION=railplan.dev/mig-change-reason
CONFIG_LABEL=nvidia.com/mig.config
STATE_LABEL=nvidia.com/mig.config.state

# config|state|unschedulable|failed label of one node (label values never contain "|").
NODE_JSONPATH='{.metadata.labels.nvidia\.com/mig\.config}'
NODE_JSONPATH="$NODE_JSONPATH|{.metadata.labels.nvidia\\.com/mig\\.config\\.state}"
NODE_JSONPATH="$NODE_JSONPATH|{.spec.unschedulable}|{.metadata.labels.railplan\\.dev/mig-change}"
# One line per pod: namespace, name, running|terminating, then every resource name asked for.
# shellcheck disable=SC2016  # a kubectl go-template: its $k and $v are not shell variables
{
    GPU_POD_TEMPLATE='{{range .items}}{{.metadata.namespace}} {{.metadata.name}} {{if .metadata.deletionTimestamp}}terminating{{else}}running{{end}}'
    GPU_POD_TEMPLATE="$GPU_POD_TEMPLATE"'{{range .spec.containers}}{{range $k, $v := .resources.limits}} {{$k}}{{end}}'
    GPU_POD_TEMPLATE="$GPU_POD_TEMPLATE"'{{range $k, $v := .resources.requests}} {{$k}}{{end}}{{end}}'
    GPU_POD_TEMPLATE="$GPU_POD_TEMPLATE"'{{range .spec.initContainers}}{{range $k, $v := .resources.limits}} {{$k}}{{end}}'
    GPU_POD_TEMPLATE="$GPU_POD_TEMPLATE"'{{range $k, $v := .resources.requests}} {{$k}}{{end}}{{end}}'
    GPU_POD_TEMPLATE="$GPU_POD_TEMPLATE"'{{"\n"}}{{end}}'
}

log() {
    printf '%s %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*" >&2
}

die() {
    log "error: $*"
    exit 2
}

# Label values: at most 63 characters, alphanumerics with - _ . inside.
check_label_value() {
    case $2 in
        '' | *[!A-Za-z0-9._-]* | [!A-Za-z0-9]* | *[!A-Za-z0-9]) die "$1 is not a label value: '$2'" ;;
    esac
    [ "${#2}" -le 63 ] || die "$1 is longer than 63 characters"
}

check_seconds() {
    case $2 in
        '' | *[!0-9]*) die "$1 must be a whole number of seconds, got '$2'" ;;
    esac
}

GROUP=${GROUP-}
CONFIG=${CONFIG-}
SUS=${SUS-}
DRAIN_TIMEOUT=${DRAIN_TIMEOUT-}
MIG_TIMEOUT=${MIG_TIMEOUT-900}
POLL_SECONDS=${POLL_SECONDS-10}
check_label_value GROUP "$GROUP"
check_label_value CONFIG "$CONFIG"
for su in $SUS; do
    check_label_value "SU" "$su"
done
check_seconds DRAIN_TIMEOUT "$DRAIN_TIMEOUT"
check_seconds MIG_TIMEOUT "$MIG_TIMEOUT"
check_seconds POLL_SECONDS "$POLL_SECONDS"

now() {
    date +%s
}

contains() { # contains LIST WORD
    case " $1 " in
        *" $2 "*) return 0 ;;
    esac
    return 1
}

# Set by node_facts: the node's current config, state, cordon and failed mark.
node_facts() {
    facts=$(kubectl get node "$1" -o "jsonpath=$NODE_JSONPATH") || return 1
    cur_config=${facts%%|*}
    facts=${facts#*|}
    cur_state=${facts%%|*}
    facts=${facts#*|}
    cur_unschedulable=${facts%%|*}
    cur_failed=${facts#*|}
}

batch_failed=0

fail_node() { # fail_node NODE REASON
    log "node $1: FAILED: $2 (left cordoned)"
    batch_failed=$((batch_failed + 1))
    kubectl label node "$1" "$FAILED_LABEL=failed" --overwrite >/dev/null ||
        log "node $1: could not set $FAILED_LABEL=failed"
    kubectl annotate node "$1" "$REASON_ANNOTATION=$2" --overwrite >/dev/null ||
        log "node $1: could not annotate the reason"
}

# Print "namespace name state" of every pod on node $1 that asks for a GPU or MIG device.
gpu_pods() {
    listing=$(kubectl get pods --all-namespaces \
        --field-selector "spec.nodeName=$1,status.phase!=Succeeded,status.phase!=Failed" \
        -o "go-template=$GPU_POD_TEMPLATE") || return 1
    printf '%s\n' "$listing" | while read -r ns pod state resources; do
        [ -n "$ns" ] || continue
        for resource in $resources; do
            case $resource in
                nvidia.com/gpu | nvidia.com/mig-*)
                    printf '%s %s %s\n' "$ns" "$pod" "$state"
                    break
                    ;;
            esac
        done
    done
}

evict() { # evict NAMESPACE POD: one Eviction (refused with 429 while a PDB forbids it)
    printf '{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"%s","namespace":"%s"}}\n' \
        "$2" "$1" |
        kubectl create --raw "/api/v1/namespaces/$1/pods/$2/eviction" -f - >/dev/null 2>&1
}

# Evict until no GPU pod is left on any node of $1 or DRAIN_TIMEOUT passes; sets `drained`.
# (Not run in $(...): fail_node must count failures in this shell.)
drain_gpu_pods() {
    pending=$1
    drained=""
    deadline=$(($(now) + DRAIN_TIMEOUT))
    while [ -n "$pending" ]; do
        still=""
        for node in $pending; do
            if ! pods=$(gpu_pods "$node"); then
                log "node $node: could not list its pods; retrying"
                still="$still $node"
            elif [ -z "$pods" ]; then
                log "node $node: no GPU pods left"
                drained="$drained $node"
            else
                still="$still $node"
                printf '%s\n' "$pods" | while read -r ns pod state; do
                    if [ "$state" = running ] && ! evict "$ns" "$pod"; then
                        log "node $node: eviction of $ns/$pod refused for now (PodDisruptionBudget?)"
                    fi
                done
            fi
        done
        pending=$still
        [ -n "$pending" ] || break
        if [ "$(now)" -ge "$deadline" ]; then
            for node in $pending; do
                fail_node "$node" "GPU pods still running after ${DRAIN_TIMEOUT}s (drain timeout); config $CONFIG not applied"
            done
            break
        fi
        sleep "$POLL_SECONDS"
    done
}

finish_node() { # finish_node NODE: config applied
    if contains "$keep_cordoned" "$1"; then
        log "node $1: $CONFIG applied; it was cordoned before this job, so it stays cordoned"
    else
        kubectl uncordon "$1" >/dev/null || {
            fail_node "$1" "$CONFIG applied but uncordon failed"
            return
        }
        log "node $1: $CONFIG applied, uncordoned"
    fi
    if contains "$marked_failed" "$1"; then
        kubectl label node "$1" "$FAILED_LABEL-" >/dev/null
        kubectl annotate node "$1" "$REASON_ANNOTATION-" >/dev/null
    fi
}

wait_for_success() { # wait_for_success NODES
    pending=$1
    deadline=$(($(now) + MIG_TIMEOUT))
    while [ -n "$pending" ]; do
        still=""
        for node in $pending; do
            if ! node_facts "$node"; then
                still="$still $node"
            elif [ "$cur_state" = success ] && [ "$cur_config" = "$CONFIG" ]; then
                finish_node "$node"
            elif [ "$cur_state" = failed ]; then
                fail_node "$node" "MIG manager reported $STATE_LABEL=failed for config $CONFIG"
            else
                still="$still $node"
            fi
        done
        pending=$still
        [ -n "$pending" ] || break
        if [ "$(now)" -ge "$deadline" ]; then
            for node in $pending; do
                fail_node "$node" "no $STATE_LABEL=success for $CONFIG within ${MIG_TIMEOUT}s"
            done
            break
        fi
        sleep "$POLL_SECONDS"
    done
}

run_batch() { # run_batch SELECTOR
    batch_failed=0
    keep_cordoned=""
    marked_failed=""
    if ! nodes=$(kubectl get nodes -l "$1" -o name); then
        log "batch $1: could not list nodes"
        batch_failed=1
        return
    fi
    [ -n "$nodes" ] || log "batch $1: no nodes carry these labels; nothing to do"
    todo=""
    for entry in $nodes; do
        node=${entry#node/}
        if ! node_facts "$node"; then
            fail_node "$node" "could not read the node"
            continue
        fi
        if [ "$cur_config" = "$CONFIG" ] && [ "$cur_state" = success ]; then
            log "node $node: already at $CONFIG (state success); left alone"
            continue
        fi
        if [ "$cur_failed" = failed ]; then
            marked_failed="$marked_failed $node" # cordoned by an earlier failed change
        elif [ "$cur_unschedulable" = true ]; then
            keep_cordoned="$keep_cordoned $node" # cordoned by someone else: leave it so
        fi
        if kubectl cordon "$node" >/dev/null; then
            log "node $node: cordoned"
            todo="$todo $node"
        else
            fail_node "$node" "cordon failed"
        fi
    done
    [ -n "$todo" ] || return
    drain_gpu_pods "$todo"
    labelled=""
    for node in $drained; do
        if kubectl label node "$node" "$CONFIG_LABEL=$CONFIG" "$STATE_LABEL-" --overwrite >/dev/null; then
            log "node $node: $CONFIG_LABEL=$CONFIG set"
            labelled="$labelled $node"
        else
            fail_node "$node" "setting $CONFIG_LABEL=$CONFIG failed"
        fi
    done
    wait_for_success "$labelled"
}

log "MIG change of group $GROUP to $CONFIG; SUs in order: ${SUS:-<none: the whole group at once>}"
if [ -z "$SUS" ]; then
    set -- "$NODE_GROUP_LABEL=$GROUP"
else
    set --
    for su in $SUS; do
        set -- "$@" "$NODE_GROUP_LABEL=$GROUP,$SU_LABEL=$su"
    done
fi
for selector in "$@"; do
    log "batch $selector"
    run_batch "$selector"
    if [ "$batch_failed" -gt 0 ]; then
        log "batch $selector: $batch_failed node(s) failed; later SUs are not changed"
        exit 1
    fi
done
log "done: group $GROUP is at $CONFIG"
