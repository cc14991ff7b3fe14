/**
 * ipamd's IPv6 parts (`ipv6`/`dual` mode, docs/design.md#ip-families; nothing in `ipv4`
 * mode): the node's /80 found or assigned and its allocations restored from the IPv6
 * checkpoint (`ipv6`), the family-aware request path (`family`), and the IPv4 egress
 * rules of IPv6 pods (`egress-v4`).
 */
import { randomBytes, randomInt } from 'node:crypto';
import { monoAtBoot, monoNow } from '../clock.js';
import { rebaseStamp, stampScale } from '../checkpoint/boot-stamps.js';
import { stageTrace } from '../service/stage-trace.js';
import { Ipv6CheckpointWriter, ipv6CheckpointPath } from '../checkpoint/ipv6-file.js';
import { loadIpv6Checkpoint } from '../checkpoint/ipv6-load.js';
import { Ipv6Allocations } from '../datastore/ipv6-allocations.js';
import { applyEgressV4 } from '../network/egress-v4.js';
import { ensureIpv6Prefix } from '../startup/ipv6-prefix.js';
import { FamilyService } from '../service/family-service.js';
import { WiredV6Adoption } from '../service/v6-adopt.js';
import type { DaemonParts, Ipv6Part } from './daemon-registry.js';
import type { PartEnv } from './parts-restore.js';
import { partOf } from './runner.js';

const part = partOf<DaemonParts>();

/** Hand-out cursors at random places: host 1..2^48-1 of the /80, egress host 1..1022. */
const randomCursors = (): { nextHost: string; nextEgress: number } => ({
  nextHost: (1n + (BigInt(`0x${randomBytes(6).toString('hex')}`) % ((1n << 48n) - 1n))).toString(),
  nextEgress: 1 + randomInt(1022),
});

/**
 * The /80 and the IPv6 allocations. A checkpoint written for another /80 (the prefix was
 * replaced) restores nothing as held: its allocations are quarantined, listed and logged.
 * A corrupt IPv6 checkpoint is set aside (checkpoint/ipv6-load.ts) and the hand-out starts at
 * random places in the /80 and the egress range, so addresses released just before (their
 * cooldown lost with the file) are not the next ones handed out.
 * @throws Error (one line) when the /80 cannot be had, or the IPv6 checkpoint is unreadable.
 */
export const ipv6Part = ({ config, log }: PartEnv) =>
  part({
    name: 'ipv6',
    needs: ['node', 'checkpoint'],
    async start({ node: { inv, bootId }, checkpoint: { fromAwsNode } }) {
      if (config.ipFamily === 'ipv4') return { value: undefined };
      const { prefix } = await ensureIpv6Prefix({
        imds: inv.imds,
        ec2: inv.ec2,
        primaryMac: inv.instance.primaryMac,
        primaryEniId: inv.primary.eniId,
        subnetId: inv.primary.subnetId,
        log,
      });
      const v6 = new Ipv6Allocations({ prefix, egressV4: config.ipFamily === 'ipv6', cooldownMs: config.ipCooldownMs });
      const file = ipv6CheckpointPath(config.checkpointPath);
      const load = await loadIpv6Checkpoint(file);
      const saved = load.kind === 'ok' ? load.data : undefined;
      if (load.kind === 'corrupt') {
        log.error(
          { reason: load.reason, movedTo: load.movedTo },
          'IPv6 checkpoint corrupt: moved aside, rebuilding (wired /128s are adopted from the kernel before the first IPv6 ADD)',
        );
        v6.restore(randomCursors());
      }
      if (saved) {
        // Stamps onto this process's clock (a wall-clock step while down changes nothing; another boot: full cooldown).
        const scale = stampScale(saved, bootId, monoAtBoot());
        const now = monoNow();
        const r = v6.restore({
          ...saved,
          allocations: saved.allocations.map((a) => ({ ...a, allocatedAt: rebaseStamp(a.allocatedAt, scale, now) })),
          cooling: saved.cooling.map((c) => ({ ...c, releasedAt: rebaseStamp(c.releasedAt, scale, now) })),
        });
        for (const q of r.quarantined)
          log.error({ address: q.address, reason: q.reason }, 'IPv6 checkpoint: address quarantined, never handed out');
        log.info(
          {
            prefix: v6.prefix,
            restored: r.restored.length,
            quarantined: r.quarantined.length,
            savedBootId: saved.bootId,
          },
          'IPv6 allocations restored',
        );
      }
      if (!saved && fromAwsNode?.kind === 'imported' && fromAwsNode.ipv6.length > 0) {
        const r = v6.restore({ allocations: fromAwsNode.ipv6.map((e) => ({ ...e, egressV4: '' })) });
        for (const q of r.quarantined)
          log.error({ address: q.address, reason: q.reason }, 'aws-node checkpoint: IPv6 address quarantined');
        log.info(
          { prefix: v6.prefix, imported: r.restored.length, quarantined: r.quarantined.length },
          "aws-node checkpoint's IPv6 allocations imported",
        );
      }
      const writer = new Ipv6CheckpointWriter(
        file,
        bootId,
        () => v6.state(monoNow()),
        true,
        (stage, ms) => stageTrace.record(`checkpoint.ipv6.${stage}`, ms),
        saved?.seq ?? 0,
      );
      await writer.commit();
      log.info(
        { mode: config.ipFamily, prefix: v6.prefix, eniId: inv.primary.eniId },
        'serving IPv6 pods from the /80',
      );
      const value: Ipv6Part = { v6, writer, primaryEniId: inv.primary.eniId };
      return { value };
    },
  });

/** `ipv6` mode: the SNAT of 169.254.172.0/22 to the node's primary IPv4 and the REJECT of NEW connections to it. */
export const egressV4Part = ({ config, log }: PartEnv) =>
  part({
    name: 'egress-v4',
    needs: ['node', 'host-network'],
    async start({ node: { inv } }) {
      if (config.ipFamily !== 'ipv6' || !config.hostNetworking) return { value: undefined };
      await applyEgressV4(inv.instance.localIpv4, config.cniExecNetns);
      log.info({ nodeIp: inv.instance.localIpv4 }, 'IPv4 egress of IPv6 pods: SNAT of 169.254.172.0/22 installed');
      return { value: undefined };
    },
  });

/**
 * The request path of `ipv6`/`dual` mode (service/family-service.ts), gated on the
 * adoption of wired /128s no allocation holds (service/v6-adopt.ts), and its sweep of
 * IPv6 halves whose container was released on the IPv4 side (DELs the shim spooled while
 * ipamd was down): once before serving, then every ENI_IPAM_GC_INTERVAL.
 */
export const familyPart = ({ config, log }: PartEnv) =>
  part({
    name: 'family',
    needs: ['service', 'ipv6', 'datastore', 'del-spool', 'kernel'],
    async start({ service, ipv6, datastore: { ds }, kernel }) {
      if (!ipv6) return { value: undefined };
      const persistV6 = () => ipv6.writer.commit();
      // Before any ADD: the /128s wired to pod veths that no allocation holds are never handed out.
      const adoption = new WiredV6Adoption({ v6: ipv6.v6, kernel, persistV6, log });
      await adoption.ensure().catch(() => undefined); // logged; ADDs retry it
      const f = new FamilyService({
        mode: config.ipFamily === 'dual' ? 'dual' : 'ipv6',
        v6: ipv6.v6,
        v4: service,
        persistV6,
        adoption,
        released: () => ds.unassignedEntries(),
        kernel,
        log,
      });
      await f.sweepReleased();
      const timer = setInterval(
        () =>
          void f
            .sweepReleased()
            .catch((e: Error) => log.warn({ err: e.message }, 'IPv6 sweep of released containers failed; retried')),
        config.gcIntervalMs,
      );
      timer.unref();
      return { value: { service: f, primaryEniId: ipv6.primaryEniId }, stop: () => clearInterval(timer) };
    },
  });
