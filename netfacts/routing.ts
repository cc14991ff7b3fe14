/**
 * The node's IPv4 policy routing facts shared by the CNI plugin (pod rules, wiring) and
 * ipamd (ipamd/network: node rules, ENI tables; ipamd/restore: reading them back): rule
 * priorities and route tables. One home, so the plugin and ipamd cannot disagree.
 *
 * Priorities (ip-rule(8): lower runs first; 0 = local, 32766 = main, 32767 = default).
 * Pod rules follow docs/design.md#1-the-parts-and-how-a-pod-gets-its-ip (step 4):
 *
 * | prio | rule | written by |
 * |---|---|---|
 * | 512  | `to <pod ip> lookup main` (traffic to a pod goes to its host veth) | plugin |
 * | 1024 | `to <VPC or SNAT-excluded CIDR> goto 1026`, one per CIDR | ipamd, unless external SNAT |
 * | 1025 | `lookup main` (anything else leaves through the primary ENI, where it is SNATed) | ipamd, unless external SNAT |
 * | 1026 | `nop` (target of the gotos) | ipamd, unless external SNAT |
 * | 1535 | `from <ENI primary ip> lookup <device+1>` | ipamd, per secondary ENI |
 * | 1536 | `from <pod ip> lookup <device+1>` (pod on a secondary ENI) | plugin |
 */

/** `to <pod ip> lookup main`. */
export const TO_POD_PRIORITY = 512;
/** `to <VPC CIDR> goto` {@link VPC_GOTO_TARGET_PRIORITY}: VPC-bound traffic skips the main lookup below. */
export const VPC_GOTO_PRIORITY = 1024;
/** `lookup main`: traffic leaving the VPC uses the main table (primary ENI) and gets SNATed. */
export const NON_VPC_MAIN_PRIORITY = 1025;
/** `nop`, the target of the {@link VPC_GOTO_PRIORITY} rules. */
export const VPC_GOTO_TARGET_PRIORITY = 1026;
/**
 * `from <ENI primary ip> lookup <device+1>`: host traffic sourced from a secondary ENI's
 * own address (and replies to connections made to it) leaves through that ENI. Just
 * before the pod rules; after the non-VPC rule, so such traffic to outside the VPC is
 * SNATed through the primary ENI like pod traffic.
 */
export const ENI_PRIMARY_IP_PRIORITY = 1535;
/** `from <pod ip> lookup <device+1>`. */
export const FROM_POD_PRIORITY = 1536;

/** Route table id of the main table (rt_tables(5)); pods on the primary ENI. */
export const MAIN_TABLE = 254;

/** Route table ids by the names iproute2 prints (rt_tables(5)). */
export const TABLE_IDS: Readonly<Record<string, number>> = Object.freeze({
  local: 255,
  main: MAIN_TABLE,
  default: 253,
});

/** The name iproute2 prints for table `id` (`main` for 254), else the number as text. */
export function tableName(id: number): string {
  return Object.keys(TABLE_IDS).find((k) => TABLE_IDS[k] === id) ?? String(id);
}

/** Table id of a name or number as iproute2 prints it (`main` → 254, `3` → 3); NaN for anything else. */
export function tableId(t: string | number): number {
  return typeof t === 'number' ? t : (TABLE_IDS[t] ?? Number(t));
}

/** Route table of the ENI at attachment `deviceNumber` (≥ 1): `deviceNumber + 1` (the primary ENI uses main). */
export function eniRouteTable(deviceNumber: number): number {
  return deviceNumber + 1;
}

/**
 * Route table of the pods of an ENI (docs/design.md#7-host-networking): {@link MAIN_TABLE}
 * for the primary ENI (device number 0), {@link eniRouteTable} for a secondary one. The one
 * definition ipamd (ADD answers, GC, `/v1/enis`) and the CLI use.
 */
export function podRouteTable(eni: { deviceNumber: number; isPrimary?: boolean }): number {
  return (eni.isPrimary ?? eni.deviceNumber === 0) ? MAIN_TABLE : eniRouteTable(eni.deviceNumber);
}
