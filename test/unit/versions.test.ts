/**
 * The release versions agree: the chart's `appVersion` is `package.json`'s version (the image
 * tag the chart pulls by default, charts/eni-ipam/templates/_helpers.tpl), and CHANGELOG.md
 * (Keep a Changelog 1.1.0) has a dated entry for that version which names the chart's
 * version, with an `[Unreleased]` section on top.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { fromMarkdown } from 'mdast-util-from-markdown';
import { toString } from 'mdast-util-to-string';
import { parse } from 'yaml';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const read = (rel: string) => readFileSync(path.join(ROOT, rel), 'utf8');

/** CHANGELOG.md's level-2 sections: heading text → the text under it (up to the next one). */
function changelogSections(): Map<string, string> {
  const tree = fromMarkdown(read('CHANGELOG.md'));
  const out = new Map<string, string>();
  let current: string | undefined;
  for (const n of tree.children) {
    if (n.type === 'heading' && n.depth === 2) {
      current = toString(n);
      out.set(current, '');
    } else if (current !== undefined) out.set(current, `${out.get(current)}${toString(n)}\n`);
  }
  return out;
}

test("the chart's appVersion is package.json's version, and the CHANGELOG has an entry for both", () => {
  const pkg = JSON.parse(read('package.json')) as { version: string };
  const lock = JSON.parse(read('package-lock.json')) as { version: string; packages: { '': { version: string } } };
  const chart = parse(read('charts/eni-ipam/Chart.yaml')) as { version: string; appVersion: unknown };
  const semver = /^\d+\.\d+\.\d+$/;
  assert.match(pkg.version, semver);
  assert.match(chart.version, semver);
  assert.equal(lock.version, pkg.version, 'package-lock.json follows package.json (npm version)');
  assert.equal(lock.packages[''].version, pkg.version);
  // A string in Chart.yaml (quoted), as helm wants it: an unquoted 0.10 would read as a number.
  assert.equal(typeof chart.appVersion, 'string', 'appVersion is quoted in Chart.yaml');
  assert.equal(chart.appVersion, pkg.version, "the chart's appVersion is the image's version");

  const sections = changelogSections();
  const headings = [...sections.keys()];
  assert.equal(headings[0], '[Unreleased]', `the first section is [Unreleased]; got ${headings.join(' | ')}`);
  for (const h of headings.slice(1))
    assert.match(h, /^\[\d+\.\d+\.\d+\] - \d{4}-\d{2}-\d{2}$/, `"${h}" is not "[x.y.z] - YYYY-MM-DD"`);
  const entry = headings.find((h) => h.startsWith(`[${pkg.version}] - `));
  assert.ok(entry, `CHANGELOG.md has no "## [${pkg.version}] - <date>" entry (package.json's version)`);
  const body = sections.get(entry)!;
  assert.match(
    body,
    new RegExp(`chart ${chart.version.replace(/\./g, '\\.')} \\(\`?appVersion: "${pkg.version.replace(/\./g, '\\.')}"`),
    `the ${pkg.version} entry names chart ${chart.version} and its appVersion`,
  );
  // Newest first, each version once.
  const versions = headings.slice(1).map((h) => /^\[([\d.]+)\]/.exec(h)![1]!);
  const sorted = [...versions].sort((a, b) => {
    const [x, y] = [a, b].map((v) => v.split('.').map(Number));
    return y![0]! - x![0]! || y![1]! - x![1]! || y![2]! - x![2]!;
  });
  assert.deepEqual(versions, sorted, 'entries newest first');
  assert.equal(new Set(versions).size, versions.length, 'each version once');
});
