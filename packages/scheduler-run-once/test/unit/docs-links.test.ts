/**
 * Every relative link of the README and `docs/` points at a file that exists, and every `#anchor`
 * at a heading of its target: the guide sends a newcomer to `docs/`, and a broken link there is
 * a dead end. In-process, no network (absolute `https:` links are not followed).
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, it } from 'node:test';
import {
  STARTER_CHECKS_SKIP,
  STARTER_ROOT,
} from '../fixtures/starter-checkout.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const PAGES = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs')).map((f) => `docs/${f}`),
].filter((f) => f.endsWith('.md'));

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens. */
function anchorOf(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

function anchorsOf(file: string): Set<string> {
  const text = readFileSync(file, 'utf8').replace(/```[\s\S]*?```/g, '');
  return new Set(
    [...text.matchAll(/^#{1,6}\s+(.+)$/gm)].map((m) =>
      anchorOf(m[1] as string),
    ),
  );
}

/** The relative links of a page, outside code blocks and code spans. */
function linksOf(page: string): string[] {
  const text = readFileSync(join(ROOT, page), 'utf8')
    .replace(/```[\s\S]*?```/g, '')
    .replace(/`[^`\n]*`/g, '');
  return [...text.matchAll(/\]\(([^)\s]+)\)/g)]
    .map((m) => m[1] as string)
    .filter((href) => !/^[a-z]+:/.test(href));
}

/** The starter's README, checked as shipped (`RUN_ONCE_STARTER_CHECKS=1`): relative to the library. */
const STARTER_README = relative(ROOT, join(STARTER_ROOT, 'README.md'));

describe('documentation links', () => {
  const pages = STARTER_CHECKS_SKIP ? PAGES : [...PAGES, STARTER_README];
  for (const page of pages) {
    it(`${page}: every relative link and anchor resolves`, () => {
      const broken: string[] = [];
      for (const href of linksOf(page)) {
        const [path = '', anchor] = href.split('#');
        const target =
          path === '' ? join(ROOT, page) : resolve(ROOT, dirname(page), path);
        if (!existsSync(target)) {
          broken.push(`${href} (no ${relative(ROOT, target)})`);
        } else if (
          anchor !== undefined &&
          statSync(target).isFile() &&
          target.endsWith('.md')
        ) {
          if (!anchorsOf(target).has(anchor)) {
            broken.push(`${href} (no heading #${anchor})`);
          }
        }
      }

      assert.deepEqual(broken, []);
    });
  }
});
