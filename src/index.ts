/**
 * Entry point: registers `handleScheduledJob`, the function that runs every job declared in
 * `jobs.ts`, with functions-framework. Nothing else: the building blocks are imported from their
 * own modules (`core/`, `policy/`, `function/`).
 */
import { registerScheduledJob } from './function/register.ts';
import { jobs } from './jobs.ts';

registerScheduledJob('handleScheduledJob', jobs);
