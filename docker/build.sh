#!/usr/bin/env bash
# Build skillopt's images, offline and idempotently:
#   base     skillopt-base:bookworm   (debootstrap + docker import; or python:3.11-slim-bookworm)
#   runtime  skillopt-runtime:latest  (every rollout container runs from it)
#   service  skillopt-service:latest  (the gRPC sandbox service, `skillopt serve`)
#   textworld skillopt-textworld:latest (runtime + the TextWorld game engine; the textworld env's
#            rollouts run from it)
#   polyglot skillopt-runtime-polyglot:latest (runtime + g++, Node.js, Go, OpenJDK, pytest from
#            Debian packages; the code runs of `skillopt serve --http-listen` use it)
#
# usage: docker/build.sh [--only base|runtime|service|textworld|polyglot] [--force] [--verbose]
#        docker/build.sh --print-base-plan      # prints slim | up-to-date | debootstrap, builds nothing
#
# Each image carries the label org.skillopt.build-hash, a sha256 of its build inputs:
#   base     this machine's docker/base/bootstrap.sh (the package list lives there)
#   runtime  docker/runtime/{Dockerfile,requirements.txt,gvisor_compat.c} + the agent CLIs' pinned versions
#            (docker/agents/versions.env) and staged layout + the base image ID
#   service  docker/service/Dockerfile + the project's packaged source (pyproject.toml,
#            skillopt/, sandbox/, controller/) + the base image ID
#   textworld docker/textworld/{Dockerfile,requirements.txt,skillopt_tw_warm.py} + the runtime image ID. --only
#            textworld never builds the runtime: it needs the runtime image to exist.
#   polyglot docker/polyglot/Dockerfile + its package list (polyglot_debs below) + the runtime
#            image ID. --only polyglot never builds the runtime either.
# An image whose tag exists with the expected hash is "up to date" and is not rebuilt; a run with
# nothing to do costs well under a second. --only X builds X and what it depends on (the base);
# --force rebuilds the named image(s) (all three without --only) even when up to date.
# Dependency versions of the service are not pinned: they are resolved when the service is
# (re)built, so use --force --only service to pick up new releases.
# The runtime carries the agent CLIs (Codex, Claude Code) at the versions pinned in
# docker/agents/versions.env: host npm installs them into .build/agents/<name>/ (skipped while a
# stamp says that version is installed; --force --only runtime reinstalls), and only their native
# binaries are hard-linked into the build context. x86_64 only for now.
#
# Environment:
#   SKILLOPT_BASE           auto (default) | slim | debootstrap. auto uses the slim image when it
#                           is present locally, else an up-to-date local base, else tries
#                           `docker pull` of the slim image, else debootstraps.
#   SKILLOPT_SLIM_IMAGE     default python:3.11-slim-bookworm
#   SKILLOPT_SKIP_IMAGES    images left out of a build without --only, space-separated
#                           (scripts/setup.sh skips polyglot unless --tests)
#   SKILLOPT_DEBIAN_MIRROR  mirror for debootstrap (default http://deb.debian.org/debian)
#   SKILLOPT_BUILD_DIR      scratch dir (default docker/.build, gitignored): build contexts, logs,
#                           debootstrap .deb cache, images.json (the IDs of the last build)
#   SKILLOPT_PYTHON         host python whose pip builds/downloads wheels (default: .venv's, else python3)
# npm takes its registry and CA settings from the environment/npmrc as usual (npm_config_registry,
# npm_config_cafile, NODE_EXTRA_CA_CERTS); when none of the CA settings is given, the CA bundle pip
# uses (PIP_CERT, else SSL_CERT_FILE, else REQUESTS_CA_BUNDLE) is passed on as NODE_EXTRA_CA_CERTS.
set -euo pipefail

# The classic builder resolves FROM against local images without asking a registry.
export DOCKER_BUILDKIT=0

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
build_dir="${SKILLOPT_BUILD_DIR:-$here/.build}"
base_mode="${SKILLOPT_BASE:-auto}"
slim_ref="${SKILLOPT_SLIM_IMAGE:-python:3.11-slim-bookworm}"
base_tag="skillopt-base:bookworm"
runtime_tag="skillopt-runtime:latest"
service_tag="skillopt-service:latest"
textworld_tag="skillopt-textworld:latest"
polyglot_tag="skillopt-runtime-polyglot:latest"
hash_label="org.skillopt.build-hash"

die() { echo "build: error: $*" >&2; exit 1; }
log() { echo "build: $*"; }
now_ms() { date +%s%3N; }
usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }

only=""
force=0
verbose=0
plan_only=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --only)
      [[ $# -ge 2 ]] || die "--only needs one of: base, runtime, service, textworld, polyglot"
      only="$2"; shift 2 ;;
    --only=*) only="${1#--only=}"; shift ;;
    --force) force=1; shift ;;
    -v|--verbose) verbose=1; shift ;;
    --print-base-plan) plan_only=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument: $1 (see --help)" ;;
  esac
done
case "$only" in
  ""|base|runtime|service|textworld|polyglot) ;;
  *) die "--only must be base, runtime, service, textworld or polyglot, not '$only'" ;;
esac
case "$base_mode" in
  auto|slim|debootstrap) ;;
  *) die "SKILLOPT_BASE must be auto, slim or debootstrap, not '$base_mode'" ;;
esac

# a target of this run (SKILLOPT_SKIP_IMAGES: names left out unless --only asks for one)
want() { [[ "$only" == "$1" || ( -z "$only" && " ${SKILLOPT_SKIP_IMAGES:-} " != *" $1 "* ) ]]; }
forced() { [[ $force -eq 1 ]] && want "$1"; }            # --force applies to it

command -v docker >/dev/null || die "docker CLI not found: run scripts/setup.sh"
docker info >/dev/null 2>&1 || die "docker engine not reachable: run scripts/setup.sh"

image_id() { docker image inspect -f '{{.Id}}' "$1" 2>/dev/null || true; }
image_hash() {
  docker image inspect -f "{{ index .Config.Labels \"$hash_label\" }}" "$1" 2>/dev/null || true
}
sha() { sha256sum | cut -c1-64; }

base_hash="$(sha256sum "$here/base/bootstrap.sh" | cut -c1-64)"

# --- plan for the base ---------------------------------------------------------------------------
base_plan() {
  case "$base_mode" in
    slim) echo slim ;;
    debootstrap)
      if ! forced base && [[ "$(image_hash "$base_tag")" == "$base_hash" ]]; then echo up-to-date
      else echo debootstrap; fi ;;
    auto)
      if [[ -n "$(image_id "$slim_ref")" ]]; then echo slim
      elif ! forced base && [[ "$(image_hash "$base_tag")" == "$base_hash" ]]; then echo up-to-date
      else echo debootstrap; fi ;;  # after a failed `docker pull` of the slim image
  esac
}
if [[ $plan_only -eq 1 ]]; then base_plan; exit 0; fi

mkdir -p "$build_dir/logs"
build_dir="$(cd "$build_dir" && pwd)"
if command -v flock >/dev/null; then
  exec 9>"$build_dir/.lock"
  flock -n 9 || { log "another build is running; waiting for it"; flock 9; }
fi

t0="$(now_ms)"
replaced=()  # image IDs superseded by this run, removed at the end when nothing uses them

docker_build() {  # name context tag build-hash base-ref [extra docker build args...]
  local name="$1" ctx="$2" tag="$3" hash="$4" base="$5" logf="$build_dir/logs/$1.log" t old
  shift 5
  t="$(now_ms)"
  old="$(image_id "$tag")"
  log "$name: building $tag (FROM $base; log $logf)"
  local cmd=(docker build --force-rm -t "$tag" --build-arg "BASE=$base" --build-arg "BUILD_HASH=$hash" "$@" "$ctx")
  if [[ $verbose -eq 1 ]]; then
    "${cmd[@]}" 2>&1 | tee "$logf" || die "$name: docker build failed (log $logf)"
  elif ! "${cmd[@]}" >"$logf" 2>&1; then
    tail -n 40 "$logf" >&2
    die "$name: docker build failed (full log $logf)"
  fi
  [[ "$(image_hash "$tag")" == "$hash" ]] || die "$name: built image lacks label $hash_label=$hash"
  if [[ -n "$old" && "$old" != "$(image_id "$tag")" ]]; then replaced+=("$old"); fi
  log "$name: built in $(( ($(now_ms) - t) / 1000 )) s"
}

# Host python whose pip makes the wheels (it has the registry access and the CA bundle).
host_python() {
  local py="${SKILLOPT_PYTHON:-}"
  if [[ -z "$py" ]]; then
    if [[ -x "$repo/.venv/bin/python" ]]; then py="$repo/.venv/bin/python"; else py="python3"; fi
  fi
  "$py" -m pip --version >/dev/null 2>&1 || die "no usable pip for '$py': run scripts/setup.sh"
  echo "$py"
}

# pip download arguments selecting wheels for the BASE image's python, glibc and architecture.
target_pip_args() {  # base-ref
  local info pyver glibc arch minor m
  info="$(docker run --rm --network none "$1" python3 -c \
    'import platform, sys; print("%d.%d" % sys.version_info[:2], platform.libc_ver()[1])')" \
    || die "cannot run python3 in $1"
  read -r pyver glibc <<<"$info"
  arch="$(docker info -f '{{.Architecture}}')"
  case "$arch" in amd64) arch=x86_64 ;; arm64) arch=aarch64 ;; esac
  minor="${glibc#2.}"
  [[ "$glibc" == 2.* && "$minor" =~ ^[0-9]+$ ]] || die "cannot tell the glibc version of $1 ('$glibc')"
  local args=(--only-binary=:all: --python-version "$pyver" --implementation cp --abi "cp${pyver/./}")
  for ((m = minor; m >= 5; m--)); do args+=(--platform "manylinux_2_${m}_$arch"); done
  args+=(--platform "manylinux2014_$arch")
  if [[ "$arch" == x86_64 ]]; then args+=(--platform manylinux2010_x86_64 --platform manylinux1_x86_64); fi
  printf '%s\n' "${args[@]}"
}

# --- base ----------------------------------------------------------------------------------------
plan="$(base_plan)"
case "$plan" in
  slim)
    if [[ -z "$(image_id "$slim_ref")" ]] || forced base; then
      log "base: docker pull $slim_ref"
      if ! docker pull -q "$slim_ref" >"$build_dir/logs/pull.log" 2>&1 && [[ -z "$(image_id "$slim_ref")" ]]; then
        die "cannot pull $slim_ref ($(tail -n 1 "$build_dir/logs/pull.log")); use SKILLOPT_BASE=debootstrap or auto"
      fi
    fi
    base_ref="$slim_ref" ;;
  up-to-date)
    base_ref="$base_tag"
    if want base; then log "base: $base_tag up to date"; fi ;;
  debootstrap)
    base_ref="$base_tag"
    if [[ "$base_mode" == auto ]] && docker pull -q "$slim_ref" >"$build_dir/logs/pull.log" 2>&1; then
      log "base: pulled $slim_ref"
      base_ref="$slim_ref"
    else
      [[ "$base_mode" == auto ]] && log "base: $slim_ref not pullable (no registry); bootstrapping from Debian packages"
      old="$(image_id "$base_tag")"
      t="$(now_ms)"
      log "base: building $base_tag with debootstrap (~1 min; log $build_dir/logs/base.log)"
      if [[ $verbose -eq 1 ]]; then
        SKILLOPT_BUILD_DIR="$build_dir" bash "$here/base/bootstrap.sh" "$base_tag" 2>&1 | tee "$build_dir/logs/base.log" \
          || die "base: bootstrap failed (log $build_dir/logs/base.log)"
      elif ! SKILLOPT_BUILD_DIR="$build_dir" bash "$here/base/bootstrap.sh" "$base_tag" >"$build_dir/logs/base.log" 2>&1; then
        tail -n 40 "$build_dir/logs/base.log" >&2
        die "base: bootstrap failed (full log $build_dir/logs/base.log)"
      fi
      [[ "$(image_hash "$base_tag")" == "$base_hash" ]] || die "base: $base_tag lacks label $hash_label=$base_hash"
      if [[ -n "$old" && "$old" != "$(image_id "$base_tag")" ]]; then replaced+=("$old"); fi
      log "base: built in $(( ($(now_ms) - t) / 1000 )) s"
    fi ;;
esac
base_id="$(image_id "$base_ref")"
[[ -n "$base_id" ]] || die "base image $base_ref missing after resolving it"
if [[ "$base_ref" == "$slim_ref" ]] && want base; then log "base: using $slim_ref"; fi

# --- agent CLIs for the runtime (npm) -------------------------------------------------------------
# Pinned in docker/agents/versions.env. Host npm installs each package into .build/agents/<name>/
# (with --ignore-scripts: nothing from the packages runs on the host; the native binaries come as
# npm optional dependencies, not from install scripts). Only the files below are staged into the
# build context, as hard links; see docker/README.md for what is left out and why.
agents_file="$here/agents/versions.env"
agents_dir="$build_dir/agents"
read_agent_versions() {
  local line key val n=0
  codex_version=""
  claude_version=""
  [[ -f "$agents_file" ]] || die "agents: $agents_file not found"
  while IFS= read -r line || [[ -n "$line" ]]; do
    n=$((n + 1))
    line="${line#"${line%%[![:space:]]*}"}"
    line="${line%"${line##*[![:space:]]}"}"
    [[ -z "$line" || "$line" == \#* ]] && continue
    [[ "$line" =~ ^([A-Z_]+)=([0-9A-Za-z.+-]+)$ ]] \
      || die "agents: $agents_file:$n: expected KEY=version, got '$line'"
    key="${BASH_REMATCH[1]}"
    val="${BASH_REMATCH[2]}"
    case "$key" in
      CODEX_VERSION) codex_version="$val" ;;
      CLAUDE_VERSION) claude_version="$val" ;;
      *) die "agents: $agents_file:$n: unknown key $key (CODEX_VERSION, CLAUDE_VERSION)" ;;
    esac
  done <"$agents_file"
  [[ -n "$codex_version" ]] || die "agents: CODEX_VERSION missing in $agents_file"
  [[ -n "$claude_version" ]] || die "agents: CLAUDE_VERSION missing in $agents_file"
}
agent_pkg() {  # name -> npm package
  case "$1" in
    codex) echo "@openai/codex" ;;
    claude) echo "@anthropic-ai/claude-code" ;;
  esac
}
agent_version() {  # name -> pinned version
  case "$1" in
    codex) echo "$codex_version" ;;
    claude) echo "$claude_version" ;;
  esac
}
# The files to stage, "<path under node_modules> <path in the context's agents/<name>/>":
#   codex   the static musl binary, the bundled ripgrep, and the package manifest (without it the
#           binary does not find codex-path/rg: `codex doctor` then reports "search provider
#           system ... cannot find binary path"). Left out: codex-resources/bwrap (Codex's own
#           sandbox is bypassed, Docker is the sandbox), codex-resources/voice/ and
#           bin/codex-code-mode-host (not used by `codex exec`).
#   claude  the native glibc binary.
agent_files() {  # name
  case "$1" in
    codex)
      local v=@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl
      printf '%s\n' "$v/bin/codex bin/codex" "$v/codex-path/rg codex-path/rg" \
        "$v/codex-package.json codex-package.json" ;;
    claude)
      printf '%s\n' "@anthropic-ai/claude-code-linux-x64/claude claude" ;;
  esac
}
agent_platform_pkg() {  # name -> the npm package (optional dependency) holding the native files
  case "$1" in
    codex) echo "@openai/codex-linux-x64 (npm:@openai/codex@$codex_version-linux-x64)" ;;
    claude) echo "@anthropic-ai/claude-code-linux-x64@$claude_version" ;;
  esac
}
agent_installed() {  # name: the stamp names the pinned version and every staged file is there
  local name="$1" dir="$agents_dir/$1" src _
  [[ "$(cat "$dir/.skillopt-installed" 2>/dev/null)" == "$(agent_pkg "$name")@$(agent_version "$name") x86_64" ]] || return 1
  while read -r src _; do [[ -f "$dir/node_modules/$src" ]] || return 1; done < <(agent_files "$name")
}
npm_env=(env)
if [[ -z "${NODE_EXTRA_CA_CERTS:-}${npm_config_cafile:-}${NPM_CONFIG_CAFILE:-}" ]]; then
  for f in "${PIP_CERT:-}" "${SSL_CERT_FILE:-}" "${REQUESTS_CA_BUNDLE:-}"; do
    if [[ -n "$f" && -f "$f" ]]; then npm_env+=("NODE_EXTRA_CA_CERTS=$f"); break; fi
  done
fi
agent_install() {  # name
  local name="$1" spec dir="$agents_dir/$1" logf="$build_dir/logs/npm-$1.log" t src _ missing=()
  spec="$(agent_pkg "$name")@$(agent_version "$name")"
  command -v npm >/dev/null \
    || die "agents: npm not found (needed to install $spec): run scripts/setup.sh (it installs Debian's nodejs npm)"
  t="$(now_ms)"
  log "agents: npm install $spec (log $logf)"
  rm -rf "$dir.tmp"
  mkdir -p "$dir.tmp"
  if ! "${npm_env[@]}" npm install --prefix "$dir.tmp" --no-audit --no-fund --no-update-notifier \
      --ignore-scripts --loglevel=warn "$spec" >"$logf" 2>&1; then
    tail -n 20 "$logf" >&2
    die "agents: npm install $spec failed (log $logf)"
  fi
  while read -r src _; do
    if [[ ! -f "$dir.tmp/node_modules/$src" ]]; then missing+=("$src"); fi
  done < <(agent_files "$name")
  if [[ ${#missing[@]} -gt 0 ]]; then
    die "agents: $spec installed without ${missing[*]}: npm did not install $(agent_platform_pkg "$name") on this $(uname -m) host (only x86_64 is supported for now; log $logf)"
  fi
  echo "$spec x86_64" >"$dir.tmp/.skillopt-installed"
  rm -rf "$dir"
  mv "$dir.tmp" "$dir"
  log "agents: $spec installed in $(( ($(now_ms) - t) / 1000 )) s"
}
agent_stage() {  # name ctx-agents-dir: hard links (a copy when that fails) of only the needed files
  local name="$1" dst="$2/$1" src rel
  while read -r src rel; do
    mkdir -p "$(dirname "$dst/$rel")"
    cp -l "$agents_dir/$name/node_modules/$src" "$dst/$rel" 2>/dev/null \
      || cp "$agents_dir/$name/node_modules/$src" "$dst/$rel"
    # Modes are set here, not in the Dockerfile: a chmod in a later layer would copy the file.
    if [[ "$rel" == *.json ]]; then chmod 0644 "$dst/$rel"; else chmod 0755 "$dst/$rel"; fi
  done < <(agent_files "$name")
}
agents_layout() {  # the pinned packages and the staged layout: part of the runtime build hash
  local name
  for name in codex claude; do
    echo "agent $name $(agent_pkg "$name")@$(agent_version "$name")"
    agent_files "$name"
  done
}

# --- runtime -------------------------------------------------------------------------------------
if want runtime; then
  read_agent_versions
  runtime_hash="$( { (cd "$here/runtime" && sha256sum Dockerfile requirements.txt gvisor_compat.c); agents_layout; echo "base $base_id"; } | sha)"
  if ! forced runtime && [[ "$(image_hash "$runtime_tag")" == "$runtime_hash" ]]; then
    log "runtime: $runtime_tag up to date"
  else
    arch="$(docker info -f '{{.Architecture}}')"
    case "$arch" in
      x86_64|amd64) ;;
      *) die "runtime: the engine is $arch, but the agent CLIs are staged for x86_64 only: missing @openai/codex-linux-x64 -> an $arch build needs @openai/codex-linux-arm64 and @anthropic-ai/claude-code-linux-arm64 wired into docker/build.sh (agent_files)" ;;
    esac
    for name in codex claude; do
      if forced runtime || ! agent_installed "$name"; then agent_install "$name"
      else log "agents: $(agent_pkg "$name")@$(agent_version "$name") already installed ($agents_dir/$name)"; fi
    done
    ctx="$build_dir/ctx/runtime"
    rm -rf "$ctx"
    mkdir -p "$ctx/pydeps" "$ctx/agents" "$ctx/shim"
    cp "$here/runtime/Dockerfile" "$here/runtime/requirements.txt" "$ctx/"
    # The gVisor compatibility shim (gvisor_compat.c): the image has no compiler, the host's gcc
    # builds it (a bookworm glibc on both sides; it needs only syscall and errno).
    command -v gcc >/dev/null || die "runtime: gcc not found: the image's gVisor compatibility shim is compiled on the host (scripts/setup.sh installs gcc; or apt-get install gcc libc6-dev)"
    gcc -O2 -Wall -Wextra -Werror -shared -fPIC -o "$ctx/shim/libskillopt-gvisor.so" "$here/runtime/gvisor_compat.c" \
      || die "runtime: compiling docker/runtime/gvisor_compat.c failed"
    : >"$ctx/pydeps/.keep"
    for name in codex claude; do agent_stage "$name" "$ctx/agents"; done
    if ! docker run --rm --network none "$base_ref" python3 -c 'import openpyxl, pandas' >/dev/null 2>&1; then
      py="$(host_python)"
      pargs_s="$(target_pip_args "$base_ref")"
      mapfile -t pargs <<<"$pargs_s"
      log "runtime: $base_ref lacks openpyxl/pandas; downloading wheels on the host"
      "$py" -m pip download -q "${pargs[@]}" -d "$ctx/pydeps" -r "$here/runtime/requirements.txt" \
        >"$build_dir/logs/runtime-pip.log" 2>&1 \
        || { tail -n 20 "$build_dir/logs/runtime-pip.log" >&2; die "runtime: pip download failed"; }
    fi
    old_runtime="$(image_id "$runtime_tag")"
    docker_build runtime "$ctx" "$runtime_tag" "$runtime_hash" "$base_ref" \
      --build-arg "CODEX_VERSION=$codex_version" --build-arg "CLAUDE_VERSION=$claude_version"
    rm -rf "$ctx"  # hard links: it would keep a replaced CLI version's 700 MB alive
    # The CLIs must start as a rollout would run them. A failure puts the previous image back
    # under the tag (and drops the new one), so the next run does not take it as up to date.
    got="$(docker run --rm --network none --read-only --cap-drop ALL --security-opt no-new-privileges:true \
      --user 1000:1000 --tmpfs /workspace:rw,uid=1000,gid=1000 --tmpfs /tmp:rw "$runtime_tag" \
      sh -c 'codex --version; claude --version' 2>&1)" || true
    want_v="$(printf 'codex-cli %s\n%s (Claude Code)' "$codex_version" "$claude_version")"
    if [[ "$got" != "$want_v" ]]; then
      new_runtime="$(image_id "$runtime_tag")"
      if [[ -n "$old_runtime" && "$old_runtime" != "$new_runtime" ]]; then
        docker tag "$old_runtime" "$runtime_tag"
        docker image rm "$new_runtime" >/dev/null 2>&1 || true
      else
        docker image rm "$runtime_tag" >/dev/null 2>&1 || true
      fi
      die "runtime: agent CLI check failed: expected '${want_v//$'\n'/; }', got '${got//$'\n'/; }'"
    fi
    log "runtime: ${got//$'\n'/, }"
  fi
fi

# --- service -------------------------------------------------------------------------------------
# The files that make the project's wheel (pyproject's packages.find: skillopt*, sandbox*, controller*).
project_files() {
  (
    cd "$repo"
    for f in pyproject.toml setup.cfg setup.py MANIFEST.in README.md LICENSE; do
      if [[ -f "$f" ]]; then printf '%s\0' "$f"; fi
    done
    for d in skillopt sandbox controller; do
      if [[ -d "$d" ]]; then
        find "$d" \( -name __pycache__ -o -name '*.egg-info' \) -prune -o -type f ! -name '*.py[co]' -print0
      fi
    done
  ) | LC_ALL=C sort -z
}

# Debian packages the service image adds to the base: iptables, with which the service firewalls
# its exec-agent network (sandbox/gateway/network.py). Downloaded by the HOST's apt (same
# release as the base: bookworm) into .build/service-debs/, installed with dpkg in the image: no
# network inside the build. Only the ones the base lacks are staged.
service_debs=(iptables libip4tc2 libip6tc2 libxtables12 libnetfilter-conntrack3 libnfnetlink0 libnftnl11 libmnl0 netbase)
stage_service_debs() {  # ctx-debs-dir: the missing packages' .debs (cached), hard-linked there
  local dst="$1" cache="$build_dir/service-debs" have want=() p f
  have="$(docker run --rm --network none "$base_ref" dpkg-query -W -f '${Package}\n' 2>/dev/null || true)"
  for p in "${service_debs[@]}"; do grep -qx "$p" <<<"$have" || want+=("$p"); done
  [[ ${#want[@]} -gt 0 ]] || return 0
  command -v apt-get >/dev/null || die "service: apt-get not found: the service image's ${want[*]} come from the host's apt (Debian bookworm)"
  mkdir -p "$cache"
  for p in "${want[@]}"; do
    if ! compgen -G "$cache/${p}_*.deb" >/dev/null; then
      (cd "$cache" && apt-get download "$p" >>"$build_dir/logs/service-apt.log" 2>&1) \
        || die "service: apt-get download $p failed (log $build_dir/logs/service-apt.log; run apt-get update?)"
    fi
    for f in "$cache/${p}"_*.deb; do cp -l "$f" "$dst/" 2>/dev/null || cp "$f" "$dst/"; done
  done
}

if want service; then
  [[ -f "$repo/pyproject.toml" ]] || die "service: $repo/pyproject.toml not found"
  src_hash="$(project_files | (cd "$repo" && xargs -0 -r sha256sum) | sha)"
  service_hash="$( { (cd "$here/service" && sha256sum Dockerfile); echo "src $src_hash"; echo "base $base_id"; echo "debs ${service_debs[*]}"; } | sha)"
  if ! forced service && [[ "$(image_hash "$service_tag")" == "$service_hash" ]]; then
    log "service: $service_tag up to date"
  else
    py="$(host_python)"
    ctx="$build_dir/ctx/service"
    src="$build_dir/src/service"
    rm -rf "$ctx" "$src"
    mkdir -p "$ctx/wheelhouse/deps" "$ctx/wheelhouse/project" "$ctx/debs" "$src"
    cp "$here/service/Dockerfile" "$ctx/"
    : >"$ctx/debs/.keep"
    stage_service_debs "$ctx/debs"
    # Build from a copy of exactly the hashed files: nothing else leaks in, and the work tree
    # gets no build/ or *.egg-info droppings.
    project_files | (cd "$repo" && tar --null -T - -cf -) | tar -C "$src" -xf -
    log "service: building the project wheel and downloading dependency wheels on the host"
    plog="$build_dir/logs/service-pip.log"
    "$py" -m pip wheel -q --no-deps -w "$ctx/wheelhouse/project" "$src" >"$plog" 2>&1 \
      || { tail -n 20 "$plog" >&2; die "service: pip wheel of the project failed (log $plog)"; }
    wheels=("$ctx"/wheelhouse/project/*.whl)
    [[ ${#wheels[@]} -eq 1 && -f "${wheels[0]}" ]] || die "service: expected one project wheel, got: ${wheels[*]}"
    pargs_s="$(target_pip_args "$base_ref")"
    mapfile -t pargs <<<"$pargs_s"
    # The dependency wheels are cached under a key of the wheel's Requires-Dist and the target
    # platform, so an edit to the source alone does not resolve and download them again.
    # --force resolves them afresh (new releases).
    deps_key="$( { "$py" - "${wheels[0]}" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    for line in z.read(meta).decode().splitlines():
        if line.startswith(("Requires-Dist:", "Requires-Python:")):
            print(line)
PY
      printf '%s\n' "${pargs[@]}"; } | sha)"
    deps_cache="$build_dir/service-deps"
    if forced service || [[ "$(cat "$deps_cache/.key" 2>/dev/null)" != "$deps_key" ]]; then
      rm -rf "$deps_cache.tmp"
      mkdir -p "$deps_cache.tmp"
      # With the metrics extra (prometheus-client): a host serves `--metrics-listen`.
      "$py" -m pip download -q "${pargs[@]}" -d "$deps_cache.tmp" "${wheels[0]}[metrics]" >>"$plog" 2>&1 \
        || { tail -n 20 "$plog" >&2; die "service: pip download of the dependencies failed (log $plog)"; }
      rm -f "$deps_cache.tmp/$(basename "${wheels[0]}")"
      echo "$deps_key" >"$deps_cache.tmp/.key"
      rm -rf "$deps_cache"
      mv "$deps_cache.tmp" "$deps_cache"
    else
      log "service: dependency wheels unchanged (cached in $deps_cache)"
    fi
    cp -l "$deps_cache"/*.whl "$ctx/wheelhouse/deps/" 2>/dev/null || cp "$deps_cache"/*.whl "$ctx/wheelhouse/deps/"
    rm -rf "$src"
    docker_build service "$ctx" "$service_tag" "$service_hash" "$base_ref"
  fi
fi

# --- textworld ----------------------------------------------------------------------------------
# The runtime plus the game engine, for the textworld env's rollouts. The host's pip makes the
# wheels (jericho has no binary wheel: pip builds it from its sdist, which needs gcc and make on
# the host; the result is cached in .build/textworld-wheels/ under a key of the requirements).
if want textworld; then
  runtime_id="$(image_id "$runtime_tag")"
  [[ -n "$runtime_id" ]] || die "textworld: $runtime_tag is not built (it is the base of $textworld_tag): run docker/build.sh --only runtime"
  textworld_hash="$( { (cd "$here/textworld" && sha256sum Dockerfile requirements.txt skillopt_tw_warm.py); echo "runtime $runtime_id"; } | sha)"
  if ! forced textworld && [[ "$(image_hash "$textworld_tag")" == "$textworld_hash" ]]; then
    log "textworld: $textworld_tag up to date"
  else
    py="$(host_python)"
    wkey="$( { sha256sum <"$here/textworld/requirements.txt"; "$py" -c 'import sys; print(sys.version_info[:2])'; } | sha)"
    wcache="$build_dir/textworld-wheels"
    if forced textworld || [[ "$(cat "$wcache/.key" 2>/dev/null)" != "$wkey" ]]; then
      rm -rf "$wcache.tmp"
      mkdir -p "$wcache.tmp"
      wlog="$build_dir/logs/textworld-pip.log"
      log "textworld: making the wheels on the host (log $wlog)"
      "$py" -m pip wheel -q --no-deps -w "$wcache.tmp" -r "$here/textworld/requirements.txt" >"$wlog" 2>&1 \
        || { tail -n 20 "$wlog" >&2; die "textworld: pip wheel failed (log $wlog)"; }
      "$py" -m pip download -q --no-deps -d "$wcache.tmp" pip >>"$wlog" 2>&1 \
        || { tail -n 20 "$wlog" >&2; die "textworld: pip download of pip failed (log $wlog)"; }
      echo "$wkey" >"$wcache.tmp/.key"
      rm -rf "$wcache"
      mv "$wcache.tmp" "$wcache"
    else
      log "textworld: wheels unchanged (cached in $wcache)"
    fi
    ctx="$build_dir/ctx/textworld"
    rm -rf "$ctx"
    mkdir -p "$ctx/wheels"
    cp "$here/textworld/Dockerfile" "$here/textworld/requirements.txt" "$here/textworld/skillopt_tw_warm.py" "$ctx/"
    cp -l "$wcache"/*.whl "$ctx/wheels/" 2>/dev/null || cp "$wcache"/*.whl "$ctx/wheels/"
    # --network none: the build needs none (and an engine without a default bridge has none).
    docker_build textworld "$ctx" "$textworld_tag" "$textworld_hash" "$runtime_tag" --network none
    rm -rf "$ctx"
  fi
fi

# --- polyglot -----------------------------------------------------------------------------------
# The runtime plus the toolchains of the code-run languages, from Debian packages. The HOST's apt
# resolves them against the runtime image's own dpkg status (so exactly the missing packages,
# dependencies included, at bookworm's versions) and downloads the .debs into a cache; the
# build installs them from those files with no network.
polyglot_debs=(g++ nodejs golang-go default-jdk-headless python3-pytest)
if want polyglot; then
  runtime_id="$(image_id "$runtime_tag")"
  [[ -n "$runtime_id" ]] || die "polyglot: $runtime_tag is not built (it is the base of $polyglot_tag): run docker/build.sh --only runtime"
  polyglot_hash="$( { (cd "$here/polyglot" && sha256sum Dockerfile); echo "debs ${polyglot_debs[*]}"; echo "runtime $runtime_id"; } | sha)"
  if ! forced polyglot && [[ "$(image_hash "$polyglot_tag")" == "$polyglot_hash" ]]; then
    log "polyglot: $polyglot_tag up to date"
  else
    command -v apt-get >/dev/null || die "polyglot: apt-get not found: the toolchains come from the host's apt (Debian bookworm)"
    ctx="$build_dir/ctx/polyglot"
    cache="$build_dir/polyglot-debs"
    alog="$build_dir/logs/polyglot-apt.log"
    : >"$alog"
    rm -rf "$ctx"
    mkdir -p "$ctx/debs" "$cache/partial"
    cp "$here/polyglot/Dockerfile" "$ctx/"
    docker run --rm --network none --entrypoint cat "$runtime_tag" /var/lib/dpkg/status >"$ctx/status" \
      || die "polyglot: cannot read the dpkg status of $runtime_tag"
    # --print-uris: the exact files apt would fetch for THIS image (the host's own installed set
    # plays no part); the ones not in the cache yet are downloaded with apt-get download.
    apt_img=(apt-get -o "Dir::State::status=$ctx/status" -o Debug::NoLocking=1 -o "Dir::Cache::Archives=$cache"
             -y -q --no-install-recommends)
    mkdir -p "$ctx/nocache/partial"  # an empty cache: --print-uris lists every file, cached or not
    plan_debs() { "${apt_img[@]}" -o "Dir::Cache::Archives=$ctx/nocache" --print-uris install "${polyglot_debs[@]}" 2>>"$alog"; }
    if ! uris="$(plan_debs)"; then  # a fresh machine's apt has no package lists yet
      log "polyglot: apt cannot resolve the packages; apt-get update once"
      apt-get update -q >>"$alog" 2>&1 || true
      uris="$(plan_debs)" || { tail -n 20 "$alog" >&2; die "polyglot: apt cannot resolve ${polyglot_debs[*]} (log $alog)"; }
    fi
    mapfile -t files < <(sed -n "s/^'[^']*' \([^ ]*\.deb\) .*/\1/p" <<<"$uris")
    [[ ${#files[@]} -gt 0 ]] || die "polyglot: apt planned no packages (log $alog)"
    if ! "${apt_img[@]}" --download-only install "${polyglot_debs[@]}" >>"$alog" 2>&1; then
      tail -n 20 "$alog" >&2
      die "polyglot: downloading the packages failed (log $alog)"
    fi
    for f in "${files[@]}"; do
      cp -l "$cache/$f" "$ctx/debs/" 2>/dev/null || cp "$cache/$f" "$ctx/debs/" || die "polyglot: $f missing from $cache"
    done
    rm -rf "$ctx/status" "$ctx/nocache"
    log "polyglot: ${#files[@]} packages staged ($(du -sm "$ctx/debs" | cut -f1) MB)"
    docker_build polyglot "$ctx" "$polyglot_tag" "$polyglot_hash" "$runtime_tag" --network none
    rm -rf "$ctx"
  fi
fi

# --- superseded images, record, summary ----------------------------------------------------------
# Images this script built and then replaced are removed once nothing uses them: an untagged
# image that a container (e.g. a pool container of the old runtime) or a child image (the old
# runtime on an old base) still uses is kept and retried on the next run. IDs only ever enter
# this list here, so nothing built by anyone else is touched.
superseded="$build_dir/superseded-images"
descends_from() {  # image ancestor: walks the local parent chain (classic-builder images)
  local cur="$1" n=0
  while [[ -n "$cur" && $n -lt 200 ]]; do
    [[ "$cur" == "$2" ]] && return 0
    cur="$(docker image inspect -f '{{.Parent}}' "$cur" 2>/dev/null)" || return 1
    n=$((n + 1))
  done
  return 1
}
# An old base is also held by the untagged final images of old multi-stage builds (the pydeps and
# deps stages, kept as the classic builder's cache): drop those, and only those, first.
if [[ -s "$superseded" || ${#replaced[@]} -gt 0 ]]; then
  mapfile -t dangling < <(docker images -q --no-trunc -f dangling=true)
  while read -r id; do
    [[ -n "$id" && "$(docker image inspect -f '{{index .Config.Labels "org.skillopt.image"}}' "$id" 2>/dev/null)" == base ]] || continue
    for d in "${dangling[@]}"; do
      if [[ "$d" != "$id" ]] && descends_from "$d" "$id"; then docker image rm "$d" >/dev/null 2>&1 || true; fi
    done
  done < <({ cat "$superseded" 2>/dev/null || true; printf '%s\n' "${replaced[@]}"; })
fi
keep=()
while read -r id; do
  [[ -n "$id" ]] || continue
  tags="$(docker image inspect -f '{{len .RepoTags}}' "$id" 2>/dev/null)" || continue  # gone already
  if [[ "$tags" == 0 ]] && docker image rm "$id" >/dev/null 2>&1; then continue; fi
  if [[ "$tags" == 0 ]]; then keep+=("$id"); fi  # re-tagged by someone: theirs now, forget it
done < <({ cat "$superseded" 2>/dev/null || true; printf '%s\n' "${replaced[@]}"; } | tac | awk '!seen[$0]++')
printf '%s\n' "${keep[@]}" >"$superseded"

entry() {  # name ref -> one JSON member (empty when the image does not exist)
  local id
  id="$(image_id "$2")"
  [[ -n "$id" ]] || return 0
  docker image inspect -f "  \"$1\": {\"ref\": \"$2\", \"id\": \"{{.Id}}\", \"build_hash\": \"{{ index .Config.Labels \"$hash_label\" }}\", \"size_bytes\": {{.Size}}}" "$2"
}
show() {  # name ref
  local id size
  id="$(image_id "$2")"
  [[ -n "$id" ]] || return 0
  size="$(docker image inspect -f '{{.Size}}' "$2")"
  printf '  %-9s %-27s %s %5d MB\n' "$1" "$2" "$id" $((size / 1000000))
}
echo "images:"
show base "$base_ref"
if want runtime; then show runtime "$runtime_tag"; fi
if want service; then show service "$service_tag"; fi
if want textworld; then show textworld "$textworld_tag"; fi
if want polyglot; then show polyglot "$polyglot_tag"; fi
# images.json: this machine's images as of the last build. An image ID is the sha256 digest of
# the image's config (content-addressed); images built here have no registry digest.
{
  echo "{"
  { entry base "$base_ref"; entry runtime "$runtime_tag"; entry service "$service_tag"; entry textworld "$textworld_tag"; entry polyglot "$polyglot_tag"; } | sed '$!s/$/,/'
  echo "}"
} >"$build_dir/images.json.tmp"
mv "$build_dir/images.json.tmp" "$build_dir/images.json"
log "done in $(awk -v ms=$(( $(now_ms) - t0 )) 'BEGIN { printf "%.1f", ms / 1000 }') s"
