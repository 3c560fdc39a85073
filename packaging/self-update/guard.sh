#!/bin/sh
# Takes back a switch of the updater to a build of itself that does not check in, using none of
# that build's code. Installed to /usr/lib/nachtwacht-agent/guard.sh by the package, never replaced
# by a self-update.
#
#   guard.sh pre-start   nachtwacht-agent.service's ExecStartPre: count this start; past the
#                        limit or the deadline, point `current` back at the build switched from
#   guard.sh check       nachtwacht-agent-guard.timer, every minute: past the deadline, the same,
#                        then restart the unit (a build that starts but never checks in)
#
#   --state-dir DIR      default $STATE_DIRECTORY, else /var/lib/nachtwacht-agent
#   --max-attempts N     starts allowed before a check-in (default 3)
#   --restart CMD        how `check` restarts the unit (default: systemctl restart --no-block
#                        nachtwacht-agent.service); --restart '' restarts nothing
#
# The switch's files (<state dir>/self-update/, key=value lines, format=1) are written by
# `nachtwacht agent self-update switch` (pending) and by the new build once it polled the control
# plane and wrote its state file (which renames pending away: committed). Renaming `pending` is
# the one decision: whoever renames it first, the guard or the new build, wins. The guard always
# exits 0 in pre-start: the unit then starts whatever `current` names.
set -eu

die() {
    echo "<3>guard.sh: $*" >&2
    exit 2
}

say() {
    echo "<4>guard.sh: $*" >&2
}

mode=${1:-}
[ $# -gt 0 ] && shift
state_dir=${STATE_DIRECTORY:-/var/lib/nachtwacht-agent}
# systemd may pass several state directories separated by ':'; ours is the first.
state_dir=${state_dir%%:*}
max_attempts=3
restart="systemctl restart --no-block nachtwacht-agent.service"
while [ $# -gt 0 ]; do
    case $1 in
        --state-dir)
            [ $# -ge 2 ] || die "--state-dir: expected a directory after it"
            state_dir=$2
            shift 2
            ;;
        --max-attempts)
            [ $# -ge 2 ] || die "--max-attempts: expected a number after it"
            max_attempts=$2
            shift 2
            ;;
        --restart)
            [ $# -ge 2 ] || die "--restart: expected a command after it (or '')"
            restart=$2
            shift 2
            ;;
        *) die "unknown argument '$1' (expected --state-dir, --max-attempts or --restart)" ;;
    esac
done
case $mode in
    pre-start | check) ;;
    *) die "expected 'pre-start' or 'check' first, found '$mode'" ;;
esac
case $max_attempts in
    '' | *[!0-9]*) die "--max-attempts: expected a whole number, found '$max_attempts'" ;;
esac

dir=$state_dir/self-update
pending=$dir/pending
rolling=$dir/pending.rolling
started=$dir/started
rolled_back=$dir/rolled_back

# Nothing was ever switched on this host: nothing to guard (and nothing to create).
[ -d "$dir" ] || exit 0

# One guard at a time: the timer's and a start's must not both rewrite `pending`.
exec 9>"$dir/guard.lock"
if command -v flock >/dev/null 2>&1; then
    flock 9
fi

field() { # file key
    sed -n "s/^$2=//p" "$1" | head -n 1
}

write_file() { # path; the content on stdin
    tmp=$1.tmp.$$
    (umask 077 && cat >"$tmp")
    mv -f "$tmp" "$1"
}

version_ok() {
    case $1 in
        '' | .* | */* | *[!A-Za-z0-9.+_-]*) return 1 ;;
    esac
    return 0
}

point() { # root link version ('' removes the link)
    if [ -z "$3" ]; then
        rm -f "$1/$2"
        return 0
    fi
    rm -f "$1/.$2.tmp"
    ln -s "versions/$3" "$1/.$2.tmp"
    # -T: replace the link itself (rename(2)), never move into the folder it names.
    mv -fT "$1/.$2.tmp" "$1/$2"
}

# The reason a switch that never checked in is taken back: did the new build ever start?
why() { # to
    if [ -f "$started" ] && [ "$(field "$started" version)" = "$1" ]; then
        echo "$2"
    else
        echo exited_at_start
    fi
}

finish_rollback() {
    [ "$(field "$rolling" format)" = 1 ] || die "$rolling: format: expected 1"
    root=$(field "$rolling" root)
    from=$(field "$rolling" from)
    to=$(field "$rolling" to)
    previous_before=$(field "$rolling" previous_before)
    reason=$(field "$rolling" reason)
    version_ok "$from" || die "$rolling: from: '$from' is not a version"
    [ -z "$previous_before" ] || version_ok "$previous_before" \
        || die "$rolling: previous_before: '$previous_before' is not a version"
    [ -f "$root/versions/$from/.complete" ] || die "$root/versions/$from: not a complete build"
    point "$root" current "$from"
    if [ -n "$previous_before" ] && [ -f "$root/versions/$previous_before/.complete" ]; then
        point "$root" previous "$previous_before"
    fi
    sync
    printf 'format=1\nfailed=%s\nrestored=%s\nreason=%s\nat=%s\n' \
        "$to" "$from" "${reason:-interrupted}" "$(date +%s)" | write_file "$rolled_back"
    rm -f "$started" "$rolling"
    sync
    say "the updater's build $to did not check in ($reason): back to $from"
}

roll_back() { # reason; 1 when the new build committed first
    mv "$pending" "$rolling" 2>/dev/null || return 1
    { cat "$rolling" && echo "reason=$1"; } | write_file "$rolling"
    finish_rollback
}

restart_unit() {
    [ -z "$restart" ] || sh -c "$restart"
}

if [ -f "$rolling" ]; then
    # A rollback was interrupted: finish it.
    finish_rollback
    [ "$mode" = pre-start ] || restart_unit
    exit 0
fi
[ -f "$pending" ] || exit 0
[ "$(field "$pending" format)" = 1 ] || die "$pending: format: expected 1, found '$(field "$pending" format)'"
root=$(field "$pending" root)
to=$(field "$pending" to)
deadline=$(field "$pending" deadline)
attempts=$(field "$pending" attempts)
version_ok "$to" || die "$pending: to: '$to' is not a version"
case $deadline$attempts in
    '' | *[!0-9]*) die "$pending: deadline/attempts: expected whole numbers, found '$deadline'/'$attempts'" ;;
esac
now=$(date +%s)

if [ "$mode" = check ]; then
    if [ "$now" -gt "$deadline" ]; then
        roll_back "$(why "$to" never_checked_in)" && restart_unit
    fi
    exit 0
fi

# pre-start
if [ "$(readlink "$root/current" 2>/dev/null || true)" != "versions/$to" ]; then
    # Killed between writing `pending` and moving `current`: the switch never happened.
    roll_back switch_interrupted || true
    exit 0
fi
if [ "$now" -gt "$deadline" ]; then
    roll_back "$(why "$to" never_checked_in)" || true
    exit 0
fi
attempts=$((attempts + 1))
if [ "$attempts" -gt "$max_attempts" ]; then
    roll_back "$(why "$to" crash_loop)" || true
    exit 0
fi
sed "s/^attempts=.*/attempts=$attempts/" "$pending" | write_file "$pending"
sync
exit 0
