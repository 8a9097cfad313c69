#!/bin/bash
# shellcheck disable=SC2317  # the per-server functions run through fan_out, unseen by shellcheck
# Slurm power saving through each server's BMC (IPMI over LAN), installed by the slurm role on
# the controller under three names; the name it is called by is its action (slurm.conf(5)):
#   railplan-suspend.sh      SuspendProgram     chassis power soft (ACPI: the OS shuts down),
#                                               then chassis power off for a server still on
#                                               when SuspendTimeout is nearly over (an OS
#                                               that ignores the ACPI request)
#   railplan-resume.sh       ResumeProgram      chassis power on
#   railplan-resume-fail.sh  ResumeFailProgram  chassis power off (stuck in POST or boot: the
#                                               node is DOWN already; do not leave it drawing)
# slurmctld runs it as SlurmUser with a hostlist ("gpu[01-04]"), and a second argument (node
# features, for node_features plugins) that it ignores. Each server's
# BMC address comes from bmc-hosts (rendered by railplan from the plan); a server not in it is
# refused. The BMC password is read by ipmitool itself from a file only SlurmUser can read
# (-f), so it is on no command line and in no environment. Every action goes to syslog
# (daemon facility, tag railplan-power). Exit status: 0 when every server took the command,
# 1 when any did not (slurmctld logs it), 2 on a usage or set-up error.
set -u
# slurmctld gives its programs no environment but SLURM_CONF (power_save.c): no PATH.
PATH="${PATH:+$PATH:}/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"

conf_dir=${RAILPLAN_POWER_DIR:-/etc/slurm}
map="$conf_dir/bmc-hosts"
user_file="$conf_dir/railplan-bmc.user"
password_file="$conf_dir/railplan-bmc.password"
tag=railplan-power

log() { # priority message...
    local priority=$1
    shift
    logger -s -t "$tag" -p "daemon.$priority" -- "$*"
}

case "$(basename -- "$0")" in
    railplan-suspend*) action=soft ;;
    railplan-resume-fail*) action=off ;;
    railplan-resume*) action=on ;;
    *)
        log err "called as $0: expected railplan-suspend, railplan-resume or railplan-resume-fail"
        exit 2
        ;;
esac

if [ "$#" -lt 1 ] || [ "$#" -gt 2 ] || [ -z "$1" ]; then
    log err "usage: $0 HOSTLIST [FEATURES] (as slurmctld calls it)"
    exit 2
fi
for file in "$map" "$user_file" "$password_file"; do
    if [ ! -r "$file" ]; then
        log err "cannot read $file (installed by the slurm role); no server powered $action"
        exit 2
    fi
done
IFS= read -r user <"$user_file" || true
if [ -z "$user" ]; then
    log err "$user_file is empty: set slurm_power_bmc_user; no server powered $action"
    exit 2
fi

if ! hosts=$(scontrol show hostnames "$1"); then
    log err "scontrol could not expand the hostlist '$1'; no server powered $action"
    exit 2
fi

# Seconds a soft power-off may take before the power is cut: SuspendTimeout (by which
# slurmctld expects the node off) less a margin for the hard off itself, at least 30 s.
# (RAILPLAN_POWER_SOFT_OFF_S and RAILPLAN_POWER_POLL_S are for tests: slurmctld gives its
# programs no environment but SLURM_CONF.)
soft_off_grace() {
    local timeout
    if [ -n "${RAILPLAN_POWER_SOFT_OFF_S:-}" ]; then
        echo "$RAILPLAN_POWER_SOFT_OFF_S"
        return
    fi
    timeout=$(scontrol show config 2>/dev/null | awk -F= '/^SuspendTimeout/ { gsub(/[^0-9]/, "", $2); print $2 }')
    timeout=${timeout:-300}
    if [ "$timeout" -gt 60 ]; then echo $((timeout - 30)); else echo 30; fi
}

chassis() { # bmc action -> ipmitool's output; its exit status
    ipmitool -I lanplus -H "$1" -U "$user" -f "$password_file" chassis power "$2" 2>&1
}

# Slurm before 23.02 (Ubuntu 22.04's 21.08) has no SuspendExcStates and powers off an idle
# node even while it is drained, as a rolling update drains it (power_save.c): a node drained
# for the roll-out (the drain role's reason) is left on. Slurm then counts it powered down
# until it registers again, which its reboot in the roll-out, or the drain role's resume,
# makes it do. Drained now, not only by its reason: Slurm 23.11 keeps a node's last reason
# after `state=resume` (seen on the twin's Ubuntu 24.04), so a resumed node still reads it.
rolling_out() {
    local node
    node=$(scontrol show node "$1" 2>/dev/null) || return 1
    grep -Eq "State=[A-Z_+]*DRAIN" <<<"$node" && grep -q "Reason=railplan rolling update" <<<"$node"
}

# Every server's BMC is driven at once (at most `parallel` sessions): slurmctld hands a
# whole hostlist to one call, counts ResumeTimeout for each node from its request, and kills
# a program still running after its timeout (slurmscriptd, Slurm 23.02 and later). One BMC
# session takes seconds (11 s each through ipmitool 1.8.19's cipher-suite query on the
# twin), so powering 18 servers one after another left the last ones off past the 90 s
# ResumeTimeout and got the suspend program killed half-way.
parallel=32
work=$(mktemp -d "${TMPDIR:-/tmp}/railplan-power.XXXXXX") || exit 2
trap 'rm -rf -- "$work"' EXIT

fan_out() { # function argument... : "function argument" for each, `parallel` at once; 1 if any failed
    local fn=$1 arg status=0 running=0
    shift
    for arg in "$@"; do
        if [ "$running" -ge "$parallel" ]; then
            wait -n || status=1
            running=$((running - 1))
        fi
        "$fn" "$arg" &
        running=$((running + 1))
    done
    for ((; running > 0; running--)); do
        wait -n || status=1
    done
    return "$status"
}

power_one() { # host: the action through its BMC; a softened one is noted for the follow-up
    local host=$1 bmc out
    if [ "$action" = soft ] && rolling_out "$host"; then
        log warning "$host: drained for a railplan roll-out; not powered off"
        return 0
    fi
    bmc=$(awk -v host="$host" '$1 == host { print $2; exit }' "$map")
    if [ -z "$bmc" ]; then
        log err "$host: not in $map (excluded from power saving?); refused to power it $action"
        return 1
    fi
    out=$(chassis "$bmc" "$action") || {
        log err "$host: BMC $bmc: chassis power $action failed (exit $?): $out"
        return 1
    }
    log info "$host: BMC $bmc: chassis power $action: $out"
    if [ "$action" = soft ]; then echo "$host $bmc" >"$work/$host.soft"; fi
}

check_off() { # "host bmc": noted when the server is off
    local host bmc
    read -r host bmc <<<"$1"
    case "$(chassis "$bmc" status)" in
        *"is off"*)
            log info "$host: BMC $bmc: powered off"
            rm -f -- "$work/$host.soft"
            ;;
    esac
    return 0
}

cut_off() { # "host bmc": the server ignored its soft power-off; cut the power
    local host bmc out
    read -r host bmc <<<"$1"
    out=$(chassis "$bmc" off) || {
        log err "$host: BMC $bmc: chassis power off failed (exit $?): $out"
        return 1
    }
    log warning "$host: BMC $bmc: still on after the soft power-off; chassis power off: $out"
}

softened() { # the "host bmc" of every server whose soft power-off is not yet seen done
    local file
    for file in "$work"/*.soft; do
        if [ -e "$file" ]; then cat -- "$file"; fi
    done
}

status=0
mapfile -t host_list <<<"$hosts"
fan_out power_one "${host_list[@]}" || status=1

# A soft power-off is a request the OS may not honour (hung, or ACPI ignored): follow it up.
if [ "$action" = soft ]; then
    deadline=$((SECONDS + $(soft_off_grace)))
    mapfile -t pending < <(softened)
    while [ "${#pending[@]}" -gt 0 ] && [ "$SECONDS" -lt "$deadline" ]; do
        sleep "${RAILPLAN_POWER_POLL_S:-5}"
        fan_out check_off "${pending[@]}"
        mapfile -t pending < <(softened)
    done
    if [ "${#pending[@]}" -gt 0 ]; then
        fan_out cut_off "${pending[@]}" || status=1
    fi
fi
exit "$status"
