#!/usr/bin/env bash
# Deploys this project's jobs: the function, its Firestore ledger and one Cloud Scheduler job per job
# in src/jobs.ts. The work is done by the scheduler-run-once package's deploy.sh, so a new version
# of the package brings its fixes; `./deploy.sh --help` lists every input.
#
#   GOOGLE_CLOUD_PROJECT=my-project REGION=us-central1 ./deploy.sh [--dry-run] [--prune]
set -euo pipefail
cd -- "$(dirname -- "${BASH_SOURCE[0]}")"
exec bash node_modules/scheduler-run-once/deploy.sh "$@"
