/**
 * Test fixture for the simulated cloud: a preset of the kit's node builder (kit/node.ts) with
 * no ipamd — a {@link SimCloud} on loopback (ephemeral ports) with one subnet and one launched instance, and an unmodified `EC2Client`
 * pointed at it. Everything is stopped by `t.after`, even when the test fails.
 */
import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import { EC2Client } from '@aws-sdk/client-ec2';
import type { Instance, SimCloud, SimCloudOptions, Subnet } from '../../sim/index.js';
import { buildNode } from '../../kit/node.js';

/** A started simulated cloud with its first subnet and instance. */
export interface SimFixture {
  sim: SimCloud;
  ec2: EC2Client;
  subnet: Subnet;
  inst: Instance;
}

/** An SDK client for `sim` with dummy static credentials and no retries. */
export function ec2ClientFor(sim: SimCloud): EC2Client {
  return new EC2Client({
    region: sim.state.region,
    endpoint: sim.ec2Endpoint,
    credentials: { accessKeyId: 'x', secretAccessKey: 'x' },
    maxAttempts: 1,
  });
}

/**
 * Starts a sim (seed 42 unless `opts` says) with a subnet (`subnetCidr`, default
 * 10.0.0.0/24) and one instance (`instanceType`, default m5.large): the kit's
 * {@link buildNode} with no ipamd. Registers cleanup on `t`.
 */
export async function startSim(
  t: TestContext,
  p: { subnetCidr?: string; instanceType?: string; opts?: SimCloudOptions } = {},
): Promise<SimFixture> {
  const k = await buildNode({
    simOptions: { seed: 42, ...p.opts },
    subnetCidr: p.subnetCidr ?? '10.0.0.0/24',
    instanceType: p.instanceType ?? 'm5.large',
    dirPrefix: 'eni-ipam-sim-',
  });
  const sim = k.sim;
  const ec2 = ec2ClientFor(sim);
  t.after(async () => {
    ec2.destroy();
    await k.close();
  });
  return { sim, ec2, subnet: sim.state.subnets.get(k.subnetId)!, inst: sim.state.instances.get(k.instanceId)! };
}

/** The error an SDK call is expected to fail with, as the SDK surfaces it. */
export interface ExpectedSdkError {
  name: string;
  status: number;
}

/**
 * Asserts that `call` rejects with an SDK service error whose `name` (the EC2 error
 * code) and `$metadata.httpStatusCode` match. Returns the error.
 */
export async function expectSdkError(
  call: Promise<unknown>,
  want: ExpectedSdkError,
): Promise<Error & { $metadata: { httpStatusCode?: number } }> {
  try {
    await call;
  } catch (e) {
    const err = e as Error & { $metadata: { httpStatusCode?: number } };
    assert.equal(err.name, want.name, `error name (message: ${err.message})`);
    assert.equal(err.$metadata?.httpStatusCode, want.status, `HTTP status of ${err.name}`);
    return err;
  }
  assert.fail(`expected ${want.name}, but the call succeeded`);
}

/** POSTs a raw EC2 Query API form to the sim (for requests the SDK would not send). */
export async function rawEc2(sim: SimCloud, form: Record<string, string>): Promise<{ status: number; body: string }> {
  const res = await fetch(sim.ec2Endpoint, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded; charset=utf-8' },
    body: new URLSearchParams({ Version: '2016-11-15', ...form }).toString(),
  });
  return { status: res.status, body: await res.text() };
}

/** Calls a JSON admin endpoint (`/_sim/...`) of the sim. */
export async function simAdmin(
  sim: SimCloud,
  method: 'GET' | 'POST',
  path: string,
  body?: unknown,
): Promise<{ status: number; json: unknown }> {
  const res = await fetch(`${sim.ec2Endpoint}${path}`, {
    method,
    ...(body !== undefined ? { body: JSON.stringify(body), headers: { 'Content-Type': 'application/json' } } : {}),
  });
  return { status: res.status, json: await res.json() };
}

/** Resolves after `ms` milliseconds. */
export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
