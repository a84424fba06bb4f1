#!/usr/bin/env bash
# Deploys handleScheduledJob as a private Cloud Run function (2nd gen) with one Cloud Scheduler job
# per job declared in src/jobs.ts, from the project it runs in, in one command. Re-running updates
# everything in place. The project's own deploy.sh runs it in the project's root:
#
#   GOOGLE_CLOUD_PROJECT=my-project REGION=us-central1 ./deploy.sh [--dry-run] [--prune] [--run-deploy]
#
# Two deploy paths, one deployment: by default the function is deployed with `gcloud functions
# deploy --gen2` (the Cloud Functions v2 API); with --run-deploy, with `gcloud run deploy --function`
# (the Cloud Run Admin API), its URL read and its invoker bound through `gcloud run services`.
# Everything else (accounts, Firestore, Scheduler jobs, metrics) is the same on both.
#
# Every input is an environment variable; `./deploy.sh --help` lists them with their defaults. The
# jobs (ids, schedules, time zones, retry settings) are read from the code with `node ops/jobs.ts
# --deploy`, which needs Node.js 22.18 or later.
set -euo pipefail

if ((BASH_VERSINFO[0] < 4 || (BASH_VERSINFO[0] == 4 && BASH_VERSINFO[1] < 4))); then
  echo "deploy.sh: needs bash 4.4 or later (this is ${BASH_VERSION})" >&2
  exit 2
fi

readonly ENTRY_POINT=handleScheduledJob
# The library's root, which holds this script, src/ (in a checkout) and dist/.
ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
readonly ROOT
# The project deployed: the directory this runs in, which holds package.json and src/jobs.ts.
PROJECT_DIR="$(pwd)"
readonly PROJECT_DIR
# The library's module $1 (e.g. ops/jobs) as Node runs it: the TypeScript source in a checkout of the
# library, the compiled file in the published package, which ships dist/ and not src/.
library_module() {
  if [[ -f "${ROOT}/src/$1.ts" ]]; then
    printf '%s\n' "${ROOT}/src/$1.ts"
  else
    printf '%s\n' "${ROOT}/dist/$1.js"
  fi
}
# The first Node.js that runs ops/jobs.ts (TypeScript) without a flag: package.json's engines.
# Node 23 strips types without a flag from 23.6 on.
readonly NODE_MIN_MAJOR=22 NODE_MIN_MINOR=18 NODE_23_MIN_MINOR=6
# The fields of one line of `node ops/jobs.ts --deploy` (deployLines in ops/format-jobs.ts).
readonly DEPLOY_LINE_FIELDS=12
# What a dry run with --assume-existing takes `scheduler jobs list` to find besides the declared jobs.
readonly DRY_RUN_UNDECLARED_JOB=UNDECLARED-JOB
# Placeholder for the function URL, which exists only once the function does: a valid URL so that
# every printed command still parses.
readonly DRY_RUN_URL=https://FUNCTION_URL.invalid
readonly APIS=(
  cloudfunctions.googleapis.com
  run.googleapis.com
  cloudbuild.googleapis.com
  artifactregistry.googleapis.com
  cloudscheduler.googleapis.com
  firestore.googleapis.com
)

usage() {
  cat <<'EOF'
Usage: GOOGLE_CLOUD_PROJECT=ID REGION=REGION ./deploy.sh [--dry-run] [--assume-existing] [--prune]
                                                          [--run-deploy]

Deploys handleScheduledJob as a private 2nd gen Cloud Run function, with a Firestore TTL policy on
its run ledger, and one Cloud Scheduler HTTP job (OIDC token) per job declared in src/jobs.ts, each
with its own id, schedule, time zone and retry settings. Idempotent: re-running updates the function
and the jobs in place. Scheduler jobs that call the function but are no longer declared are listed,
and deleted only with --prune.

Options:
  --dry-run          Print every gcloud command, one per line, shell-quoted, and run none.
                     Existence checks are printed and taken as "missing": the create path is shown.
  --assume-existing  With --dry-run: take every existence check as "found" (shows the update path),
                     and the job list as holding one undeclared job, UNDECLARED-JOB.
  --prune            Delete Scheduler jobs that call this function but are no longer declared.
  --run-deploy       Deploy with `gcloud run deploy --function` (Cloud Run Admin API: a function
                     managed as a Cloud Run service) instead of `gcloud functions deploy --gen2`
                     (Cloud Functions v2 API, the default). Stops, changing nothing, if the function
                     exists on the other path, and prints the command that moves it
                     (`gcloud functions detach` to the Cloud Run Admin API). A dry run takes the
                     other path's function as missing, with --assume-existing too.
  -h, --help         This help.

Required:   GOOGLE_CLOUD_PROJECT, REGION
Jobs:       declared in code (src/job.ts, src/jobs.ts); read with Node.js >= 22.18 (`node` on PATH,
            or NODE_BIN=/path/to/node); JOBS_MODULE=path reads another module that exports `jobs`.
            A job with catchUp also lets the runtime account invoke the function (the run audit
            delivers its late slots to the function itself).
Optional (default):
  FUNCTION_NAME (scheduler-run-once)   RUNTIME (nodejs24)               FUNCTION_TIMEOUT_SECONDS (180)
  LEASE_SECONDS (300)                  RETENTION_SECONDS (2592000)      RUNS_COLLECTION (scheduler_runs)
  FIRESTORE_DATABASE ((default))       RUN_KEY_SCOPE (PROJECT/REGION)   LOG_LEVEL (info)
  RUNTIME_SA_NAME (FUNCTION_NAME-run)  INVOKER_SA_NAME (FUNCTION_NAME-invoker)
  FIRESTORE_TIMEOUT_SECONDS, RUN_KEY_SCOPE_HEADERS, RUN_KEY_SCOPE_PARAMS (unset: the function's defaults)
  JOB_HEADERS (KEY=VALUE,... sent by every job), JOB_QUERY (a=b&c=d appended to every job's URL)
  AUTH_MODE (platform): verify-oidc turns Cloud Run's invoker IAM check off and has the function
    verify the OIDC token itself; OIDC_AUDIENCE (https://REGION-PROJECT.cloudfunctions.net/FUNCTION_NAME)
  ALERT_CHANNELS (unset): notification channels (projects/P/notificationChannels/ID,...) to alert on
    missed, finally failed and lease-lost runs, and on no processed run of a job for
    ALERT_ABSENCE_PERIODS (2) of its periods; uses gcloud alpha monitoring. Log-based metrics of the
    runs (processed, failed, failed-after-retries, missed, late, lease-lost, by job) are always created.
  EXAMPLE (unset): workflows, cloud-run-job or cloud-build also grants the runtime account the
    roles of that proxy example (examples/*/README.md); cloud-run-job needs EXAMPLE_CLOUD_RUN_JOB,
    the Cloud Run job in REGION.
  DRY_RUN=1 is the same as --dry-run.
EOF
}

DRY_RUN="${DRY_RUN:-0}"
ASSUME_EXISTING=0
PRUNE=0
RUN_DEPLOY=0
while (($# > 0)); do
  case "$1" in
    --dry-run) DRY_RUN=1 ;;
    --assume-existing) ASSUME_EXISTING=1 ;;
    --prune) PRUNE=1 ;;
    --run-deploy) RUN_DEPLOY=1 ;;
    -h | --help)
      usage
      exit 0
      ;;
    *)
      echo "deploy.sh: unknown argument ${1@Q}" >&2
      usage >&2
      exit 2
      ;;
  esac
  shift
done
if [[ "$DRY_RUN" != 0 && "$DRY_RUN" != 1 ]]; then
  echo "deploy.sh: DRY_RUN must be 0 or 1, not ${DRY_RUN@Q}" >&2
  exit 2
fi
if ((ASSUME_EXISTING && !DRY_RUN)); then
  echo "deploy.sh: --assume-existing only applies to --dry-run" >&2
  exit 2
fi

# ----------------------------------------------------------------------------------------------
# Inputs: every variable resolved to its value or default here, then checked all at once.
# ----------------------------------------------------------------------------------------------
GOOGLE_CLOUD_PROJECT="${GOOGLE_CLOUD_PROJECT:-}"
REGION="${REGION:-}"
FUNCTION_NAME="${FUNCTION_NAME:-scheduler-run-once}"
RUNTIME="${RUNTIME:-nodejs24}"
FUNCTION_TIMEOUT_SECONDS="${FUNCTION_TIMEOUT_SECONDS:-180}"
NODE_BIN="${NODE_BIN:-node}"
JOBS_MODULE="${JOBS_MODULE:-}"
LEASE_SECONDS="${LEASE_SECONDS:-300}"
RETENTION_SECONDS="${RETENTION_SECONDS:-2592000}"
RUNS_COLLECTION="${RUNS_COLLECTION:-scheduler_runs}"
FIRESTORE_DATABASE="${FIRESTORE_DATABASE:-(default)}"
RUN_KEY_SCOPE="${RUN_KEY_SCOPE:-${GOOGLE_CLOUD_PROJECT}/${REGION}}"
RUNTIME_SA_NAME="${RUNTIME_SA_NAME:-${FUNCTION_NAME}-run}"
INVOKER_SA_NAME="${INVOKER_SA_NAME:-${FUNCTION_NAME}-invoker}"
LOG_LEVEL="${LOG_LEVEL:-info}"
FIRESTORE_TIMEOUT_SECONDS="${FIRESTORE_TIMEOUT_SECONDS:-}"
RUN_KEY_SCOPE_HEADERS="${RUN_KEY_SCOPE_HEADERS:-}"
RUN_KEY_SCOPE_PARAMS="${RUN_KEY_SCOPE_PARAMS:-}"
JOB_HEADERS="${JOB_HEADERS:-}"
JOB_QUERY="${JOB_QUERY:-}"
AUTH_MODE="${AUTH_MODE:-platform}"
ALERT_CHANNELS="${ALERT_CHANNELS:-}"
ALERT_ABSENCE_PERIODS="${ALERT_ABSENCE_PERIODS:-2}"
# With verify-oidc the audience must be known before the function exists (it is in the function's
# environment): the function's cloudfunctions.net address is, unlike its run.app URL.
OIDC_AUDIENCE="${OIDC_AUDIENCE:-https://${REGION}-${GOOGLE_CLOUD_PROJECT}.cloudfunctions.net/${FUNCTION_NAME}}"

# The function's own limits (src/config.ts): a lease of at most a day, a Firestore timeout of at
# most 600 s, a retention of at most a year.
readonly MAX_LEASE_SECONDS=86400 MAX_FIRESTORE_TIMEOUT_SECONDS=600 MAX_SECONDS=31536000
problems=()
# Numbers that failed their own check, so that no rule between numbers reports them twice.
declare -A invalid_number=()

problem() { problems+=("$*"); }

# Checks that variable $1 holds a whole number from $2 to $3 and rewrites it without leading zeros.
check_number() {
  local name="$1" min="$2" max="$3" what="$4" value="${!1}"
  if [[ ! "$value" =~ ^[0-9]{1,9}$ ]] || ((10#$value < min || 10#$value > max)); then
    problem "$name=${value@Q}: must be a whole number of $what from $min to $max"
    invalid_number[$name]=1
    return 0
  fi
  printf -v "$name" '%d' "$((10#$value))"
}

# Succeeds if every number named passed its own check.
numbers_valid() {
  local name
  for name in "$@"; do [[ -z "${invalid_number[$name]:-}" ]] || return 1; done
}

# Checks that variable $1 matches the regular expression $2, else reports $3.
check_pattern() {
  local name="$1" pattern="$2" rule="$3" value="${!1}"
  if [[ ! "$value" =~ $pattern ]]; then problem "$name=${value@Q}: $rule"; fi
}

# Checks that every name in the comma-separated list $1 (as the function reads it) is a key of the
# list $2 of KEY=VALUE items separated by $3: the function refuses a delivery without it.
check_sent() {
  local names="$1" list="$2" separator="$3" source="$4" option="$5" name item key found
  local -a wanted items
  IFS=',' read -r -a wanted <<<"$names"
  IFS="$separator" read -r -a items <<<"$list"
  for name in "${wanted[@]}"; do
    name="${name//[[:space:]]/}"
    [[ -n "$name" ]] || continue
    found=0
    for item in "${items[@]}"; do
      # Header names are case-insensitive; query parameter names are not.
      key="${item%%=*}"
      if [[ "$key" == "$name" || ("$separator" == , && "${key,,}" == "${name,,}") ]]; then found=1; fi
    done
    if ((!found)); then
      problem "$source must include ${name@Q}: $option puts it in the run id, so the function refuses a delivery without it"
    fi
  done
}

# Inputs that moved into the job declarations, each with the declaration field that replaced it.
readonly MOVED_TO_CODE=(
  SCHEDULE=schedule JOB_ID=id TIME_ZONE=timeZone ATTEMPT_DEADLINE_SECONDS=attemptDeadlineSeconds
  MAX_RETRY_ATTEMPTS=retryCount MAX_RETRY_DURATION_SECONDS=maxRetryDurationSeconds
  MIN_BACKOFF_SECONDS=minBackoffSeconds MAX_BACKOFF_SECONDS=maxBackoffSeconds MAX_DOUBLINGS=maxDoublings
)

# The declared jobs, one entry per job, in declaration order (filled by read_jobs).
job_ids=() job_schedules=() job_zones=() job_deadlines=() job_retries=() job_retry_durations=()
job_min_backoffs=() job_max_backoffs=() job_doublings=() job_retry_windows=() job_judging_delays=()
# The declared jobs with catchUp (src/policy/catch-up.ts), whose late slots the run audit delivers
# to the function itself as its runtime account (filled by read_jobs).
catch_up_jobs=()

# Whether NODE_BIN cannot read the declarations because it is missing or older than
# NODE_MIN_MAJOR.NODE_MIN_MINOR, and if so records the problem: asked only once reading them failed,
# so a deploy starts one Node process fewer.
node_too_old() {
  local version major minor
  if ! version="$("$NODE_BIN" -p 'process.versions.node' 2>/dev/null)" || [[ ! "$version" =~ ^([0-9]+)\.([0-9]+)\. ]]; then
    problem "deploy.sh reads the job declarations (src/jobs.ts) with Node.js ${NODE_MIN_MAJOR}.${NODE_MIN_MINOR} or later," \
"and ${NODE_BIN@Q} did not run: install Node.js, put it on PATH, or set NODE_BIN=/path/to/node"
    return 0
  fi
  major="${BASH_REMATCH[1]}" minor="${BASH_REMATCH[2]}"
  if ((major < NODE_MIN_MAJOR || (major == NODE_MIN_MAJOR && minor < NODE_MIN_MINOR) ||
    (major == 23 && minor < NODE_23_MIN_MINOR))); then
    problem "deploy.sh reads the job declarations (src/jobs.ts) with Node.js ${NODE_MIN_MAJOR}.${NODE_MIN_MINOR} or later" \
"(it runs TypeScript without a build), and ${NODE_BIN@Q} is ${version}: put a newer node first on PATH or set NODE_BIN=/path/to/node"
    return 0
  fi
  return 1
}

# Records why `node ops/jobs.ts --deploy` failed, from its stderr in FILE: each problem of an
# invalid declaration (a ConfigError) on a line of its own, or the first lines of any other error.
declaration_problems() {
  local file="$1" line
  if [[ "$(head -n 1 "$file")" == "Invalid configuration:" ]]; then
    while IFS= read -r line; do
      if [[ "$line" == "  - "* ]]; then problem "${JOBS_MODULE:-src/jobs.ts}: ${line#  - }"; fi
    done <"$file"
  else
    problem "reading the job declarations (node ops/jobs.ts --deploy) failed:"$'\n'"$(head -n 20 "$file")"
  fi
}

# Reads the job declarations with `node ops/jobs.ts --deploy`: one tab-separated line per job
# (ops/format-jobs.ts, DEPLOY_FIELDS, then the retry window and judging delay in seconds and catchUp.slots or
# "none"), already validated by validateJobs (src/policy/job-declaration.ts).
read_jobs() {
  local output errors line
  local -a fields
  errors="$(mktemp)"
  if ! output="$(JOBS_MODULE="$JOBS_MODULE" "$NODE_BIN" --no-warnings "$(library_module ops/jobs)" --deploy 2>"$errors")"; then
    node_too_old || declaration_problems "$errors"
    rm -f -- "$errors"
    return 0
  fi
  rm -f -- "$errors"
  while IFS= read -r line; do
    [[ -n "$line" ]] || continue
    IFS=$'\t' read -r -a fields <<<"$line"
    if ((${#fields[@]} != DEPLOY_LINE_FIELDS)); then
      problem "reading the job declarations (node ops/jobs.ts --deploy) printed a line that is not a job's: ${line@Q};" \
"does ${JOBS_MODULE:-src/jobs.ts}, or a module it imports, print to stdout as it loads? Print to stderr (console.error) instead"
      continue
    fi
    job_ids+=("${fields[0]}") job_schedules+=("${fields[1]}") job_zones+=("${fields[2]}")
    job_deadlines+=("${fields[3]}") job_retries+=("${fields[4]}") job_retry_durations+=("${fields[5]}")
    job_min_backoffs+=("${fields[6]}") job_max_backoffs+=("${fields[7]}") job_doublings+=("${fields[8]}")
    job_retry_windows+=("${fields[9]}") job_judging_delays+=("${fields[10]}")
    if [[ "${fields[11]}" != none ]]; then catch_up_jobs+=("${fields[0]}"); fi
  done <<<"$output"
  # A real Node refuses declarations without a job; a NODE_BIN that runs nothing prints nothing.
  if [[ -z "$output" ]]; then
    node_too_old || problem "reading the job declarations (${NODE_BIN@Q} ops/jobs.ts --deploy) printed no job and no error:" \
"set NODE_BIN to Node.js ${NODE_MIN_MAJOR}.${NODE_MIN_MINOR} or later, or unset it for the node on PATH"
  fi
}

# ----------------------------------------------------------------------------------------------
# Opt-in: the roles of a proxy example (examples/*/README.md), granted to the runtime account.
#   EXAMPLE=workflows      roles/workflows.invoker on the project (create and list executions;
#                          gcloud has no per-workflow IAM binding)
#   EXAMPLE=cloud-run-job  roles/run.jobsExecutorWithOverrides (run.jobs.runWithOverrides) and
#                          roles/run.viewer (run.executions.list) on the Cloud Run job
#                          EXAMPLE_CLOUD_RUN_JOB in REGION
#   EXAMPLE=cloud-build    roles/cloudbuild.builds.editor on the project (cloudbuild.builds.create
#                          runs a trigger, cloudbuild.builds.list lists builds)
# Unset (the default): nothing beyond roles/datastore.user.
# ----------------------------------------------------------------------------------------------
EXAMPLE="${EXAMPLE:-}"
EXAMPLE_CLOUD_RUN_JOB="${EXAMPLE_CLOUD_RUN_JOB:-}"

# Called by validate(): reports bad example inputs with the others, before anything runs.
check_example() {
  case "$EXAMPLE" in
    '' | workflows | cloud-build) ;;
    cloud-run-job)
      # A Cloud Run job name: up to 63 of a-z, 0-9, "-", starting with a letter.
      if [[ ! "$EXAMPLE_CLOUD_RUN_JOB" =~ ^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$ ]]; then
        problem "EXAMPLE=cloud-run-job needs EXAMPLE_CLOUD_RUN_JOB, the name of the Cloud Run job in ${REGION:-REGION} that the proxy runs (1-63 of a-z, 0-9, \"-\", starting with a letter), not ${EXAMPLE_CLOUD_RUN_JOB@Q}"
      fi
      ;;
    *) problem "EXAMPLE=${EXAMPLE@Q}: must be workflows, cloud-run-job or cloud-build (or unset)" ;;
  esac
  if [[ -n "$EXAMPLE_CLOUD_RUN_JOB" && "$EXAMPLE" != cloud-run-job ]]; then
    problem "EXAMPLE_CLOUD_RUN_JOB is set but EXAMPLE is ${EXAMPLE:-unset}: it is only read with EXAMPLE=cloud-run-job"
  fi
}

# The example's roles, for the summary.
example_roles() {
  case "$EXAMPLE" in
    workflows) printf ', roles/workflows.invoker' ;;
    cloud-run-job) printf ', roles/run.jobsExecutorWithOverrides and roles/run.viewer on job %s' "$EXAMPLE_CLOUD_RUN_JOB" ;;
    cloud-build) printf ', roles/cloudbuild.builds.editor' ;;
  esac
}

# Grants the example's roles to the runtime account (after its roles/datastore.user).
grant_example() {
  local member="serviceAccount:${RUNTIME_SA_EMAIL}" role
  case "$EXAMPLE" in
    workflows | cloud-build)
      role=roles/workflows.invoker
      if [[ "$EXAMPLE" == cloud-build ]]; then role=roles/cloudbuild.builds.editor; fi
      say "==> Example ${EXAMPLE}: ${role} for ${RUNTIME_SA_EMAIL}"
      run_retrying gcloud projects add-iam-policy-binding "$GOOGLE_CLOUD_PROJECT" \
        --member="$member" --role="$role" --condition=None --format=none --quiet
      ;;
    cloud-run-job)
      say "==> Example cloud-run-job: roles on the Cloud Run job ${EXAMPLE_CLOUD_RUN_JOB} for ${RUNTIME_SA_EMAIL}"
      for role in roles/run.jobsExecutorWithOverrides roles/run.viewer; do
        run_retrying gcloud run jobs add-iam-policy-binding "$EXAMPLE_CLOUD_RUN_JOB" \
          --region="$REGION" "${project[@]}" --member="$member" --role="$role" --format=none --quiet
      done
      ;;
  esac
}
# ------------------------------------------------------------------------------ end of opt-in --

validate() {
  # Byte-wise character classes, whatever the caller's locale.
  local LC_ALL=C
  local moved name i

  [[ -n "$GOOGLE_CLOUD_PROJECT" ]] || problem "GOOGLE_CLOUD_PROJECT is required: the project id, e.g. my-project"
  [[ -n "$REGION" ]] || problem "REGION is required: the region of the function and the jobs, e.g. us-central1"

  if [[ -n "$GOOGLE_CLOUD_PROJECT" ]]; then
    check_pattern GOOGLE_CLOUD_PROJECT '^([a-z][a-z0-9.-]{0,61}[a-z0-9]:)?[a-z][a-z0-9-]{4,28}[a-z0-9]$' \
      'must be a project id: 6-30 of a-z, 0-9, "-", starting with a letter'
  fi
  if [[ -n "$REGION" ]]; then
    check_pattern REGION '^[a-z]+(-[a-z]+)+[0-9]+$' 'must be a region such as us-central1'
  fi

  # Step 1: the jobs, from the code. A setting still given the old way would be silently ignored.
  for moved in "${MOVED_TO_CODE[@]}"; do
    name="${moved%%=*}"
    if [[ -n "${!name:-}" ]]; then
      problem "$name is set, but deploy.sh no longer reads it: declare the job's ${moved#*=} in code" \
"(src/job.ts, or src/jobs.ts for several jobs) and unset $name"
    fi
  done
  read_jobs

  check_pattern FUNCTION_NAME '^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$' \
    'must be 1-63 of a-z, 0-9, "-", starting with a letter and not ending with "-"'
  check_pattern RUNTIME '^nodejs(2[2-9]|[3-9][0-9])$' 'must be a Node.js runtime id, nodejs22 or later (package.json engines)'
  check_pattern RUNTIME_SA_NAME '^[a-z][-a-z0-9]{4,28}[a-z0-9]$' \
    'must be a service account id: 6-30 of a-z, 0-9, "-", starting with a letter (default: FUNCTION_NAME-run)'
  check_pattern INVOKER_SA_NAME '^[a-z][-a-z0-9]{4,28}[a-z0-9]$' \
    'must be a service account id: 6-30 of a-z, 0-9, "-", starting with a letter (default: FUNCTION_NAME-invoker)'
  if [[ "$RUNTIME_SA_NAME" == "$INVOKER_SA_NAME" ]]; then
    problem "RUNTIME_SA_NAME and INVOKER_SA_NAME are both ${RUNTIME_SA_NAME@Q}: each role needs its own account"
  fi

  # The rules below mirror src/config.ts, so a bad value fails here and not at the function's cold start.
  check_pattern RUNS_COLLECTION '^[A-Za-z0-9_-]{1,100}$' 'must be 1-100 letters, digits, "_" or "-" (a Firestore collection id)'
  if [[ "$RUNS_COLLECTION" =~ ^__.*__$ ]]; then problem "RUNS_COLLECTION=${RUNS_COLLECTION@Q}: __names__ are reserved by Firestore"; fi
  check_pattern FIRESTORE_DATABASE '^(\(default\)|[a-z][a-z0-9-]{2,61}[a-z0-9])$' \
    'must be "(default)" or a database id (4-63 of a-z, 0-9, "-")'
  check_pattern RUN_KEY_SCOPE '^[!-~]{0,200}$' 'must be at most 200 printable ASCII characters without spaces'
  check_pattern LOG_LEVEL '^(fatal|error|warn|info|debug|trace|silent)$' \
    'must be one of fatal, error, warn, info, debug, trace, silent'
  check_pattern RUN_KEY_SCOPE_HEADERS '^[A-Za-z0-9, -]*$' 'must be a comma-separated list of header names'
  if [[ ",${RUN_KEY_SCOPE_HEADERS,,}," =~ ,[[:space:]]*(x-cloudscheduler-jobname|x-cloudscheduler-scheduletime|authorization)[[:space:]]*, ]]; then
    problem "RUN_KEY_SCOPE_HEADERS: ${BASH_REMATCH[1]} cannot be a scope header"
  fi
  check_pattern RUN_KEY_SCOPE_PARAMS '^[A-Za-z0-9_., -]*$' 'must be a comma-separated list of query parameter names'
  check_pattern JOB_HEADERS '^([A-Za-z0-9-]+=[^,]*(,[A-Za-z0-9-]+=[^,]*)*)?$' \
    'must be a comma-separated list of Name=value headers (values without commas)'
  check_pattern JOB_QUERY '^[A-Za-z0-9_.~%=&+-]*$' 'must be a URL query string without "?", e.g. tenant=acme&env=prod'
  check_pattern AUTH_MODE '^(platform|verify-oidc)$' 'must be platform (Cloud Run checks the token) or verify-oidc (the function does)'
  check_pattern OIDC_AUDIENCE '^[!-~]{1,500}$' 'must be 1-500 printable ASCII characters without spaces'
  check_sent "$RUN_KEY_SCOPE_HEADERS" "$JOB_HEADERS" ',' JOB_HEADERS RUN_KEY_SCOPE_HEADERS
  check_sent "$RUN_KEY_SCOPE_PARAMS" "$JOB_QUERY" '&' JOB_QUERY RUN_KEY_SCOPE_PARAMS
  check_example

  # Step 2: timing. 3600 s is the 2nd gen limit for HTTP functions. Each job's own settings were
  # checked against Scheduler's ranges by validateJobs; what is left are the rules between them.
  check_number FUNCTION_TIMEOUT_SECONDS 1 3600 seconds
  check_number ALERT_ABSENCE_PERIODS 1 100 periods
  if [[ -n "$ALERT_CHANNELS" ]]; then
    check_pattern ALERT_CHANNELS '^projects/[^/,]+/notificationChannels/[^/,]+(,projects/[^/,]+/notificationChannels/[^/,]+)*$' \
      'must be notification channel names, comma-separated: projects/PROJECT/notificationChannels/ID (gcloud beta monitoring channels list)'
  fi
  check_number LEASE_SECONDS 1 "$MAX_LEASE_SECONDS" seconds
  check_number RETENTION_SECONDS 1 "$MAX_SECONDS" seconds
  if [[ -n "$FIRESTORE_TIMEOUT_SECONDS" ]]; then
    check_number FIRESTORE_TIMEOUT_SECONDS 1 "$MAX_FIRESTORE_TIMEOUT_SECONDS" seconds
  fi

  # lease ≥ function timeout ≥ every job's attempt deadline. Cloud Run keeps running a request after
  # Scheduler gives up on it, until the function timeout: the lease must outlast that, or a retry
  # takes over a run that is still working. No attempt deadline may outlast the function either, so
  # that the lease covers every attempt Scheduler still waits on.
  if numbers_valid LEASE_SECONDS FUNCTION_TIMEOUT_SECONDS && ((LEASE_SECONDS < FUNCTION_TIMEOUT_SECONDS)); then
    problem "LEASE_SECONDS ($LEASE_SECONDS) must be at least FUNCTION_TIMEOUT_SECONDS ($FUNCTION_TIMEOUT_SECONDS):" \
"a lease shorter than the function may run lets a retry take over a run that is still working"
  fi
  if numbers_valid RETENTION_SECONDS LEASE_SECONDS && ((RETENTION_SECONDS <= LEASE_SECONDS)); then
    problem "RETENTION_SECONDS ($RETENTION_SECONDS) must exceed LEASE_SECONDS ($LEASE_SECONDS):" \
"the TTL sweep must never delete a claim whose lease is still live"
  fi
  local window
  for i in "${!job_ids[@]}"; do
    if numbers_valid FUNCTION_TIMEOUT_SECONDS && ((FUNCTION_TIMEOUT_SECONDS < job_deadlines[i])); then
      problem "FUNCTION_TIMEOUT_SECONDS ($FUNCTION_TIMEOUT_SECONDS) must be at least the attemptDeadlineSeconds" \
"(${job_deadlines[i]}) of job ${job_ids[i]}: Scheduler would keep waiting on an attempt the platform already" \
"ended, past the lease sized for it"
    fi
    # The job's retry window and judging delay are computed by the code the function checks them
    # with (retryWindowMs and judgingDelayMs, src/policy/retry-policy.ts); the function adds the job's forced-run tolerance, at most the 60 s
    # FORCED_RUN_TOLERANCE_SECONDS it runs with (deploy.sh leaves it at its default).
    numbers_valid RETENTION_SECONDS || continue
    window=$((job_retry_windows[i] + 60))
    if ((RETENTION_SECONDS <= window)); then
      problem "RETENTION_SECONDS ($RETENTION_SECONDS) must exceed the retry window of job ${job_ids[i]} plus its" \
"forced-run tolerance ($window s: ${job_retry_windows[i]} s of attempts and back-offs, retryWindowMs in" \
"src/policy/retry-policy.ts, + 60 s): a late retry must still find the completed record, or it runs the job again"
    elif ((RETENTION_SECONDS <= job_judging_delays[i] + 60)); then
      problem "RETENTION_SECONDS ($RETENTION_SECONDS) must exceed the judging delay of job ${job_ids[i]} plus its" \
"forced-run tolerance ($((job_judging_delays[i] + 60)) s: judgingDelayMs in src/policy/retry-policy.ts," \
"+ 60 s): missed-run detection judges a slot that late, and its record must still be there"
    fi
  done
}

validate
if ((${#problems[@]} > 0)); then
  {
    echo "deploy.sh: nothing was deployed; fix these inputs (environment variables, job declarations) first:"
    printf '  - %s\n' "${problems[@]}"
    echo "Example: GOOGLE_CLOUD_PROJECT=my-project REGION=us-central1 ./deploy.sh --dry-run"
  } >&2
  exit 2
fi

# ----------------------------------------------------------------------------------------------
# Derived values
# ----------------------------------------------------------------------------------------------
# A domain-scoped project (example.com:my-project) has accounts under my-project.example.com.
if [[ "$GOOGLE_CLOUD_PROJECT" == *:* ]]; then
  sa_domain="${GOOGLE_CLOUD_PROJECT#*:}.${GOOGLE_CLOUD_PROJECT%%:*}.iam.gserviceaccount.com"
else
  sa_domain="${GOOGLE_CLOUD_PROJECT}.iam.gserviceaccount.com"
fi
readonly RUNTIME_SA_EMAIL="${RUNTIME_SA_NAME}@${sa_domain}"
readonly INVOKER_SA_EMAIL="${INVOKER_SA_NAME}@${sa_domain}"

env_vars=(
  "NODE_ENV=production"
  "GOOGLE_CLOUD_PROJECT=${GOOGLE_CLOUD_PROJECT}"
  "LEASE_SECONDS=${LEASE_SECONDS}"
  "RETENTION_SECONDS=${RETENTION_SECONDS}"
  "RUNS_COLLECTION=${RUNS_COLLECTION}"
  "FIRESTORE_DATABASE=${FIRESTORE_DATABASE}"
  "RUN_KEY_SCOPE=${RUN_KEY_SCOPE}"
  "LOG_LEVEL=${LOG_LEVEL}"
  # The job's own deadline: abort it no later than the platform would.
  "JOB_TIMEOUT_SECONDS=${FUNCTION_TIMEOUT_SECONDS}"
)
if [[ -n "$FIRESTORE_TIMEOUT_SECONDS" ]]; then env_vars+=("FIRESTORE_TIMEOUT_SECONDS=${FIRESTORE_TIMEOUT_SECONDS}"); fi
# Catch-up (a job with catchUp): the run audit sends a late slot to the function itself, with an ID
# token of the runtime account (src/function/catch-up-delivery.ts), which must be let in as
# Scheduler's invoker account is. The invoker stays first: `npm run scheduler` signs as the first.
oidc_invokers="$INVOKER_SA_EMAIL"
if ((${#catch_up_jobs[@]} > 0)); then oidc_invokers+=",${RUNTIME_SA_EMAIL}"; fi
if [[ "$AUTH_MODE" == verify-oidc ]]; then
  env_vars+=("AUTH_MODE=verify-oidc" "OIDC_AUDIENCE=${OIDC_AUDIENCE}" "OIDC_INVOKERS=${oidc_invokers}")
  readonly TOKEN_AUDIENCE="$OIDC_AUDIENCE"
fi
if [[ -n "$RUN_KEY_SCOPE_HEADERS" ]]; then env_vars+=("RUN_KEY_SCOPE_HEADERS=${RUN_KEY_SCOPE_HEADERS// /}"); fi
if [[ -n "$RUN_KEY_SCOPE_PARAMS" ]]; then env_vars+=("RUN_KEY_SCOPE_PARAMS=${RUN_KEY_SCOPE_PARAMS// /}"); fi
# OpenTelemetry, opt-in (docs/tracing.md): with OTEL_TRACES_EXPORTER set, its standard variables
# pass through, so a redeploy keeps tracing on. Not OTEL_EXPORTER_OTLP_HEADERS: it may hold a secret,
# and these are printed by --dry-run.
readonly OTEL_PASSED=(OTEL_TRACES_EXPORTER OTEL_EXPORTER_OTLP_ENDPOINT OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
  OTEL_EXPORTER_OTLP_PROTOCOL OTEL_EXPORTER_OTLP_TRACES_PROTOCOL OTEL_TRACES_SAMPLER OTEL_TRACES_SAMPLER_ARG
  OTEL_SERVICE_NAME OTEL_RESOURCE_ATTRIBUTES OTEL_SDK_DISABLED)
if [[ -n "${OTEL_TRACES_EXPORTER:-}" ]]; then
  for otel_var in "${OTEL_PASSED[@]}"; do
    if [[ -n "${!otel_var:-}" ]]; then env_vars+=("${otel_var}=${!otel_var}"); fi
  done
fi

# gcloud splits list flags on ","; RUN_KEY_SCOPE may hold commas, so the list names its own
# delimiter ("^D^K=V{D}K=V", see `gcloud topic escaping`): the first character no value contains.
env_delimiter=''
for candidate in '|' '@' ';' '#' '~' '!' '+' '*' '&' '$' '%' '?'; do
  if [[ "${env_vars[*]}" != *"$candidate"* ]]; then
    env_delimiter="$candidate"
    break
  fi
done
if [[ -z "$env_delimiter" ]]; then
  echo "deploy.sh: RUN_KEY_SCOPE uses every delimiter gcloud could split on; drop one of | @ ; # ~ ! + * & \$ % ?" >&2
  exit 2
fi
env_list="$(IFS="$env_delimiter" && printf '%s' "${env_vars[*]}")"
readonly SET_ENV_VARS="^${env_delimiter}^${env_list}"

# ----------------------------------------------------------------------------------------------
# Running, or printing, gcloud
# ----------------------------------------------------------------------------------------------
# Sets QUOTED to one word, quoted for bash only where needed; --flag=value keeps the flag outside
# the quotes. It sets a variable rather than printing: a dry run quotes hundreds of words, and a
# $(...) per word forks a subshell each time.
quote_word_into_quoted() {
  local word="$1"
  QUOTED=''
  while [[ ! "$word" =~ ^[A-Za-z0-9_./:=@%+,-]+$ && "$word" =~ ^(--[a-z0-9-]+=)(.*)$ ]]; do
    QUOTED+="${BASH_REMATCH[1]}"
    word="${BASH_REMATCH[2]}"
  done
  if [[ "$word" =~ ^[A-Za-z0-9_./:=@%+,-]+$ ]]; then
    QUOTED+="$word"
  elif [[ -z "$word" ]]; then
    QUOTED+="''"
  else
    QUOTED+="${word@Q}"
  fi
}

# Prints one word, quoted as quote_word_into_quoted quotes it.
quote_word() {
  quote_word_into_quoted "$1"
  printf '%s' "$QUOTED"
}

# Prints a command on one line, shell-quoted, so that bash reads back the same words.
print_command() {
  local word line=''
  for word in "$@"; do
    quote_word_into_quoted "$word"
    line+="${line:+ }${QUOTED}"
  done
  printf '%s\n' "$line"
}

say() { printf '%s\n' "$*" >&2; }

# A dry run prints commands on fd 3, the script's stdout, even from inside $(...).
exec 3>&1

# Runs a command; in a dry run only prints it on stdout.
run() {
  if ((DRY_RUN)); then
    print_command "$@" >&3
    return 0
  fi
  printf '+ %s\n' "$(print_command "$@")" >&2
  "$@"
}

# Like run, retrying: a service account created seconds ago may not be visible to IAM yet.
run_retrying() {
  local attempt=1
  if ((DRY_RUN)); then
    run "$@"
    return 0
  fi
  printf '+ %s\n' "$(print_command "$@")" >&2
  until "$@"; do
    if ((attempt >= 5)); then return 1; fi
    say "  retrying in $((attempt * 5)) s (IAM changes take a moment to propagate)"
    sleep "$((attempt * 5))"
    attempt=$((attempt + 1))
  done
}

# Runs a describe command and succeeds if the resource exists. A dry run prints it and answers
# "missing" (or "found" with --assume-existing). Any failure counts as missing: if it was
# something else (permissions), the create that follows fails and says why.
exists() {
  if ((DRY_RUN)); then
    print_command "$@" >&3
    ((ASSUME_EXISTING))
    return
  fi
  printf '+ %s\n' "$(print_command "$@")" >&2
  "$@" >/dev/null 2>&1
}

# Runs a command and prints its output; a dry run prints the command and answers $1.
query() {
  local placeholder="$1"
  shift
  if ((DRY_RUN)); then
    print_command "$@" >&3
    printf '%s' "$placeholder"
    return 0
  fi
  printf '+ %s\n' "$(print_command "$@")" >&2
  "$@"
}

# Every path in --source is relative to the project's root.
cd -- "$PROJECT_DIR"

if ((DRY_RUN)); then
  say "deploy.sh: dry run: printing every gcloud command on stdout and running none."
  if ((ASSUME_EXISTING)); then
    say "Existence checks are printed and taken as found: the update path is shown. The Scheduler job"
    say "list is taken to hold the declared jobs and one that is not declared, ${DRY_RUN_UNDECLARED_JOB}."
  else
    say "Existence checks are printed and taken as missing: the create path is shown."
  fi
elif ! command -v gcloud >/dev/null 2>&1; then
  say "deploy.sh: gcloud not found: install the Google Cloud CLI (https://cloud.google.com/sdk/docs/install)"
  exit 1
fi

project=(--project="$GOOGLE_CLOUD_PROJECT")

say "==> Enabling the APIs"
# The Cloud Run Admin API path needs no Cloud Functions API: that is its point for a team that
# keeps its workloads within run.googleapis.com.
apis=()
for api in "${APIS[@]}"; do
  if ((RUN_DEPLOY)) && [[ "$api" == cloudfunctions.googleapis.com ]]; then continue; fi
  apis+=("$api")
done
run gcloud services enable "${apis[@]}" "${project[@]}" --quiet

say "==> Checking the Firestore database ${FIRESTORE_DATABASE} (it must exist, in Native mode)"
db_type="$(query FIRESTORE_NATIVE gcloud firestore databases describe --database="$FIRESTORE_DATABASE" \
  "${project[@]}" --format='value(type)')" || {
  say "deploy.sh: Firestore database ${FIRESTORE_DATABASE} not found in ${GOOGLE_CLOUD_PROJECT}. Create it, e.g.:"
  say "  gcloud firestore databases create --database=${FIRESTORE_DATABASE@Q} --location=${REGION} --type=firestore-native --project=${GOOGLE_CLOUD_PROJECT}"
  exit 1
}
if [[ "$db_type" != FIRESTORE_NATIVE ]]; then
  say "deploy.sh: Firestore database ${FIRESTORE_DATABASE} is ${db_type:-of unknown type}, not FIRESTORE_NATIVE: the run ledger needs Native mode."
  exit 1
fi

# ----------------------------------------------------------------------------------------------
# The two deploy paths (--run-deploy). Both deploy the same function as the Cloud Run service
# FUNCTION_NAME; they differ in the API that manages it:
#   default       gcloud functions deploy --gen2, the Cloud Functions v2 API
#                 (https://cloud.google.com/functions/docs/deploy)
#   --run-deploy  gcloud run deploy --function, the Cloud Run Admin API
#                 (https://cloud.google.com/run/docs/deploy-functions)
# "Manage functions" (https://cloud.google.com/functions/docs/managing): a function created through
# the Cloud Functions v2 API can also be changed through the Cloud Run Admin API, but it stays that
# API's function, whose next `gcloud functions deploy` writes its own copy of the configuration back;
# a function created through the Cloud Run Admin API cannot be managed with `gcloud functions` at
# all. So each path stops, before creating anything, at a function of the other, and prints the
# command that moves it. `gcloud functions detach` moves a Cloud Functions v2 function to the Cloud
# Run Admin API for good ("not reversible"; an HTTP function keeps its URLs); nothing moves one back:
# the service is deleted and deployed again, under a new URL.
# ----------------------------------------------------------------------------------------------

# Runs an existence check of the other path's function and succeeds if it is found. A dry run
# prints it and answers "missing", with --assume-existing too: the update path it shows is the
# chosen path's own. As with exists, any failure counts as missing.
other_path_exists() {
  if ((DRY_RUN)); then
    print_command "$@" >&3
    return 1
  fi
  printf '+ %s\n' "$(print_command "$@")" >&2
  "$@" >/dev/null 2>&1
}

# Stops with the commands that move the function if it exists on the other deploy path.
refuse_other_path() {
  local where=(--region="$REGION" "${project[@]}")
  # The same check on both paths: --quiet, so that gcloud never waits on a prompt to enable the
  # Cloud Functions API (the Cloud Run path does not enable it; disabled, no function exists).
  local function_check=(gcloud functions describe "$FUNCTION_NAME" --gen2 "${where[@]}" --format='value(name)' --quiet)
  if ((RUN_DEPLOY)); then
    say "==> Checking that ${FUNCTION_NAME} is not a function of the Cloud Functions API (the default path)"
    if other_path_exists "${function_check[@]}"; then
      say "deploy.sh: nothing was deployed: ${FUNCTION_NAME} in ${REGION} is a function of the Cloud Functions v2 API"
      say "  (deployed by ./deploy.sh without --run-deploy). --run-deploy deploys through the Cloud Run Admin API,"
      say "  and the next gcloud functions deploy would write the Cloud Functions API's own configuration back."
      say "  Keep deploying it as before:"
      say "    ./deploy.sh"
      say "  or move it to the Cloud Run Admin API for good (not reversible; it keeps its URLs and its Scheduler"
      say "  jobs; https://cloud.google.com/functions/docs/managing#detach), then deploy with --run-deploy:"
      say "    $(print_command gcloud functions detach "$FUNCTION_NAME" "${where[@]}")"
      say "    ./deploy.sh --run-deploy"
      exit 1
    fi
    return 0
  fi
  say "==> Checking that ${FUNCTION_NAME} is not a service of the Cloud Run Admin API (--run-deploy)"
  # Every function of the Cloud Functions v2 API has a Cloud Run service of its name: a service
  # without such a function was deployed with gcloud run deploy, or detached.
  if other_path_exists gcloud run services describe "$FUNCTION_NAME" "${where[@]}" --format='value(metadata.name)' --quiet &&
    ! other_path_exists "${function_check[@]}"; then
    say "deploy.sh: nothing was deployed: ${FUNCTION_NAME} in ${REGION} is a Cloud Run service that is not a function"
    say "  of the Cloud Functions API (deployed with ./deploy.sh --run-deploy or with gcloud run deploy, or detached"
    say "  from the Cloud Functions API), so gcloud functions deploy cannot manage it."
    say "  Keep deploying it through the Cloud Run Admin API:"
    say "    ./deploy.sh --run-deploy"
    say "  or, to deploy it with gcloud functions deploy, delete the service (its URL goes with it; the run"
    say "  ledger in Firestore stays, and deploy.sh points the Scheduler jobs at the new URL), then deploy:"
    say "    $(print_command gcloud run services delete "$FUNCTION_NAME" "${where[@]}")"
    say "    ./deploy.sh"
    say "  If it is a function of the Cloud Functions API and the check failed for another reason (permissions),"
    say "  this says why:"
    say "    $(print_command gcloud functions describe "$FUNCTION_NAME" --gen2 "${where[@]}")"
    exit 1
  fi
}
refuse_other_path

say "==> Runtime service account ${RUNTIME_SA_EMAIL} (roles/datastore.user on the project)"
if ! exists gcloud iam service-accounts describe "$RUNTIME_SA_EMAIL" "${project[@]}" --format='value(email)'; then
  run gcloud iam service-accounts create "$RUNTIME_SA_NAME" "${project[@]}" \
    --display-name="Runtime of ${FUNCTION_NAME}" \
    --description="Identity of the function ${FUNCTION_NAME}: reads and writes its Firestore run ledger." --quiet
fi
run_retrying gcloud projects add-iam-policy-binding "$GOOGLE_CLOUD_PROJECT" \
  --member="serviceAccount:${RUNTIME_SA_EMAIL}" --role=roles/datastore.user --condition=None \
  --format=none --quiet
grant_example

say "==> Invoker service account ${INVOKER_SA_EMAIL} (for Cloud Scheduler)"
if ! exists gcloud iam service-accounts describe "$INVOKER_SA_EMAIL" "${project[@]}" --format='value(email)'; then
  run gcloud iam service-accounts create "$INVOKER_SA_NAME" "${project[@]}" \
    --display-name="Scheduler invoker of ${FUNCTION_NAME}" \
    --description="Cloud Scheduler calls the function ${FUNCTION_NAME} with an OIDC token of this account." --quiet
fi

# The runs collection and the per-job documents beside it (src/policy/job-state.ts) both carry
# expire_at; each collection group needs its own TTL policy.
for ttl_group in "$RUNS_COLLECTION" "${RUNS_COLLECTION}_jobs"; do
  say "==> Firestore TTL policy on ${ttl_group}.expire_at"
  # In a dry run the policy is taken as missing, or as active with --assume-existing.
  ttl_states="$(query "$( ((ASSUME_EXISTING)) && printf 'expire_at\tACTIVE')" gcloud firestore fields ttls list --collection-group="$ttl_group" \
    --database="$FIRESTORE_DATABASE" "${project[@]}" --format='value(name.basename(),ttlConfig.state)')"
  if [[ "$ttl_states" =~ (^|$'\n')expire_at[[:space:]]+(ACTIVE|CREATING)($'\n'|$) ]]; then
    say "  already ${BASH_REMATCH[2]}"
  else
    # --async: building a TTL policy can take a while; the function does not depend on it.
    run gcloud firestore fields ttls update expire_at --collection-group="$ttl_group" \
      --database="$FIRESTORE_DATABASE" --enable-ttl --async "${project[@]}" --quiet
  fi
done

# The composite indexes of the queries the operations commands make (ops/indexes.ts: every query
# is built from a spec there). The emulator needs none; production answers FAILED_PRECONDITION
# without them. Listed first, so only missing ones are created; in a dry run none exists, or all
# with --assume-existing.
say "==> Firestore composite indexes on ${RUNS_COLLECTION} (for npm run runs)"
listed_indexes_placeholder='[]'
if ((ASSUME_EXISTING)); then
  listed_indexes_placeholder="$("$NODE_BIN" --no-warnings "$(library_module ops/indexes)" --collection="$RUNS_COLLECTION" --as-listed)"
fi
listed_indexes="$(query "$listed_indexes_placeholder" gcloud firestore indexes composite list \
  --database="$FIRESTORE_DATABASE" "${project[@]}" --format=json)"
if ! index_lines="$(printf '%s' "$listed_indexes" | "$NODE_BIN" --no-warnings "$(library_module ops/indexes)" --collection="$RUNS_COLLECTION" --missing)"; then
  say "deploy.sh: reading the index definitions (node ops/indexes.ts) failed; see above"
  exit 1
fi
if [[ -z "$index_lines" ]]; then say "  all present"; fi
while IFS=$'\t' read -r -a field_configs; do
  ((${#field_configs[@]} > 0)) || continue
  # --async: an index builds for minutes; until it is READY only `npm run runs` waits for it.
  run gcloud firestore indexes composite create --collection-group="$RUNS_COLLECTION" \
    --database="$FIRESTORE_DATABASE" --query-scope=collection "${field_configs[@]}" --async "${project[@]}" --quiet
done <<<"$index_lines"

# Deploys the function through the Cloud Run Admin API (--run-deploy) and sets function_url: the
# deployment of the default path's `gcloud functions deploy`, flag by flag
# (https://cloud.google.com/run/docs/deploy-functions, `gcloud run deploy --help`):
#   --entry-point=ENTRY --trigger-http   --function=ENTRY: "the deployed object is a function", its
#                                        entry point; an HTTP function, as every Cloud Run service
#   --runtime=nodejs24                   --base-image=nodejs24: a runtime id names that runtime's base
#                                        image on its default stack (google-24 for nodejs24;
#                                        https://cloud.google.com/run/docs/runtimes/nodejs), with
#                                        automatic base image updates, as the default path's
#                                        automatic runtime update policy
#   --source=.                           --source=. (filtered by .gcloudignore; the buildpack runs the
#                                        gcp-build script, as on the default path)
#   --region, --service-account, --set-env-vars, --no-allow-unauthenticated, --timeout: the same
#                                        flags (--timeout takes the same "180s" duration)
#   (defaults of a Cloud Functions v2 function) --memory=256Mi and --concurrency=1: a Cloud Run
#                                        service would otherwise get 512Mi and 80 requests at once
#                                        (https://cloud.google.com/run/docs/functions/comparison);
#                                        1 vCPU, Cloud Run's default (the default path's 256 MB get
#                                        0.167); at most 100 instances on both, their default
#   AUTH_MODE=verify-oidc                --no-invoker-iam-check here, not a later services update
deploy_function_run() {
  local auth=()
  if [[ "$AUTH_MODE" == verify-oidc ]]; then auth=(--no-invoker-iam-check); fi
  say "==> Function ${FUNCTION_NAME} (Cloud Run Admin API: gcloud run deploy --function; private; the build runs the gcp-build script)"
  run gcloud run deploy "$FUNCTION_NAME" --region="$REGION" "${project[@]}" \
    --function="$ENTRY_POINT" --base-image="$RUNTIME" --source=. --no-allow-unauthenticated "${auth[@]}" \
    --service-account="$RUNTIME_SA_EMAIL" --timeout="${FUNCTION_TIMEOUT_SECONDS}s" \
    --memory=256Mi --concurrency=1 \
    --set-env-vars="$SET_ENV_VARS" --quiet
  function_url="$(query "$DRY_RUN_URL" gcloud run services describe "$FUNCTION_NAME" --region="$REGION" \
    "${project[@]}" --format='value(status.url)')"
}

# Grants $1 (a service account) roles/run.invoker on the function's Cloud Run service: through the
# Cloud Functions API on the default path, through the Cloud Run Admin API with --run-deploy
# (https://cloud.google.com/run/docs/securing/managing-access), the same binding either way.
add_invoker() {
  local member="serviceAccount:$1"
  if ((RUN_DEPLOY)); then
    run_retrying gcloud run services add-iam-policy-binding "$FUNCTION_NAME" --region="$REGION" "${project[@]}" \
      --member="$member" --role=roles/run.invoker --format=none --quiet
  else
    run_retrying gcloud functions add-invoker-policy-binding "$FUNCTION_NAME" --region="$REGION" "${project[@]}" \
      --member="$member" --format=none --quiet
  fi
}

if ((RUN_DEPLOY)); then
  deploy_function_run
else
  say "==> Function ${FUNCTION_NAME} (2nd gen, private; the build runs the gcp-build script)"
  run gcloud functions deploy "$FUNCTION_NAME" --gen2 --region="$REGION" "${project[@]}" \
    --runtime="$RUNTIME" --source=. --entry-point="$ENTRY_POINT" --trigger-http --no-allow-unauthenticated \
    --service-account="$RUNTIME_SA_EMAIL" --timeout="${FUNCTION_TIMEOUT_SECONDS}s" \
    --set-env-vars="$SET_ENV_VARS" --quiet
  function_url="$(query "$DRY_RUN_URL" gcloud functions describe "$FUNCTION_NAME" --gen2 --region="$REGION" \
    "${project[@]}" --format='value(serviceConfig.uri)')"
fi
if [[ ! "$function_url" =~ ^https:// ]]; then
  say "deploy.sh: could not read the URL of ${FUNCTION_NAME} (got ${function_url@Q})"
  exit 1
fi

say "==> Letting ${INVOKER_SA_EMAIL} invoke ${FUNCTION_NAME} (roles/run.invoker on its Cloud Run service)"
add_invoker "$INVOKER_SA_EMAIL"
if ((${#catch_up_jobs[@]} > 0)); then
  say "==> Letting ${RUNTIME_SA_EMAIL} invoke ${FUNCTION_NAME} (roles/run.invoker on its Cloud Run service):"
  say "    ${catch_up_jobs[*]} $( ((${#catch_up_jobs[@]} == 1)) && printf 'declares' || printf 'declare') catchUp, so the run audit delivers late slots to the function"
  say "    itself, with an ID token of the runtime account$([[ "$AUTH_MODE" == verify-oidc ]] && printf ' (also in OIDC_INVOKERS)')"
  add_invoker "$RUNTIME_SA_EMAIL"
fi
# On the Cloud Run path, gcloud run deploy turned the check off itself (--no-invoker-iam-check).
if [[ "$AUTH_MODE" == verify-oidc ]] && ((!RUN_DEPLOY)); then
  # The function verifies the token itself (src/auth.ts): Cloud Run's check would strip its signature.
  say "==> Turning Cloud Run's invoker IAM check off: the function verifies the OIDC token itself"
  run gcloud run services update "$FUNCTION_NAME" --region="$REGION" "${project[@]}" \
    --no-invoker-iam-check --quiet
fi

# The function URL as a regular expression for gcloud's `~` filter: every character other than a
# letter, digit, "/", ":", "_" or "-" in brackets, so that "." matches only itself.
url_pattern() {
  local url="$1" pattern='' char i
  for ((i = 0; i < ${#url}; i++)); do
    char="${url:i:1}"
    if [[ "$char" =~ [A-Za-z0-9/:_-] ]]; then pattern+="$char"; else pattern+="[$char]"; fi
  done
  printf '%s' "$pattern"
}

job_uri="${function_url}${JOB_QUERY:+?${JOB_QUERY}}"
existing_jobs=() new_jobs=()
for i in "${!job_ids[@]}"; do
  job_id="${job_ids[i]}"
  say "==> Scheduler job ${job_id} ('${job_schedules[i]}' in ${job_zones[i]})"
  job_flags=(
    --location="$REGION" "${project[@]}"
    --schedule="${job_schedules[i]}" --time-zone="${job_zones[i]}"
    --uri="$job_uri" --http-method=POST
    # The audience is the service URL itself (no query): that is what Cloud Run checks. With
    # verify-oidc it is OIDC_AUDIENCE, which the function checks.
    --oidc-service-account-email="$INVOKER_SA_EMAIL" --oidc-token-audience="${TOKEN_AUDIENCE:-$function_url}"
    --attempt-deadline="${job_deadlines[i]}s"
    --max-retry-attempts="${job_retries[i]}" --max-retry-duration="${job_retry_durations[i]}s"
    --min-backoff="${job_min_backoffs[i]}s" --max-backoff="${job_max_backoffs[i]}s"
    --max-doublings="${job_doublings[i]}"
    --description="Runs job ${job_id} of ${FUNCTION_NAME} once per scheduled run (deploy.sh)"
    --quiet
  )
  if exists gcloud scheduler jobs describe "$job_id" --location="$REGION" "${project[@]}" --format='value(name)'; then
    existing_jobs+=("$job_id")
    # Update only adds or replaces headers: a header dropped from JOB_HEADERS stays until cleared
    # with `gcloud scheduler jobs update http JOB --clear-headers`.
    if [[ -n "$JOB_HEADERS" ]]; then job_flags+=(--update-headers="$JOB_HEADERS"); fi
    run gcloud scheduler jobs update http "$job_id" "${job_flags[@]}"
  else
    new_jobs+=("$job_id")
    say "  ${job_id} has no Scheduler job yet: $( ((DRY_RUN)) && echo 'deploy.sh (without --dry-run) creates it' || echo 'creating it')"
    if [[ -n "$JOB_HEADERS" ]]; then job_flags+=(--headers="$JOB_HEADERS"); fi
    run gcloud scheduler jobs create http "$job_id" "${job_flags[@]}"
  fi
done

# Jobs that call this function (its URL, with or without a query) but are no longer declared: a job
# removed from src/jobs.ts, or renamed. Each would keep calling the function, which no longer
# declares it; they are deleted only when asked (--prune).
say "==> Scheduler jobs in ${REGION} that call ${FUNCTION_NAME} but are not declared"
listed_placeholder=''
if ((ASSUME_EXISTING)); then listed_placeholder="$(printf '%s\n' "${job_ids[@]}" "$DRY_RUN_UNDECLARED_JOB")"; fi
# A trailing "/" is allowed: Scheduler may store the URL with one.
if ! listed="$(query "$listed_placeholder" gcloud scheduler jobs list --location="$REGION" "${project[@]}" \
  --filter="httpTarget.uri~\"^$(url_pattern "$function_url")/?([?]|\$)\"" --format='value(name.basename())')"; then
  say "  could not list the Scheduler jobs (see above); the declared jobs are deployed, none was pruned"
  listed=''
fi
undeclared=()
while IFS= read -r listed_id; do
  [[ -n "$listed_id" ]] || continue
  declared=0
  for job_id in "${job_ids[@]}"; do [[ "$listed_id" != "$job_id" ]] || declared=1; done
  if ((!declared)); then undeclared+=("$listed_id"); fi
done <<<"$listed"
if ((${#undeclared[@]} == 0)) && ((DRY_RUN)) && ((!ASSUME_EXISTING)); then
  say "  not checked in a dry run (it lists no Scheduler job): run ./deploy.sh for real, or add --assume-existing to see how one is reported"
elif ((${#undeclared[@]} == 0)); then
  say "  none"
elif ((PRUNE)); then
  for job_id in "${undeclared[@]}"; do
    run gcloud scheduler jobs delete "$job_id" --location="$REGION" "${project[@]}" --quiet
  done
else
  for job_id in "${undeclared[@]}"; do
    say "  ${job_id}: calls ${FUNCTION_NAME} but is not declared (removed, or renamed$( ((${#new_jobs[@]} > 0)) && printf ' to %s?' "${new_jobs[*]}")): it gets 404 unknown_job at every slot"
    say "    its history stays readable: npm run runs -- --job $(quote_word "$job_id") --since 30d"
    say "    delete it: ./deploy.sh --prune (or gcloud scheduler jobs delete $(quote_word "$job_id") --location=${REGION} --project=${GOOGLE_CLOUD_PROJECT})"
  done
fi

# Log-based metrics (GA) of the function's own log lines, labelled by job, and a dashboard of them
# (created only if none has its name); with ALERT_CHANNELS, alert
# policies on them (opt-in: the policy commands are in gcloud's alpha track). ops/alerts.ts writes
# one JSON file per resource (ops/alert-config.ts) into .deploy/alerts, kept for the next run.
say "==> Log-based metrics of ${FUNCTION_NAME}'s runs, by job$([[ -n "$ALERT_CHANNELS" ]] && printf ', and alert policies')"
alerts_dir="${PROJECT_DIR}/.deploy/alerts"
alert_args=(--function="$FUNCTION_NAME" --out="$alerts_dir" --absence-periods="$ALERT_ABSENCE_PERIODS")
if [[ -n "$ALERT_CHANNELS" ]]; then alert_args+=(--channels="$ALERT_CHANNELS"); fi
if ! alert_lines="$(JOBS_MODULE="$JOBS_MODULE" "$NODE_BIN" --no-warnings "$(library_module ops/alerts)" "${alert_args[@]}")"; then
  say "deploy.sh: writing the metric and alert definitions (node ops/alerts.ts) failed; see above"
  exit 1
fi
alert_summary=()
dashboard_summary=''
while IFS=$'\t' read -r kind name detail; do
  case "$kind" in
    metric)
      if exists gcloud logging metrics describe "$name" "${project[@]}" --format='value(name)'; then
        run gcloud logging metrics update "$name" --config-from-file="$detail" "${project[@]}" --quiet
      else
        run gcloud logging metrics create "$name" --config-from-file="$detail" "${project[@]}" --quiet
      fi
      ;;
    dashboard)
      # Created once: a dashboard someone edited in the console is theirs to keep.
      existing="$(query "$( ((ASSUME_EXISTING)) && printf 'projects/%s/dashboards/assumed' "$GOOGLE_CLOUD_PROJECT")" \
        gcloud monitoring dashboards list "${project[@]}" \
        --filter="displayName=\"${name}\"" --format='value(name)')"
      if [[ -n "$existing" ]]; then
        say "  dashboard \"${name}\" exists: kept as it is (delete it to have deploy.sh create it again)"
      else
        run gcloud monitoring dashboards create --config-from-file="$detail" "${project[@]}" --quiet
      fi
      dashboard_summary="$name"
      ;;
    policy)
      existing="$(query '' gcloud alpha monitoring policies list "${project[@]}" \
        --filter="displayName=\"${name}\"" --format='value(name)')"
      if [[ -n "$existing" ]]; then
        run gcloud alpha monitoring policies update "${existing%%$'\n'*}" --policy-from-file="$detail" "${project[@]}" --quiet
      else
        run gcloud alpha monitoring policies create --policy-from-file="$detail" "${project[@]}" --quiet
      fi
      alert_summary+=("$name")
      ;;
    skipped) say "  no absence alert for ${name}: ${detail}" ;;
  esac
done <<<"$alert_lines"

# One entry per Scheduler job: the declared ones, then those not declared (kept or deleted).
scheduler_summary() {
  local i label='Scheduler jobs' retries
  for i in "${!job_ids[@]}"; do
    retries="up to ${job_retries[i]} retries"
    if ((job_retry_durations[i] > 0)); then retries+=" within ${job_retry_durations[i]} s"; fi
    printf '  %-14s  %s\n' "$label" "${job_ids[i]}: '${job_schedules[i]}' in ${job_zones[i]}, attempt deadline ${job_deadlines[i]} s, ${retries}"
    label=''
  done
  if ((${#new_jobs[@]} > 0)); then
    printf '  %-14s  %s\n' 'New' "${new_jobs[*]} (had no Scheduler job: $( ((DRY_RUN)) && echo 'would be created' || echo created))"
  fi
  if ((${#undeclared[@]} > 0)); then
    printf '  %-14s  %s\n' 'Not declared' "${undeclared[*]} ($( ((PRUNE)) && echo deleted || echo 'kept: --prune deletes them; npm run runs -- --job ID shows their history'))"
  fi
}

# The runtime account's invoker role, for the summary: only with catch-up.
runtime_invoker_role() {
  if ((${#catch_up_jobs[@]} > 0)); then
    printf ', roles/run.invoker on the function: catch-up of %s' "${catch_up_jobs[*]}"
  fi
}

summary() {
  local summary_title=Deployed
  if ((DRY_RUN)); then summary_title='Would deploy (dry run: nothing was changed)'; fi
  cat <<EOF

${summary_title}
  Function        ${FUNCTION_NAME} in ${REGION} (${RUNTIME}, timeout ${FUNCTION_TIMEOUT_SECONDS} s, private; $( ((RUN_DEPLOY)) && printf 'Cloud Run Admin API, gcloud run deploy --function' || printf 'Cloud Functions v2 API, gcloud functions deploy'))
  URL             ${function_url}
  Runs as         ${RUNTIME_SA_EMAIL} (roles/datastore.user$(example_roles)$(runtime_invoker_role))
  Invoked by      ${INVOKER_SA_EMAIL} (roles/run.invoker on the function)
  Authentication  ${AUTH_MODE}$([[ "$AUTH_MODE" == verify-oidc ]] && printf ' (audience %s; invoker IAM check off)' "$OIDC_AUDIENCE")
$(scheduler_summary)
  Run ledger      ${FIRESTORE_DATABASE}/${RUNS_COLLECTION} (+ ${RUNS_COLLECTION}_jobs), lease ${LEASE_SECONDS} s, kept ${RETENTION_SECONDS} s (TTL on expire_at; composite indexes for npm run runs)
  Metrics         ${FUNCTION_NAME}-runs-{processed,duplicates,failed,failed-after-retries,missed,late,skipped,paused,lease-lost} (by job)
  Dashboard       ${dashboard_summary:-none} (Cloud Monitoring, console.cloud.google.com/monitoring/dashboards)
  Alerts          $( ((${#alert_summary[@]} > 0)) && printf '%s policies to %s' "${#alert_summary[@]}" "$ALERT_CHANNELS" || printf 'none (set ALERT_CHANNELS to add them)')

Trigger a run now:
  gcloud scheduler jobs run $(quote_word "${job_ids[0]}") --location=${REGION} --project=${GOOGLE_CLOUD_PROJECT}
A forced run carries the *next* schedule time; arriving well before it, it is a run of its own and
the scheduled run still runs. To run a job by hand on purpose:
  npm run trigger -- $(quote_word "${job_ids[0]}") --url=${function_url} --invoker=${INVOKER_SA_EMAIL}

Logs:
  gcloud $( ((RUN_DEPLOY)) && printf 'run services' || printf 'functions') logs read $(quote_word "$FUNCTION_NAME") --region=${REGION} --project=${GOOGLE_CLOUD_PROJECT}
EOF
}
if ((DRY_RUN)); then summary >&2; else summary; fi
