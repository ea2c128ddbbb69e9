#!/usr/bin/env bash
# Builds berth's small native helpers into dist/native/ (part of `npm run build`). A helper whose
# compiler or headers are missing is skipped with a note: the engine works without it.
#   berth-seccomp-bpf: compiles seccomp profiles to BPF once (needs gcc and libseccomp-dev).
#   berth-sys: the engine's long-lived helper for mounts, network namespaces and detached spawns
#              (needs gcc and libc6-dev); without it the engine runs mount/umount/unshare per call.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p dist/native

out=dist/native/berth-seccomp-bpf
src=native/seccomp-bpf.c
if ! { [ -x "$out" ] && [ "$out" -nt "$src" ]; }; then
  if command -v gcc >/dev/null 2>&1 && [ -f /usr/include/seccomp.h ]; then
    gcc -O2 -Wall -Wextra -Werror -o "$out.tmp" "$src" -lseccomp
    mv "$out.tmp" "$out"
  else
    rm -f "$out"
    echo "note: gcc or libseccomp-dev missing, $out not built (seccomp profiles are compiled by the runtime per container)" >&2
  fi
fi

out=dist/native/berth-sys
src=native/berth-sys.c
if ! { [ -x "$out" ] && [ "$out" -nt "$src" ]; }; then
  if command -v gcc >/dev/null 2>&1 && [ -f /usr/include/stdio.h ]; then
    gcc -O2 -Wall -Wextra -Werror -o "$out.tmp" "$src"
    mv "$out.tmp" "$out"
  else
    rm -f "$out"
    echo "note: gcc or libc6-dev missing, $out not built (mounts and network namespaces run host tools per call)" >&2
  fi
fi
