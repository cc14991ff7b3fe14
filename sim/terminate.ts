/**
 * TerminateInstances as EC2 does it to the network interfaces (EC2 User Guide, "Network
 * interfaces": an interface attached to a terminating instance is deleted when its attachment
 * has DeleteOnTermination, and otherwise detached and left `available`), then the instance is
 * gone from the state (DescribeInstances no longer lists it). Not an API action of the
 * simulated EC2 (ipamd never terminates instances): the test harness calls it.
 */
import type { CloudModel } from './cloud-model.js';
import type { SimState } from './types.js';

/**
 * Terminates `instanceId`. @returns the ids of the ENIs deleted and of those left available.
 * @throws Error for an unknown instance.
 */
export function terminateInstance(
  model: CloudModel,
  state: SimState,
  instanceId: string,
): { deleted: string[]; available: string[] } {
  if (!state.instances.has(instanceId)) throw new Error(`unknown instance ${instanceId}`);
  const deleted: string[] = [];
  const available: string[] = [];
  for (const eni of [...state.enis.values()]) {
    const a = eni.attachment;
    if (a?.instanceId !== instanceId) continue;
    delete eni.attachment;
    eni.status = 'available';
    if (a.deleteOnTermination) {
      model.deleteEni(eni.networkInterfaceId);
      deleted.push(eni.networkInterfaceId);
    } else available.push(eni.networkInterfaceId);
  }
  state.instances.delete(instanceId);
  return { deleted, available };
}
