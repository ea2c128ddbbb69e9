#!/usr/bin/env bash
# Runs node's test runner (TypeScript through tsx) over every *.test.ts below the given folders.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(find "${@:-test}" -name '*.test.ts' -type f | sort)
if [ "${#files[@]}" -eq 0 ]; then
  echo "no test files under: $*" >&2
  exit 1
fi
exec node --import tsx --test --test-reporter=spec --test-concurrency="${TEST_CONCURRENCY:-2}" \
  --test-timeout="${TEST_TIMEOUT_MS:-300000}" "${files[@]}"
