#!/usr/bin/env bash
# Deploys this project's jobs: the function, its Firestore ledger and one Cloud Scheduler job per job
# in src/jobs.ts. The work is the scheduler-run-once package's (`run-once deploy`), so a new version
# of the package brings its fixes; `./deploy.sh --help` lists every input. NODE_BIN names the Node
# (22.18 or later) that runs it when the `node` on PATH is older.
#
#   GOOGLE_CLOUD_PROJECT=my-project REGION=us-central1 ./deploy.sh [--dry-run] [--prune]
set -euo pipefail
cd -- "$(dirname -- "${BASH_SOURCE[0]}")"
node_bin="${NODE_BIN:-node}"
run_once=node_modules/scheduler-run-once/bin/run-once.cjs
if [[ ! -f "$run_once" ]]; then
  echo "deploy.sh: ${run_once} is missing: run npm install in $(pwd) first" >&2
  exit 2
fi
if ! node_path="$(command -v -- "$node_bin")" || [[ -d "$node_path" ]]; then
  echo "deploy.sh: no Node.js at ${node_bin@Q}: install Node.js 22.18 or later, or set NODE_BIN=/path/to/node" >&2
  exit 2
fi
exec "$node_bin" "$run_once" deploy "$@"
