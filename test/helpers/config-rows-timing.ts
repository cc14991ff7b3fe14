/**
 * Config test rows (second part, in the env table's order): timers, EC2 call limits,
 * logs and node reporting.
 */
import type { Row } from './config-row.js';

export const TIMING_ROWS: Row[] = [
  {
    name: 'ENI_IPAM_ADD_WAIT_TIMEOUT',
    key: 'addWaitTimeoutMs',
    def: 10_000,
    good: [
      ['3s', 3_000],
      ['500ms', 500],
      ['0', 0],
      ['1.5', 1_500],
      ['1h', 3_600_000],
    ],
    bad: ['3 s', '-1', 's', '1.5.2', '10x'],
  },
  {
    name: 'ENI_IPAM_ADD_WAIT_FOR_ENI_TIMEOUT',
    key: 'addWaitForEniMs',
    def: 0,
    good: [
      ['45s', 45_000],
      ['0', 0],
      ['50000ms', 50_000],
    ],
    bad: ['51s', '1m', '-1', 'soon'],
  },
  {
    name: 'ENI_IPAM_CNI_IPAMD_WAIT',
    key: 'cniIpamdWaitMs',
    def: 10_000,
    good: [
      ['0', 0],
      ['2500ms', 2_500],
      ['300s', 300_000],
    ],
    bad: ['301s', '1h', 'soon'],
  },
  {
    name: 'ENI_IPAM_SHRINK_DELAY',
    key: 'shrinkDelayMs',
    def: 60_000,
    good: [
      ['0', 0],
      ['2m', 120_000],
      ['596h', 596 * 3_600_000],
    ],
    bad: ['later', '597h', '99999999999999999999'],
  },
  {
    name: 'ENI_IPAM_RECONCILE_INTERVAL',
    key: 'reconcileIntervalMs',
    def: 60_000,
    good: [['30s', 30_000]],
    bad: ['0', 'often'],
  },
  { name: 'ENI_IPAM_GC_INTERVAL', key: 'gcIntervalMs', def: 60_000, good: [['1m', 60_000]], bad: ['0ms'] },
  {
    name: 'ENI_IPAM_GC_GRACE',
    key: 'gcGraceMs',
    def: 60_000,
    good: [
      ['0', 0],
      ['90s', 90_000],
    ],
    bad: ['-1', 'soon'],
  },
  {
    name: 'ENI_IPAM_NETWORK_NAME',
    key: 'networkName',
    def: 'aws-cni',
    good: [['my-net', 'my-net']],
    bad: ['n'.repeat(129)],
  },
  {
    name: 'ENI_IPAM_POOL_INTERVAL',
    key: 'poolIntervalMs',
    def: 5_000,
    good: [['200ms', 200]],
    bad: ['0', '-5', '1000h'],
  },
  {
    name: 'ENI_IPAM_MIN_ENI_AGE',
    key: 'minEniAgeMs',
    def: 60_000,
    good: [
      ['0', 0],
      ['2m', 120_000],
    ],
    bad: ['-1', 'old'],
  },
  {
    name: 'ENI_IPAM_IMDS_ENI_WAIT',
    key: 'imdsEniWaitMs',
    def: 30_000,
    good: [
      ['0', 0],
      ['90s', 90_000],
    ],
    bad: ['never'],
  },
  {
    name: 'ENI_IPAM_LEAKED_ENI_SWEEP_INTERVAL',
    key: 'leakedEniSweepIntervalMs',
    def: 3_600_000,
    good: [['30m', 1_800_000]],
    bad: ['0', 'hourly'],
  },
  {
    name: 'ENI_IPAM_LEAKED_ENI_SWEEP_JITTER',
    key: 'leakedEniSweepJitterMs',
    def: 300_000,
    good: [
      ['0', 0],
      ['10s', 10_000],
    ],
    bad: ['-1'],
  },
  {
    name: 'ENI_IPAM_CHART_ENV',
    key: 'chartEnv',
    def: [],
    good: [
      ['WARM_ENI_TARGET, AWS_VPC_ENI_MTU', ['WARM_ENI_TARGET', 'AWS_VPC_ENI_MTU']],
      ['A,,B', ['A', 'B']],
    ],
    bad: ['WARM-ENI', '1X'],
  },
];
