/**
 * `npm run runs -- --html FILE` in a real browser: the page `src/ops/format-html.ts` renders from rows
 * of every state, opened from disk in the system's headless Chromium (driven by playwright-core;
 * no browser is downloaded). It asserts on the rendered page (each state's colour, the marks of
 * manual and forced runs, details on hover and click, escaping, no request leaving the file) and
 * keeps a screenshot under the system's temporary directory as an artifact, never in the repo.
 * Without Chromium (`CHROMIUM_PATH`, else `/usr/bin/chromium`) it skips, saying so in one line;
 * `.ci/run` installs it and sets `REQUIRE_CHROMIUM=1`, under which a missing Chromium fails.
 */
import assert from 'node:assert/strict';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pathToFileURL } from 'node:url';
import { type BrowserContext, chromium, type Page } from 'playwright-core';
import { runsHtml, STATE_COLOURS } from '../../src/ops/format-html.ts';
import type { SlotRow } from '../../src/ops/slot-history.ts';

const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
const ARTIFACTS = join(tmpdir(), 'scheduler-run-once-artifacts');
const HOSTILE_ERROR = '<img src=x onerror="window.__pwned=1">boom & "quotes"';
const HOSTILE_NOTE = '</script><script>window.__pwned=2</script>';
const HOSTILE_JOB = '<b id="bold">old-job</b>';

// A fixed date on purpose: the page is rendered from these rows at `generatedAt`; nothing in it
// reads the real clock or Firestore's.
const T0 = Date.parse('2026-12-01T09:00:00Z');
function row(i: number, fields: Partial<SlotRow>): SlotRow {
  return {
    job: 'charge-customers',
    slot: new Date(T0 + i * 300_000),
    runId: `run${String(i).padStart(61, '0')}`,
    state: 'completed',
    final: true,
    attempts: 1,
    startedLateMs: 120,
    durationMs: 850,
    attemptId: `attempt-${i}`,
    lastError: undefined,
    reported: false,
    rerunOf: undefined,
    notes: {},
    kind: 'slot',
    ...fields,
  };
}

/** Every state, a manual and a forced run, a failed slot still retrying, and hostile text. */
const ROWS: SlotRow[] = [
  row(0, { state: 'missed', final: true, attempts: 0, durationMs: undefined }),
  row(1, {}),
  row(2, {
    state: 'failed',
    final: true,
    attempts: 3,
    durationMs: undefined,
    lastError: HOSTILE_ERROR,
    notes: { execution: HOSTILE_NOTE },
  }),
  row(3, { state: 'missed', final: true, attempts: 0, durationMs: undefined }),
  row(4, { state: 'skipped', attempts: 0, durationMs: undefined }),
  row(5, { kind: 'manual', runId: 'manual-run-id' }),
  row(6, { state: 'failed', final: false, attempts: 1, lastError: 'timeout' }),
  row(7, {
    state: 'unreadable',
    final: false,
    attempts: 0,
    lastError: 'status unknown',
  }),
  row(8, {
    kind: 'forced',
    state: 'in_progress',
    final: false,
    durationMs: undefined,
  }),
  row(9, {
    state: 'pending',
    final: false,
    attempts: 0,
    durationMs: undefined,
  }),
  row(10, {
    state: 'paused',
    attempts: 0,
    durationMs: undefined,
    pauseNote: 'db maintenance',
  }),
  // "Force run" at 09:03 carries the 09:55 slot: drawn where it ran, between 09:00 and 09:05.
  row(11, {
    kind: 'forced',
    runId: 'forced-early',
    startedLateMs: -52 * 60_000,
  }),
  // A forced run within the tolerance, taken as the 12th slot's run.
  row(12, { startedLateMs: -14_500, runId: 'forced-as-slot' }),
  row(0, { job: HOSTILE_JOB }),
  ...[0, 1, 2, 3].map((i) =>
    row(i, {
      job: 'behind',
      state: i < 2 ? 'pending' : i === 2 ? 'failed' : 'pending',
      final: false,
      attempts: i === 2 ? 4 : 0,
      durationMs: undefined,
      runId: `behind-${i}`,
    }),
  ),
  row(4, { job: 'behind', runId: 'behind-first-record', state: 'completed' }),
].sort(
  (a, b) => a.job.localeCompare(b.job) || a.slot.getTime() - b.slot.getTime(),
);

/** `#rrggbb` as the browser reports a computed colour. */
function rgb(hex: string): string {
  const [r, g, b] = [1, 3, 5].map((i) =>
    Number.parseInt(hex.slice(i, i + 2), 16),
  );
  return `rgb(${r}, ${g}, ${b})`;
}

const missing = !existsSync(CHROMIUM);
const skip =
  missing &&
  !process.env.REQUIRE_CHROMIUM &&
  `no Chromium at ${CHROMIUM}: install chromium (or set CHROMIUM_PATH) to run this`;

it('finds Chromium where CI requires it', {
  skip: !process.env.REQUIRE_CHROMIUM,
}, () => {
  assert.equal(
    missing,
    false,
    `REQUIRE_CHROMIUM is set and there is no Chromium at ${CHROMIUM}`,
  );
});

describe('the HTML run history in headless Chromium', { skip }, () => {
  let dir: string;
  let context: BrowserContext;
  let page: Page;
  const requests: string[] = [];
  /**
   * Evaluates a JavaScript expression in the page. Text, not a function: the project compiles
   * without the DOM's types, which a function run in the page would need.
   */
  const inPage = <T = unknown>(expression: string) =>
    page.evaluate<T>(expression);

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'runs-html-'));
    const file = join(dir, 'runs.html');
    writeFileSync(
      file,
      runsHtml(ROWS, {
        generatedAt: new Date(T0 + 3_600_000),
        window: '--since 1h',
      }),
    );
    context = await chromium.launchPersistentContext(join(dir, 'profile'), {
      executablePath: CHROMIUM,
      headless: true,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
      viewport: { width: 900, height: 600 },
    });
    page = context.pages()[0] ?? (await context.newPage());
    page.on('request', (request) => requests.push(request.url()));
    await page.goto(pathToFileURL(file).href);
  });

  after(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    const shot = join(ARTIFACTS, 'runs-html.png');
    await page?.screenshot({ path: shot, fullPage: true });
    console.log(`# screenshot: ${shot}`);
    await context?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('colours each state its own colour, one cell per row', async () => {
    const cells = await inPage<{ state: string; bg: string }[]>(`
      [...document.querySelectorAll('.timeline .slot')].map((el) => ({
        state: el.dataset.state,
        bg: getComputedStyle(el).backgroundColor,
      }))`);

    assert.equal(cells.length, ROWS.length);
    for (const [state, colour] of Object.entries(STATE_COLOURS)) {
      const solid = cells.filter(
        (c) => c.state === state && c.bg !== 'rgba(0, 0, 0, 0)',
      );
      assert.ok(solid.length > 0, `no ${state} cell`);
      assert.ok(
        solid.some((c) => c.bg === rgb(colour)),
        `${state}: ${JSON.stringify(solid)}`,
      );
    }
  });

  it('marks manual and forced runs, and no slot run', async () => {
    const marks = await inPage<[string, string][]>(`
      [...document.querySelectorAll('.timeline .slot')].map((el) => [
        el.classList.contains('forced-slot') ? 'forced as slot' : el.dataset.kind,
        getComputedStyle(el, '::after').content,
      ])`);

    for (const [kind, content] of marks) {
      assert.equal(
        content !== 'none',
        kind === 'manual' || kind === 'forced' || kind === 'forced as slot',
        `${kind} ${content}`,
      );
    }
    assert.ok(marks.some(([kind]) => kind === 'forced as slot'));
  });

  it('places a forced run where it ran, not at the slot it carries', async () => {
    const order = await inPage<string[]>(`
      [...document.querySelectorAll('section[data-job="charge-customers"] .slot')].map(
        (el) => el.title.slice(0, 20) + ' ' + el.dataset.kind)`);

    assert.deepEqual(order.slice(0, 3), [
      '2026-12-01T09:00:00Z slot',
      '2026-12-01T09:55:00Z forced',
      '2026-12-01T09:05:00Z slot',
    ]);
  });

  it('draws the slots before the first record apart from pending ones, and counts them in the legend', async () => {
    const seen = await inPage<{
      early: string[];
      pending: string[];
      legend: string;
    }>(`({
      early: [...document.querySelectorAll('.timeline .slot.early')].map((el) => getComputedStyle(el).backgroundImage + getComputedStyle(el).backgroundColor),
      pending: [...document.querySelectorAll('.timeline .slot.state-pending:not(.early):not(.waiting)')].map((el) => getComputedStyle(el).backgroundImage + getComputedStyle(el).backgroundColor),
      legend: document.querySelector('.legend').textContent,
    })`);

    assert.equal(
      seen.early.length,
      3,
      'charge-customers 09:00, behind 09:00 and 09:05',
    );
    assert.ok(seen.pending.length > 0);
    assert.ok(
      seen.early.every((look) => !seen.pending.includes(look)),
      JSON.stringify(seen),
    );
    assert.match(
      seen.legend,
      /not judged \(before first record\), not counted \(3\)/,
    );
    assert.match(seen.legend, /paused \(1\)/);
  });

  it('shows a slot waiting behind an outstanding execution as such', async () => {
    const tips = await inPage<string[]>(`
      [...document.querySelectorAll('section[data-job="behind"] .slot.waiting')].map((el) => el.title)`);

    assert.deepEqual(tips, [
      '2026-12-01T09:15:00Z pending (waiting behind 2026-12-01T09:10:00Z)',
    ]);
  });

  it('has a time axis: ticks under the cells, each labelled with its time', async () => {
    const ticks = await inPage<string[]>(`
      [...document.querySelectorAll('section[data-job="charge-customers"] .tick:not(.none)')].map((el) => el.textContent)`);

    assert.ok(ticks.length >= 2, JSON.stringify(ticks));
    assert.match(ticks[0] ?? '', /^12-01 09:00$/);
    assert.ok(
      ticks.slice(1).every((t) => /^\d\d:\d\d$/.test(t)),
      JSON.stringify(ticks),
    );
  });

  it('offers no next step for a completed slot', async () => {
    await page.hover(
      '.timeline .slot.state-completed.kind-slot:not(.forced-slot)',
    );
    const detail = await page.textContent('#detail');

    assert.doesNotMatch(detail ?? '', /next step|--rerun/);
  });

  it('shows the run id, the error as text, the notes and the fixing command on hover', async () => {
    await page.hover('.timeline .slot.state-failed:not(.retrying)');
    const detail = await page.textContent('#detail');

    assert.match(detail ?? '', new RegExp(`run${'0'.repeat(60)}2`));
    assert.ok(detail?.includes(HOSTILE_ERROR), detail ?? '');
    assert.ok(detail?.includes(HOSTILE_NOTE), detail ?? '');
    assert.ok(
      detail?.includes(
        'npm run trigger -- charge-customers --slot 2026-12-01T09:10:00Z',
      ),
      detail ?? '',
    );
  });

  it('keeps a clicked slot in the details after the pointer leaves it', async () => {
    await page.click('.timeline .slot.kind-manual');
    await page.hover('h1');
    const detail = await page.textContent('#detail');

    assert.ok(detail?.includes('manual-run-id'), detail ?? '');
  });

  it('renders user text as text: no injected element runs or appears', async () => {
    const state = await inPage(`({
      pwned: window.__pwned,
      images: document.querySelectorAll('img').length,
      bold: document.getElementById('bold'),
      headings: [...document.querySelectorAll('h2')].map((h) => h.textContent),
    })`);

    assert.deepEqual(state, {
      pwned: undefined,
      images: 0,
      bold: null,
      headings: [HOSTILE_JOB, 'behind', 'charge-customers'],
    });
  });

  it('loads nothing but the file itself', () => {
    assert.deepEqual(
      requests.filter((url) => !url.startsWith('file:')),
      [],
    );
  });
});
