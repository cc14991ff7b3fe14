/**
 * The shipped Grafana dashboard and Prometheus rules, read as tests need them: the
 * dashboard's panel targets (PromQL with Grafana variables) flattened, the variables
 * replaced by concrete values, and the rules file with its `for:` durations shortened.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { parse, stringify } from 'yaml';

const root = fileURLToPath(new URL('../../../', import.meta.url));
/** config/grafana/eni-ipam-dashboard.json (the chart reads it through charts/eni-ipam/files/). */
export const DASHBOARD_FILE = `${root}config/grafana/eni-ipam-dashboard.json`;
/** config/prometheus/eni-ipam-rules.yaml (the chart reads it through charts/eni-ipam/files/). */
export const RULES_FILE = `${root}config/prometheus/eni-ipam-rules.yaml`;

/** The parts of a Grafana dashboard panel the tests read. */
export interface Panel {
  id: number;
  type: string;
  title: string;
  targets?: Array<{ refId: string; expr?: string; legendFormat?: string }>;
  panels?: Panel[];
}
/** The parts of the dashboard the tests read. */
export interface Dashboard {
  uid: string;
  title: string;
  panels: Panel[];
  templating: { list: Array<{ name: string; type: string }> };
}
/** One panel target: the panel's title, the target's refId and its PromQL. */
export interface PanelTarget {
  panel: string;
  refId: string;
  expr: string;
}

/** Parses the shipped dashboard. @throws Error when the file is missing or not JSON. */
export async function loadDashboard(file = DASHBOARD_FILE): Promise<Dashboard> {
  return JSON.parse(await readFile(file, 'utf8')) as Dashboard;
}

/** Every target with an `expr`, rows' nested panels included, in dashboard order. */
export function dashboardTargets(d: Dashboard): PanelTarget[] {
  const out: PanelTarget[] = [];
  const visit = (ps: Panel[]) => {
    for (const p of ps) {
      for (const t of p.targets ?? []) if (t.expr) out.push({ panel: p.title, refId: t.refId, expr: t.expr });
      visit(p.panels ?? []);
    }
  };
  visit(d.panels);
  return out;
}

/**
 * Replaces Grafana variables (`$name`, `${name}`, `${name:format}`, `[[name]]`) in
 * `expr` by `vars[name]`. @throws Error naming any variable left without a value.
 */
export function substituteVariables(expr: string, vars: Record<string, string>): string {
  const out = expr.replace(/\$\{(\w+)(?::\w+)?\}|\[\[(\w+)\]\]|\$(\w+)/g, (m, a?: string, b?: string, c?: string) => {
    const name = (a ?? b ?? c)!;
    if (!(name in vars))
      throw new Error(`Grafana variable ${m} in "${expr}" has no test value (known: ${Object.keys(vars).join(', ')})`);
    return vars[name]!;
  });
  return out;
}

/** One alerting rule of the shipped file (the parts the tests read). */
export interface AlertRule {
  alert: string;
  expr: string;
  for?: string;
}

/**
 * Writes the shipped rules to `outFile` with every rule's `for:` replaced by `forValue`
 * and nothing else changed. @returns the alerting rules with their shipped `for:`.
 */
export async function writeRulesWithFor(outFile: string, forValue: string): Promise<AlertRule[]> {
  const doc = parse(await readFile(RULES_FILE, 'utf8')) as { groups: Array<{ rules: AlertRule[] }> };
  const shipped = doc.groups.flatMap((g) => g.rules.filter((r) => r.alert).map((r) => ({ ...r })));
  for (const g of doc.groups) for (const r of g.rules) if (r.for !== undefined) r.for = forValue;
  await writeFile(outFile, stringify(doc));
  return shipped;
}
