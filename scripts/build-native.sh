#!/usr/bin/env bash
# Builds berth's small native helpers into dist/native/ (part of `npm run build`). A helper whose
# compiler or headers are missing is skipped with a note: the engine works without it.
#   berth-seccomp-bpf: compiles seccomp profiles to BPF once (needs gcc and libseccomp-dev).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p dist/native
out=dist/native/berth-seccomp-bpf
src=native/seccomp-bpf.c
if [ -x "$out" ] && [ "$out" -nt "$src" ]; then exit 0; fi
if command -v gcc >/dev/null 2>&1 && [ -f /usr/include/seccomp.h ]; then
  gcc -O2 -Wall -Wextra -Werror -o "$out.tmp" "$src" -lseccomp
  mv "$out.tmp" "$out"
else
  rm -f "$out"
  echo "note: gcc or libseccomp-dev missing, $out not built (seccomp profiles are compiled by the runtime per container)" >&2
fi
