/**
 * The image's pinned content list (image/contents-<arch>.lock, committed): the Node runtime
 * package with its integrity, every Debian package with its version, every npm production
 * package with its version, and every path of the image with its type, mode and owner —
 * except the files under /app/dist/<dir>/, which follow the source tree (their dirs, the
 * entrypoint files and the shim are listed), and the files inside each npm package
 * (pinned by its version and package-lock.json's integrity; the package dirs are listed).
 * `npm run image` fails when the built image
 * differs from the lock; `npm run image -- --update-lock` rewrites it.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ImageBuildError, ROOT, run } from './common.mjs';

/** The lock file for a Debian architecture. */
export function lockFile(debArch) {
  return path.join(ROOT, 'image', `contents-${debArch}.lock`);
}

/** /app/dist files listed one by one (the rest of /app/dist/<dir>/ is summarised by its dir). */
const DIST_LISTED = new Set(['./app/dist/cli/main.js', './app/dist/ipamd/main.js', './app/dist/cni-plugin/eni-ipam', './app/dist/cni-plugin/eni-ipam.cjs', './app/dist/proto/ipam.js']);

/**
 * Lists a layer tarball as `path <type+mode> <uid>:<gid> <name>[ -> target]` lines.
 * @param {string} tar uncompressed tarball
 * @returns {Promise<string[]>} one line per member, in archive order
 * @throws ImageBuildError when tar cannot read it
 */
export async function listTar(tar) {
  const { stdout } = await run('tar', ['--list', '--verbose', '--numeric-owner', `--file=${tar}`],
    { env: { ...process.env, LC_ALL: 'C', TZ: 'UTC' }, what: `list ${tar}` });
  const out = [];
  for (const line of stdout.split('\n')) {
    const m = /^(\S+) (\d+)\/(\d+) +\d+(?:,\s*\d+)? \S+ \S+ (.*)$/.exec(line);
    if (!m) continue;
    const name = m[4].replace(/ link to .*$/, (s) => ` =>${s.slice(' link to'.length)}`);
    const bare = name.replace(/ (->|=>) .*$/, '');
    if (/^\.\/app\/dist\/[^/]+\/.+/.test(bare) && !DIST_LISTED.has(bare)) continue;
    if (/^\.\/app\/node_modules\/(@[^/]+\/)?[^@/][^/]*\/.+/.test(bare)) continue;
    out.push(`path ${m[1]} ${m[2]}:${m[3]} ${name}`);
  }
  return out;
}

/**
 * Reads the npm packages installed in a staged node_modules (its hidden lockfile).
 * @param {string} appDir staged /app
 * @returns {string[]} sorted `npm <name>@<version>` lines
 */
export function npmPackages(appDir) {
  const lock = JSON.parse(readFileSync(path.join(appDir, 'node_modules', '.package-lock.json'), 'utf8'));
  return Object.entries(lock.packages ?? {})
    .filter(([k]) => k.startsWith('node_modules/'))
    .map(([k, v]) => `npm ${k.replace(/^.*node_modules\//, '')}@${/** @type {{ version: string }} */ (v).version}`)
    .sort()
    .filter((l, i, a) => a.indexOf(l) === i);
}

/**
 * The full content list of an image.
 * @param {{ node: { spec: string, integrity: string }, debs: string[], npm: string[], layers: string[] }} o
 *   layers: uncompressed layer tarballs, bottom first
 * @returns {Promise<string>} the lock file text
 */
export async function contentList(o) {
  const paths = [];
  for (const l of o.layers) paths.push(...await listTar(l));
  return [
    '# eni-ipam image content list (scripts/image/contents.mjs). `npm run image` fails when the',
    '# image differs; after reviewing the change, `npm run image -- --update-lock` rewrites this file.',
    `node-runtime ${o.node.spec} ${o.node.integrity}`,
    ...o.debs.map((d) => `deb ${d}`),
    ...o.npm,
    ...paths,
    '',
  ].join('\n');
}

/** True for a content-list line that Debian's packages decide (not Node, npm or /app). */
function isDebianLine(l) {
  if (l.startsWith('deb ')) return true;
  if (!l.startsWith('path ')) return false;
  const p = l.split(' ')[3] ?? '';
  return !p.startsWith('./app') && !p.startsWith('./usr/local/');
}

/**
 * The Debian packages whose version differs between two sets of content-list lines, as
 * `name old → new` (`name (new) v` / `name v (gone)` for one added or removed).
 * @param {string[]} removed lines only the lock has
 * @param {string[]} added lines only the built list has
 * @returns {string[]}
 */
export function movedPackages(removed, added) {
  const debs = (lines) => new Map(lines.filter((l) => l.startsWith('deb ')).map((l) => {
    const m = /^deb ([^=\s]+)=(\S+) /.exec(l);
    return m ? [m[1], m[2]] : [l, ''];
  }));
  const [was, now] = [debs(removed), debs(added)];
  const names = [...new Set([...was.keys(), ...now.keys()])].sort();
  return names.map((n) => was.has(n) && now.has(n) ? `${n} ${was.get(n)} → ${now.get(n)}` : now.has(n) ? `${n} (new) ${now.get(n)}` : `${n} ${was.get(n)} (gone)`);
}

/**
 * Compares the built image's content list with the committed lock, or rewrites the lock.
 * A difference confined to Debian (package versions and Debian's files: a point or security
 * release the mirror published since the lock was written) is named package by package with
 * the commands to review and accept it: thrown with `debianDrift` 'fail' (`npm run image`,
 * `npm run release`), returned as `drift` with 'warn' (the tests and `npm run cluster`: they
 * report it and go on); Node, npm and /app stay strict in both.
 * @param {{ debArch: string, text: string, update: boolean, newFile: string, debianDrift?: 'fail' | 'warn', file?: string }} o
 *   newFile: where the built list is written when it differs (for `diff`); file: the lock
 *   (default image/contents-<debArch>.lock)
 * @returns {{ changed: boolean, file: string, drift?: string }}
 * @throws ImageBuildError when it differs (or no lock exists) and update is false (one line)
 */
export function checkContents(o) {
  const file = o.file ?? lockFile(o.debArch);
  const old = existsSync(file) ? readFileSync(file, 'utf8') : undefined;
  if (old === o.text) return { changed: false, file };
  if (o.update) {
    writeFileSync(file, o.text);
    return { changed: true, file };
  }
  writeFileSync(o.newFile, o.text);
  const rel = path.relative(ROOT, file);
  const relNew = path.relative(ROOT, o.newFile);
  const accept = `npm run image -- --update-lock${o.file ? ` --lock ${rel}` : ''}`;
  if (old === undefined) throw new ImageBuildError(`${rel} is missing: review ${o.newFile} and run \`${accept}\``);
  const a = new Set(old.split('\n'));
  const b = new Set(o.text.split('\n'));
  const added = [...b].filter((l) => !a.has(l));
  const removed = [...a].filter((l) => !b.has(l));
  if ([...added, ...removed].every(isDebianLine)) {
    // The mirror published newer Debian versions (a point or security release): ours are unchanged.
    const moved = movedPackages(removed, added);
    const what = `Debian packages moved on the mirror since ${rel} was written: ${moved.length ? moved.join(', ') : `${added.length + removed.length} of Debian's files`}`;
    if (o.debianDrift === 'warn') return { changed: false, file, drift: `${what}; review: diff ${rel} ${relNew}; accept: ${accept}` };
    throw new ImageBuildError(`${what}; review them with \`diff ${rel} ${relNew}\`, then accept them with \`${accept}\``);
  }
  const first = [...removed.slice(0, 1).map((l) => `- ${l}`), ...added.slice(0, 1).map((l) => `+ ${l}`)].join(', ');
  throw new ImageBuildError(`the image differs from ${rel} (+${added.length} -${removed.length} lines; ${first}); see diff ${rel} ${relNew}; if intended, run \`${accept}\``);
}
