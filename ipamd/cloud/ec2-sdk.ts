/**
 * The parts of @aws-sdk/client-ec2 that ipamd uses: the client and the commands of
 * ./ec2.ts. Loaded on the first EC2 call (./ec2-call.ts); add a command here when an
 * operation needs one (the `Sdk` type of ec2-call.ts is this module's shape, so a
 * missing one fails to compile).
 *
 * `npm run build` replaces this module's compiled output (dist/ipamd/cloud/ec2-sdk.js)
 * with a tree-shaken, minified esbuild bundle of these exports (scripts/bundle-vendor.mjs):
 * only the request/response schemas of these commands are kept instead of the SDK's
 * ~3,400 (its whole-service index costs ~45 MiB of resident memory, the bundle ~6 MiB).
 * Without that step (plain `tsc`) this file loads the SDK's index, with the same behaviour.
 * Why and what it saved: docs/design.md#16-footprint-and-latency.
 */
export {
  EC2Client,
  AssignIpv6AddressesCommand,
  AssignPrivateIpAddressesCommand,
  AttachNetworkInterfaceCommand,
  CreateNetworkInterfaceCommand,
  DeleteNetworkInterfaceCommand,
  DescribeInstanceTypesCommand,
  DescribeNetworkInterfacesCommand,
  DescribeSubnetsCommand,
  DetachNetworkInterfaceCommand,
  ModifyNetworkInterfaceAttributeCommand,
  UnassignPrivateIpAddressesCommand,
} from '@aws-sdk/client-ec2';
