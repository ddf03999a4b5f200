// The holder enclave's ECALLs (enclaves/holder/holder.c) as the host (src/holder/enclave_mode.c)
// calls them: plain macros, shared by freestanding and hosted C. All integers little-endian.
#ifndef GT_HOLDER_ENCLAVE_ABI_H
#define GT_HOLDER_ENCLAVE_ABI_H

// 0 IMPORT: in = dataset key 32. out = the key sealed under the MRSIGNER policy (payload
//   "GTHK" | u32 version 1 | key 32). The plain key is wiped in the enclave.
// 1 OPEN: in = that sealed blob. The key is unsealed into the enclave and stays there.
// 2 TERMS: in = agreement hash 32 | dataset id 16 | u32 max_uses_per_chunk | u64 token_budget |
//   u32 chunk_count | u64 tokens[chunk_count] | u32 releases[chunk_count] | u32 uses[chunk_count]
//   | u64 tokens_released. Fixed once per enclave run (a second TERMS is refused); the counts
//   given are where counting starts (the ledger's replay).
// 3 RELEASE: in = u32 chunk | device X25519 public 32 | trip id 32 | device id 32 | appraisal:
//   u32 n, agreement document | u32 n, devd's CLIENT_HELLO body | u32 n, its SERVER_HELLO body.
//   The decision; on a grant the wrap leaf appraises the device from the appraisal bytes itself
//   (the agreement must hash to TERMS's, the key and device id must be the attested session's,
//   the device's measurement one the agreement accepts) and only then returns (status 0)
//   K_chunk wrapped to the device key (GT_KEYWRAP_BYTES) under HOLDER_WRAP_AAD; otherwise status
//   says why (HOLDER_E_DEVICE: the appraisal refused) and nothing is derived.
// 4 USED: in = u32 chunk: one confirmed use of a chunk that was released and not yet counted used.
// 5 QUOTE: in = the vQE's TARGETINFO 512 | session 32. out = REPORT 432 (ENCLU[EREPORT] for that
//   target) with REPORTDATA = the agreement hash TERMS fixed | session: the enclave itself says
//   which agreement it runs under; the host names the session (travel.h gt_holder_quote_session:
//   the holder's identity key and the channel binding, which the enclave has no SHA-256 to hash
//   itself). HOLDER_E_STATE before TERMS.
#define HOLDER_ECALL_IMPORT 0
#define HOLDER_ECALL_OPEN 1
#define HOLDER_ECALL_TERMS 2
#define HOLDER_ECALL_RELEASE 3
#define HOLDER_ECALL_USED 4
#define HOLDER_ECALL_QUOTE 5
#define HOLDER_QUOTE_IN_BYTES (512 + 32)
#define HOLDER_QUOTE_OUT_BYTES 432

#define HOLDER_OK 0
#define HOLDER_E_FORMAT 1       // an input of the wrong shape
#define HOLDER_E_REFUSED 2      // the sealed key does not open for this enclave (signer, bytes)
#define HOLDER_E_STATE 3        // no key / no terms yet, or terms already fixed
#define HOLDER_E_WRAP 4         // the wrap leaf refused (a bad device key)
#define HOLDER_E_DEVICE 5       // the wrap leaf's appraisal refused the device (nothing wrapped)
#define HOLDER_REFUSE_USES 10   // the chunk's uses are spent
#define HOLDER_REFUSE_RESENDS 11  // sent max_uses + 1 times without confirmed uses
#define HOLDER_REFUSE_BUDGET 12 // the release would cross the token budget
#define HOLDER_REFUSE_CHUNK 13  // no such chunk
#define HOLDER_E_NOTSENT 14     // USED of a chunk not sent, or its use already counted

#define HOLDER_RELEASE_FIXED (4 + 32 + 32 + 32)
#define HOLDER_RELEASE_MAX 32768  // the SDK's ECALL input: agreement + hellos must fit
#define HOLDER_MAX_CHUNKS 1900  // TERMS fits the SDK's 32 KiB ECALL input
#define HOLDER_SEALED_MAGIC "GTHK"
// The wrap's AAD: "GTRW" | agreement hash 32 | dataset id 16 | u32 chunk | trip id 32 |
// device id 32 (gt_holder_release_aad builds the same bytes on the host and in devd).
#define HOLDER_WRAP_AAD_BYTES (4 + 32 + 16 + 4 + 32 + 32)
// K_i's HKDF info: "gputravel chunk key v1" | u32 chunk (as gt_chunk_key_derive), salt: dataset id.
#define HOLDER_CHUNK_KEY_INFO "gputravel chunk key v1"

#endif
