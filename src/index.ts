/** Entry point: registers `handleScheduledJob`, which runs every job declared in `jobs.ts`. */
import { registerScheduledJob } from 'scheduler-run-once';
import { jobs } from './jobs.ts';

registerScheduledJob('handleScheduledJob', jobs);
