/*
 * eni-ipam-netlink's IPv6 requests (issue #31): what the `ip -batch` lines of
 * cni-plugin/wiring-v6.ts do for a pod's IPv6 and for the IPv4 egress pair of an IPv6
 * pod, with the attributes iproute2 sends for them (routes table main, proto boot, type
 * unicast; IPv6 routes scope universe; neighbours NUD_PERMANENT, replaced), and the
 * deletion of an IPv6 pod's two host veths in one kernel batch (`dellinks`: each link
 * delete waits for an RCU grace period under the rtnl lock, ~20 ms here, so two deletes
 * in turn took twice that). Requests and answers as in eni-ipam-netlink.c's docstring:
 *
 *   <id> veth6 <pod netns path> <host veth> <host mac> <if name> <pod mac> <mtu> <ipv6|dual>
 *        as veth, but the pod gets `::/0 via fe80::1 dev <if>` and a permanent neighbour
 *        fe80::1 → host mac (replaced), and the IPv4 gateway routes only for dual.
 *   <id> addr6 <pod netns path> <if name> <ipv6>      pod: `<ipv6>/128 dev <if> nodad` replaced.
 *   <id> host6 <host veth> <ipv6> <pod mac>
 *        node: route `<ipv6>/128 dev <host veth>` ADDED (EEXIST as for host), permanent
 *        neighbour <ipv6> → pod mac replaced.
 *   <id> route <host veth> <ipv4>
 *        node: route `<ipv4>/32 dev <host veth> scope link` ADDED, no rules (an IPv6 pod's
 *        IPv4 egress pair, whose pod end is wired by `veth` and `addr`).
 *   <id> dellinks <host veth> <other host veth> [<host mac> <other host mac>]
 *        node: both deleted in one batch (put in a link group no link is in, checked by a
 *        dump, then that group deleted); any error (ENODEV when one is absent, ENXIO when
 *        one has another MAC than the one given, as for `dellink`) deletes neither, and
 *        the caller deletes them one by one.
 *
 * veth6 and addr6 are served by eni-ipam-netlink.c's veth and addr code (this file adds
 * the IPv6 gateway); the others are here.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/if_link.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "eni-ipam-netlink.h"

/* The pod's IPv6 gateway: link-local, never resolved (a permanent neighbour). */
#define GATEWAY6 "fe80::1"

/* Link groups `dellinks` uses for a moment (0x7e000000-0x7effffff), each checked unused first. */
#define GROUP_BASE 0x7e000000u

#define FAIL(e, what) do { err = (e); step = (what); goto out; } while (0)

/* Permanent neighbour `ip` (`alen` bytes of `family`) → `mac` on link `idx`, replaced. */
static int neigh(int fd, int family, int idx, const void *ip, size_t alen, const unsigned char mac[6]) {
  struct req r;
  struct ndmsg nd = { .ndm_family = (unsigned char)family, .ndm_ifindex = idx, .ndm_state = NUD_PERMANENT };
  msg(&r, RTM_NEWNEIGH, NLM_F_CREATE | NLM_F_REPLACE, &nd, sizeof nd);
  attr(&r, NDA_DST, ip, alen);
  attr(&r, NDA_LLADDR, mac, 6);
  return talk(fd, &r);
}

int pod_v6_gateway(int nl, int idx, const unsigned char hmac[6], const char **step) {
  struct in6_addr gw;
  inet_pton(AF_INET6, GATEWAY6, &gw);
  int err = route(nl, 1, AF_INET6, NULL, 0, &gw, idx, RT_SCOPE_UNIVERSE);
  if (err) {
    *step = "IPv6 default route";
    return err;
  }
  if ((err = neigh(nl, AF_INET6, idx, &gw, 16, hmac))) *step = "IPv6 gateway neighbour";
  return err;
}

void do_host6(const char *id, int node_nl, char **f) {
  /* f: host veth, ipv6, pod mac */
  struct in6_addr ip;
  unsigned char pmac[6];
  if (!valid_ifname(f[0]) || inet_pton(AF_INET6, f[1], &ip) != 1 || parse_mac(f[2], pmac)) {
    reply(id, EINVAL, "host6 request");
    return;
  }
  int err = 0;
  const char *step = "";
  int idx = ifindex(node_inet, f[0]);
  if (idx < 0) FAIL(-idx, "host veth index");
  if ((err = route(node_nl, 0, AF_INET6, &ip, 128, NULL, idx, RT_SCOPE_UNIVERSE))) FAIL(err, "IPv6 host route add");
  if ((err = neigh(node_nl, AF_INET6, idx, &ip, 16, pmac))) FAIL(err, "IPv6 pod neighbour");
out:
  reply(id, err, step);
}

void do_route(const char *id, int node_nl, char **f) {
  /* f: host veth, ipv4 */
  struct in_addr ip;
  if (!valid_ifname(f[0]) || inet_pton(AF_INET, f[1], &ip) != 1) {
    reply(id, EINVAL, "route request");
    return;
  }
  int idx = ifindex(node_inet, f[0]);
  if (idx < 0) reply(id, -idx, "host veth index");
  else reply(id, route(node_nl, 0, AF_INET, &ip, 32, NULL, idx, RT_SCOPE_LINK), "host route add");
}

/* Sets the group of link `idx` to `group`. 0 or an errno. */
static int link_group(int fd, int idx, unsigned group) {
  struct req r;
  struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC, .ifi_index = idx };
  msg(&r, RTM_NEWLINK, 0, &ifi, sizeof ifi);
  attr_u32(&r, IFLA_GROUP, group);
  return talk(fd, &r);
}

/* 1 when a link of the node netns is in `group`, 0 when none is, or -errno (a link dump). */
static int group_used(int fd, unsigned group) {
  struct req r;
  struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC };
  msg(&r, RTM_GETLINK, NLM_F_DUMP, &ifi, sizeof ifi);
  r.n->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  struct sockaddr_nl k = { .nl_family = AF_NETLINK };
  if (sendto(fd, r.n, r.n->nlmsg_len, 0, (struct sockaddr *)&k, sizeof k) < 0) return -errno;
  static char rb[65536];
  int used = 0;
  for (;;) {
    ssize_t n = recv(fd, rb, sizeof rb, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -errno;
    for (struct nlmsghdr *h = (struct nlmsghdr *)rb; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
      if (h->nlmsg_seq != r.n->nlmsg_seq) continue;
      if (h->nlmsg_type == NLMSG_DONE) return used;
      if (h->nlmsg_type == NLMSG_ERROR) return ((struct nlmsgerr *)NLMSG_DATA(h))->error ?: -EIO;
      if (h->nlmsg_type != RTM_NEWLINK) continue;
      int len = (int)h->nlmsg_len - (int)NLMSG_LENGTH(sizeof(struct ifinfomsg));
      struct rtattr *a = (struct rtattr *)((char *)NLMSG_DATA(h) + NLMSG_ALIGN(sizeof(struct ifinfomsg)));
      for (; RTA_OK(a, len); a = RTA_NEXT(a, len))
        if (a->rta_type == IFLA_GROUP && *(unsigned *)RTA_DATA(a) == group) used = 1;
    }
  }
}

void do_dellinks(const char *id, int node_nl, char **f, int n) {
  /* f: host veth, egress host veth [, host mac, egress host mac] */
  if (!valid_ifname(f[0]) || !valid_ifname(f[1]) || !strcmp(f[0], f[1])) {
    reply(id, EINVAL, "dellinks request");
    return;
  }
  int err = 0;
  const char *step = "";
  int a = owned_index(f[0], n == 4 ? f[2] : NULL), b = owned_index(f[1], n == 4 ? f[3] : NULL);
  if (a < 0 || b < 0) FAIL(a < 0 ? -a : -b, "host veth index");
  /* A group no link is in (checked), in a range of its own, so the delete takes these two only. */
  static unsigned counter;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  unsigned group = 0;
  for (int tries = 0; tries < 4 && !group; tries++) {
    unsigned g = GROUP_BASE | ((unsigned)(ts.tv_nsec ^ getpid() * 40503u ^ ++counter * 2654435761u) & 0xffffff);
    int used = group_used(node_nl, g);
    if (used < 0) FAIL(-used, "link dump");
    if (!used) group = g;
  }
  if (!group) FAIL(EBUSY, "free link group");
  if ((err = link_group(node_nl, a, group))) FAIL(err, "link group");
  if ((err = link_group(node_nl, b, group))) {
    link_group(node_nl, a, 0);
    FAIL(err, "link group");
  }
  struct req r;
  struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC };
  msg(&r, RTM_DELLINK, 0, &ifi, sizeof ifi);
  attr_u32(&r, IFLA_GROUP, group);
  if ((err = talk(node_nl, &r))) {
    link_group(node_nl, a, 0);
    link_group(node_nl, b, 0);
    FAIL(err, "link del group");
  }
out:
  reply(id, err, step);
}
