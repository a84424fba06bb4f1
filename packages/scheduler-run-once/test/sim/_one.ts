import { readFileSync } from 'node:fs';
import { violations } from './invariants.ts';
import { simulate } from './simulator.ts';

const h = JSON.parse(readFileSync(process.argv[2]!, 'utf8'));
const change = process.argv[3];
if (change)
  for (const e of h.events) if (e.type === 'redeploy') e.change = change;
const o = await simulate(h);
console.log(violations(o));
if (process.argv[4])
  for (const l of o.logs)
    if (
      String(l.fields.jobName ?? l.fields.jobId ?? '').includes('job-0') ||
      /check|cursor|missed/.test(l.message)
    )
      console.log(
        new Date(l.at).toISOString(),
        l.instance,
        l.level,
        l.message.slice(0, 140),
        JSON.stringify(l.fields).slice(0, 200),
      );
