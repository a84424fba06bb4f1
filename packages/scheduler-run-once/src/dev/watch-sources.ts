/**
 * The watch of `npm run dev`: every file under the watched directories, subfolders included
 * (`fs.watch` with `recursive`, which Node supports on Linux since 20 and which follows an editor's
 * atomic save and a new folder), debounced: a burst of edits (an editor writes, renames, touches;
 * `git checkout` rewrites many files) calls back once, when it is quiet. Paths under
 * `node_modules/`, build output (`build/`, `dist/`), dev's state (`.run-once/`, `.emulator/`) and
 * `.git/` are ignored, as are editors' temporary files, so a build does not trigger the next one.
 */
import { type FSWatcher, watch } from 'node:fs';
import { join, sep } from 'node:path';

/** Folders whose changes never rebuild: dependencies, build output, dev's own state. */
export const IGNORED_FOLDERS: readonly string[] = [
  'node_modules',
  'build',
  'dist',
  '.run-once',
  '.emulator',
  '.git',
];

/** Editors' temporary and backup files (`.x.ts.swp`, `x.ts~`, `4913`, `.#x.ts`). */
const TEMPORARY_FILE = /(^|[\\/])(\.#[^\\/]*|[^\\/]*~|[^\\/]*\.sw[px]|4913)$/;

/** Whether a change of `path` (relative to a watched directory) is ignored. */
export function ignoredChange(path: string): boolean {
  const parts = path.split(/[\\/]/);
  return (
    parts.some((part) => IGNORED_FOLDERS.includes(part)) ||
    TEMPORARY_FILE.test(path)
  );
}

/** A directory to watch and how its changes are named (`src/`, `the library's src/`). */
export interface WatchedDir {
  readonly dir: string;
  /** Prefixed to a changed path when it is reported, e.g. `src/`. */
  readonly label: string;
}

/**
 * Watches every `dirs` entry recursively; calls `onChange` with the first changed path of a burst
 * (labelled, e.g. `src/jobs/nightly.ts`) once `quietMs` passed without another change.
 *
 * @returns a function that stops watching (and drops a burst not yet reported).
 * @throws {Error} from `fs.watch` when a directory does not exist.
 */
export function watchSources(
  dirs: readonly WatchedDir[],
  onChange: (changed: string) => void,
  quietMs: number,
): () => void {
  let quiet: NodeJS.Timeout | undefined;
  let first: string | undefined;
  const changed = (label: string, file: string | null) => {
    const path = String(file ?? '');
    if (ignoredChange(path)) {
      return;
    }
    first ??= `${label}${path.split(sep).join('/')}`;
    clearTimeout(quiet);
    quiet = setTimeout(() => {
      const reported = first ?? label;
      first = undefined;
      onChange(reported);
    }, quietMs);
  };
  const watchers: FSWatcher[] = dirs.map(({ dir, label }) =>
    watch(join(dir), { recursive: true }, (_event, file) =>
      changed(label, file),
    ),
  );
  return () => {
    clearTimeout(quiet);
    for (const watcher of watchers) {
      watcher.close();
    }
  };
}
