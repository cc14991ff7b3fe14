/**
 * Server-side printing for the stand-in: the meta.k8s.io/v1 Table that kubectl asks for
 * (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`) when it prints columns, per
 * https://kubernetes.io/docs/reference/using-api/api-concepts/#receiving-resources-as-tables.
 */
import type { IncomingMessage } from 'node:http';
import type { KubeObject } from './objects.js';
import type { Resource } from './store.js';

/** True when the Accept header asks for a meta.k8s.io Table. */
export function wantsTable(req: IncomingMessage): boolean {
  return /as=Table/.test(String(req.headers.accept ?? ''));
}

/** Short age like kubectl prints ("42s", "7m", "3h", "2d") since `created` (RFC 3339). */
function age(created: string): string {
  const s = Math.max(0, Math.floor((Date.now() - Date.parse(created)) / 1000));
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.floor(s / 60)}m`;
  if (s < 172800) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

const col = (name: string, type: string, priority = 0, format = '') => ({
  name,
  type,
  format,
  description: name,
  priority,
});

const COLUMNS: Record<Resource, ReturnType<typeof col>[]> = {
  pods: [
    col('Name', 'string', 0, 'name'),
    col('Ready', 'string'),
    col('Status', 'string'),
    col('Restarts', 'string'),
    col('Age', 'string'),
    col('IP', 'string', 1),
    col('Node', 'string', 1),
  ],
  nodes: [
    col('Name', 'string', 0, 'name'),
    col('Status', 'string'),
    col('Roles', 'string'),
    col('Age', 'string'),
    col('Version', 'string'),
  ],
  events: [
    col('Last Seen', 'string'),
    col('Type', 'string'),
    col('Reason', 'string'),
    col('Object', 'string'),
    col('Message', 'string'),
    col('Source', 'string', 1),
    col('Count', 'integer', 1),
    col('Name', 'string', 1, 'name'),
  ],
  namespaces: [col('Name', 'string', 0, 'name'), col('Status', 'string'), col('Age', 'string')],
  // a CRD without additionalPrinterColumns prints NAME and AGE
  eniconfigs: [col('Name', 'string', 0, 'name'), col('Age', 'string')],
  endpointslices: [col('Name', 'string', 0, 'name'), col('Age', 'string')],
};

/** LAST SEEN of an Event as the API server prints it: "<last>", or "<last> (x<count> over <first>)". */
function eventSeen(o: KubeObject): string {
  const first = String(o.firstTimestamp ?? o.metadata.creationTimestamp);
  const last = String(o.lastTimestamp ?? first);
  const count = Number(o.count ?? 1);
  return count > 1 ? `${age(last)} (x${count} over ${age(first)})` : age(last);
}

function cells(resource: Resource, o: KubeObject): unknown[] {
  if (resource === 'nodes')
    return [o.metadata.name, 'Ready', '<none>', age(o.metadata.creationTimestamp), 'v1.30.0-standin'];
  if (resource === 'namespaces') return [o.metadata.name, 'Active', age(o.metadata.creationTimestamp)];
  if (resource === 'eniconfigs' || resource === 'endpointslices')
    return [o.metadata.name, age(o.metadata.creationTimestamp)];
  if (resource === 'events') {
    const io = (o.involvedObject ?? {}) as { kind?: string; name?: string };
    const src = (o.source ?? {}) as { component?: string; host?: string };
    return [
      eventSeen(o),
      o.type ?? '',
      o.reason ?? '',
      `${String(io.kind ?? '').toLowerCase()}/${io.name ?? ''}`,
      o.message ?? '',
      [src.component, src.host].filter(Boolean).join(', '),
      Number(o.count ?? 1),
      o.metadata.name,
    ];
  }
  const st = o.status as { phase?: string; podIP?: string; containerStatuses?: Array<{ ready: boolean }> };
  const cs = st.containerStatuses ?? [];
  const ready = `${cs.filter((c) => c.ready).length}/${Math.max(1, cs.length)}`;
  return [
    o.metadata.name,
    ready,
    st.phase ?? 'Unknown',
    '0',
    age(o.metadata.creationTimestamp),
    st.podIP ?? '<none>',
    (o.spec as { nodeName?: string }).nodeName ?? '<none>',
  ];
}

/**
 * A Table of `items` at `resourceVersion`. `includeObject` (query parameter): 'None',
 * 'Object', or default 'Metadata' (a PartialObjectMetadata per row).
 */
export function tableFor(
  resource: Resource,
  items: KubeObject[],
  resourceVersion: string,
  includeObject: string | null,
): Record<string, unknown> {
  return {
    kind: 'Table',
    apiVersion: 'meta.k8s.io/v1',
    metadata: { resourceVersion },
    columnDefinitions: COLUMNS[resource],
    rows: items.map((o) => ({
      cells: cells(resource, o),
      ...(includeObject === 'None'
        ? {}
        : {
            object:
              includeObject === 'Object'
                ? o
                : { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: o.metadata },
          }),
    })),
  };
}
