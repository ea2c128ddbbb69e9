#!/usr/bin/env bash
# The whole test suite: installs what it needs, builds, checks format, lint and types, then runs
# unit and integration tests and the fuzzers' CI runs (test/fuzz, docs/testing.md). The structure check refuses import circles and imports across the
# layers' "never" rules (scripts/check-structure.ts). This is what README's second command and .ci/run run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
npx biome ci .
node --import tsx scripts/check-structure.ts
npx tsc -p tsconfig.test.json --noEmit
bash scripts/run-tests.sh test/unit test/integration test/fuzz
