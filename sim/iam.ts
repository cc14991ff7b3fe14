/**
 * The IAM identity policy the simulated cloud enforces on EC2 calls when one is set
 * ({@link SimCloud.setIamPolicy}): a call no statement allows, or one a statement denies,
 * is answered as EC2 answers it, HTTP 403 `UnauthorizedOperation` naming the action (and
 * the resource, for one with an ARN) (AWS EC2 API Reference, "Error codes":
 * UnauthorizedOperation). Without a
 * policy every call is allowed, as before.
 *
 * Evaluated as IAM does for one identity-based policy (IAM User Guide, "Policy evaluation
 * logic"): an explicit Deny wins, else every resource of the request must be allowed by an
 * Allow statement whose Action, Resource and Condition all match; `*` and `?` wildcards in
 * actions (case-insensitive) and resources. What each call is authorized against:
 *
 * - `CreateTags`: `ec2:CreateTags` on the ARN of each `ResourceId.N`
 *   (`arn:aws:ec2:<region>:<account>:network-interface/eni-…`, `subnet/…`, `instance/…`,
 *   `vpc/…`, `security-group/…`), with no `ec2:CreateAction`;
 * - a create call with `TagSpecification.N` (EC2 User Guide, "Grant permission to tag
 *   resources during creation"): the action itself, and `ec2:CreateTags` on the new
 *   resource (`network-interface/*` for CreateNetworkInterface) with the condition key
 *   `ec2:CreateAction` set to the action;
 * - every other action on `*` only. A simplification on the safe side: a statement that
 *   scopes such an action to resource ARNs is not honoured (refused here, where AWS might
 *   allow it), so a policy that works here grants at least what it must on AWS.
 *
 * Conditions: `StringEquals` and `StringLike` on the request's context keys (only
 * `ec2:CreateAction` exists here); a key the request does not carry fails the condition.
 * Any other operator is refused when the policy is set, naming it.
 */
import { Ec2ApiError } from './ec2-errors.js';

/** One statement of an IAM policy document (the parts evaluated here). */
export interface IamStatement {
  Sid?: string;
  Effect: 'Allow' | 'Deny';
  Action: string | string[];
  Resource: string | string[];
  Condition?: Record<string, Record<string, string | string[]>>;
}

/** An IAM policy document (`Version` 2012-10-17). */
export interface IamPolicy {
  Version: string;
  Statement: IamStatement | IamStatement[];
}

/** One authorization a call needs: an IAM action on a resource ARN (`*` for none), with context keys. */
export interface IamRequest {
  action: string;
  resource: string;
  context: Record<string, string>;
}

const OPERATORS = new Set(['StringEquals', 'StringLike']);
const list = (v: string | string[]): string[] => (Array.isArray(v) ? v : [v]);

/** `*` / `?` wildcard pattern as a RegExp (whole string). */
function wildcard(pattern: string, flags = ''): RegExp {
  const body = pattern
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '.*')
    .replace(/\?/g, '.');
  return new RegExp(`^${body}$`, flags);
}

/**
 * Checks the shape of a policy document.
 * @throws Error naming the first statement or field that is not an IAM policy the sim evaluates
 */
export function validateIamPolicy(doc: unknown): IamPolicy {
  const p = doc as IamPolicy;
  if (typeof p !== 'object' || p === null || p.Version !== '2012-10-17')
    throw new Error('IAM policy: expected an object with "Version": "2012-10-17"');
  const statements = Array.isArray(p.Statement) ? p.Statement : [p.Statement];
  statements.forEach((s, i) => {
    const at = `IAM policy Statement[${i}]${s?.Sid ? ` (${s.Sid})` : ''}`;
    if (s?.Effect !== 'Allow' && s?.Effect !== 'Deny') throw new Error(`${at}: Effect must be Allow or Deny`);
    for (const f of ['Action', 'Resource'] as const) {
      const v = s[f];
      if (!(typeof v === 'string' || (Array.isArray(v) && v.length > 0 && v.every((x) => typeof x === 'string'))))
        throw new Error(
          `${at}: ${f} must be a string or a non-empty list of strings (NotAction/NotResource are not evaluated)`,
        );
    }
    for (const op of Object.keys(s.Condition ?? {}))
      if (!OPERATORS.has(op))
        throw new Error(`${at}: condition operator ${op} is not evaluated (accepted: ${[...OPERATORS].join(', ')})`);
  });
  return p;
}

/** The ARN of an EC2 resource id by its prefix (`eni-` → network-interface), `*`-free. */
export function ec2ResourceArn(region: string, account: string, id: string): string {
  const kind = id.startsWith('eni-')
    ? 'network-interface'
    : id.startsWith('subnet-')
      ? 'subnet'
      : id.startsWith('i-')
        ? 'instance'
        : id.startsWith('vpc-')
          ? 'vpc'
          : id.startsWith('sg-')
            ? 'security-group'
            : 'unknown';
  return `arn:aws:ec2:${region}:${account}:${kind}/${id}`;
}

/** The resource type each create action tags on creation (`TagSpecification.N.ResourceType`). */
const CREATED: Readonly<Record<string, string>> = { CreateNetworkInterface: 'network-interface' };

/**
 * The authorizations an EC2 call needs (see the module comment).
 * @param params the call's Query parameters (`Action`, `ResourceId.N`, `TagSpecification.N.*`)
 */
export function iamRequests(region: string, account: string, params: Record<string, string>): IamRequest[] {
  const action = params.Action ?? '';
  if (action === 'CreateTags') {
    const ids = Object.keys(params)
      .filter((k) => /^ResourceId\.\d+$/.test(k))
      .map((k) => params[k]!);
    return ids.map((id) => ({ action: 'ec2:CreateTags', resource: ec2ResourceArn(region, account, id), context: {} }));
  }
  const out: IamRequest[] = [{ action: `ec2:${action}`, resource: '*', context: {} }];
  const created = CREATED[action];
  if (created && Object.keys(params).some((k) => /^TagSpecification\.\d+\.ResourceType$/.test(k)))
    out.push({
      action: 'ec2:CreateTags',
      resource: `arn:aws:ec2:${region}:${account}:${created}/*`,
      context: { 'ec2:CreateAction': action },
    });
  return out;
}

/** Whether a statement's Action, Resource and Condition match a request. */
function matches(s: IamStatement, r: IamRequest): boolean {
  if (!list(s.Action).some((a) => wildcard(a, 'i').test(r.action))) return false;
  // A request on `*` (an action without resource-level permissions here) needs a statement on `*`.
  const resources = list(s.Resource);
  if (r.resource === '*' ? !resources.includes('*') : !resources.some((x) => wildcard(x).test(r.resource)))
    return false;
  for (const [op, keys] of Object.entries(s.Condition ?? {})) {
    for (const [key, want] of Object.entries(keys)) {
      const got = r.context[key];
      if (got === undefined) return false;
      const ok = list(want).some((w) => (op === 'StringLike' ? wildcard(w).test(got) : w === got));
      if (!ok) return false;
    }
  }
  return true;
}

/**
 * Authorizes one EC2 call under `policy`.
 * @throws Ec2ApiError `UnauthorizedOperation` (HTTP 403) naming the first action and resource refused
 */
export function authorize(
  policy: IamPolicy,
  who: { region: string; account: string },
  params: Record<string, string>,
): void {
  const statements = Array.isArray(policy.Statement) ? policy.Statement : [policy.Statement];
  for (const r of iamRequests(who.region, who.account, params)) {
    const denied = statements.some((s) => s.Effect === 'Deny' && matches(s, r));
    const allowed = !denied && statements.some((s) => s.Effect === 'Allow' && matches(s, r));
    if (allowed) continue;
    const why = denied
      ? `with an explicit deny in an identity-based policy`
      : `because no identity-based policy allows the ${r.action} action`;
    throw new Ec2ApiError(
      'UnauthorizedOperation',
      `You are not authorized to perform this operation. User: arn:aws:sts::${who.account}:assumed-role/eni-ipam/sim is not authorized to perform: ${r.action}${r.resource === '*' ? '' : ` on resource: ${r.resource}`} ${why}`,
      403,
    );
  }
}
