/*
 * Shared declarations of the native CNI shim (eni-ipam-shim.c, json-scan.c, spool.c).
 * Wire format to ipamd: ipamd/cni-exec/protocol.ts; spool format: ipamd/cni-exec/spool.ts.
 */
#ifndef ENI_IPAM_SHIM_H
#define ENI_IPAM_SHIM_H
#include <stddef.h>
#include <stdint.h>

/* A growable byte buffer; put() exits 1 when memory runs out. */
struct buf { char *p; size_t len, cap; };
void put(struct buf *b, const void *d, size_t n);
void put_str(struct buf *b, const char *s);
/* Appends `s` as a JSON string (quotes, escapes). */
void json_str(struct buf *b, const char *s);
int write_all(int fd, const char *p, size_t n);

/*
 * Top-level member `key` of the JSON object `json` (n bytes) as a string: 1 = copied to
 * out, 0 = absent or not a string, -1 = not a plain JSON object / escapes this scan does
 * not decode / too long. Last occurrence wins, as in JSON.parse.
 */
int top_level_string(const char *json, size_t n, const char *key, char *out, size_t outsz);
/* 1 when `json` is one JSON object (nesting at most 64 deep), else 0. */
int json_is_object(const char *json, size_t n);
/* Same for a number (JSON number syntax, stored as double): 1, 0 (absent or not a number), -1. */
int top_level_number(const char *json, size_t n, const char *key, double *out);

/* The CNI error object (spec "Error") on stdout in the request's cniVersion; exits 1. */
void cni_error(int code, const char *msg, const char *details) __attribute__((noreturn));
extern char cni_version[16];

/*
 * Records a DEL durably under `spool_dir` (spool.ts has the format). Returns 0, or -1 with
 * a message in `why` (why_sz bytes).
 */
int spool_del(const char *spool_dir, const char *network, const char *container_id, const char *ifname,
              const char *netns, char *why, size_t why_sz);

#endif
