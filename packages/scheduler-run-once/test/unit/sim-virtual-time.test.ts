/**
 * The simulator's virtual clock (test/sim/virtual-time.ts): timers a paused process held fire, as
 * Node's do after a blocked event loop, in the order they fell due, not the order they were set.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type MachineClock, VirtualTime } from '../sim/virtual-time.ts';

describe('the virtual clock', () => {
  it('fires the timers a pause held in the order they fell due, then the order they were set', async () => {
    const time = new VirtualTime(0);
    const machine: MachineClock = {
      name: 'd0-i0-r0',
      offsetMs: 0,
      pausedUntil: 0,
      dead: false,
    };
    const fired: string[] = [];
    time.within(machine, () => {
      // A lapse armed first, due at 23 s; a beat set after it, due every 7.7 s.
      time.schedule(() => fired.push('lapse'), 23_000);
      time.schedule(() => fired.push('beat'), 7_700, 7_700);
      time.schedule(() => fired.push('second lapse'), 23_000);
    });
    machine.pausedUntil = 50_000;
    await time.run(50_000);

    assert.deepEqual(fired, ['beat', 'lapse', 'second lapse']);
    assert.equal(time.now, 50_000);
  });
});
