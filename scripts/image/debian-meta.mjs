/**
 * What the SBOM says about each Debian package of the image beyond its name and version:
 *
 * - its license, from its copyright file in the image root (`/usr/share/doc/<pkg>/copyright`,
 *   the doc dir followed when it is a symlink to another package's, as libstdc++6's is). A
 *   machine-readable file (DEP-5, Debian's copyright-format 1.0) gives the `License:` short
 *   names of its header and `Files:` paragraphs; each is written as an SPDX expression when
 *   every name in it is one of DEP-5's standard short names (or already an SPDX id), else
 *   kept as Debian wrote it. Library help was tried and refused: spdx-correct maps Debian's
 *   `GPL-2+` to GPL-2.0-only and `BSD-4-clause` to BSD-2-Clause. A free-form file gives the
 *   `/usr/share/common-licenses/<name>` files it names, or, naming none, its own text;
 * - its `.deb`'s SHA-256, from the apt metadata the build resolved it with (`apt-cache show`
 *   of the exact version, run by mmdebstrap's customize hook while apt's lists exist:
 *   scripts/image/debian-rootfs.mjs).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ImageBuildError, run } from './common.mjs';

/** SPDX ids of DEP-5's standard short names that have no version (copyright-format 1.0, "License specification"). */
const PLAIN = {
  'public-domain': undefined,
  expat: 'MIT',
  mit: 'MIT',
  isc: 'ISC',
  zlib: 'Zlib',
  w3c: 'W3C',
  'bsd-2-clause': 'BSD-2-Clause',
  'bsd-3-clause': 'BSD-3-Clause',
  'bsd-4-clause': 'BSD-4-Clause',
  perl: '(Artistic-1.0-Perl OR GPL-1.0-or-later)',
  // Debian's /usr/share/common-licenses/Artistic is "Artistic License 1.0 (Perl)" (base-files' copyright file).
  artistic: 'Artistic-1.0-Perl',
};

/** Versioned DEP-5 families: `<name>-<version>[+]` → SPDX `<spdx>-<version>-only|-or-later` (GNU) or `<spdx>-<version>`. */
const GNU = { gpl: 'GPL', lgpl: 'LGPL', agpl: 'AGPL', gfdl: 'GFDL', 'gfdl-niv': 'GFDL' };
const VERSIONED = { apache: 'Apache', artistic: 'Artistic', mpl: 'MPL', cddl: 'CDDL', epl: 'EPL', cc0: 'CC0' };

/**
 * One DEP-5 short name (no `or`/`and`) as an SPDX id, or undefined when it is not a
 * standard name with a version SPDX can say (bare `GPL`, `Artistic`, `BSD-like`, `other`…).
 * @param {string} name e.g. `GPL-2+`, `LGPL-2.1`, `BSD-3-clause`, `Expat`, `GFDL-NIV-1.3+`
 * @param {(id: string) => string | undefined} spdxId an SPDX id's canonical spelling, or undefined
 * @returns {string | undefined}
 */
export function dep5Term(name, spdxId) {
  const lower = name.toLowerCase();
  if (lower in PLAIN) return PLAIN[/** @type {keyof typeof PLAIN} */ (lower)];
  const m = /^([a-z0-9-]+?)-(\d+(?:\.\d+)?)(\+?)$/.exec(lower);
  if (m) {
    const [, family, ver, plus] = m;
    const v = ver.includes('.') ? ver : `${ver}.0`;
    if (family in GNU) {
      const base = `${GNU[/** @type {keyof typeof GNU} */ (family)]}-${v}`;
      const id = spdxId(`${base}${family === 'gfdl-niv' ? '-no-invariants' : ''}-${plus ? 'or-later' : 'only'}`);
      if (id) return id;
    } else if (family in VERSIONED && !plus) {
      const id = spdxId(`${VERSIONED[/** @type {keyof typeof VERSIONED} */ (family)]}-${v}`);
      if (id) return id;
    }
    if (family in GNU || family in VERSIONED) return undefined;
  }
  // A name that already is an SPDX id (FSFULLR, X11, CC0-1.0, Apache-2.0, BSD-3-Clause, …); never one with "+".
  return name.includes('+') ? undefined : spdxId(name);
}

/**
 * A DEP-5 `License:` short name (terms joined by `or` / `and`, DEP-5's words) as one SPDX
 * expression, or undefined when any term has no SPDX id (`with … exception` included).
 * @param {string} name e.g. `GPL-1+ or Artistic-1.0`, `BSD-3-clause or GPL-2`
 * @param {(id: string) => string | undefined} spdxId
 * @returns {string | undefined}
 */
export function dep5Expression(name, spdxId) {
  if (/\bwith\b/i.test(name)) return undefined;
  const parts = name.trim().split(/\s+(or|and)\s+/i);
  const out = [];
  for (const [i, p] of parts.entries()) {
    if (i % 2 === 1) {
      out.push(p.toUpperCase());
      continue;
    }
    const t = dep5Term(p.replace(/,$/, ''), spdxId);
    if (!t) return undefined;
    out.push(t);
  }
  return out.length > 1 ? `(${out.join(' ')})` : out[0];
}

/**
 * Reads a Debian copyright file.
 * @param {string} text the file
 * @returns {{ format: 'DEP-5' | 'free-form', names: string[], commonLicenses: string[] }}
 *   names: distinct `License:` short names of the header and `Files:` paragraphs (DEP-5);
 *   commonLicenses: the `/usr/share/common-licenses/<name>` files a free-form file names
 */
export function readCopyright(text) {
  const paragraphs = text.split(/\n[ \t]*\n/);
  if (!/^Format:\s*\S*copyright-format/m.test(paragraphs[0] ?? '')) {
    const commonLicenses = [...new Set([...text.matchAll(/\/usr\/share\/common-licenses\/([A-Za-z0-9][A-Za-z0-9.+-]*[A-Za-z0-9+])/g)].map((m) => m[1]))];
    return { format: 'free-form', names: [], commonLicenses };
  }
  const names = [];
  for (const [i, p] of paragraphs.entries()) {
    if (i > 0 && !/^Files:/m.test(p)) continue; // stand-alone License paragraphs hold texts, not grants
    const m = /^License:[ \t]*(.+)$/m.exec(p);
    if (m && !names.includes(m[1].trim())) names.push(m[1].trim());
  }
  return { format: 'DEP-5', names, commonLicenses: [] };
}

/**
 * Parses `apt-cache show` output into each package version's `.deb` SHA-256.
 * @param {string} text stanzas with Package, Version, SHA256
 * @returns {Map<string, string>} `name=version` → lowercase hex SHA-256
 */
export function aptHashes(text) {
  const out = new Map();
  for (const stanza of text.split(/\n\n+/)) {
    const f = Object.fromEntries(stanza.split('\n').filter((l) => /^[A-Za-z0-9-]+: /.test(l)).map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 2).trim()]));
    if (f.Package && f.Version && /^[0-9a-f]{64}$/.test(f.SHA256 ?? '')) out.set(`${f.Package}=${f.Version}`, f.SHA256);
  }
  return out;
}

/**
 * Each installed package's copyright facts and `.deb` hash, read from the root filesystem
 * tarball and the apt metadata written by the build's hook.
 * @param {{ tar: string, packages: string[], aptShow: string }} o packages: `name=version arch` lines
 * @returns {Promise<Record<string, { copyright: string, format: string, names: string[], commonLicenses: string[], text?: string, sha256?: string }>>}
 *   keyed by `name=version arch`; `text` only for a free-form file that names no common license
 * @throws ImageBuildError when a package has no copyright file
 */
export async function debianMeta(o) {
  const { stdout: listing } = await run('tar', ['--list', '--verbose', `--file=${o.tar}`, './usr/share/doc/'], { env: { ...process.env, LC_ALL: 'C' }, what: `list the doc dirs of ${o.tar}` });
  const links = new Map([...listing.matchAll(/ \.\/usr\/share\/doc\/([^/\s]+) -> ([^/\s]+)$/gm)].map((m) => [m[1], m[2]]));
  const hashes = aptHashes(readFileSync(o.aptShow, 'utf8'));
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'eni-ipam-copyright-'));
  try {
    await run('tar', ['-xf', o.tar, '-C', tmp, '--wildcards', './usr/share/doc/*/copyright'], { what: `read the copyright files of ${o.tar}` });
    const out = {};
    for (const line of o.packages) {
      const [nameVersion] = line.split(' ');
      const name = nameVersion.slice(0, nameVersion.indexOf('='));
      const copyright = `/usr/share/doc/${links.get(name) ?? name}/copyright`;
      let text;
      try {
        text = readFileSync(path.join(tmp, copyright), 'utf8');
      } catch {
        throw new ImageBuildError(`the Debian package ${name} has no ${copyright} in the image root: its license cannot be given`);
      }
      const c = readCopyright(text);
      out[line] = {
        copyright,
        ...c,
        ...(c.format === 'free-form' && c.commonLicenses.length === 0 ? { text } : {}),
        ...(hashes.has(nameVersion) ? { sha256: hashes.get(nameVersion) } : {}),
      };
    }
    return out;
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}
