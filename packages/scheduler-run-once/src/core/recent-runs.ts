/** What an instance remembers of recent runs, bounded: the oldest entry is forgotten first. */

/** How many runs an instance remembers in one such map. */
export const MAX_REMEMBERED_RUNS = 1000;

/** Sets `key` in `map` as its newest entry; past {@link MAX_REMEMBERED_RUNS}, the oldest goes. */
export function rememberBounded<V>(
  map: Map<string, V>,
  key: string,
  value: V,
): void {
  map.delete(key);
  map.set(key, value);
  if (map.size > MAX_REMEMBERED_RUNS) {
    const oldest = map.keys().next().value;
    if (oldest !== undefined) {
      map.delete(oldest);
    }
  }
}
