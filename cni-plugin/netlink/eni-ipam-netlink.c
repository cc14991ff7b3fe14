/*
 * eni-ipam-netlink: ipamd's long-lived helper that wires (and for DEL/GC unwires) a pod's
 * veth over rtnetlink, so a CNI ADD or DEL starts no process (ipamd starts this one once; cni-plugin/netlink-wiring.ts).
 * It does exactly what the `ip -batch` lines of cni-plugin/wiring.ts and wiring-v6.ts do, in the same
 * order, with the same kernel attributes (iproute2's defaults: routes proto boot, table
 * main; rules action to-table), so CHECK, DEL and GC (which read with `ip`) see the same
 * state whichever wired the pod.
 *
 * Usage: eni-ipam-netlink [<node netns path>] — enters that netns first (default: stays in
 * its own). Requests on stdin, one per line, fields separated by one space; one answer
 * line per request on stdout, in order: `<id> ok` or `<id> err <errno> <what failed>: <strerror>`.
 *
 *   <id> veth <pod netns path> <host veth> <host mac> <if name> <pod mac> <mtu>
 *        node: veth pair created with the peer in the pod netns (fails EEXIST when the
 *        host veth exists), host end up; pod: lo up, peer up, `169.254.1.1 dev <if>
 *        scope link` and `default via 169.254.1.1 dev <if>` replaced, permanent neighbour
 *        169.254.1.1 → host mac replaced.
 *   <id> host <host veth> <ipv4> <route table id>
 *        node: route `<ipv4>/32 dev <host veth> scope link` ADDED (EEXIST when the node
 *        routes it already: wiring.ts tells a conflict), rule prio 512 `to <ipv4>/32
 *        lookup main` added, and for a table other than 254 (and 0) rule prio 1536 `from
 *        <ipv4>/32 lookup <table>` added (EEXIST when present).
 *   <id> addr <pod netns path> <if name> <ipv4>
 *        pod: `<ipv4>/32 dev <if>` replaced.
 *   <id> dellink <host veth> [<host mac>]
 *        node: the link deleted (its peer and routes with it); err 19 (ENODEV) when absent.
 *        With a MAC, only a link of that MAC is deleted (by its index), err 6 (ENXIO)
 *        when the link of that name has another MAC: a host veth named after its pod is
 *        shared by two sandboxes of one pod during a fast re-create, and the older one's
 *        DEL must not take the newer one's veth (veth-name.ts `hostVethNames`).
 *   <id> delrules <ipv4> <route table id>
 *        node: the rules `host` adds deleted (prio 512 to, prio 1536 from for a table other
 *        than 254 and 0); a rule already gone (ENOENT) is fine; the first other failure is
 *        the answer, after both were tried.
 *   <id> ping                         answers ok (start-up check).
 *   veth6, addr6, host6, route, dellinks: IPv6 and the egress pair, eni-ipam-netlink6.c.
 *
 * The pod netns is entered only to open sockets there (setns, socket, setns back), so
 * every request runs in the node netns otherwise. A malformed request is answered
 * `err 22` (EINVAL); EOF on stdin ends the helper. Build: scripts/bundle-plugin.mjs
 * (gcc -O2 -static; every .c file here). Linux only.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fib_rules.h>
#include <linux/if_addr.h>
#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include "eni-ipam-netlink.h"

#define GATEWAY "169.254.1.1"
#define TO_POD_PRIORITY 512
#define FROM_POD_PRIORITY 1536
#define MAIN_TABLE 254

static int node_ns = -1;
int node_inet = -1;
static unsigned seq;

struct nlmsghdr *msg(struct req *r, int type, int flags, const void *hdr, size_t hdrlen) {
  memset(r->buf, 0, sizeof r->buf);
  r->n = (struct nlmsghdr *)r->buf;
  r->n->nlmsg_len = NLMSG_LENGTH(hdrlen);
  r->n->nlmsg_type = type;
  r->n->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | flags;
  r->n->nlmsg_seq = ++seq;
  memcpy(NLMSG_DATA(r->n), hdr, hdrlen);
  return r->n;
}

struct rtattr *attr(struct req *r, int type, const void *d, size_t len) {
  struct rtattr *a = (struct rtattr *)(r->buf + NLMSG_ALIGN(r->n->nlmsg_len));
  a->rta_type = type;
  a->rta_len = RTA_LENGTH(len);
  if (len) memcpy(RTA_DATA(a), d, len);
  r->n->nlmsg_len = NLMSG_ALIGN(r->n->nlmsg_len) + RTA_ALIGN(a->rta_len);
  return a;
}

void attr_u32(struct req *r, int type, unsigned v) { attr(r, type, &v, 4); }
static void nest_end(struct req *r, struct rtattr *a) { a->rta_len = (unsigned short)(r->buf + r->n->nlmsg_len - (char *)a); }

/* Sends the request and waits for its ACK. Returns 0 or a positive errno. */
int talk(int fd, struct req *r) {
  struct sockaddr_nl k = { .nl_family = AF_NETLINK };
  if (sendto(fd, r->n, r->n->nlmsg_len, 0, (struct sockaddr *)&k, sizeof k) < 0) return errno;
  char rb[8192];
  for (;;) {
    ssize_t n = recv(fd, rb, sizeof rb, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    for (struct nlmsghdr *h = (struct nlmsghdr *)rb; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
      if (h->nlmsg_seq != r->n->nlmsg_seq) continue;
      if (h->nlmsg_type == NLMSG_ERROR) return -((struct nlmsgerr *)NLMSG_DATA(h))->error;
    }
  }
}

static int nl_socket(void) {
  int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0) return -1;
  struct sockaddr_nl a = { .nl_family = AF_NETLINK };
  if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0) {
    close(fd);
    return -1;
  }
  return fd;
}

int parse_mac(const char *s, unsigned char m[6]) {
  unsigned v[6];
  char tail;
  if (sscanf(s, "%2x:%2x:%2x:%2x:%2x:%2x%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &tail) != 6) return -1;
  for (int i = 0; i < 6; i++) m[i] = (unsigned char)v[i];
  return 0;
}

int valid_ifname(const char *s) { return *s && strlen(s) < IFNAMSIZ && !strchr(s, '/'); }

/* Link `name` up (by name) on socket fd. */
static int link_up(int fd, const char *name) {
  struct req r;
  struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC, .ifi_flags = IFF_UP, .ifi_change = IFF_UP };
  msg(&r, RTM_NEWLINK, 0, &ifi, sizeof ifi);
  attr(&r, IFLA_IFNAME, name, strlen(name) + 1);
  return talk(fd, &r);
}

/* Route of `family`: dst/len (len 0 = default), optional gateway, device index, scope; replace or exclusive add. */
int route(int fd, int replace, int family, const void *dst, int len, const void *gw, int oif, int scope) {
  struct req r;
  size_t alen = family == AF_INET ? 4 : 16;
  struct rtmsg rt = { .rtm_family = (unsigned char)family, .rtm_dst_len = (unsigned char)len,
                      .rtm_table = RT_TABLE_MAIN, .rtm_protocol = RTPROT_BOOT, .rtm_scope = (unsigned char)scope,
                      .rtm_type = RTN_UNICAST };
  msg(&r, RTM_NEWROUTE, NLM_F_CREATE | (replace ? NLM_F_REPLACE : NLM_F_EXCL), &rt, sizeof rt);
  if (len) attr(&r, RTA_DST, dst, alen);
  if (gw) attr(&r, RTA_GATEWAY, gw, alen);
  attr_u32(&r, RTA_OIF, (unsigned)oif);
  return talk(fd, &r);
}

static int rule(int fd, int prio, int to, struct in_addr ip, unsigned table) {
  struct req r;
  struct fib_rule_hdr h = { .family = AF_INET, .action = FR_ACT_TO_TBL };
  if (to) h.dst_len = 32;
  else h.src_len = 32;
  h.table = table < 256 ? (unsigned char)table : RT_TABLE_UNSPEC;
  msg(&r, RTM_NEWRULE, NLM_F_CREATE | NLM_F_EXCL, &h, sizeof h);
  attr_u32(&r, FRA_PRIORITY, (unsigned)prio);
  attr(&r, to ? FRA_DST : FRA_SRC, &ip, 4);
  if (table >= 256) attr_u32(&r, FRA_TABLE, table);
  return talk(fd, &r);
}

/* Deletes the rule `rule()` adds (action unspecified matches, as `ip rule del`). 0, or an errno; ENOENT = gone. */
static int rule_del(int fd, int prio, int to, struct in_addr ip, unsigned table) {
  struct req r;
  struct fib_rule_hdr h = { .family = AF_INET };
  if (to) h.dst_len = 32;
  else h.src_len = 32;
  h.table = table < 256 ? (unsigned char)table : RT_TABLE_UNSPEC;
  msg(&r, RTM_DELRULE, 0, &h, sizeof h);
  attr_u32(&r, FRA_PRIORITY, (unsigned)prio);
  attr(&r, to ? FRA_DST : FRA_SRC, &ip, 4);
  if (table >= 256) attr_u32(&r, FRA_TABLE, table);
  return talk(fd, &r);
}

/*
 * Opens a netlink socket and an AF_INET socket (for SIOCGIFINDEX) inside the netns at
 * `path`, then returns to the node netns. Returns 0 or an errno.
 */
int pod_sockets(const char *path, int *nl, int *inet) {
  int ns = open(path, O_RDONLY | O_CLOEXEC);
  if (ns < 0) return errno;
  int err = 0;
  *nl = *inet = -1;
  if (setns(ns, CLONE_NEWNET) < 0) err = errno;
  else {
    *nl = nl_socket();
    if (*nl < 0) err = errno;
    else if ((*inet = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0) err = errno;
    if (setns(node_ns, CLONE_NEWNET) < 0) {
      perror("eni-ipam-netlink: cannot return to the node netns");
      exit(1); /* never wire anything in the wrong netns */
    }
  }
  close(ns);
  if (err) {
    if (*nl >= 0) close(*nl);
    if (*inet >= 0) close(*inet);
  }
  return err;
}

int ifindex(int inet, const char *name) {
  struct ifreq q = {0};
  snprintf(q.ifr_name, sizeof q.ifr_name, "%s", name);
  return ioctl(inet, SIOCGIFINDEX, &q) < 0 ? -errno : q.ifr_ifindex;
}

void reply(const char *id, int err, const char *what) {
  if (!err) printf("%s ok\n", id);
  else printf("%s err %d %s: %s\n", id, err, what, strerror(err));
  fflush(stdout);
}

#define FAIL(e, what) do { err = (e); step = (what); goto out; } while (0)

/* `veth` (v4 1, v6 0) and `veth6` (v6 1; v4 1 for dual). */
static void do_veth(const char *id, int node_nl, char **f, int v4, int v6) {
  /* f: pod netns, host veth, host mac, if name, pod mac, mtu */
  unsigned char hmac[6], pmac[6];
  char *end;
  long mtu = strtol(f[5], &end, 10);
  if (parse_mac(f[2], hmac) || parse_mac(f[4], pmac) || *end || mtu < 68 || mtu > 65535 || !valid_ifname(f[1]) ||
      !valid_ifname(f[3]) || f[0][0] != '/') {
    reply(id, EINVAL, "veth request");
    return;
  }
  int err = 0, nl = -1, inet = -1;
  const char *step = "";
  int ns = open(f[0], O_RDONLY | O_CLOEXEC);
  if (ns < 0) FAIL(errno, "open pod netns");
  struct req r;
  struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC };
  msg(&r, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, &ifi, sizeof ifi);
  attr(&r, IFLA_IFNAME, f[1], strlen(f[1]) + 1);
  attr(&r, IFLA_ADDRESS, hmac, 6);
  attr_u32(&r, IFLA_MTU, (unsigned)mtu);
  struct rtattr *li = attr(&r, IFLA_LINKINFO, NULL, 0);
  attr(&r, IFLA_INFO_KIND, "veth", 4);
  struct rtattr *data = attr(&r, IFLA_INFO_DATA, NULL, 0);
  struct rtattr *peer = attr(&r, VETH_INFO_PEER, &ifi, sizeof ifi);
  attr(&r, IFLA_IFNAME, f[3], strlen(f[3]) + 1);
  attr(&r, IFLA_ADDRESS, pmac, 6);
  attr_u32(&r, IFLA_MTU, (unsigned)mtu);
  attr_u32(&r, IFLA_NET_NS_FD, (unsigned)ns);
  nest_end(&r, peer);
  nest_end(&r, data);
  nest_end(&r, li);
  if ((err = talk(node_nl, &r))) FAIL(err, "link add");
  if ((err = link_up(node_nl, f[1]))) FAIL(err, "host veth up");
  if ((err = pod_sockets(f[0], &nl, &inet))) FAIL(err, "enter pod netns");
  if ((err = link_up(nl, "lo"))) FAIL(err, "lo up");
  if ((err = link_up(nl, f[3]))) FAIL(err, "pod link up");
  int idx = ifindex(inet, f[3]);
  if (idx < 0) FAIL(-idx, "pod link index");
  if (v4) {
    struct in_addr gw;
    inet_pton(AF_INET, GATEWAY, &gw);
    if ((err = route(nl, 1, AF_INET, &gw, 32, NULL, idx, RT_SCOPE_LINK))) FAIL(err, "gateway route");
    if ((err = route(nl, 1, AF_INET, NULL, 0, &gw, idx, RT_SCOPE_UNIVERSE))) FAIL(err, "default route");
    struct ndmsg nd = { .ndm_family = AF_INET, .ndm_ifindex = idx, .ndm_state = NUD_PERMANENT };
    msg(&r, RTM_NEWNEIGH, NLM_F_CREATE | NLM_F_REPLACE, &nd, sizeof nd);
    attr(&r, NDA_DST, &gw, 4);
    attr(&r, NDA_LLADDR, hmac, 6);
    if ((err = talk(nl, &r))) FAIL(err, "gateway neighbour");
  }
  if (v6 && (err = pod_v6_gateway(nl, idx, hmac, &step))) goto out;
out:
  if (ns >= 0) close(ns);
  if (nl >= 0) close(nl);
  if (inet >= 0) close(inet);
  reply(id, err, step);
}

static void do_host(const char *id, int node_nl, char **f) {
  /* f: host veth, ipv4, table */
  struct in_addr ip;
  char *end;
  long table = strtol(f[2], &end, 10);
  if (!valid_ifname(f[0]) || inet_pton(AF_INET, f[1], &ip) != 1 || *end || table < 0 || table > 0xffffffffL) {
    reply(id, EINVAL, "host request");
    return;
  }
  int err = 0;
  const char *step = "";
  int idx = ifindex(node_inet, f[0]);
  if (idx < 0) FAIL(-idx, "host veth index");
  if ((err = route(node_nl, 0, AF_INET, &ip, 32, NULL, idx, RT_SCOPE_LINK))) FAIL(err, "host route add");
  if ((err = rule(node_nl, TO_POD_PRIORITY, 1, ip, MAIN_TABLE))) FAIL(err, "rule add to-pod");
  if (table > 0 && table != MAIN_TABLE && (err = rule(node_nl, FROM_POD_PRIORITY, 0, ip, (unsigned)table)))
    FAIL(err, "rule add from-pod");
out:
  reply(id, err, step);
}

/* `addr` (AF_INET: `/32`) and `addr6` (AF_INET6: `/128` nodad: ipamd hands each /128 to one
 * pod, so ADD never waits for duplicate address detection). */
static void do_addr(const char *id, char **f, int family) {
  /* f: pod netns, if name, address */
  unsigned char ip[16];
  int v6 = family == AF_INET6;
  if (f[0][0] != '/' || !valid_ifname(f[1]) || inet_pton(family, f[2], ip) != 1) {
    reply(id, EINVAL, v6 ? "addr6 request" : "addr request");
    return;
  }
  int err = 0, nl = -1, inet = -1;
  const char *step = "";
  if ((err = pod_sockets(f[0], &nl, &inet))) FAIL(err, "enter pod netns");
  int idx = ifindex(inet, f[1]);
  if (idx < 0) FAIL(-idx, "pod link index");
  struct req r;
  struct ifaddrmsg a = { .ifa_family = (unsigned char)family, .ifa_prefixlen = v6 ? 128 : 32,
                         .ifa_flags = v6 ? IFA_F_NODAD : 0, .ifa_index = (unsigned)idx };
  msg(&r, RTM_NEWADDR, NLM_F_CREATE | NLM_F_REPLACE, &a, sizeof a);
  attr(&r, IFA_LOCAL, ip, v6 ? 16 : 4);
  attr(&r, IFA_ADDRESS, ip, v6 ? 16 : 4);
  if ((err = talk(nl, &r))) FAIL(err, v6 ? "IPv6 address" : "address");
out:
  if (nl >= 0) close(nl);
  if (inet >= 0) close(inet);
  reply(id, err, step);
}

int owned_index(const char *name, const char *mac) {
  unsigned char want[6];
  if (mac && parse_mac(mac, want)) return -EINVAL;
  int idx = ifindex(node_inet, name);
  if (idx < 0 || !mac) return idx;
  struct ifreq q = {0};
  snprintf(q.ifr_name, sizeof q.ifr_name, "%s", name);
  if (ioctl(node_inet, SIOCGIFHWADDR, &q) < 0) return -errno;
  if (memcmp(q.ifr_hwaddr.sa_data, want, 6)) return -ENXIO;
  /* The same link still: not deleted and another made under its name in between. */
  return ifindex(node_inet, name) == idx ? idx : -ENXIO;
}

static void do_dellink(const char *id, int node_nl, char **f, int n) {
  /* f: host veth [, host mac] */
  if (!valid_ifname(f[0])) {
    reply(id, EINVAL, "dellink request");
    return;
  }
  int idx = owned_index(f[0], n > 1 ? f[1] : NULL);
  if (idx < 0) {
    reply(id, -idx, idx == -ENXIO ? "link of another attachment" : "link del");
    return;
  }
  struct req r;
  struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC, .ifi_index = idx };
  msg(&r, RTM_DELLINK, 0, &ifi, sizeof ifi);
  reply(id, talk(node_nl, &r), "link del");
}

static void do_delrules(const char *id, int node_nl, char **f) {
  struct in_addr ip;
  char *end;
  long table = strtol(f[1], &end, 10);
  if (inet_pton(AF_INET, f[0], &ip) != 1 || *end || table < 0 || table > 0xffffffffL) {
    reply(id, EINVAL, "delrules request");
    return;
  }
  int err = rule_del(node_nl, TO_POD_PRIORITY, 1, ip, MAIN_TABLE);
  const char *step = "rule del to-pod";
  if (err == ENOENT) err = 0;
  if (table > 0 && table != MAIN_TABLE) {
    int e2 = rule_del(node_nl, FROM_POD_PRIORITY, 0, ip, (unsigned)table);
    if (!err && e2 != ENOENT && e2) {
      err = e2;
      step = "rule del from-pod";
    }
  }
  reply(id, err, step);
}

int main(int argc, char **argv) {
  if (argc > 1) {
    int ns = open(argv[1], O_RDONLY | O_CLOEXEC);
    if (ns < 0 || setns(ns, CLONE_NEWNET) < 0) {
      perror("eni-ipam-netlink: cannot enter the node netns");
      return 1;
    }
    close(ns);
  }
  node_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  int node_nl = nl_socket();
  node_inet = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (node_ns < 0 || node_nl < 0 || node_inet < 0) {
    perror("eni-ipam-netlink: start-up");
    return 1;
  }
  char line[4096];
  while (fgets(line, sizeof line, stdin)) {
    char *f[12];
    int n = 0;
    line[strcspn(line, "\n")] = '\0';
    for (char *save = NULL, *t = strtok_r(line, " ", &save); t && n < 12; t = strtok_r(NULL, " ", &save)) f[n++] = t;
    if (n < 2) {
      reply(n ? f[0] : "-", EINVAL, "request");
      continue;
    }
    if (!strcmp(f[1], "veth") && n == 8) do_veth(f[0], node_nl, f + 2, 1, 0);
    else if (!strcmp(f[1], "veth6") && n == 9 && (!strcmp(f[8], "ipv6") || !strcmp(f[8], "dual")))
      do_veth(f[0], node_nl, f + 2, !strcmp(f[8], "dual"), 1);
    else if (!strcmp(f[1], "host") && n == 5) do_host(f[0], node_nl, f + 2);
    else if (!strcmp(f[1], "addr") && n == 5) do_addr(f[0], f + 2, AF_INET);
    else if (!strcmp(f[1], "addr6") && n == 5) do_addr(f[0], f + 2, AF_INET6);
    else if (!strcmp(f[1], "host6") && n == 5) do_host6(f[0], node_nl, f + 2);
    else if (!strcmp(f[1], "route") && n == 4) do_route(f[0], node_nl, f + 2);
    else if (!strcmp(f[1], "dellinks") && (n == 4 || n == 6)) do_dellinks(f[0], node_nl, f + 2, n - 2);
    else if (!strcmp(f[1], "dellink") && (n == 3 || n == 4)) do_dellink(f[0], node_nl, f + 2, n - 2);
    else if (!strcmp(f[1], "delrules") && n == 4) do_delrules(f[0], node_nl, f + 2);
    else if (!strcmp(f[1], "ping") && n == 2) reply(f[0], 0, "");
    else reply(f[0], EINVAL, "request");
  }
  return 0;
}
