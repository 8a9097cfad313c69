#!/bin/sh
# railplan MIG schedule: move one node group's GPUs to one mig-parted config, one SU at a time.
#
# Run by the CronJob `mig-<group>-<N>` (infra/k8s/mig_schedule.py) with kubectl on PATH and
# the ServiceAccount railplan-mig-scheduler (nodes get/list/patch, pods list,
# pods/eviction create). Every input comes from the environment, never from this text:
#
#   GROUP          value of the node label railplan.dev/node-group
#   CONFIG         mig-parted config to apply (node label nvidia.com/mig.config)
#   SUS            space-separated SU names (label railplan.dev/su), in order.
#                  Empty: the group has no SUs (no compute fabric) and is one batch.
#   ROLLING_BATCH_SUS  how many SUs of SUS one batch takes, in order (default 1, 1..1024)
#   DRAIN_TIMEOUT  seconds GPU pods of a batch get to leave before its nodes fail (1..86400)
#   MIG_TIMEOUT    seconds the GPU Operator's MIG manager gets to report success (default 900,
#                  1..86400)
#   POLL_SECONDS   seconds between checks (default 10, 0..3600)
#
# Numbers are plain decimals without leading zeros and within their bounds, checked before any
# kubectl call: `$(( ))` reads 08 as bad octal and 10^20 overflows, which would fail only after
# the first cordon.
#
# For each batch: every node not already at CONFIG with state success is cordoned; its GPU
# pods (containers asking for nvidia.com/gpu or nvidia.com/mig-*) are evicted through the
# Eviction API, so PodDisruptionBudgets are respected (a refused eviction is retried until
# DRAIN_TIMEOUT); then nvidia.com/mig.config=CONFIG is set (and the old
# nvidia.com/mig.config.state removed in the same patch, so a stale "success" is not read as
# this change's) and the node is uncordoned once the MIG manager reports success.
# Before cordoning a schedulable node the script annotates it railplan.dev/mig-change-cordoned
# (removed when it uncordons), so a run killed mid-drain leaves a record: the next run takes a
# cordoned node with that annotation for its own and uncordons it when done, while a node
# cordoned without it (an administrator's) stays cordoned.
# Pods without GPUs stay: they do not hold a GPU the MIG manager must free.
#
# A node that fails (cordon or label refused, GPU pods still there at DRAIN_TIMEOUT, state
# failed or no success within MIG_TIMEOUT) stays cordoned and gets the label
# railplan.dev/mig-change=failed and the annotation railplan.dev/mig-change-reason; nothing
# is forced past a PodDisruptionBudget. The other nodes of its batch finish, but no later SU
# is touched, so a bad config or a stuck workload does not spread across the group; the
# script then exits 1 (the Job fails and alerts).

set -u
# No globbing: SUS and node lists are split into words on purpose, and a `*` in a value must
# stay a `*` (refused as a label value), not become the names of the files in the working
# directory. IFS is set, not inherited.
set -f
IFS=$(printf ' \t\n_')
IFS=${IFS%_}

NODE_GROUP_LABEL=railplan.dev/node-group
SU_LABEL=railplan.dev/su
FAILED_LABEL=railplan.dev/mig-change
REASON_ANNOTATION=railplan.dev/mig-change-reason
CORDONED_ANNOTATION=railplan.dev/mig-change-cordoned
CONFIG_LABEL=nvidia.com/mig.config
STATE_LABEL=nvidia.com/mig.config.state

# config|state|unschedulable|failed label|cordoned annotation of one node (label values never
# contain "|"; the annotation is last, so whatever it holds cannot shift the other fields).
NODE_JSONPATH='{.metadata.labels.nvidia\.com/mig\.config}'
NODE_JSONPATH="$NODE_JSONPATH|{.metadata.labels.nvidia\\.com/mig\\.config\\.state}"
NODE_JSONPATH="$NODE_JSONPATH|{.spec.unschedulable}|{.metadata.labels.railplan\\.dev/mig-change}"
NODE_JSONPATH="$NODE_JSONPATH|{.metadata.annotations.railplan\\.dev/mig-change-cordoned}"
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

check_seconds() { # check_seconds NAME VALUE MIN MAX
    case $2 in
        '' | *[!0-9]* | 0?*) die "$1 must be a whole number of seconds without leading zeros, got '$2'" ;;
    esac
    # at most 5 digits before comparing, so test(1) never sees a number it cannot hold
    if [ "${#2}" -gt 5 ] || [ "$2" -lt "$3" ] || [ "$2" -gt "$4" ]; then
        die "$1 must be $3 to $4 seconds, got '$2'"
    fi
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
check_seconds DRAIN_TIMEOUT "$DRAIN_TIMEOUT" 1 86400
check_seconds MIG_TIMEOUT "$MIG_TIMEOUT" 1 86400
check_seconds POLL_SECONDS "$POLL_SECONDS" 0 3600
ROLLING_BATCH_SUS=${ROLLING_BATCH_SUS-1}
check_seconds ROLLING_BATCH_SUS "$ROLLING_BATCH_SUS" 1 1024
RUN_ID=$(date -u +%Y%m%dT%H%M%SZ)

now() {
    date +%s
}

contains() { # contains LIST WORD
    case " $1 " in
        *" $2 "*) return 0 ;;
    esac
    return 1
}

# Set by node_facts: the node's current config, state, cordon, failed mark and cordon record.
node_facts() {
    facts=$(kubectl get node "$1" -o "jsonpath=$NODE_JSONPATH") || return 1
    cur_config=${facts%%|*}
    facts=${facts#*|}
    cur_state=${facts%%|*}
    facts=${facts#*|}
    cur_unschedulable=${facts%%|*}
    facts=${facts#*|}
    cur_failed=${facts%%|*}
    cur_cordoned_by_us=${facts#*|}
}

uncordon_own() { # uncordon_own NODE: lift a cordon this script made, then drop its record
    kubectl uncordon "$1" >/dev/null || return 1
    kubectl annotate node "$1" "$CORDONED_ANNOTATION-" >/dev/null ||
        log "node $1: uncordoned, but could not remove $CORDONED_ANNOTATION"
}

batch_failed=0

fail_node() { # fail_node NODE REASON
    log "node $1: FAILED: $2 (left as it is: cordoned if it was)"
    batch_failed=$((batch_failed + 1))
    # The failed label becomes the node's record (a later run that succeeds uncordons it), so
    # the cordon record goes: an administrator who clears the failure by hand leaves no stale
    # annotation that would make a later cordon of theirs look like this script's.
    if kubectl label node "$1" "$FAILED_LABEL=failed" --overwrite >/dev/null; then
        kubectl annotate node "$1" "$CORDONED_ANNOTATION-" >/dev/null ||
            log "node $1: could not remove $CORDONED_ANNOTATION"
    else
        log "node $1: could not set $FAILED_LABEL=failed"
    fi
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
        uncordon_own "$1" || {
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
            if [ -n "$cur_cordoned_by_us" ] && [ "$cur_unschedulable" = true ]; then
                # an earlier run applied it and was killed before its uncordon
                if uncordon_own "$node"; then
                    log "node $node: already at $CONFIG; uncordoned (an earlier run's cordon)"
                else
                    fail_node "$node" "$CONFIG applied but uncordon failed"
                fi
            else
                log "node $node: already at $CONFIG (state success); left alone"
            fi
            continue
        fi
        if [ "$cur_failed" = failed ]; then
            marked_failed="$marked_failed $node" # cordoned by an earlier failed change
        elif [ "$cur_unschedulable" = true ] && [ -z "$cur_cordoned_by_us" ]; then
            keep_cordoned="$keep_cordoned $node" # cordoned by someone else: leave it so
        elif ! kubectl annotate node "$node" "$CORDONED_ANNOTATION=$RUN_ID" --overwrite >/dev/null; then
            # recorded before the cordon, so no kill can leave a cordon without its record
            fail_node "$node" "could not record the cordon (annotation $CORDONED_ANNOTATION)"
            continue
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

log "MIG change of group $GROUP to $CONFIG; SUs in order, $ROLLING_BATCH_SUS at a time: ${SUS:-<none: the whole group at once>}"
# One selector per batch: a single SU by equality, several by a set (`su in (a,b)`), so a
# batch's nodes are cordoned, drained, relabelled and resumed together.
set --
if [ -z "$SUS" ]; then
    set -- "$NODE_GROUP_LABEL=$GROUP"
fi
chunk=""
taken=0
for su in $SUS; do
    chunk="${chunk:+$chunk,}$su"
    taken=$((taken + 1))
    if [ "$taken" -eq "$ROLLING_BATCH_SUS" ]; then
        set -- "$@" "$chunk"
        chunk=""
        taken=0
    fi
done
[ -z "$chunk" ] || set -- "$@" "$chunk"
if [ -n "$SUS" ]; then
    batches=$#
    for chunk in "$@"; do
        case $chunk in
            *,*) set -- "$@" "$NODE_GROUP_LABEL=$GROUP,$SU_LABEL in ($chunk)" ;;
            *) set -- "$@" "$NODE_GROUP_LABEL=$GROUP,$SU_LABEL=$chunk" ;;
        esac
    done
    shift "$batches"
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
