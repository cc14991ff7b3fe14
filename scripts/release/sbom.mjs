/**
 * The image's CycloneDX SBOM, made with the CycloneDX project's own library
 * (@cyclonedx/cyclonedx-library): one component per Debian package, per npm production
 * package and for the Node runtime, read from the content list the image build wrote for
 * the image it built (scripts/image/contents.mjs: `deb name=version arch`, `npm name@version`,
 * `node-runtime name@version integrity`). npm packages get their license and SHA-512 from
 * package-lock.json. The Node runtime gets its CPE (`cpe:2.3:a:nodejs:node.js:<version>`,
 * NVD's vendor and product names, so CVE scanners keyed on CPE find it) and its license;
 * each Debian package its license from its copyright file in the image root and its `.deb`'s
 * SHA-256 from the apt metadata (the build's `sbom-meta.json`: scripts/image/debian-meta.mjs).
 * The document is validated against the CycloneDX JSON schema (the library's strict
 * validator, ajv) before it is returned.
 */
import { createHash } from 'node:crypto';
import * as CDX from '@cyclonedx/cyclonedx-library';
import { PackageURL } from 'packageurl-js';
import { dep5Expression } from '../image/debian-meta.mjs';

/** The CycloneDX version written. */
export const SPEC_VERSION = CDX.Spec.Version.v1dot6;

/** A release step that failed: its message is the one line `npm run release` prints. */
export class ReleaseError extends Error {}

/**
 * Parses the lines of an image content list that name packages.
 * @param {string} text the content list (image/contents-<arch>.lock format)
 * @returns {{ debs: { name: string, version: string, arch: string }[], npm: { name: string, version: string }[],
 *   node: { name: string, version: string, integrity: string } | undefined }}
 * @throws ReleaseError naming the first line that does not parse
 */
export function parseContentList(text) {
  const debs = [];
  const npm = [];
  let node;
  for (const line of text.split('\n')) {
    if (line.startsWith('deb ')) {
      const m = /^deb ([^=\s]+)=(\S+) (\S+)$/.exec(line);
      if (!m) throw new ReleaseError(`content list: cannot read the Debian package line '${line}'`);
      debs.push({ name: m[1], version: m[2], arch: m[3] });
    } else if (line.startsWith('npm ')) {
      const m = /^npm ((?:@[^/\s]+\/)?[^@\s]+)@(\S+)$/.exec(line);
      if (!m) throw new ReleaseError(`content list: cannot read the npm package line '${line}'`);
      npm.push({ name: m[1], version: m[2] });
    } else if (line.startsWith('node-runtime ')) {
      const m = /^node-runtime (\S+)@(\S+) (\S+)$/.exec(line);
      if (!m) throw new ReleaseError(`content list: cannot read the node-runtime line '${line}'`);
      node = { name: m[1], version: m[2], integrity: m[3] };
    }
  }
  if (debs.length === 0 || npm.length === 0)
    throw new ReleaseError(
      `content list: found ${debs.length} Debian and ${npm.length} npm packages (both must be listed)`,
    );
  return { debs, npm, node };
}

/** `sha512-<base64>` (an npm integrity) as a CycloneDX hash dictionary, or undefined. */
function hashes(integrity) {
  const m = /^sha512-([A-Za-z0-9+/=]+)$/.exec(integrity ?? '');
  if (!m) return undefined;
  return new CDX.Models.HashDictionary([
    [CDX.Enums.HashAlgorithm['SHA-512'], Buffer.from(m[1], 'base64').toString('hex')],
  ]);
}

/** package-lock.json's entry for name@version (any nesting), or undefined. */
function lockEntry(lock, name, version) {
  for (const [k, v] of Object.entries(lock.packages ?? {})) {
    if (k.replace(/^.*node_modules\//, '') === name && v.version === version) return v;
  }
  return undefined;
}

/** A library component for an npm package. */
function npmComponent(name, version, lock) {
  const at = name.startsWith('@') ? name.indexOf('/') : -1;
  const purl = new PackageURL(
    'npm',
    at > 0 ? name.slice(0, at) : undefined,
    at > 0 ? name.slice(at + 1) : name,
    version,
    undefined,
    undefined,
  );
  const entry = lockEntry(lock, name, version);
  const c = new CDX.Models.Component(CDX.Enums.ComponentType.Library, name, {
    version,
    purl,
    bomRef: purl.toString(),
    hashes: hashes(entry?.integrity),
  });
  if (typeof entry?.license === 'string') c.licenses.add(new CDX.Models.NamedLicense(entry.license));
  return c;
}

const DECLARED = { acknowledgement: CDX.Enums.LicenseAcknowledgement.Declared };

/** NVD's CPE 2.3 name of a Node.js release (vendor `nodejs`, product `node.js`). */
export function nodeCpe(version) {
  return `cpe:2.3:a:nodejs:node.js:${version}:*:*:*:*:*:*:*`;
}

/**
 * A Debian package's licenses as CycloneDX license choices: one SPDX expression when every
 * DEP-5 name of its copyright file has one (joined by AND: the package holds files under
 * each), else one license per name (an SPDX id where it is one, else Debian's own name);
 * for a free-form copyright file, the common-licenses files it names, or its text.
 * @param {{ copyright: string, format: string, names: string[], commonLicenses: string[], text?: string }} m
 * @returns {CDX.Models.License[]}
 */
export function debianLicenses(m) {
  const spdxId = (id) => CDX.SPDX.fixupSpdxId(id);
  if (m.format === 'DEP-5') {
    const exprs = m.names.map((n) => dep5Expression(n, spdxId));
    if (exprs.length > 0 && exprs.every(Boolean)) {
      // `(A AND B)` from one name is two terms of the package's AND; `(A OR B)` stays one.
      const terms = [
        ...new Set(
          exprs.flatMap((e) =>
            /^\([^()]* AND [^()]*\)$/.test(e) && !/ OR /.test(e) ? e.slice(1, -1).split(' AND ') : [e],
          ),
        ),
      ];
      const expression = terms.length === 1 ? terms[0].replace(/^\((.*)\)$/, '$1') : terms.join(' AND ');
      if (spdxId(expression)) return [new CDX.Models.SpdxLicense(spdxId(expression), DECLARED)];
      const e = new CDX.Models.LicenseExpression(expression);
      e.acknowledgement = DECLARED.acknowledgement;
      return [e];
    }
    return m.names.map((n, i) =>
      exprs[i] && spdxId(exprs[i])
        ? new CDX.Models.SpdxLicense(spdxId(exprs[i]), DECLARED)
        : new CDX.Models.NamedLicense(n, DECLARED),
    );
  }
  if (m.commonLicenses.length > 0) return m.commonLicenses.map((n) => new CDX.Models.NamedLicense(n, DECLARED));
  return [
    new CDX.Models.NamedLicense(`Debian copyright file ${m.copyright}`, {
      ...DECLARED,
      text: new CDX.Models.Attachment(m.text ?? '', { contentType: 'text/plain' }),
    }),
  ];
}

/**
 * Builds the SBOM of one image.
 * @param {{ contents: string, packageLock: object, version: string, arch: string, manifestDigest?: string,
 *   epoch: number, meta: { node: { license: string }, debs: Record<string, object> } }} o
 *   contents: the image's content list; packageLock: parsed package-lock.json; meta: the
 *   build's sbom-meta.json (Node's license; each `name=version arch` Debian line's copyright facts and hash);
 *   version: eni-ipam's version; arch: Debian arch (amd64, arm64); manifestDigest: the image
 *   manifest's `sha256:…`; epoch: SOURCE_DATE_EPOCH seconds (the document's timestamp, so
 *   the same build gives the same bytes)
 * @returns {Promise<{ json: string, debs: number, npm: number }>} the serialised document (CycloneDX 1.6 JSON)
 * @throws ReleaseError when the content list does not parse, a Debian package has no license
 *   facts, or the document fails the schema
 */
export async function imageSbom(o) {
  const list = parseContentList(o.contents);
  const bom = new CDX.Models.Bom();
  const imagePurl = new PackageURL(
    'oci',
    undefined,
    'eni-ipam',
    o.manifestDigest,
    { arch: o.arch, tag: o.version },
    undefined,
  );
  bom.metadata.component = new CDX.Models.Component(CDX.Enums.ComponentType.Container, 'eni-ipam', {
    version: o.version,
    bomRef: 'eni-ipam-image',
    purl: o.manifestDigest ? imagePurl : undefined,
    description: 'eni-ipam container image: Debian 12, the Node.js runtime, the production node_modules and /app',
  });
  bom.metadata.timestamp = new Date(o.epoch * 1000);
  bom.metadata.tools.components.add(
    new CDX.Models.Component(CDX.Enums.ComponentType.Library, 'cyclonedx-library', { group: '@cyclonedx' }),
  );
  for (const d of list.debs) {
    const purl = new PackageURL('deb', 'debian', d.name, d.version, { arch: d.arch, distro: 'debian-12' }, undefined);
    const m = o.meta.debs[`${d.name}=${d.version} ${d.arch}`];
    if (!m)
      throw new ReleaseError(
        `the build's sbom-meta.json has nothing on the Debian package ${d.name}=${d.version}: rebuild the image (npm run image -- --refresh)`,
      );
    bom.components.add(
      new CDX.Models.Component(CDX.Enums.ComponentType.Library, d.name, {
        version: d.version,
        purl,
        bomRef: purl.toString(),
        licenses: new CDX.Models.LicenseRepository(debianLicenses(m)),
        ...(m.sha256
          ? { hashes: new CDX.Models.HashDictionary([[CDX.Enums.HashAlgorithm['SHA-256'], m.sha256]]) }
          : {}),
        properties: new CDX.Models.PropertyRepository([
          new CDX.Models.Property('eni-ipam:copyright-file', m.copyright),
          new CDX.Models.Property('eni-ipam:copyright-format', m.format),
        ]),
      }),
    );
  }
  for (const n of list.npm) bom.components.add(npmComponent(n.name, n.version, o.packageLock));
  if (list.node) {
    const purl = new PackageURL('npm', undefined, list.node.name, list.node.version, undefined, undefined);
    bom.components.add(
      new CDX.Models.Component(CDX.Enums.ComponentType.Application, list.node.name, {
        version: list.node.version,
        purl,
        cpe: nodeCpe(list.node.version),
        bomRef: purl.toString(),
        hashes: hashes(list.node.integrity),
        licenses: new CDX.Models.LicenseRepository([new CDX.Models.SpdxLicense(o.meta.node.license, DECLARED)]),
        description: 'the Node.js runtime at /usr/local/bin/node',
      }),
    );
  }
  // Same inputs, same serial number: the SBOM is as reproducible as the image.
  const h = createHash('sha256')
    .update(o.contents)
    .update(o.manifestDigest ?? '')
    .digest('hex');
  bom.serialNumber = `urn:uuid:${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-8${h.slice(17, 20)}-${h.slice(20, 32)}`;
  const serializer = new CDX.Serialize.JsonSerializer(
    new CDX.Serialize.JSON.Normalize.Factory(CDX.Spec.SpecVersionDict[SPEC_VERSION]),
  );
  const json = serializer.serialize(bom, { sortLists: true, space: 2 });
  const problem = await validateSbom(json);
  if (problem) throw new ReleaseError(`the SBOM fails the CycloneDX ${SPEC_VERSION} schema: ${problem}`);
  return {
    json: `${json}\n`,
    debs: list.debs.length,
    npm: list.npm.length,
    debsHashed: list.debs.filter((d) => o.meta.debs[`${d.name}=${d.version} ${d.arch}`]?.sha256).length,
  };
}

/**
 * Validates a CycloneDX JSON document against the schema of SPEC_VERSION (strict: unknown
 * properties refused).
 * @param {string} json the document
 * @returns {Promise<string | null>} null when valid, else the first errors as one line
 */
export async function validateSbom(json) {
  const errors = await new CDX.Validation.JsonStrictValidator(SPEC_VERSION).validate(json);
  if (errors === null) return null;
  return JSON.stringify(errors).slice(0, 500);
}
