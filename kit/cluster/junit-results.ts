/**
 * Reads the JUnit report the e2e suite writes (`<report-dir>/junit_01.xml`, Ginkgo v2's
 * reporters.GenerateJUnitReportWithConfig as k8s.io/kubernetes test/e2e/framework/internal/junit
 * calls it). Each spec is a `<testcase name="[It] <full text>" status="passed|failed|skipped|…"
 * time="<s>">`; a spec left out by the focus or skip regexes is `skipped` with
 * `<skipped message="skipped"/>`, one that skipped itself is `<skipped message="skipped - <why>"/>`.
 * Pure.
 */
import { XMLParser } from 'fast-xml-parser';

/** One spec's outcome. */
export interface SpecResult {
  /** The spec's full text (container texts and the It's), without Ginkgo's `[It] ` prefix. */
  name: string;
  /** Ginkgo's state: passed, failed, skipped, pending, panicked, interrupted, aborted, timedout. */
  state: string;
  /** Wall time (s). */
  seconds: number;
  /** Skipped by the spec itself: its reason (`skipped - ` taken off). Undefined for a filtered-out spec. */
  skipReason?: string;
  /** Failed: the first lines of the failure text. */
  failure?: string;
}

/** What the report holds: the specs, and suite-level nodes (BeforeSuite, AfterSuite) that did not pass. */
export interface JunitReport {
  specs: SpecResult[];
  suiteFailures: SpecResult[];
}

interface RawCase {
  '@_name'?: string;
  '@_status'?: string;
  '@_time'?: string;
  skipped?: { '@_message'?: string } | string;
  failure?: { '#text'?: string; '@_message'?: string } | string;
  error?: { '#text'?: string; '@_message'?: string } | string;
}

const text = (x: RawCase['failure']): string =>
  typeof x === 'string' ? x : `${x?.['@_message'] ?? ''}\n${x?.['#text'] ?? ''}`.trim();

/**
 * Parses a Ginkgo JUnit report.
 * @throws Error when `xml` has no `<testsuites>`/`<testsuite>` (not a JUnit report).
 */
export function parseJunit(xml: string): JunitReport {
  const doc = new XMLParser({
    ignoreAttributes: false,
    // Ginkgo writes the failure text's newlines as numeric references (&#xA;).
    htmlEntities: true,
    isArray: (name) => name === 'testsuite' || name === 'testcase',
  }).parse(xml) as {
    testsuites?: { testsuite?: Array<{ testcase?: RawCase[] }> };
    testsuite?: Array<{ testcase?: RawCase[] }>;
  };
  const suites = doc.testsuites?.testsuite ?? doc.testsuite;
  if (!suites) throw new Error('not a JUnit report: no <testsuites> or <testsuite> element');
  const out: JunitReport = { specs: [], suiteFailures: [] };
  for (const c of suites.flatMap((s) => s.testcase ?? [])) {
    const raw = c['@_name'] ?? '';
    const state = c['@_status'] ?? (c.failure ? 'failed' : c.skipped !== undefined ? 'skipped' : 'passed');
    const r: SpecResult = { name: raw.replace(/^\[It\] /, ''), state, seconds: Number(c['@_time'] ?? 0) };
    const skipMsg = typeof c.skipped === 'object' ? (c.skipped['@_message'] ?? '') : (c.skipped ?? '');
    if (state === 'skipped' && /^skipped - /.test(skipMsg)) r.skipReason = skipMsg.replace(/^skipped - /, '').trim();
    const fail = c.failure ?? c.error;
    if (fail !== undefined) r.failure = text(fail).split('\n').slice(0, 12).join('\n');
    if (raw.startsWith('[It] ')) out.specs.push(r);
    else if (state !== 'passed' && state !== 'skipped') out.suiteFailures.push(r);
  }
  return out;
}
