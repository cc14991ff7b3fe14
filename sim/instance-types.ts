/**
 * The simulated cloud's instance types are EC2's: the one table lives in
 * ipamd/cloud/instance-types.ts (the operator CLI's max-pods reads it too, in the image).
 */
export * from '../ipamd/cloud/instance-types.js';
