/**
 * A job's catch-up policy (`catchUp`): what the run audit does with a slot Scheduler never
 * delivered (docs/jobs.md, "Catch-up"; docs/how-it-works.md, "Late runs and catch-up").
 */

/** Which late slots a check catches up: only the newest, or each, oldest first. */
export const CATCH_UP_SLOTS = ['latest', 'all'] as const;
export type CatchUpSlots = (typeof CATCH_UP_SLOTS)[number];

/** `catchUp` as declared; durations in s, defaults {@link CATCH_UP_DEFAULTS}. */
export interface CatchUpDeclaration {
  /**
   * How long after a slot could have started (its time, or the end of the execution it waits
   * behind) a slot with no attempt is late, s; 30-86400, default 120.
   */
  readonly graceSeconds?: number;
  /** How old a late slot may be and still be caught up, s; older ones are reported missed. */
  readonly windowSeconds?: number;
  /** `latest`: only the newest late slot runs; `all`: each, oldest first, one per check. */
  readonly slots?: CatchUpSlots;
}

/** A validated catch-up policy, every default filled in. */
export type CatchUpPolicy = Required<CatchUpDeclaration>;

/** The defaults of `catchUp`'s fields, and the late-run grace of a job without it, in s. */
export const CATCH_UP_DEFAULTS: CatchUpPolicy = Object.freeze({
  graceSeconds: 120,
  windowSeconds: 3600,
  slots: 'latest',
});

/** Each duration's range, s: the grace at least one check's reads, the window at most a day. */
const RANGES = {
  graceSeconds: [30, 86_400],
  windowSeconds: [60, 86_400],
} as const;

/**
 * The policy `declared`, defaults filled in and frozen; `undefined` when the job declared none.
 * Each problem (a field out of its range, an unknown `slots`, a window shorter than the grace)
 * is told to `problem`.
 */
export function catchUpPolicyOf(
  declared: CatchUpDeclaration | undefined,
  problem: (text: string) => void,
): CatchUpPolicy | undefined {
  if (declared === undefined) {
    return undefined;
  }
  if (typeof declared !== 'object' || declared === null) {
    problem(
      'catchUp must be an object, e.g. { graceSeconds: 120, windowSeconds: 3600, slots: "latest" }',
    );
    return undefined;
  }
  for (const key of Object.keys(declared)) {
    if (!(key in CATCH_UP_DEFAULTS)) {
      const known = Object.keys(CATCH_UP_DEFAULTS).join(', ');
      problem(`catchUp.${key} is not a catch-up setting: use ${known}`);
    }
  }
  const policy = { ...CATCH_UP_DEFAULTS, ...withoutUndefined(declared) };
  let inRange = true;
  for (const key of Object.keys(RANGES) as (keyof typeof RANGES)[]) {
    const [min, max] = RANGES[key];
    const value = policy[key];
    if (!Number.isInteger(value) || value < min || value > max) {
      inRange = false;
      problem(
        `catchUp.${key} ${JSON.stringify(value)} must be a whole number of seconds from ${min} to ${max}`,
      );
    }
  }
  if (!CATCH_UP_SLOTS.includes(policy.slots)) {
    problem(
      `catchUp.slots ${JSON.stringify(policy.slots)} must be one of ${CATCH_UP_SLOTS.join(', ')}`,
    );
  }
  // Only between two valid durations: a value out of its range is reported once, above.
  if (inRange && policy.windowSeconds < policy.graceSeconds) {
    problem(
      `catchUp.windowSeconds (${policy.windowSeconds}) must be at least catchUp.graceSeconds (${policy.graceSeconds}): no late slot would be young enough to catch up`,
    );
  }
  return Object.freeze(policy);
}

/** `declared` without the fields set to `undefined`, so they take their defaults. */
function withoutUndefined(declared: CatchUpDeclaration): CatchUpDeclaration {
  const entries = Object.entries(declared).filter(
    ([, value]) => value !== undefined,
  );
  return Object.fromEntries(entries) as CatchUpDeclaration;
}

/** How long after a slot could have started it is late, ms: its `catchUp` grace, or the default. */
export function lateGraceMs(job: {
  readonly catchUp?: CatchUpPolicy | undefined;
}): number {
  const seconds = job.catchUp?.graceSeconds ?? CATCH_UP_DEFAULTS.graceSeconds;
  return seconds * 1000;
}
