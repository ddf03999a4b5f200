// gputravel/holder.h: the data holder's side. The holder agent appraises trainers and devices,
// decides what to release, and records every decision in an append-only, hash-chained ledger
// signed with the holder's identity key.
//
// Ledger format (docs/ledger.md): one entry per line,
//     BODY ' ' HASH ' ' SIG '\n'
// BODY is one-line JSON {"seq":N,"time":UNIX,"prev":HEX64,"kind":STR,"detail":{...}};
// HASH = SHA-256(BODY bytes) in hex, where BODY names the previous entry's HASH in "prev" (the
// first entry's prev is 64 zeros); SIG = Ed25519(HASH bytes) by the holder key, in hex. Entry 0
// has kind "genesis" and detail {"holder_key": HEX}: the key every signature is checked with.
// Trusts nothing in a ledger file: verification re-derives every hash and signature.
#ifndef GPUTRAVEL_HOLDER_H
#define GPUTRAVEL_HOLDER_H

#include <gputravel/crypto.h>
#include <gputravel/util.h>

#include <stdio.h>

typedef struct gt_ledger gt_ledger;  // opaque; appends are serialised by an internal mutex

typedef struct {
    uint64_t entries;                 // including genesis
    uint8_t head[GT_SHA256_BYTES];    // hash of the last entry
    uint8_t holder_key[GT_ED25519_PUBLIC_BYTES];
} gt_ledger_summary;

// Opens the ledger at path for appending, creating it (with a genesis entry) if absent. An
// existing ledger is verified first and must carry this holder's key.
GT_MUST_USE gt_err gt_ledger_open(gt_ledger **l, const char *path,
                                  const uint8_t holder_secret[GT_ED25519_SECRET_BYTES]);
// Appends one entry (kind: "grant", "refuse", "erase", ...; detail: any JSON object, may be
// NULL). Written with O_APPEND and fsynced before returning. Safe from several threads.
GT_MUST_USE gt_err gt_ledger_append(gt_ledger *l, const char *kind, const cJSON *detail);
void gt_ledger_close(gt_ledger *l);  // wipes the key copy

// Verifies a whole ledger. expected_key (may be NULL) pins the holder key; show (may be NULL)
// receives one human-readable line per verified entry. The first failure is returned with its
// line number; entries before it were verified.
GT_MUST_USE gt_err gt_ledger_verify_bytes(const uint8_t *data, size_t len,
                                          const uint8_t *expected_key, FILE *show,
                                          gt_ledger_summary *out);
GT_MUST_USE gt_err gt_ledger_verify_file(const char *path, const uint8_t *expected_key,
                                         FILE *show, gt_ledger_summary *out);

#endif
