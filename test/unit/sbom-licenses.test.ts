/**
 * The SBOM's license and identity facts (scripts/image/debian-meta.mjs,
 * scripts/image/node-runtime.mjs, scripts/release/sbom.mjs), on texts shaped as the image's
 * own: DEP-5 short names become SPDX only where the name says exactly which license it is
 * (`GPL-2+` is GPL-2.0-or-later and `GPL-2` GPL-2.0-only, where spdx-correct answers
 * GPL-2.0-only for both; `BSD-4-clause` is BSD-4-Clause, not BSD-2-Clause; a bare `GPL` or a
 * `with … exception` stays Debian's name); a DEP-5 file's names come from its header and
 * `Files:` paragraphs only; a free-form file gives the common licenses it names, or its
 * text; `apt-cache show` stanzas give each version's SHA-256; the Node runtime's LICENSE
 * gives MIT and nothing else passes for it; the runtime's CPE is NVD's. The whole release,
 * with a hash checked against the real `.deb`, is test/integration/release.test.ts.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';
import * as CDX from '@cyclonedx/cyclonedx-library';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- plain .mjs modules without type declarations
type Mod = Record<string, any>;
const load = async (rel: string): Promise<Mod> =>
  import(pathToFileURL(path.join(ROOT, 'scripts', rel)).href) as Promise<Mod>;
const spdxId = (id: string) => CDX.SPDX.fixupSpdxId(id);

test('DEP-5 short names become SPDX expressions only when they say exactly which license', async () => {
  const { dep5Expression } = await load('image/debian-meta.mjs');
  const cases: Array<[string, string | undefined]> = [
    ['GPL-2', 'GPL-2.0-only'],
    ['GPL-2+', 'GPL-2.0-or-later'],
    ['GPL-2.0+', 'GPL-2.0-or-later'],
    ['GPL-3', 'GPL-3.0-only'],
    ['LGPL-2.1+', 'LGPL-2.1-or-later'],
    ['LGPL-2+', 'LGPL-2.0-or-later'],
    ['GFDL-NIV-1.3+', 'GFDL-1.3-no-invariants-or-later'],
    ['BSD-4-clause', 'BSD-4-Clause'],
    ['BSD-3-clause', 'BSD-3-Clause'],
    ['Expat', 'MIT'],
    ['zlib', 'Zlib'],
    ['Apache-2', 'Apache-2.0'],
    ['Artistic', 'Artistic-1.0-Perl'],
    ['FSFULLR', 'FSFULLR'],
    ['BSD-3-clause or GPL-2+', '(BSD-3-Clause OR GPL-2.0-or-later)'],
    ['GPL-1+ or Artistic', '(GPL-1.0-or-later OR Artistic-1.0-Perl)'],
    ['GPL-3+ and ISC', '(GPL-3.0-or-later AND ISC)'],
    ['GPL', undefined],
    ['LGPL', undefined],
    ['public-domain', undefined],
    ['BSD-3-clause or GPL', undefined],
    ['GPL-2 with Linux-syscall-note exception', undefined],
    ['GPL-3+ with Bison exception', undefined],
    ['custom', undefined],
    ['MIT-like', undefined],
  ];
  for (const [name, want] of cases) assert.equal(dep5Expression(name, spdxId), want, name);
});

test('copyright files: DEP-5 names from the header and Files paragraphs; free-form: the common licenses named', async () => {
  const { readCopyright } = await load('image/debian-meta.mjs');
  const dep5 = [
    'Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/',
    'Upstream-Name: iproute2',
    '',
    'Files: *',
    'Copyright: 2004-2022 the authors',
    'License: GPL-2',
    '',
    'Files: lib/bpf*',
    'Copyright: 2015 someone',
    'License: GPL-2 or BSD-2-clause',
    '',
    'License: GPL-2',
    ' On Debian systems, the complete text of the GNU General Public License',
    ' version 2 can be found in /usr/share/common-licenses/GPL-2.',
    '',
    'License: Unused-elsewhere',
    ' text of a license no Files paragraph grants',
  ].join('\n');
  assert.deepEqual(readCopyright(dep5), {
    format: 'DEP-5',
    names: ['GPL-2', 'GPL-2 or BSD-2-clause'],
    commonLicenses: [],
  });
  const free =
    'This is the Debian prepackaged version of libc.\n\nOn Debian systems the text is in /usr/share/common-licenses/GPL-2 and\n/usr/share/common-licenses/LGPL-2.1; see also /usr/share/common-licenses/GPL-2.\n';
  assert.deepEqual(readCopyright(free), { format: 'free-form', names: [], commonLicenses: ['GPL-2', 'LGPL-2.1'] });
});

test('a package’s licenses: one expression when every name maps, else each name; free-form text kept', async () => {
  const { debianLicenses } = await load('release/sbom.mjs');
  const json = (ls: unknown[]) =>
    JSON.parse(
      new CDX.Serialize.JsonSerializer(new CDX.Serialize.JSON.Normalize.Factory(CDX.Spec.Spec1dot6)).serialize(
        Object.assign(new CDX.Models.Bom(), {
          components: new CDX.Models.ComponentRepository([
            new CDX.Models.Component(CDX.Enums.ComponentType.Library, 'x', {
              licenses: new CDX.Models.LicenseRepository(ls as CDX.Models.License[]),
            }),
          ]),
        }),
      ),
    ).components[0].licenses;
  const base = { copyright: '/usr/share/doc/x/copyright', commonLicenses: [] };
  assert.deepEqual(json(debianLicenses({ ...base, format: 'DEP-5', names: ['GPL-2'] })), [
    { license: { id: 'GPL-2.0-only', acknowledgement: 'declared' } },
  ]);
  assert.deepEqual(
    json(debianLicenses({ ...base, format: 'DEP-5', names: ['GPL-3+', 'GPL-3+ and ISC', 'BSD-2-clause or GPL-2+'] })),
    [{ expression: 'GPL-3.0-or-later AND ISC AND (BSD-2-Clause OR GPL-2.0-or-later)', acknowledgement: 'declared' }],
  );
  assert.deepEqual(json(debianLicenses({ ...base, format: 'DEP-5', names: ['LGPL-2.1+', 'public-domain'] })), [
    { license: { id: 'LGPL-2.1-or-later', acknowledgement: 'declared' } },
    { license: { name: 'public-domain', acknowledgement: 'declared' } },
  ]);
  assert.deepEqual(json(debianLicenses({ ...base, format: 'free-form', names: [], commonLicenses: ['GPL-2'] })), [
    { license: { name: 'GPL-2', acknowledgement: 'declared' } },
  ]);
  const [text] = json(
    debianLicenses({ ...base, format: 'free-form', names: [], text: 'All rights reserved, see below.' }),
  );
  assert.equal(text.license.name, 'Debian copyright file /usr/share/doc/x/copyright');
  assert.equal(text.license.text.content, 'All rights reserved, see below.');
});

test('apt-cache show stanzas give each version its .deb SHA-256', async () => {
  const { aptHashes } = await load('image/debian-meta.mjs');
  const h = 'a'.repeat(64);
  const text = `Package: iproute2\nVersion: 6.1.0-3\nArchitecture: amd64\nSHA256: ${h}\nDescription: x\n\nPackage: zlib1g\nVersion: 1:1.2.13.dfsg-1\nSHA256: short\n`;
  assert.deepEqual([...aptHashes(text)], [['iproute2=6.1.0-3', h]]);
});

test('the Node runtime: MIT from its LICENSE (nothing else passes), NVD’s CPE', async () => {
  const { nodeLicenseId } = await load('image/node-runtime.mjs');
  const { nodeCpe } = await load('release/sbom.mjs');
  const mit =
    'Node.js is licensed for use as follows:\n\n"""\nCopyright Node.js contributors. All rights reserved.\n\nPermission is hereby granted, free of charge, to any person obtaining a copy\nof this software ...\n\nTHE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND\n"""\n\nThis license applies to parts originating from ...\n';
  assert.equal(nodeLicenseId(mit), 'MIT');
  assert.throws(
    () => nodeLicenseId(mit.replace('Permission is hereby granted', 'Permission is granted to Joyent only')),
    /cannot tell the Node runtime's license/,
  );
  assert.equal(nodeCpe('24.21.0'), 'cpe:2.3:a:nodejs:node.js:24.21.0:*:*:*:*:*:*:*');
});
