/** Entry point: registers `handleScheduledJob`, which runs every job declared in `jobs.ts`. */
import { registerScheduledJob } from './function/register.ts';
import { jobs } from './jobs.ts';

registerScheduledJob('handleScheduledJob', jobs);
