#!/usr/bin/env bash
# The whole test suite: installs what it needs, builds, checks format, lint and types, then runs
# unit and integration tests. This is what README's second command and .ci/run run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
npx biome ci .
npx tsc -p tsconfig.test.json --noEmit
bash scripts/run-tests.sh test/unit test/integration
