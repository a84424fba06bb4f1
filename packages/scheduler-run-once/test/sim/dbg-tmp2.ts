import fc from 'fast-check';
import { noAbortAfterEnd } from './lease-loss-invariants.ts';
import { historyArbitrary, KNOWN_GAPS } from './model.ts';
import { simulate } from './simulator.ts';

await fc.check(
  fc.asyncProperty(historyArbitrary({ size: 'large' }), async (hist) => {
    const o = await simulate(hist, { gaps: KNOWN_GAPS, brokenFencing: false });
    const v = noAbortAfterEnd(o);
    if (!v.length) return;
    console.log(v);
    const id = /attempt (\w+)/.exec(v[0]!)![1]!;
    const e = o.executions.find((x) => x.attemptId.startsWith(id))!;
    console.log({ ...e, context: undefined, caseNote: undefined });
    console.log(hist.events.filter((ev) => 'instance' in ev));
    for (const l of o.logs)
      if (
        l.fields.runId === e.runId ||
        (l.instance === e.instance &&
          l.at >= e.end! - 1000 &&
          l.at <= e.abortedAt! + 1000)
      )
        console.log(
          l.at - e.end!,
          l.instance,
          l.message.slice(0, 90),
          JSON.stringify(l.fields).slice(0, 150),
        );
  }),
  { seed: 3, path: process.argv[2] },
);
