#!/usr/bin/env bash
# Installs what berth needs on Debian 12 (run as root): the Debian packages, the npm packages,
# and the build. Idempotent and quiet: a second run changes nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  runc crun conmon           # OCI runtimes and the per-container process monitor
  gcc libc6-dev libseccomp-dev  # build berth-seccomp-bpf (seccomp filters compiled once for crun) and berth-sys
  busybox-static             # the rootfs of the seeded busybox image and of test images
  attr                       # setfattr: overlay opaque directories when applying image layers
  bzip2 xz-utils zstd        # decompressors of bzip2/xz/zstd image layers (gzip is in-process)
  containernetworking-plugins iptables iproute2
  nftables                   # nft: swarm VIP load balancing and the ingress routing mesh (nft -f per namespace)
  skopeo                     # registry client used by the tests
  apache2-utils              # htpasswd, for registry auth tests
  docker.io docker-registry  # reference systems: compared against by tests and benchmarks
  docker-compose             # compose 1.29 (docker-py underneath): a real client the tests drive
  python3-docker             # docker-py 5.0.3: the build scenarios of its own tests run against berth
  git                        # docker build with a git remote (the builder clones it)
  etcd-server etcd-client    # swarm mode: each manager engine runs its own etcd member (etcdctl for tests)
  ca-certificates curl jq
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Debian's docker.io enables dockerd and containerd units; berth does not want them running.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet docker 2>/dev/null; then
  systemctl disable --now docker docker.socket containerd >/dev/null 2>&1 || true
fi
# etcd-server enables the distribution's own etcd service; swarm mode starts its members itself
# and must never meet that one (it would hold 2379/2380 and /var/lib/etcd).
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
  if systemctl is-enabled --quiet etcd 2>/dev/null || systemctl is-active --quiet etcd 2>/dev/null; then
    systemctl disable --now etcd >/dev/null 2>&1 || true
  fi
fi

if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  # The npm mirror here lacks some other platforms' optional binaries, and npm leaves those out of
  # a lock file it writes, which its own `npm ci` then refuses: fall back to installing from it.
  npm ci --no-audit --no-fund --loglevel=error ||
    npm install --no-audit --no-fund --loglevel=error
fi
npm run --silent build
