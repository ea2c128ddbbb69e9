#!/usr/bin/env bash
# Bundles the compiled registry command (dist/cli/registry.command.js and what it imports) into
# dist/registry-bundle/ (part of `npm run build`, after tsc). A serving registry then loads one
# module and a few shared chunks instead of ~60 modules: Node's ESM loader resolving and loading
# ~60 modules runs its own path helpers hot enough to wake TurboFan, which costs the idle process
# ~4 MiB of RSS for good (bench/README.md, "Registry: memory"). The lazy imports (gc, proxy,
# notifications, auth) stay lazy: each is a chunk loaded when used. npm packages stay external.
# src/cli/main.ts loads the bundle only when it is not older than tsc's output (a bare `tsc` after
# it makes main fall back to the module tree rather than run stale code).
set -euo pipefail
cd "$(dirname "$0")/.."
out=dist/registry-bundle
rm -rf "$out"
node_modules/.bin/esbuild dist/cli/registry.command.js --bundle --splitting --format=esm \
  --platform=node --target=node20 --packages=external --sourcemap \
  --outdir="$out" --chunk-names='chunks/[name]-[hash]' --log-level=warning
