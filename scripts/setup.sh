#!/usr/bin/env bash
# The project's own setup, for a fresh Debian machine or an already set-up one (then it only
# checks, in about a second):
#   1. Docker engine: install Debian's docker.io if dockerd is missing (and docker-compose, 1.29)
#   2. start dockerd in the background if the engine does not answer (no systemd needed)
#   3. debootstrap: install it if missing and the base image will have to be bootstrapped
#   3b. gcc and make if missing (jericho, TextWorld's engine, builds from its sdist)
#   4. .venv with python >= 3.11 and `pip install -e '.[dev]'` (skipped while pyproject.toml is
#      unchanged: a stamp with its hash is kept in .venv); dev holds every extra the tests use
#      (webui, textworld, inspect, tracking: MLflow, W&B and TensorBoard, and metrics:
#      prometheus-client)
#   5. node/npm: install Debian's nodejs npm if npm is missing (build.sh installs the agent CLIs
#      with it from the npm registry)
#   6. chromium: install Debian's chromium if missing (the WebUI's browser tests drive it
#      with Playwright; nothing is downloaded by Playwright itself)
#   6b. (--tests) prometheus: install Debian's prometheus server if missing (the metrics test
#      starts one on a free port and scrapes a host; no service of its own is started)
#   7. docker/build.sh: base, runtime (with the agent CLIs Codex and Claude Code at the versions in
#      docker/agents/versions.env), service and textworld images, and with --tests polyglot (the
#      code runs' toolchains, for `skillopt serve --http-listen`; ~1.3 GB, minutes to build, so
#      the main job does not wait for it: `docker/build.sh --only polyglot` builds it alone)
#      (no-op when up to date)
#
# usage: scripts/setup.sh [--tests] [--gvisor] [--agents]
#   --tests    everything the test suite needs besides the main job's: --gvisor, Debian's
#              prometheus and the polyglot image (scripts/test.sh and .ci/run pass it)
#   --agents   accepted for compatibility and otherwise ignored: the agent CLIs are now always
#              part of the runtime image (the tests need them).
#   --gvisor   also install gVisor (Debian's runsc, 2024-07 or newer: from bookworm-backports on
#              Debian 12) and register it with Docker as the runtimes "runsc" (no network) and
#              "runsc-net" (for exec agents and sessions on the gateway network), for `skillopt
#              serve --runtime runsc`. .ci/run passes it (CI runs the security suites under both
#              runc and runsc).
# Environment: SKILLOPT_PYTHON (interpreter for .venv), SKILLOPT_RUNSC_PLATFORM (gVisor's
# platform, default ptrace), plus docker/build.sh's SKILLOPT_* variables.
# Runs from any directory; uses sudo for apt-get/dockerd when not root.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

gvisor=0
tests=0
for arg in "$@"; do
  case "$arg" in
    --tests) tests=1; gvisor=1 ;;
    --agents) ;;  # compatibility: the agent CLIs are always installed now
    --gvisor) gvisor=1 ;;
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "setup: unknown argument: $arg (see --help)" >&2; exit 2 ;;
  esac
done

now_ms() { date +%s%3N; }
secs() { awk -v ms=$(( $(now_ms) - $1 )) 'BEGIN { printf "%.1f s", ms / 1000 }'; }
die() { echo "setup: error: $*" >&2; exit 1; }
t_all="$(now_ms)"
t=""
step() { t="$(now_ms)"; printf 'setup: %-16s' "$1"; }   # one line per step ...
done_() { echo "$* ($(secs "$t"))"; }                    # ... finished by its outcome

sudo=()
if [[ ${EUID:-$(id -u)} -ne 0 ]]; then
  command -v sudo >/dev/null || die "not root and sudo is missing: run as root"
  sudo=(sudo)
fi
apt_updated=0
apt_install() {  # quiet; the log is kept for when it fails
  local logf=/tmp/skillopt-setup-apt.log
  if [[ $apt_updated -eq 0 ]]; then
    "${sudo[@]}" apt-get update >"$logf" 2>&1 || { tail -n 20 "$logf" >&2; die "apt-get update failed"; }
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y "$@" >>"$logf" 2>&1 \
    || { tail -n 20 "$logf" >&2; die "apt-get install $* failed (log $logf)"; }
}

# 1. Docker engine ----------------------------------------------------------------------------------
step "docker engine"
if command -v dockerd >/dev/null && command -v docker >/dev/null; then
  done_ "present"
else
  apt_install docker.io
  done_ "installed docker.io"
fi

# 1b. docker-compose (the compose fleet's test brings docker/compose.yaml up with it) -------------
step "docker-compose"
if command -v docker-compose >/dev/null; then
  done_ "present ($(docker-compose version --short 2>/dev/null))"
else
  apt_install docker-compose
  done_ "installed Debian's docker-compose ($(docker-compose version --short 2>/dev/null))"
fi

# 2. dockerd running --------------------------------------------------------------------------------
step "docker daemon"
if docker info >/dev/null 2>&1; then
  done_ "running"
else
  pid="$(cat /var/run/docker.pid 2>/dev/null || true)"
  if [[ -n "$pid" && -d "/proc/$pid" && -S /var/run/docker.sock ]]; then
    :  # starting up, or a permission problem: the wait below tells which
  else
    # No systemd here: start it detached (own session), so it outlives this script.
    "${sudo[@]}" sh -c 'setsid nohup dockerd >/var/log/skillopt-dockerd.log 2>&1 </dev/null &'
  fi
  for _ in $(seq 60); do
    docker info >/dev/null 2>&1 && break
    sleep 1
  done
  if ! docker info >/dev/null 2>&1; then
    if [[ ${EUID:-$(id -u)} -ne 0 ]] && "${sudo[@]}" docker info >/dev/null 2>&1; then
      die "dockerd runs but $(id -un) may not use it: add the user to group docker (then log in again)"
    fi
    tail -n 20 /var/log/skillopt-dockerd.log >&2 || true
    die "dockerd did not answer within 60 s (log /var/log/skillopt-dockerd.log)"
  fi
  done_ "started (log /var/log/skillopt-dockerd.log)"
fi

# 3. debootstrap, only when the base image must be bootstrapped ----------------------------------------
step "debootstrap"
plan="$(bash docker/build.sh --print-base-plan)"
if [[ "$plan" != debootstrap ]]; then
  done_ "not needed (base: $plan)"
elif command -v debootstrap >/dev/null; then
  done_ "present"
else
  apt_install debootstrap
  done_ "installed"
fi

# 4. Python environment -------------------------------------------------------------------------------
# 3b. a C toolchain: jericho (TextWorld's game engine, in the dev extras and the textworld image)
# ships no binary wheel; pip builds it from its sdist with gcc and make ---------------------------
step "gcc/make"
if command -v gcc >/dev/null && command -v make >/dev/null; then
  done_ "present ($(gcc -dumpversion))"
else
  apt_install gcc make libc6-dev
  done_ "installed gcc, make ($(gcc -dumpversion))"
fi

step "python .venv"
py_ok() { "$1" -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1; }
if [[ ! -x .venv/bin/python ]]; then
  py=""
  for c in "${SKILLOPT_PYTHON:-}" python3 python3.13 python3.12 python3.11; do
    if [[ -n "$c" ]] && command -v "$c" >/dev/null && py_ok "$c"; then py="$c"; break; fi
  done
  [[ -n "$py" ]] || die "no python >= 3.11 found (set SKILLOPT_PYTHON)"
  if ! "$py" -m venv .venv >/dev/null 2>&1; then
    rm -rf .venv
    apt_install python3-venv  # Debian splits ensurepip out of python3
    "$py" -m venv .venv || die "cannot create .venv with $py"
  fi
fi
py_ok .venv/bin/python || die ".venv has $(.venv/bin/python -V 2>&1); skillopt needs >= 3.11: remove .venv and rerun"
stamp=.venv/.skillopt-setup.stamp
want_stamp="$( { sha256sum pyproject.toml; .venv/bin/python -V; } | sha256sum | cut -c1-64)"
if [[ "$(cat "$stamp" 2>/dev/null)" == "$want_stamp" ]]; then
  done_ "up to date"
else
  logf=.venv/skillopt-setup-pip.log
  # The longest step on a fresh machine: say so before it, since its output goes to the log.
  printf "pip install -e '.[dev]', 5-10 min on a fresh machine (progress: tail -f %s) ... " "$logf"
  if ! .venv/bin/python -m pip install -e '.[dev]' >"$logf" 2>&1; then
    tail -n 20 "$logf" >&2
    die "pip install -e '.[dev]' failed (log $logf)"
  fi
  echo "$want_stamp" >"$stamp"
  done_ "installed -e '.[dev]' ($(.venv/bin/python -V))"
fi

# 5. node/npm for the agent CLIs ------------------------------------------------------------------------
step "node/npm"
if command -v npm >/dev/null && command -v node >/dev/null; then
  done_ "present (node $(node --version), npm $(npm --version 2>/dev/null))"
else
  apt_install nodejs npm
  command -v npm >/dev/null || die "npm still missing after apt-get install nodejs npm"
  done_ "installed Debian nodejs npm (node $(node --version))"
fi

# 6. chromium for the WebUI browser tests ------------------------------------------------------------
step "chromium"
if command -v chromium >/dev/null; then
  done_ "present ($(chromium --version 2>/dev/null | head -n 1))"
else
  apt_install chromium
  command -v chromium >/dev/null || die "chromium still missing after apt-get install chromium"
  done_ "installed Debian chromium ($(chromium --version 2>/dev/null | head -n 1))"
fi

# 6b. Prometheus for the metrics test (tests/sandbox/test_metrics_prometheus.py) ---------------------
step "prometheus"
if [[ $tests -eq 0 ]]; then
  done_ "not needed (--tests installs it)"
elif command -v prometheus >/dev/null; then
  done_ "present ($(prometheus --version 2>&1 | head -n 1))"
else
  apt_install --no-install-recommends prometheus
  command -v prometheus >/dev/null || die "prometheus still missing after apt-get install prometheus"
  done_ "installed Debian prometheus ($(prometheus --version 2>&1 | head -n 1))"
fi

# 7. Images -------------------------------------------------------------------------------------------
step "images"
mkdir -p docker/.build/logs
logf=docker/.build/logs/setup-build.log
skip_images=polyglot
[[ $tests -eq 1 ]] && skip_images=""
if ! SKILLOPT_SKIP_IMAGES="$skip_images" bash docker/build.sh >"$logf" 2>&1; then
  echo
  tail -n 30 "$logf" >&2
  die "docker/build.sh failed (log $logf)"
fi
built="$(sed -n 's/^build: \([a-z]*\): built in .*/\1/p' "$logf" | tr '\n' ' ')"
if [[ -z "$built" ]]; then
  done_ "up to date"
else
  done_ "built ${built% } (IDs in docker/.build/images.json, log $logf)"
fi

# 8. gVisor ------------------------------------------------------------------------------------------
# Two runtimes (docker/README.md, "Isolation levels"): runsc for the network-less rollout
# containers, runsc-net for exec agents and sessions on the gateway network. runsc-net uses
# --network=host: gVisor passes socket calls to the host kernel inside the container's own
# network namespace, so the gateway network's firewall applies as under runc. --host-uds=all: the
# runner connects to the service's unix socket on a bind mount. No --oci-seccomp: gVisor's kernel
# serves every system call and its own host filter replaces the profile (docker/README.md).
#
# gVisor's release: bookworm's own runsc (0.0~20221219) loses wake-ups (an agent CLI's command
# sometimes never reports back: Codex CLI 16 of 46 rollouts) and rejects statx's
# AT_NO_AUTOMOUNT; bookworm-backports carries 0.0~20240729, which has neither fault. We install
# that one (the backports suite is added to apt's sources when missing; apt takes nothing else
# from it) and require at least RUNSC_MIN.
#
# Platform: ptrace. No KVM here; the other KVM-less platform, systrap, starts a container faster
# (874 vs 1276 ms to the runner's hello) but runs each execution slower (136 vs 56 ms for one sent
# as the last answered), and rollouts take their containers from a warm pool (bench/README.md).
# SKILLOPT_RUNSC_PLATFORM=systrap (or kvm, on a host with /dev/kvm) registers another.
RUNSC_MIN=20240729
RUNSC_PLATFORM="${SKILLOPT_RUNSC_PLATFORM:-ptrace}"
# The release date: Debian's "runsc version 0.0~20240729.0", upstream's "release-20240729.0".
runsc_date() { runsc --version 2>/dev/null | sed -n 's/^runsc version \(0\.0~\|release-\)\([0-9]\{8\}\).*/\2/p'; }
if [[ $gvisor -eq 1 ]]; then
  step "gvisor"
  if [[ "$(runsc_date)" < "$RUNSC_MIN" ]]; then
    codename="$(. /etc/os-release && echo "${VERSION_CODENAME:-}")"
    if [[ "$codename" == bookworm ]]; then
      if ! grep -rqs "bookworm-backports" /etc/apt/sources.list /etc/apt/sources.list.d/; then
        echo "deb http://deb.debian.org/debian bookworm-backports main" \
          | "${sudo[@]}" tee /etc/apt/sources.list.d/skillopt-bookworm-backports.list >/dev/null
        apt_updated=0  # the new suite's index must be fetched
      fi
      apt_install -t bookworm-backports runsc
    else
      apt_install runsc
    fi
    [[ ! "$(runsc_date)" < "$RUNSC_MIN" ]] \
      || die "runsc $(runsc_date) is older than $RUNSC_MIN, which agent CLIs need (docker/README.md, \"Isolation levels\"); install a newer runsc and rerun"
  fi
  # (not `docker info | grep -q`: grep's early exit fails the pipe under pipefail)
  registered() { [[ "$(docker info --format '{{json .Runtimes}}' 2>/dev/null)" == *'"runsc-net"'* ]]; }
  cfg=/etc/docker/daemon.json
  merged="$(RUNSC_PLATFORM=$RUNSC_PLATFORM RUNSC_PATH="$(command -v runsc)" python3 - "$cfg" <<'PY'
import json, os, sys
path = sys.argv[1]
cfg = json.load(open(path)) if os.path.exists(path) else {}
common = [f"--platform={os.environ['RUNSC_PLATFORM']}", "--host-uds=all"]
want = {"runsc": ["--network=none", *common], "runsc-net": ["--network=host", *common]}
runtimes = cfg.setdefault("runtimes", {})
runsc_path = os.environ["RUNSC_PATH"]
if all(runtimes.get(n, {}) == {"path": runsc_path, "runtimeArgs": a} for n, a in want.items()):
    sys.exit(0)  # up to date: print nothing
for name, args in want.items():
    runtimes[name] = {"path": runsc_path, "runtimeArgs": args}
print(json.dumps(cfg, indent=2))
PY
)" || die "cannot read $cfg"
  if [[ -z "$merged" ]] && registered; then
    done_ "registered (runsc $(runsc_date), runsc-net; platform $RUNSC_PLATFORM)"
  else
    if [[ -n "$merged" ]]; then
      "${sudo[@]}" mkdir -p /etc/docker
      printf '%s\n' "$merged" | "${sudo[@]}" tee "$cfg" >/dev/null
    fi
    # SIGHUP: dockerd reloads its runtimes without stopping running containers.
    "${sudo[@]}" pkill -HUP -x dockerd || die "could not signal dockerd to reload $cfg"
    for _ in $(seq 20); do registered && break; sleep 0.5; done
    registered || die "dockerd did not pick up runsc/runsc-net from $cfg"
    done_ "registered runsc $(runsc_date), runsc-net (platform $RUNSC_PLATFORM; $cfg updated)"
  fi
fi

echo "setup: done in $(secs "$t_all")"
