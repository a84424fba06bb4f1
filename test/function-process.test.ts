/**
 * The built function run as Cloud Run runs it: `functions-framework --target=handleScheduledJob` in
 * the repo root, a separate process, over real HTTP, with the shipped `src/job.ts`.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import {
  documents,
  freshCollection,
  schedulerHeaders,
  sleep,
  storedRecord,
  until,
} from './helpers.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const FRAMEWORK = `${ROOT}node_modules/.bin/functions-framework`;

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

function startFunction(
  port: number,
  env: Record<string, string>,
): ChildProcess & { output: () => string } {
  let output = '';
  const child = spawn(FRAMEWORK, ['--target=handleScheduledJob', `--port=${port}`], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout?.on('data', (c: Buffer) => {
    output += c.toString();
  });
  child.stderr?.on('data', (c: Buffer) => {
    output += c.toString();
  });
  return Object.assign(child, { output: () => output });
}

async function waitForPort(port: number, child: ChildProcess): Promise<void> {
  for (let i = 0; i < 100 && child.exitCode === null; i++) {
    try {
      await fetch(`http://127.0.0.1:${port}/`, { method: 'OPTIONS' });
      return;
    } catch {
      await sleep(100);
    }
  }
  throw new Error('the function did not start listening');
}

describe('the built function as a process', {
  skip: !existsSync(`${ROOT}build/index.js`) && 'run `npm run build` first',
}, () => {
  const children: ChildProcess[] = [];
  after(() => {
    for (const child of children) child.kill('SIGKILL');
  });

  it('answers a delivery 200 processed and its retry 200 duplicate', async () => {
    const port = await freePort();
    const collection = freshCollection();
    const fn = startFunction(port, { RUNS_COLLECTION: collection });
    children.push(fn);
    await waitForPort(port, fn);
    const post = () =>
      fetch(`http://127.0.0.1:${port}/`, {
        method: 'POST',
        headers: schedulerHeaders('process-test'),
      });

    const first = await post();
    const firstBody = (await first.json()) as { outcome: string; runId: string };
    const retry = await post();
    const retryBody = (await retry.json()) as { outcome: string };

    assert.equal(first.status, 200, fn.output());
    assert.equal(firstBody.outcome, 'processed');
    assert.equal(retry.status, 200);
    assert.equal(retryBody.outcome, 'duplicate');
    assert.equal((await storedRecord(collection, firstBody.runId)).status, 'completed');
    assert.match(fn.output(), /"message":"job started"/);
  });

  it('on SIGTERM mid-job aborts the job, releases its claim, answers 500, then exits', async () => {
    const port = await freePort();
    const collection = freshCollection();
    const fn = startFunction(port, { RUNS_COLLECTION: collection });
    children.push(fn);
    await waitForPort(port, fn);
    const exited = new Promise((resolve) => fn.once('exit', resolve));

    const delivery = fetch(`http://127.0.0.1:${port}/`, {
      method: 'POST',
      headers: schedulerHeaders('sigterm-test'),
    });
    await until(async () => (await documents(collection)).size === 1);
    fn.kill('SIGTERM');
    const res = await delivery;
    const body = (await res.json()) as { outcome: string; message: string };
    await exited;

    assert.equal(res.status, 500, fn.output());
    assert.equal(body.outcome, 'failed');
    assert.match(body.message, /shutting down.*claim is released/);
    assert.equal((await documents(collection)).size, 0, 'the claim was released');
    assert.match(fn.output(), /shutting down: aborting running jobs/);
  });

  it('fails at cold start with every configuration problem listed', async () => {
    const fn = startFunction(await freePort(), { LEASE_SECONDS: 'five', LOG_LEVEL: 'loud' });
    children.push(fn);

    const code = await new Promise((resolve) => fn.once('exit', resolve));

    assert.equal(code, 1);
    assert.match(
      fn.output(),
      /Invalid configuration:\n {2}- LEASE_SECONDS="five": .*\n {2}- LOG_LEVEL="loud"/,
    );
  });
});
