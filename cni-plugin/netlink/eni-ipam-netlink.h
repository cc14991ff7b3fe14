/*
 * What the two files of eni-ipam-netlink share: the request buffer, the rtnetlink
 * primitives and the answer line (eni-ipam-netlink.c), and the IPv6 wiring
 * (eni-ipam-netlink6.c). The request line format is eni-ipam-netlink.c's docstring.
 */
#ifndef ENI_IPAM_NETLINK_H
#define ENI_IPAM_NETLINK_H
#include <stddef.h>

struct nlmsghdr;
struct rtattr;

/** One rtnetlink request being built: `n` points into `buf`. */
struct req {
  struct nlmsghdr *n;
  char buf[1024];
};

/** Starts request `r` of `type` (NLM_F_REQUEST | NLM_F_ACK | `flags`) with the family header `hdr`. */
struct nlmsghdr *msg(struct req *r, int type, int flags, const void *hdr, size_t hdrlen);
/** Appends attribute `type` of `len` bytes (none for a nest opened with NULL, 0). */
struct rtattr *attr(struct req *r, int type, const void *d, size_t len);
void attr_u32(struct req *r, int type, unsigned v);
/** Sends the request on `fd` and waits for its ACK. Returns 0 or a positive errno. */
int talk(int fd, struct req *r);
/** Opens a netlink and an AF_INET socket inside the netns at `path` (then back to the node's). 0 or an errno. */
int pod_sockets(const char *path, int *nl, int *inet);
/** The index of link `name`, or -errno. */
int ifindex(int inet, const char *name);
/** Writes the answer line: `<id> ok`, or `<id> err <errno> <what>: <strerror>`. */
void reply(const char *id, int err, const char *what);
/** Route of `family` (AF_INET, AF_INET6) to dst/len (len 0: default), optional gateway, via link `oif`;
 *  table main, proto boot, type unicast; replaced, or added exclusively (EEXIST when present). 0 or an errno. */
int route(int fd, int replace, int family, const void *dst, int len, const void *gw, int oif, int scope);
/** An AF_INET socket in the node netns (for SIOCGIFINDEX there). */
extern int node_inet;
/** Parses `aa:bb:cc:dd:ee:ff`. 0, or -1 when malformed. */
int parse_mac(const char *s, unsigned char m[6]);
/** A link name: not empty, shorter than IFNAMSIZ, no '/'. */
int valid_ifname(const char *s);

/**
 * The index of the node's link `name` when its MAC is `mac` (`aa:bb:..`; NULL: any MAC):
 * -ENODEV when there is no such link, -ENXIO when it has another MAC, -EINVAL for a bad MAC.
 */
int owned_index(const char *name, const char *mac);

/* eni-ipam-netlink6.c */
/**
 * Pod side of the IPv6 gateway on link `idx` (socket `nl` in the pod netns):
 * `::/0 via fe80::1 dev <if>` replaced, permanent neighbour fe80::1 → `hmac` replaced.
 * Returns 0 or an errno, and the failed step in `*step`.
 */
int pod_v6_gateway(int nl, int idx, const unsigned char hmac[6], const char **step);
/** `<id> host6 <host veth> <ipv6> <pod mac>`. */
void do_host6(const char *id, int node_nl, char **f);
/** `<id> route <host veth> <ipv4>`. */
void do_route(const char *id, int node_nl, char **f);
/** `<id> dellinks <host veth> <egress host veth> [<host mac> <egress host mac>]` (`n` fields). */
void do_dellinks(const char *id, int node_nl, char **f, int n);
#endif
