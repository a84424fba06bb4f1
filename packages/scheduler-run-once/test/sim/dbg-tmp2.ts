import fc from 'fast-check';
import { stillRunningWarned } from './lease-loss-invariants.ts';
import { historyArbitrary, KNOWN_GAPS } from './model.ts';
import { simulate } from './simulator.ts';

await fc.check(
  fc.asyncProperty(historyArbitrary({ size: 'large' }), async (hist) => {
    const o = await simulate(hist, { gaps: KNOWN_GAPS, brokenFencing: false });
    const v = stillRunningWarned(o);
    if (!v.length) return;
    console.log(v);
    const id = /attempt (\w+)/.exec(v[0]!)![1]!;
    const e = o.executions.find((x) => x.attemptId.startsWith(id))!;
    console.log({ ...e, context: undefined, caseNote: undefined });
    for (const x of o.executions)
      if (x.runId === e.runId)
        console.log(
          'exec',
          x.attemptId.slice(0, 8),
          x.instance,
          x.start,
          x.end,
          x.abortedAt,
          x.abortReason,
          x.result,
          x.stubborn,
        );
    for (const l of o.logs)
      if (l.fields.runId === e.runId)
        console.log(
          l.at,
          l.instance,
          l.message.slice(0, 90),
          JSON.stringify(l.fields).slice(0, 200),
        );
  }),
  { seed: 1, path: process.argv[2] },
);
