// gputravel/devd.h: the emulated confidential device (gputravel devd), the top of the house
// beside the CLI. It runs the kernels (kernels.h) on memory no other process can read, speaks the
// device protocol (devproto.h) to its clients through device.h's sim backend, and takes the
// lend / attach / return trip of travel.h. Nothing below it knows it exists.
#ifndef GPUTRAVEL_DEVD_H
#define GPUTRAVEL_DEVD_H

#include <gputravel/device.h>
#include <gputravel/util.h>

#include <signal.h>
#include <stdint.h>

// The server: owns all device memory (one arena, touched once at start), serves one session at a
// time and refuses a second client while one is attached, until *stop becomes non-zero or
// max_sessions sessions have ended. Returns only on a setup failure or when told to stop.
typedef struct {
    const char *socket_path;
    uint64_t mem_limit;        // 0: GT_DEVD_DEFAULT_MEM
    const char *paging_store;  // page beyond mem_limit into this directory (NULL: refuse past
                               // it); mem_limit then caps resident memory (docs/paging.md)
    uint32_t page_bytes;       // paging: 0 = GT_PAGER_PAGE_BYTES
    bool prefetch;             // paging: the pager's prefetch thread (gt_pager_config)
    uint32_t slot_count;       // bounce slots (0: 4)
    uint32_t slot_bytes;       // bytes per slot (0: 4 MiB)
    int threads;               // OpenMP threads for launched ops (0: OpenMP's default)
    gt_device_attester attester;  // NULL produce: sim device evidence from devd's identity;
                                  // NULL appraise: admission policy below
    const char *identity_dir;     // devd identity key (NULL: <sim root>/devd-identity)
    const char *vendor_root_dir;  // sim vendor root that certifies it (NULL: the sim root)
    const char *admit_policy;     // client admission policy JSON file (NULL: sim, not debug)
    const char *client_root;      // root for client evidence, PEM (NULL: the sim root's public key)
    const volatile sig_atomic_t *stop;  // may be NULL; checked between sessions
    uint64_t max_sessions;     // 0: unlimited
    int idle_timeout_ms;       // a silent client is dropped after this (0 or -1: never;
                               // `gputravel devd` defaults to GT_DEVD_DEFAULT_IDLE_TIMEOUT_MS)
} gt_devd_config;
#define GT_DEVD_DEFAULT_MEM (1ull << 30)
GT_MUST_USE gt_err gt_devd_run(const gt_devd_config *cfg);

#define GT_DEVD_DEFAULT_IDLE_TIMEOUT_MS 300000

#endif
