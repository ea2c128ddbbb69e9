#!/usr/bin/env bash
# Installs what berth needs, builds it, and starts `berth up` (engine + registry with defaults) in
# the background. Logs go to /var/log/berth.log; `bash scripts/up.sh stop` stops it, `bash
# scripts/up.sh reload` has it read /etc/berth/daemon.json again (SIGHUP).
set -euo pipefail
cd "$(dirname "$0")/.."
pidfile=/run/berth-up.pid
if [ "${1:-}" = "stop" ]; then
  if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    kill "$(cat "$pidfile")"
    for _ in $(seq 1 100); do kill -0 "$(cat "$pidfile")" 2>/dev/null || break; sleep 0.1; done
    echo "berth stopped (containers keep running; 'berth up' finds them again)"
  else
    echo "berth is not running"
  fi
  rm -f "$pidfile"
  exit 0
fi
if [ "${1:-}" = "reload" ]; then
  if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    kill -HUP "$(cat "$pidfile")"
    echo "berth reloads its configuration file (see /var/log/berth.log)"
    exit 0
  fi
  echo "berth is not running" >&2
  exit 1
fi
bash scripts/install-deps.sh
if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
  echo "berth is already running (pid $(cat "$pidfile"))"
  exit 0
fi
nohup ./bin/berth up >>/var/log/berth.log 2>&1 &
echo $! >"$pidfile"
for _ in $(seq 1 300); do
  if curl -sf --unix-socket /run/berth/berth.sock http://engine/_ping >/dev/null 2>&1; then
    echo "berth engine: unix:///run/berth/berth.sock   (docker -H unix:///run/berth/berth.sock ...)"
    echo "berth registry: http://127.0.0.1:5000"
    echo "logs: /var/log/berth.log; stop: bash scripts/up.sh stop"
    exit 0
  fi
  if ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    echo "berth up failed; last log lines:" >&2
    tail -n 20 /var/log/berth.log >&2
    exit 1
  fi
  sleep 0.2
done
echo "berth did not answer within 60 s; see /var/log/berth.log" >&2
exit 1
