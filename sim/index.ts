/**
 * The simulated cloud: EC2 Query API + IMDSv2 over HTTP on loopback, with AWS instance
 * limits and error codes, fault knobs and a call log (docs/design.md#5-the-simulated-cloud).
 */
export { SimCloud, type SimCloudOptions } from './sim-cloud.js';
export {
  FaultInjector,
  FaultConfigSchema,
  NO_RESPONSE,
  actionClass,
  type FaultConfig,
  type LatencySpec,
  type BucketSpec,
  type ActionClass,
  type ImdsChangeKind,
  type InjectedError,
  type DrawnFault,
} from './faults.js';
export { INSTANCE_TYPES, instanceTypeInfo, type InstanceTypeInfo } from './instance-types.js';
export { Ec2ApiError, httpStatusForCode } from './ec2-errors.js';
export { stateToJson, type SimStateJson } from './state-json.js';
export { vpcCidrBlocks } from './types.js';
export type { ApiCallRecord, Eni, EniAttachment, EniStatus, Instance, SimState, Subnet } from './types.js';
export { MAX_VPC_CIDR_BLOCKS } from './vpc.js';
export { DEFAULT_VPC_IPV6_CIDR, MAX_VPC_IPV6_CIDR_BLOCKS } from './vpc-ipv6.js';
export type { SubnetInput } from './subnet-create.js';
export type { ImdsInstanceView, ImdsEniView } from './imds-view.js';
