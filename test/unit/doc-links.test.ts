/**
 * The documentation's links hold: in README.md, CONTRIBUTING.md and docs/*.md (parsed with
 * mdast-util-from-markdown and its GFM extension), every relative link names a file or
 * directory of the repository, every `#anchor` is a heading of its target page (slugged by
 * github-slugger, GitHub's own rules, duplicates numbered), and every repository file cited
 * in inline code (`test/integration/x.test.ts`, `scripts/release.mjs`, …) exists.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import GithubSlugger from 'github-slugger';
import { fromMarkdown } from 'mdast-util-from-markdown';
import { gfmFromMarkdown } from 'mdast-util-gfm';
import { toString } from 'mdast-util-to-string';
import { gfm } from 'micromark-extension-gfm';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const DOCS = [
  'README.md',
  'CONTRIBUTING.md',
  ...readdirSync(path.join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/**
 * Pages another branch of issue #29 brings in (docs/configuration.md is generated from the
 * config spec by i29-settings): linked already, checked once they exist. Remove an entry
 * when its page lands.
 */
const PENDING = new Set(['docs/configuration.md']);

/** Top-level dirs whose paths, cited in inline code, must exist. */
const CITED =
  /^(?:bench|charts|cli|cluster|cni-plugin|config|demo|docs|image|ipamd|loader|netfacts|nodefs|proto|scripts|sim|test)\/[\w.\-/]*$/;

interface Node {
  type: string;
  url?: string;
  value?: string;
  children?: Node[];
}

/** Parses a Markdown file of the repository. */
function parse(rel: string): Node {
  return fromMarkdown(readFileSync(path.join(ROOT, rel), 'utf8'), {
    extensions: [gfm()],
    mdastExtensions: [gfmFromMarkdown()],
  }) as Node;
}

/** Every node of a tree, depth first. */
function* walk(n: Node): Generator<Node> {
  yield n;
  for (const c of n.children ?? []) yield* walk(c);
}

const anchorCache = new Map<string, Set<string>>();
/** The anchors GitHub gives a file's headings. */
function anchors(rel: string): Set<string> {
  let set = anchorCache.get(rel);
  if (!set) {
    const slugger = new GithubSlugger();
    set = new Set([...walk(parse(rel))].filter((n) => n.type === 'heading').map((h) => slugger.slug(toString(h))));
    anchorCache.set(rel, set);
  }
  return set;
}

test('relative links and #anchors in the docs resolve', () => {
  const broken: string[] = [];
  for (const doc of DOCS) {
    for (const n of walk(parse(doc))) {
      if ((n.type !== 'link' && n.type !== 'definition' && n.type !== 'image') || !n.url) continue;
      if (/^[a-z][a-z0-9+.-]*:/i.test(n.url)) continue; // http:, https:, mailto:
      const [file = '', frag] = n.url.split('#');
      const target = file ? path.posix.normalize(path.posix.join(path.posix.dirname(doc), decodeURI(file))) : doc;
      if (!existsSync(path.join(ROOT, target))) {
        if (PENDING.has(target) && !frag) continue;
        broken.push(`${doc}: ${n.url} (no ${target})`);
        continue;
      }
      if (frag && target.endsWith('.md') && !anchors(target).has(decodeURIComponent(frag)))
        broken.push(`${doc}: ${n.url} (no heading #${frag} in ${target})`);
    }
  }
  assert.deepEqual(broken, []);
});

test('repository files the docs cite in inline code exist', () => {
  const missing: string[] = [];
  for (const doc of DOCS) {
    for (const n of walk(parse(doc))) {
      if (n.type !== 'inlineCode' || !n.value || !CITED.test(n.value)) continue;
      // A module may be cited without its extension (`bench/ipamd-rss`).
      if (!['', '.ts'].some((ext) => existsSync(path.join(ROOT, n.value + ext))))
        missing.push(`${doc}: \`${n.value}\``);
    }
  }
  assert.deepEqual(missing, []);
});

test('the checker catches a broken anchor (github-slugger rules)', () => {
  const s = new GithubSlugger();
  assert.equal(s.slug('4. Restore after restart'), '4-restore-after-restart');
  assert.equal(s.slug('Metrics, introspection and logs'), 'metrics-introspection-and-logs');
  assert.equal(s.slug('Metrics, introspection and logs'), 'metrics-introspection-and-logs-1');
  assert.ok(anchors('docs/architecture.md').size > 0);
});
