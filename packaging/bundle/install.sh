#!/bin/sh
# Installs the nachtwacht agent @VERSION@ (linux-@ARCH@) from the wheels beside this script, with
# no network: a Python environment in /opt/nachtwacht/versions/@VERSION@/venv (`current` names
# it, `previous` the build it replaces), `nachtwacht` on the PATH, and the
# systemd units with their users, install root and polkit rule. It starts nothing: the host is
# enrolled first (the next step it prints). Run it again to upgrade from a newer bundle.
#
#   sh install.sh [--root DIR] [--venv-only]
#
#   --root DIR    install under DIR instead of / (to look at the result; the environment made
#                 there works only in that place)
#   --venv-only   only the Python environment and its links (the .deb places everything else
#                 itself)
#   PYTHON=...    the interpreter to build the environment from (default python3; one of
#                 @PYTHONS@, with its venv module)
set -eu

VERSION=@VERSION@
ARCH=@ARCH@
PYTHONS="@PYTHONS@"

die() {
    echo "install.sh: $*" >&2
    exit 1
}

usage() {
    sed -n '2,/^set -eu$/p' "$0" | sed -e '/^set -eu$/d' -e 's/^# \{0,1\}//'
}

root=/
venv_only=no
while [ $# -gt 0 ]; do
    case $1 in
        --root)
            [ $# -ge 2 ] || die "--root: expected a directory after it"
            root=$2
            shift 2
            ;;
        --root=*)
            root=${1#--root=}
            shift
            ;;
        --venv-only)
            venv_only=yes
            shift
            ;;
        -h | --help)
            usage
            exit 0
            ;;
        *) die "unknown argument '$1' (expected --root DIR or --venv-only)" ;;
    esac
done
[ -n "$root" ] || die "--root: expected a directory, found an empty value"
if [ "$root" = / ] && [ "$(id -u)" != 0 ]; then
    die "run it as root (it installs into /opt, /etc and /usr/local), or try it with --root DIR"
fi
mkdir -p "$root"
root=$(cd "$root" && pwd)
root=${root%/}

here=$(cd "$(dirname "$0")" && pwd)
machine=$(uname -m)
[ "$machine" = "$ARCH" ] || die "these wheels are for linux-$ARCH, this machine is $machine (use the bundle for $machine)"

PYTHON=${PYTHON:-python3}
command -v "$PYTHON" >/dev/null 2>&1 || die "no $PYTHON on the PATH (needs Python $PYTHONS)"
python_version=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
case " $PYTHONS " in
    *" $python_version "*) ;;
    *) die "$PYTHON is Python $python_version; the wheels here are for $PYTHONS (choose one with PYTHON=/usr/bin/python3.X)" ;;
esac
"$PYTHON" -c 'import ensurepip, venv' 2>/dev/null \
    || die "$PYTHON has no venv module (Debian, Ubuntu: apt install python3-venv)"

set -- "$here"/wheels/nachtwacht_agent-*.whl
[ $# -eq 1 ] && [ -f "$1" ] || die "expected one nachtwacht_agent wheel in $here/wheels, found: $*"
agent_wheel=$1

# The updater's builds side by side: versions/<v>/venv, `current` and `previous` links, so that a
# build of the updater can later switch to another and back (`nachtwacht agent self-update`).
own=$root/opt/nachtwacht
build=$own/versions/$VERSION
venv=$build/venv
found=
if [ -f "$build/.complete" ]; then
    found=$("$venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || true)
    # A build of another Python (the host's python3 was upgraded) is made again.
    [ "$found" = "$python_version" ] \
        || echo "install.sh: remaking $build (it was for Python ${found:-an interpreter that is gone})"
fi
if [ "$found" != "$python_version" ]; then
    # Made under a temporary name and renamed, `.complete` last: a build without it is torn.
    staging=$own/versions/.$VERSION.tmp
    rm -rf "$staging"
    mkdir -p "$staging"
    "$PYTHON" -m venv "$staging/venv" || die "could not make the Python environment $staging/venv"
    # Only the wheels beside this script: no index, no pip settings of this host, no cache.
    env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin PIP_CONFIG_FILE=/dev/null \
        "$staging/venv/bin/python" -m pip install --quiet --no-index --no-cache-dir \
        --disable-pip-version-check --find-links "$here/wheels" "$agent_wheel" \
        || die "pip could not install $agent_wheel from $here/wheels"
    rm -rf "$build"
    mv "$staging" "$build"
    sha256sum "$agent_wheel" | cut -d' ' -f1 >"$build/.complete.tmp"
    mv -f "$build/.complete.tmp" "$build/.complete"
    sync
fi

# Links are replaced by a rename, never removed and made again: `current` always names a build.
point() { # link version
    rm -f "$own/.$1.tmp"
    ln -s "versions/$2" "$own/.$1.tmp"
    mv -fT "$own/.$1.tmp" "$own/$1"
}
running=$(readlink "$own/current" 2>/dev/null || true)
running=${running#versions/}
if [ -n "$running" ] && [ "$running" != "$VERSION" ] && [ -f "$own/versions/$running/.complete" ]; then
    point previous "$running"
fi
point current "$VERSION"
# Only `current` and `previous` are kept: an install by hand decides which builds stay.
kept_previous=$(readlink "$own/previous" 2>/dev/null || true)
for old in "$own"/versions/*; do
    [ -d "$old" ] || continue
    case versions/${old##*/} in
        "versions/$VERSION" | "$kept_previous") ;;
        *) rm -rf "$old" ;;
    esac
done
# An install by hand decides: a switch of the updater's own build still pending is void.
rm -f "$root/var/lib/nachtwacht-agent/self-update/pending" \
    "$root/var/lib/nachtwacht-agent/self-update/pending.rolling"
# The layout before builds side by side: one environment in /opt/nachtwacht/venv. Its scripts name
# it by path, so it cannot be moved: it is replaced by the build just made.
# Only the agent's own: an operator's control plane may live in a venv of that name too.
agent_venv() {
    for dist_info in "$own"/venv/lib/python3*/site-packages/nachtwacht_agent-*.dist-info; do
        [ -d "$dist_info" ] && return 0
    done
    return 1
}
if [ -d "$own/venv" ] && [ ! -L "$own/venv" ] && agent_venv; then
    echo "install.sh: replaced $own/venv by $build (builds now live side by side in $own/versions)"
    rm -rf "$own/venv"
fi
sync

if [ "$venv_only" = no ]; then
    units=$here/units
    # Each unit starts with this line, so that `nachtwacht agent install` uses (enables) them as
    # the bundle's and never takes them for units the administrator wrote
    # (agent_daemon/commands/unit_files.py, WRITTEN_BY_BUNDLE).
    mkdir -p "$root/etc/systemd/system"
    for unit in nachtwacht-agent.service provibr-agent.service nachtwacht-agent-guard.service \
        nachtwacht-agent-guard.timer; do
        target=$root/etc/systemd/system/$unit
        {
            echo "# Installed by the nachtwacht-agent bundle's install.sh; a newer bundle's install.sh replaces it."
            cat "$units/systemd/$unit"
        } >"$target.tmp"
        chmod 0644 "$target.tmp"
        mv -f "$target.tmp" "$target"
    done
    for conf in "$units"/sysusers.d/*.conf; do
        install -D -m 0644 "$conf" "$root/etc/sysusers.d/$(basename "$conf")"
    done
    install -D -m 0644 "$units/tmpfiles.d/nachtwacht-agent.conf" "$root/etc/tmpfiles.d/nachtwacht-agent.conf"
    install -D -m 0644 "$units/polkit/50-nachtwacht-agent.rules" "$root/etc/polkit-1/rules.d/50-nachtwacht-agent.rules"
    # The unit names the guard by this path; a self-update never replaces it.
    install -D -m 0755 "$units/self-update/guard.sh" "$root/usr/lib/nachtwacht-agent/guard.sh"
    mkdir -p "$root/usr/local/bin"
    # A script, not a link to a console script: those name the venv by the path it was made at.
    rm -f "$root/usr/local/bin/nachtwacht"
    printf '#!/bin/sh\nexec %s -m nachtwacht "$@"\n' "$own/current/venv/bin/python" \
        >"$root/usr/local/bin/nachtwacht"
    chmod 0755 "$root/usr/local/bin/nachtwacht"
    # The users (the updater's, the managed agent's) and the install root they own.
    if command -v systemd-sysusers >/dev/null 2>&1; then
        systemd-sysusers --root="$root/" nachtwacht-agent.conf provibr-agent.conf
        systemd-tmpfiles --root="$root/" --create nachtwacht-agent.conf
    else
        echo "install.sh: no systemd-sysusers: create the users in $units/sysusers.d and $root/opt/provibr-agent yourself" >&2
    fi
    if [ "$root" = "" ] && [ -d /run/systemd/system ]; then
        systemctl daemon-reload
    fi
fi

if [ -f "$root/etc/nachtwacht-agent/agent.toml" ]; then
    # An upgrade of an enrolled host: the running updater goes on with the build it started.
    cat <<UPGRADED
nachtwacht agent $VERSION is installed in $venv; this host is enrolled already.
A running updater goes on with its old build until it restarts:
  systemctl restart nachtwacht-agent
UPGRADED
else
    cat <<NEXT
nachtwacht agent $VERSION is installed in $venv; nothing runs yet.
Next, enroll this host with a token from your control plane and the trust root your provider
gave you (it writes the configuration and starts the service):
  nachtwacht agent install --url https://control.example --enrollment-token nwe_... --trust-root root-1.json
NEXT
fi
