/**
 * What `run-once --help` and `run-once COMMAND --help` print: one text per command, each flag
 * explained. Texts only; `run-once.ts` chooses which to print.
 */

/** The exit statuses every command shares (docs/operations.md, "Exit statuses"). */
const EXIT_STATUSES = `Exit status:
  0  done (also --record-only, and a pause or resume on the emulator)
  1  failed: a problem found or named (Firestore unreachable, invalid declarations, an answer not 2xx)
  2  a bad argument, or a job that is neither declared nor has records
  4  recorded, but not carried out (pause/resume: the Cloud Scheduler job was not changed)`;

/** The flags that choose which Firestore and which key scope a command reads. */
const WHERE_FLAGS = `  --collection NAME       the runs collection (RUNS_COLLECTION; default runs)
  --database ID           the Firestore database (FIRESTORE_DATABASE; default (default))
  --project ID            the Google Cloud project (GOOGLE_CLOUD_PROJECT; on the emulator
                          demo-scheduler-run-once unless given)
  --scope VALUE           the key scope as RUN_KEY_SCOPE has it (a deployment's own scope)
  --scope-header NAME=VALUE
                          a scope header the function reads (RUN_KEY_SCOPE_HEADERS); repeat each
  --scope-param NAME=VALUE
                          a scope query parameter the function reads (RUN_KEY_SCOPE_PARAMS)`;

/** The flags that reach a deployed function instead of the local one. */
const TARGET_FLAGS = `  --url URL               the function's URL (default: npm run dev's, http://127.0.0.1:8080)
  --invoker SA_EMAIL      a service account to impersonate for the ID token (gcloud auth)
  --token TOKEN           an ID token to send as is`;

/** `run-once --help`: the commands. */
export const OVERVIEW = `run-once: operate Cloud Scheduler jobs that run exactly once per scheduled run.

Usage: run-once COMMAND [FLAGS]     (run-once COMMAND --help explains each flag)

Commands:
  jobs        list the declared jobs (src/jobs.ts) and their next fire times
  runs        each job's last slots and what became of each; --check, --backfill
  trigger     run a job by hand now, deliver one slot as Scheduler would, or re-run a slot
  pause       record a pause of a job (its slots read paused, never missed) and pause its
              Cloud Scheduler job
  resume      end a pause, and resume the Cloud Scheduler job
  scheduler   a local Cloud Scheduler that fires the declared jobs at a function
  dev         the Firestore emulator, the function and a local Scheduler in one terminal
  deploy      deploy the function, its ledger and one Scheduler job per declared job
  check-node  exit 1, in one line, when this Node.js is older than the package needs
  version     print the package's version

The commands serve the project they run in: its package.json and src/jobs.ts (JOBS_MODULE names
another module that exports \`jobs\`). JSON output (--json) is printed alone on stdout; npm run
adds its banner unless run as \`npm run -s\`. NO_COLOR turns colours off, FORCE_COLOR on.

${EXIT_STATUSES}`;

/** Each command's help. */
export const COMMAND_HELP: Readonly<Record<string, string>> = {
  jobs: `run-once jobs: list the declared jobs and their next fire times.

Usage: run-once jobs [--json | --deploy] [--after RFC3339] [--count N]

  --json                  the jobs as JSON, alone on stdout
  --deploy                one tab-separated line per job, as deploy.sh reads them
  --after RFC3339         list the fire times after this instant instead of now
  --count N               how many fire times per job (default 3)
  -h, --help              this help

Invalid declarations print every problem and exit 1.

${EXIT_STATUSES}`,

  runs: `run-once runs: each job's last slots, and what became of each.

Usage: run-once runs [--since 24h|RFC3339] [--job ID]... [--json | --html FILE] [--check] [--now RFC3339]
                     [--backfill [--dry-run | --yes] [--include-before-first-record]]

  --since DURATION|TIME   the window: 90m, 24h, 7d back from now, or from an RFC 3339 time
                          (2026-12-01T09:40:00Z) to now (default: the last 10 slots of each job)
  --job ID                only this job; repeat for more. An id no longer declared shows its
                          records (a renamed job's history); an id with neither exits 2
  --json                  the rows as JSON, alone on stdout
  --html FILE             the rows as one HTML page (- for stdout)
  --check                 print only the problems (missed, finally failed, unreadable slots),
                          each with the command that fixes it; exit 1 if any, 3 if none was found
                          but a window held more than 10000 slots of a job (narrow --since)
  --now RFC3339           judge the window as if it were this instant
  --backfill              deliver the window's missed slots, oldest first, as Scheduler would
  --dry-run               with --backfill: print what would be delivered, deliver nothing
  --yes                   with --backfill: deliver without asking
  --include-before-first-record
                          with --backfill: also the slots before the job's first record
${WHERE_FLAGS}
${TARGET_FLAGS}
  -h, --help              this help

${EXIT_STATUSES}`,

  trigger: `run-once trigger: run a declared job by hand.

Usage: run-once trigger JOB [--slot RFC3339 [--rerun]] [--allow-overlap] [--scope NAME=VALUE]...

  JOB                     the declared job's id
  (no --slot)             a manual run: a run id of its own, recorded as manual; no slot is touched
  --slot RFC3339          deliver slot T exactly as Scheduler would (a duplicate if it already ran);
                          within RETENTION_SECONDS
  --rerun                 with --slot: run a finished slot again on purpose (a run of its own,
                          kind rerun, listed beside the slot)
  --allow-overlap         a manual run or re-run beside another run of the job; without it the
                          job's overlap policy holds and a blocked run answers 409 (exit 1)
  --scope NAME=VALUE      a scope header or query parameter the function reads; repeat for each
${TARGET_FLAGS}
  -h, --help              this help

${EXIT_STATUSES}`,

  pause: `run-once pause: record a pause of a job and pause its Cloud Scheduler job.

Usage: run-once pause JOB [--until RFC3339|DURATION] [--note TEXT] [--record-only] [--location REGION]

  JOB                     the declared job's id
  --until WHEN            when the pause ends (an instant, or a duration such as 2h, at least 1m);
                          without it a pause is reported after a week
  --note TEXT             why: shown beside each paused slot in runs
  --record-only           record the pause only; print the gcloud command that pauses the
                          Scheduler job instead of running it (exit 0)
  --location REGION       the Scheduler job's region (REGION)
${WHERE_FLAGS}
  -h, --help              this help

Paused slots read paused in runs and are never reported missed. On the emulator the pause is
recorded and npm run dev's local Scheduler honours it.

${EXIT_STATUSES}`,

  resume: `run-once resume: end a job's pause and resume its Cloud Scheduler job.

Usage: run-once resume JOB [--record-only] [--location REGION]
                        [--catch-up [--url URL] [--invoker SA_EMAIL] [--token TOKEN]]

  JOB                     the declared job's id
  --record-only           record the resume only; print the gcloud command instead of running it
  --location REGION       the Scheduler job's region (REGION)
  --catch-up              then deliver the paused slots by the job's catchUp policy (its
                          defaults if it declares none): within its window, the newest
                          ("latest") or each oldest first ("all", at most 100), one at a time
${TARGET_FLAGS}
${WHERE_FLAGS}
  -h, --help              this help

A plain resume does not run the paused slots; --catch-up does, as the run audit catches up a late
slot (ctx.caughtUp is true).

${EXIT_STATUSES}`,

  scheduler: `run-once scheduler: a local Cloud Scheduler that fires the declared jobs at a function.

Usage: run-once scheduler [--url URL] [--fire JOB [--without-schedule-time]]
                          [--drop-answers RATE] [--duplicates RATE] [--certs-port PORT]

  --url URL               the function to call (default http://127.0.0.1:8080)
  --fire JOB              fire JOB once as a Force run, follow its retries, and exit: 0 if it
                          ended with a 2xx answer, 1 if Scheduler gave up
  --without-schedule-time with --fire: send no X-CloudScheduler-ScheduleTime, as the console's
                          Force run may
  --drop-answers RATE     drop this share of the answers (0 to 1): Scheduler retries
  --duplicates RATE       deliver this share twice (0 to 1)
  --certs-port PORT       serve the OIDC signing key's certificates on this port
                          (AUTH_MODE=verify-oidc)
  -h, --help              this help

${EXIT_STATUSES}`,

  dev: `run-once dev: the Firestore emulator, the function built from src/ and a local Cloud Scheduler
firing the declared jobs at it, in one terminal; Ctrl-C stops them all.

Usage: run-once dev [--drop-answers RATE] [--duplicates RATE] [--keep-data [--data-dir DIR]]
                    [--fire JOB [--without-schedule-time]] [--no-scheduler] [--no-watch]
                    [--no-build] [--source FILE --target NAME] [--host ADDRESS]

  --drop-answers RATE     the local Scheduler drops this share of the answers (it retries)
  --duplicates RATE       the local Scheduler delivers this share twice
  --keep-data             load the emulator's data at start and export it every 60 s
                          (RUN_ONCE_DEV_EXPORT_SECONDS) and on Ctrl-C
  --data-dir DIR          with --keep-data: where (default .emulator/)
  --fire JOB              also fire JOB once at start, as a Force run
  --without-schedule-time with --fire: without X-CloudScheduler-ScheduleTime
  --no-scheduler          no local Scheduler: deliver by hand (run-once trigger)
  --no-watch              do not rebuild and restart on changes under src/ (its subfolders
                          too, and the library's src/ in a workspace checkout)
  --no-build              serve build/ as it is, without building first
  --source FILE --target NAME
                          serve another module's function (functions-framework's flags)
  --host ADDRESS          listen there instead of 127.0.0.1 (e.g. 0.0.0.0), with a warning:
                          anyone who can reach it can run the jobs
  -h, --help              this help

The function listens on PORT (8080); the run history page's address is printed at start.
.run-once/ keeps dev's lock (dev.json: its pid, its children's pids and ports) and the local
Scheduler's pending deliveries (scheduler.json). A start beside a running dev is refused, naming
its pid; after a crash (kill -9) the next start stops what that dev left running, resumes its
retries in back-off and delivers each job's newest slot missed meanwhile, late.

${EXIT_STATUSES}`,

  'check-node': `run-once check-node: exit 1, with one line naming both versions, when this Node.js is older
than the package needs (package.json engines); print nothing and exit 0 otherwise. Every other
command checks first too; npm scripts that run no run-once command can start with this one.

Usage: run-once check-node`,

  version: `run-once version: print the package's version.

Usage: run-once version`,
};
