// netns.h (cli): benchmark plumbing, kept out of the product's net layer. Used by `gputravel bench
// transfer` (src/cli/cmd_bench.c) and its test (tests/cli/test_netns.c) to measure what crosses
// a network on one machine.
#ifndef GT_CLI_NETNS_H
#define GT_CLI_NETNS_H

#include <gputravel/util.h>

#include <stdbool.h>
#include <stdint.h>

// Two namespaces joined by a veth pair (GT_NETNS_ADDR_A <-> GT_NETNS_ADDR_B, link-local, only
// inside these namespaces), each direction optionally shaped to rate_bits_per_s with a tc token
// bucket. Needs root and iproute2. Destroy removes both namespaces and the pair.
#define GT_NETNS_ADDR_A "169.254.213.1"
#define GT_NETNS_ADDR_B "169.254.213.2"
typedef struct {
    char ns[2][32];
    char addr[2][32];
    bool created[2];
    uint64_t rate_bits_per_s;
} gt_netns_pair;
// tag: at most 8 characters, unique per concurrent pair (names become gt-TAG-a / gt-TAG-b).
GT_MUST_USE gt_err gt_netns_pair_create(gt_netns_pair *p, const char *tag,
                                        uint64_t rate_bits_per_s);
void gt_netns_pair_destroy(gt_netns_pair *p);
// Moves the calling thread (and what it forks afterwards) into namespace ns.
GT_MUST_USE gt_err gt_netns_enter(const char *ns);

#endif
