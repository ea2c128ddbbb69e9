#!/usr/bin/env bash
# Starts Debian's dockerd (the reference engine) on its own socket, data root and exec root under
# DIR, for side-by-side benchmarks; `stop DIR` ends it by its pid file. Never uses --bridge=none
# (that deletes the host's docker0).
#   bench/engine/reference-dockerd.sh start /tmp/refd   -> prints unix:///tmp/refd/docker.sock
#   bench/engine/reference-dockerd.sh stop /tmp/refd
set -euo pipefail
cmd=${1:?start|stop}
dir=${2:?directory}
case "$cmd" in
  start)
    command -v dockerd >/dev/null || { echo "dockerd not installed (Debian package docker.io)" >&2; exit 1; }
    mkdir -p "$dir"
    dockerd --host "unix://$dir/docker.sock" --data-root "$dir/data" --exec-root "$dir/exec" \
      --pidfile "$dir/docker.pid" --iptables=false --ip-masq=false >"$dir/dockerd.log" 2>&1 &
    for _ in $(seq 1 150); do
      if curl -sf --unix-socket "$dir/docker.sock" http://d/_ping >/dev/null 2>&1; then
        echo "unix://$dir/docker.sock"
        exit 0
      fi
      sleep 0.2
    done
    echo "reference dockerd did not start; see $dir/dockerd.log" >&2
    exit 1
    ;;
  stop)
    if [ -f "$dir/docker.pid" ]; then
      pid=$(cat "$dir/docker.pid")
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    fi
    # dockerd bind-mounts its data root onto itself; undo what it left under DIR, deepest first.
    findmnt -rn -o TARGET | grep -F "$dir/" | sort -r | while read -r m; do umount -l "$m" || true; done
    ;;
  *) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac
