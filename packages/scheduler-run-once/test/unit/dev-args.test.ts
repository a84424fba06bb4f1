/**
 * `run-once dev`'s arguments (`src/dev/dev-args.ts`): what `run-once` checks before it starts the
 * dev loop, and what the loop reads. No process is started.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DevArgumentError, readDevArguments } from '../../src/dev/dev-args.ts';

/** The message of the {@link DevArgumentError} `args` (with `env`) are refused with. */
function refusal(
  args: readonly string[],
  env: Record<string, string | undefined> = {},
): string {
  try {
    readDevArguments(args, env);
  } catch (err) {
    assert.ok(err instanceof DevArgumentError, String(err));
    return err.message;
  }
  assert.fail(`accepted: ${args.join(' ')}`);
}

describe('run-once dev arguments', () => {
  it('defaults to port 8080 on 127.0.0.1, without dropped answers or duplicates', () => {
    const read = readDevArguments([], {});

    assert.equal(read.port, 8080);
    assert.equal(read.host, '127.0.0.1');
    assert.equal(read.dropAnswers, 0);
    assert.equal(read.duplicates, 0);
  });

  it('reads the flags, PORT and the rates', () => {
    const read = readDevArguments(
      [
        '--drop-answers',
        '0.5',
        '--duplicates',
        '1',
        '--host',
        '0.0.0.0',
        '--fire',
        'nightly',
        '--without-schedule-time',
        '--keep-data',
      ],
      { PORT: '9090' },
    );

    assert.equal(read.port, 9090);
    assert.equal(read.host, '0.0.0.0');
    assert.equal(read.dropAnswers, 0.5);
    assert.equal(read.duplicates, 1);
    assert.equal(read.options.fire, 'nightly');
    assert.equal(read.options['keep-data'], true);
  });

  it('refuses each bad argument with what to fix', () => {
    assert.match(refusal(['--nope']), /Unknown option '--nope'/);
    assert.match(
      refusal(['--drop-answers', '2']),
      /--drop-answers must be a number from 0 to 1/,
    );
    assert.match(
      refusal(['--duplicates', '']),
      /--duplicates must be a number from 0 to 1/,
    );
    assert.match(
      refusal(['--without-schedule-time']),
      /--without-schedule-time goes with --fire JOB/,
    );
    assert.match(
      refusal(['--source', 'x.js']),
      /--source and --target go together/,
    );
    assert.match(refusal(['--fire=']), /--fire needs the id of a declared job/);
    assert.match(refusal(['--host', '']), /--host "" is not an address/);
    for (const host of ['a b', '[::1]', 'http://x', '1.2.3.4:80', '-x']) {
      assert.match(
        refusal([`--host=${host}`]),
        /is not an address: give an IP address or a host name, without brackets, scheme or port/,
        host,
      );
    }
    for (const rate of [
      '0x1',
      '1e-1',
      '-0',
      ' 0.5',
      'NaN',
      'Infinity',
      '1.5',
    ]) {
      assert.match(
        refusal([`--drop-answers=${rate}`]),
        /--drop-answers must be a number from 0 to 1/,
        rate,
      );
    }
    for (const port of [
      'abc',
      '0',
      '65536',
      '80.5',
      ' 8080',
      '1e3',
      '0x50',
      '+80',
    ]) {
      assert.match(
        refusal([], { PORT: port }),
        new RegExp(
          `PORT="${port.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}" is not a port: set it to a whole number from 1 to 65535`,
        ),
      );
    }
  });

  it('takes an empty PORT as unset, IPv6 and host names, rates as decimals, and reads --help', () => {
    assert.equal(readDevArguments([], { PORT: '' }).port, 8080);
    for (const host of ['::', '::1', '0.0.0.0', 'localhost', 'my-box.local']) {
      assert.equal(readDevArguments(['--host', host], {}).host, host);
    }
    for (const [raw, rate] of [
      ['0', 0],
      ['1', 1],
      ['1.0', 1],
      ['.5', 0.5],
      ['0.25', 0.25],
    ] as const) {
      assert.equal(
        readDevArguments(['--duplicates', raw], {}).duplicates,
        rate,
      );
    }
    assert.equal(readDevArguments(['-h'], {}).options.help, true);
    assert.equal(
      readDevArguments(['--help', '--host', ''], { PORT: 'x' }).options.help,
      true,
    );
  });
});
