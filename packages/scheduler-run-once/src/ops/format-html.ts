/**
 * `npm run runs -- --html FILE`: the rows `runs` computes as one static HTML page, each job a
 * timeline of its slots coloured by state, in the manner of the cron monitors people already know
 * (Healthchecks, Cronitor, Sentry Crons). One file, no dependency and no external load (a Content
 * Security Policy forbids any), so it can be attached to an incident and opened anywhere.
 *
 * Everything from the ledger is user data (job ids of undeclared jobs, errors, notes): text goes
 * into the page HTML-escaped, and the details shown on hover or click are built from an inline JSON
 * block with `textContent`, never `innerHTML`.
 */
import { toUtcRfc3339 } from '../policy/schedule.ts';
import {
  BEFORE_FIRST_RECORD,
  BEFORE_FIRST_RECORD_WHY,
  forcedAsSlot,
  humanDuration,
  nextStep,
  type RowMarks,
  type SeenBefore,
  startedLateText,
  stateText,
  type Target,
  viewOf,
} from './format-runs.ts';
import type { SlotRow, SlotState } from './slot-history.ts';

/** Every state a slot can show, in the legend's order, with its colour (CSS). */
export const STATE_COLOURS = {
  completed: '#2e7d32',
  failed: '#c62828',
  missed: '#ef6c00',
  skipped: '#9e9e9e',
  paused: '#80cbc4',
  in_progress: '#1565c0',
  pending: '#e0e0e0',
  unreadable: '#6a1b9a',
} as const satisfies Record<SlotState, string>;

/** `&`, `<`, `>`, `"` and `'` as character references: safe in text and in quoted attributes. */
export function escapeHtml(text: string): string {
  return text.replace(
    /[&<>"']/g,
    (c) =>
      ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[
        c
      ] ?? c,
  );
}

/**
 * JSON that can sit inside `<script type="application/json">`: `<` written as `\u003c`, so no
 * value can close the element (`</script>`) or open a comment.
 */
function scriptJson(value: unknown): string {
  return JSON.stringify(value).replace(/</g, '\\u003c');
}

/** What the details panel shows for one slot, field by field (label → text). */
function detailOf(
  row: SlotRow,
  state: string,
  target: Target,
): [string, string][] {
  const fields: [string, string | undefined][] = [
    ['job', row.job],
    ['slot (UTC)', toUtcRfc3339(row.slot)],
    ['state', state],
    ['run id', row.runId],
    ['attempts', String(row.attempts)],
    ['started late', startedLateText(row.startedLateMs)],
    ['duration', humanDuration(row.durationMs)],
    ['attempt id', row.attemptId],
    ['last error', row.lastError],
    ['re-run of', row.rerunOf],
    [
      'reported',
      row.reported ? 'yes (missed-run detection logged it)' : undefined,
    ],
    [
      'notes',
      Object.keys(row.notes).length > 0
        ? JSON.stringify(row.notes, null, 2)
        : undefined,
    ],
    ['next step', nextStep(row, target)],
  ];
  return fields.filter(
    (f): f is [string, string] => f[1] !== undefined && f[1] !== '',
  );
}

const STYLE = `
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#212121;background:#fff}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:20px 0 6px;font-family:monospace}
.meta{color:#616161;margin:0 0 12px}
.legend{display:flex;flex-wrap:wrap;gap:12px;margin:8px 0 16px;padding:0;list-style:none}
.legend li{display:flex;align-items:center;gap:4px}
.timeline{display:flex;flex-wrap:wrap;gap:3px;align-items:flex-end}
.slot{width:14px;height:28px;border:0;border-radius:3px;padding:0;cursor:pointer;position:relative}
.legend .slot{height:14px;cursor:default}
.slot:focus-visible,.slot.selected{outline:2px solid #000;outline-offset:1px}
${Object.entries(STATE_COLOURS)
  .map(([state, colour]) => `.state-${state}{background:${colour}}`)
  .join('\n')}
.state-pending{box-shadow:inset 0 0 0 1px #9e9e9e}
.state-failed.retrying{background:repeating-linear-gradient(45deg,#c62828 0 3px,#ef9a9a 3px 6px)}
.slot.early{background:#fff;box-shadow:inset 0 0 0 1px #bdbdbd;background-image:repeating-linear-gradient(-45deg,transparent 0 4px,#eeeeee 4px 5px)}
.state-pending.waiting{background:repeating-linear-gradient(0deg,#e0e0e0 0 3px,#90a4ae 3px 5px)}
.kind-manual::after,.kind-forced::after,.forced-slot::after{content:'';position:absolute;left:3px;top:-7px;width:8px;height:8px;border-radius:50%;background:#000}
.kind-forced::after,.forced-slot::after{border-radius:0;transform:rotate(45deg) scale(.8)}
.forced-slot::after{background:#fff;box-shadow:0 0 0 1px #000}
.caught-up{outline:2px dashed #000;outline-offset:1px}
.cell{display:flex;flex-direction:column;align-items:flex-start;gap:2px;width:14px}
.tick{font-size:10px;color:#616161;white-space:nowrap;height:12px;border-left:1px solid #9e9e9e;padding-left:2px;overflow:visible}
.tick.none{border-left-color:transparent}
.range{color:#616161;font-size:12px;margin:2px 0 0}
#detail{position:sticky;bottom:0;margin-top:24px;padding:8px 12px;border:1px solid #bdbdbd;border-radius:4px;background:#fafafa;min-height:3em}
#detail dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:0}
#detail dt{color:#616161}#detail dd{margin:0;font-family:monospace;white-space:pre-wrap;word-break:break-all}
.empty{color:#616161}
`;

/**
 * Shows a slot's details (from the inline JSON, as text nodes) on hover, focus or click; a click
 * keeps them until another slot is clicked.
 */
const SCRIPT = `
(function(){
  var details = JSON.parse(document.getElementById('slot-details').textContent);
  var panel = document.getElementById('detail');
  var pinned = null;
  function show(button){
    var fields = details[Number(button.dataset.index)];
    var dl = document.createElement('dl');
    fields.forEach(function(f){
      var dt = document.createElement('dt'); dt.textContent = f[0];
      var dd = document.createElement('dd'); dd.textContent = f[1];
      dl.appendChild(dt); dl.appendChild(dd);
    });
    panel.replaceChildren(dl);
  }
  document.querySelectorAll('.timeline .slot').forEach(function(button){
    button.addEventListener('mouseenter', function(){ show(button); });
    button.addEventListener('focus', function(){ show(button); });
    button.addEventListener('mouseleave', function(){ if (pinned) show(pinned); });
    button.addEventListener('click', function(){
      if (pinned) pinned.classList.remove('selected');
      pinned = button; button.classList.add('selected'); show(button);
    });
  });
})();
`;

/** When a row's run happened, ms: a forced run's first attempt; a slot's schedule time. */
function ranAt(row: SlotRow): number {
  const late = row.kind === 'forced' ? (row.startedLateMs ?? 0) : 0;
  return row.slot.getTime() + late;
}

/** The fewest cells between two labels of the time axis: a label is about five cells wide. */
const MIN_TICK_CELLS = 5;

/** The steps a time axis may take, ms: a minute to a week. */
const TICK_STEPS = [
  60_000,
  300_000,
  900_000,
  3_600_000,
  6 * 3_600_000,
  86_400_000,
  7 * 86_400_000,
];

/**
 * The time axis of one timeline: the cells that open a new step (the first step of
 * {@link TICK_STEPS} that gives at most eight ticks over the range, at least
 * {@link MIN_TICK_CELLS} cells apart), each with its label (`HH:MM`, or `MM-DD HH:MM` when the day
 * changes).
 */
function tickIndexes(times: readonly number[]): Map<number, string> {
  const ticks = new Map<number, string>();
  const first = times[0];
  const last = times.at(-1);
  if (first === undefined || last === undefined) {
    return ticks;
  }
  const step =
    TICK_STEPS.find((ms) => (last - first) / ms <= 8) ??
    (TICK_STEPS.at(-1) as number);
  let lastBucket: number | undefined;
  let lastDay: string | undefined;
  let lastTick = Number.NEGATIVE_INFINITY;
  for (const [i, t] of times.entries()) {
    const bucket = Math.floor(t / step);
    // A label spans about five cells: a closer one would overlap it.
    if (bucket === lastBucket || i - lastTick < MIN_TICK_CELLS) {
      continue;
    }
    lastBucket = bucket;
    lastTick = i;
    const iso = new Date(t).toISOString();
    const day = iso.slice(5, 10);
    ticks.set(
      i,
      day === lastDay ? iso.slice(11, 16) : `${day} ${iso.slice(11, 16)}`,
    );
    lastDay = day;
  }
  return ticks;
}

/** What the page says about itself: when it was made and over which window. */
export interface HtmlMeta {
  /** When the rows were read. */
  readonly generatedAt: Date;
  /** The window, as the user asked for it (e.g. `--since 24h`, `the last 10 slots`). */
  readonly window: string;
}

/**
 * The rows as one self-contained HTML page: per job (in the rows' order) a timeline of its slots,
 * oldest first, each a coloured cell with a tooltip (no script needed) and details on hover or
 * click: run id, attempts, durations, last error, notes and the next step ({@link nextStep}).
 * Manual and forced runs carry a mark (a dot, a diamond; a hollow diamond for a forced run taken as
 * its slot) and are placed by when they ran; a failed slot still retrying is hatched; a pending
 * slot waiting behind an outstanding execution is striped; a slot before the job's first record
 * (no run, which `--check` does not count) is an outlined, hatched cell of its own. Ticks under
 * the cells mark the time axis.
 *
 * @param target - where the next-step commands deliver (`--url`), as in `--check`.
 * @example writeFileSync('runs.html', runsHtml(rows, { generatedAt: new Date(), window: '--since 24h' }));
 */
export function runsHtml(
  rows: readonly SlotRow[],
  meta: HtmlMeta,
  target: Target = {},
  marks: RowMarks = new Map(),
  seenBefore: SeenBefore = new Set(),
): string {
  const view = viewOf(rows, marks, seenBefore);
  const jobs = [...new Set(rows.map((row) => row.job))];
  const page: HtmlPage = { view, target, details: [] };
  const sections = jobs.map((job) => jobSection(page, job, rows));
  const { details } = page;
  const legend = legendOf(rows, view);
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Run history — scheduler-run-once</title>
<style>${STYLE}</style>
</head>
<body>
<h1>Run history</h1>
<p class="meta">Read ${escapeHtml(toUtcRfc3339(meta.generatedAt))} (UTC), ${escapeHtml(meta.window)}. Hover or click a slot for its run.</p>
<ul class="legend">${legend}</ul>
${sections.length === 0 ? '<p class="empty">No runs in the window.</p>' : sections.join('\n')}
<div id="detail" aria-live="polite"><span class="empty">Hover or click a slot to see its run id, attempts, duration, last error and notes.</span></div>
<script type="application/json" id="slot-details">${scriptJson(details)}</script>
<script>${SCRIPT}</script>
</body>
</html>
`;
}

/** What the page's sections share: the rows' view, the next steps' target, each cell's detail. */
interface HtmlPage {
  readonly view: ReturnType<typeof viewOf>;
  readonly target: Target;
  /** Each cell's detail, by its `data-index`. */
  readonly details: [string, string][][];
}

/** One job's section: its timeline of cells, then the range it spans. */
function jobSection(
  page: HtmlPage,
  job: string,
  rows: readonly SlotRow[],
): string {
  // Each run where it happened in time: a forced run carries its next slot's time, but ran when
  // its first attempt came.
  const own = rows
    .filter((row) => row.job === job)
    .sort((a, b) => ranAt(a) - ranAt(b) || a.slot.getTime() - b.slot.getTime());
  const ticks = tickIndexes(own.map(ranAt));
  const cells = own.map((row, i) => cellOf(page, row, ticks.get(i)));
  const first = own[0];
  const last = own.at(-1);
  const range =
    first === undefined || last === undefined
      ? ''
      : `${toUtcRfc3339(new Date(ranAt(first)))} → ${toUtcRfc3339(new Date(ranAt(last)))}, ${own.length} ${own.length === 1 ? 'slot or run' : 'slots and runs'} (UTC; ticks mark the time axis)`;
  return `<section class="job" data-job="${escapeHtml(job)}">
<h2>${escapeHtml(job)}</h2>
<div class="timeline">${cells.join('')}</div>
<p class="range">${escapeHtml(range)}</p>
</section>`;
}

/** One row's cell: its button (classes by state and kind, its tip), and its tick on the axis. */
function cellOf(
  page: HtmlPage,
  row: SlotRow,
  tick: string | undefined,
): string {
  const { view } = page;
  const text = stateText(row, view);
  const index = page.details.push(detailOf(row, text, page.target)) - 1;
  const classes = [
    'slot',
    `state-${row.state}`,
    `kind-${row.kind}`,
    ...(row.state === 'failed' && !row.final ? ['retrying'] : []),
    ...(view.early.has(row) ? ['early'] : []),
    ...(view.waiting.has(row) ? ['waiting'] : []),
    ...(forcedAsSlot(row) ? ['forced-slot'] : []),
    ...(row.caughtUpAt === undefined ? [] : ['caught-up']),
  ];
  const tip = `${toUtcRfc3339(row.slot)} ${text}${
    row.lastError === undefined ? '' : ` — ${row.lastError}`
  }`;
  return `<span class="cell"><button type="button" class="${classes.join(' ')}" data-index="${index}" data-state="${view.early.has(row) ? 'no_run' : row.state}" data-kind="${row.kind}" title="${escapeHtml(tip)}" aria-label="${escapeHtml(tip)}"></button><span class="tick${tick === undefined ? ' none' : ''}">${tick === undefined ? '' : escapeHtml(tick)}</span></span>`;
}

/** The legend: each state with its count, the marks, and the slots before the first record. */
function legendOf(
  rows: readonly SlotRow[],
  view: ReturnType<typeof viewOf>,
): string {
  // Slots before the first record are counted apart: they are no run, not pending or missed.
  const counts = new Map<string, number>();
  let early = 0;
  let waiting = 0;
  for (const row of rows) {
    if (view.early.has(row)) {
      early++;
    } else {
      counts.set(row.state, (counts.get(row.state) ?? 0) + 1);
    }
    if (view.waiting.has(row)) {
      waiting++;
    }
  }
  return Object.keys(STATE_COLOURS)
    .map(
      (state) =>
        `<li><span class="slot state-${state}"></span>${escapeHtml(state.replace('_', ' '))} (${counts.get(state) ?? 0})</li>`,
    )
    .concat(
      '<li><span class="slot state-completed kind-manual"></span>manual run</li>',
      '<li><span class="slot state-completed kind-forced"></span>forced run (placed when it ran)</li>',
      '<li><span class="slot state-completed forced-slot"></span>forced run taken as its slot</li>',
      '<li><span class="slot state-completed caught-up"></span>caught up by the run audit</li>',
      '<li><span class="slot state-failed retrying"></span>failed, retrying</li>',
      `<li><span class="slot state-pending waiting"></span>pending, waiting behind an outstanding execution (${waiting})</li>`,
      `<li title="${escapeHtml(BEFORE_FIRST_RECORD_WHY)}"><span class="slot early"></span>${escapeHtml(BEFORE_FIRST_RECORD)}, not counted (${early})</li>`,
    )
    .join('');
}
