// gputravel/seal.h: what a holder keeps at rest and what leaves sealed: signed manifests and
// sealed datasets (AES-256-GCM chunk files), holder and recipient key folders, sealed
// checkpoints (docs/formats.md).
//
// Trusts: nothing read from disk; manifests, chunks and checkpoint headers go through gt_reader
// and are checked against the file sizes and signatures before any byte is used.
#ifndef GPUTRAVEL_SEAL_H
#define GPUTRAVEL_SEAL_H

#include <gputravel/crypto.h>
#include <gputravel/data.h>
#include <gputravel/util.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

// ---- sealed datasets (docs/formats.md "Sealed dataset") -------------------------------------
// A sealed dataset is a folder: manifest.gtm (binary, signed with the holder's Ed25519 key) and
// chunk-NNNNNN.gtc files. The plaintext is the concatenation of the input shards' tokens
// (uint16 LE), cut into chunks of chunk_size bytes (the last may be shorter). Chunk i is
// AES-256-GCM under its own key K_i = HKDF-SHA256(ikm = dataset key, salt = dataset id,
// info = "gputravel chunk key v1" || u32le i), with a random 96-bit IV recorded in the manifest
// and AAD = dataset id || u32le i || u32le chunk count || u64le plaintext length (32 bytes).
// A chunk file is a 40-byte header (magic, then exactly those AAD bytes) followed by
// ciphertext || tag; so one chunk can be opened by anyone given (K_i, IV_i, the header's AAD,
// ciphertext || tag) alone: gt_aead_open(pt, ..., ct_and_tag, len, aad, 32, iv, K_i). That is how a
// travelling device decrypts a chunk whose key alone was wrapped to it. That is GTCHUNK1
// (manifest version 1); GTCHUNK2 (version 2, seal's default) is the same but its body is
// independently tagged segments (below), which a device opens on several cores.
//
// Keyless checks (verify-dataset): manifest signature, then each chunk file's size, header and
// SHA-256. Keyed checks (unseal): the same manifest, the key check value (wrong key), each
// chunk's header and its GCM tag (which the manifest also records). Plaintext is released only
// after every tag verified (unseal writes a temporary file renamed on success).

#define GT_DATASET_KEY_BYTES 32
#define GT_DATASET_ID_BYTES 16
#define GT_KEY_CHECK_BYTES 32
#define GT_CHUNK_AAD_BYTES 32     // dataset id 16 || index u32le || count u32le || pt length u64le
#define GT_CHUNK_HEADER_BYTES 40  // magic "GTCHUNK1" or "GTCHUNK2" || AAD
#define GT_CHUNK_MAGIC "GTCHUNK1"
#define GT_CHUNK_V2_MAGIC "GTCHUNK2"  // segmented: independently tagged segments (below)
#define GT_MANIFEST_MAGIC "GTSEALMF"
#define GT_MANIFEST_VERSION 1     // GTCHUNK1 chunks: one GCM message each
#define GT_MANIFEST_VERSION_SEGMENTED 2  // GTCHUNK2 chunks; the header's u32 at 124 = segment size
#define GT_MANIFEST_HEADER_BYTES 128
#define GT_MANIFEST_ENTRY_BYTES 68  // plaintext length u64 || IV 12 || tag 16 || SHA-256 32
#define GT_MANIFEST_FILE "manifest.gtm"
#define GT_MANIFEST_MAX_CHUNKS (1u << 20)
#define GT_SUITE_AES256GCM_HKDF_SHA256 1  // AES-256-GCM, HKDF-SHA256, SHA-256, Ed25519
#define GT_DTYPE_U16LE 1
#define GT_SEAL_DEFAULT_CHUNK_BYTES (512ull << 20)
#define GT_SEAL_DEFAULT_FORMAT 2
#define GT_SEAL_MAX_CHUNK_BYTES (16ull << 30)  // far below GCM's 2^39 - 256 bits per (key, IV)
#define GT_SEAL_IO_BYTES (256u << 10)   // streaming buffer (L2-sized): memory is constant
// Datasets stream through GT_SEAL_PIPE_SLOTS buffers of GT_SEAL_PIPE_BYTES shared by the
// calling thread (read + cipher) and workers (SHA-256, writes): 16 MiB whatever the dataset
// size, enough slack that a worker descheduled on a busy machine does not stall the reader at
// once. Writeback of buffered output is started every GT_SEAL_WRITEBACK_BYTES.
#define GT_SEAL_PIPE_SLOTS 16
#define GT_SEAL_PIPE_BYTES (1u << 20)
#define GT_SEAL_WRITEBACK_BYTES (8u << 20)

// ---- segmented chunks (GTCHUNK2, manifest version 2; docs/formats.md) ----------------------
// A chunk of L plaintext bytes is cut into n = ceil(L / S) segments of S bytes (the last holds the
// rest); segment j is its own AES-256-GCM message under the chunk key K_i:
//   nonce_j = IV_i xor (0^4 || u64le j)
//   aad_j   = AAD_i (32) || u32le S || u32le j || u8 (j == n - 1)
// The body (what follows the 40-byte header) is ct_0 || tag_0 || ... || ct_{n-1} || tag_{n-1}:
// L + 16 n bytes. Each segment verifies on its own, so a chunk opens on several cores, and the
// index and last-segment flag in every segment's AAD and nonce make reordering, dropping,
// duplicating or truncating segments fail. seg_bytes 0 everywhere below means GTCHUNK1: one
// message with nonce IV_i and AAD AAD_i, body L + 16.
#define GT_CHUNK_SEG_DEFAULT_BYTES (4u << 20)
#define GT_CHUNK_SEG_MIN_BYTES 4096u
#define GT_CHUNK_SEG_MAX_BYTES (1u << 30)
#define GT_CHUNK_SEG_AAD_BYTES (GT_CHUNK_AAD_BYTES + 9)

// 0 (GTCHUNK1) or a multiple of 4 KiB in 4 KiB .. 1 GiB (GT_E_FORMAT otherwise).
GT_MUST_USE gt_err gt_chunk_seg_check(uint32_t seg_bytes);
// Segments of a chunk of pt_len bytes (1 for GTCHUNK1; pt_len >= 1).
uint64_t gt_chunk_seg_count(uint64_t pt_len, uint32_t seg_bytes);
// Bytes of the body (ciphertext and tags) of such a chunk.
uint64_t gt_chunk_body_bytes(uint64_t pt_len, uint32_t seg_bytes);
// The plaintext bytes of a body of body_len bytes (the inverse of gt_chunk_body_bytes; GT_E_ARG
// when no plaintext length gives that body).
GT_MUST_USE gt_err gt_chunk_plain_bytes(uint64_t body_len, uint32_t seg_bytes, uint64_t *pt_len);
// Plaintext bytes of segment j, and where its ciphertext starts in the body.
uint64_t gt_chunk_seg_plain_bytes(uint64_t pt_len, uint32_t seg_bytes, uint64_t j);
uint64_t gt_chunk_seg_body_offset(uint32_t seg_bytes, uint64_t j);
// nonce_j and aad_j as above (*aad_len 32 for GTCHUNK1, else GT_CHUNK_SEG_AAD_BYTES).
void gt_chunk_seg_nonce(uint8_t nonce[GT_AEAD_IV_BYTES], const uint8_t iv[GT_AEAD_IV_BYTES],
                        uint32_t seg_bytes, uint64_t j);
void gt_chunk_seg_aad(uint8_t aad_out[GT_CHUNK_SEG_AAD_BYTES], size_t *aad_len,
                      const uint8_t chunk_aad[GT_CHUNK_AAD_BYTES], uint32_t seg_bytes,
                      uint64_t j, uint64_t nseg);

// Opens segments [first, end) of a chunk's body. part: the body bytes from segment first's
// start (part_len: exactly those segments' bytes); pt: the whole chunk's plaintext (segment j
// goes to pt + j S). GT_E_AUTH at the first segment that does not verify (the segments this call
// wrote are zeroed then); GT_E_ARG for a range or length that does not fit.
GT_MUST_USE gt_err gt_chunk_segs_open(uint8_t *pt, const uint8_t *part, uint64_t part_len,
                                      uint64_t pt_len, uint32_t seg_bytes, uint64_t first,
                                      uint64_t end, const uint8_t iv[GT_AEAD_IV_BYTES],
                                      const uint8_t aad[GT_CHUNK_AAD_BYTES],
                                      const uint8_t key[GT_AEAD_KEY_BYTES]);
// The whole body into pt (pt_len bytes), on up to `threads` threads (the caller and threads - 1
// workers, each taking a contiguous run of segments; GTCHUNK1 is one thread). Any failing
// segment: all of pt zeroed, GT_E_AUTH.
GT_MUST_USE gt_err gt_chunk_body_open(uint8_t *pt, const uint8_t *body, uint64_t body_len,
                                      uint64_t pt_len, uint32_t seg_bytes, int threads,
                                      const uint8_t iv[GT_AEAD_IV_BYTES],
                                      const uint8_t aad[GT_CHUNK_AAD_BYTES],
                                      const uint8_t key[GT_AEAD_KEY_BYTES]);

// The same opened serially from body bytes that arrive in pieces (a socket, shared slots, a
// file read in order). update consumes n body bytes and writes the plaintext among them to out
// (*out_n <= n bytes; out may equal in); GT_E_AUTH as soon as a segment's tag fails. Plaintext
// of a segment is released before its tag is checked (streaming GCM): the caller stages it and
// wipes everything on any failure. final: every byte seen and the last segment verified.
typedef struct gt_chunk_stream gt_chunk_stream;
GT_MUST_USE gt_err gt_chunk_stream_new(gt_chunk_stream **s, uint64_t pt_len, uint32_t seg_bytes,
                                       const uint8_t iv[GT_AEAD_IV_BYTES],
                                       const uint8_t aad[GT_CHUNK_AAD_BYTES],
                                       const uint8_t key[GT_AEAD_KEY_BYTES]);
GT_MUST_USE gt_err gt_chunk_stream_update(gt_chunk_stream *s, const uint8_t *in, size_t n,
                                          uint8_t *out, size_t *out_n);
GT_MUST_USE gt_err gt_chunk_stream_final(gt_chunk_stream *s);
void gt_chunk_stream_free(gt_chunk_stream *s);  // wipes the key schedule and held tag; NULL ok

// One chunk as the signed manifest describes it.
typedef struct {
    uint64_t plaintext_len;
    uint8_t iv[GT_AEAD_IV_BYTES];
    uint8_t tag[GT_AEAD_TAG_BYTES];  // the file's last 16 bytes (v2: the last segment's tag)
    uint8_t file_sha256[GT_SHA256_BYTES];  // SHA-256 of the whole chunk file (header too)
} gt_manifest_chunk;

typedef struct {
    uint32_t version;
    uint8_t dataset_id[GT_DATASET_ID_BYTES];
    uint8_t holder_pub[GT_ED25519_PUBLIC_BYTES];
    uint8_t key_check[GT_KEY_CHECK_BYTES];  // HKDF of the dataset key: "is this the right key?"
    uint16_t suite;
    uint16_t token_dtype;
    uint32_t vocab_size;
    uint64_t token_count;
    uint64_t chunk_size;   // plaintext bytes per chunk except the last
    uint32_t chunk_count;
    uint32_t segment_bytes;  // version 2: GTCHUNK2 segment size; version 1: 0 (GTCHUNK1)
    gt_manifest_chunk *chunks;  // chunk_count entries, owned (gt_manifest_free)
    uint8_t signature[GT_ED25519_SIG_BYTES];
} gt_manifest;

// Decodes the structure only (magic, version, field widths, table length, exact size); checks
// neither the signature nor the sizes. On failure *m is empty. For fuzzing and diagnostics.
GT_MUST_USE gt_err gt_manifest_decode(gt_manifest *m, const uint8_t *data, size_t len);
// Decodes, verifies the signature against the embedded holder key (over exactly the bytes
// before it), then checks the sizes agree with each other (gt_manifest_check).
GT_MUST_USE gt_err gt_manifest_parse(gt_manifest *m, const uint8_t *data, size_t len);
// Internal consistency: suite, dtype, chunk sizes, counts (no signature).
GT_MUST_USE gt_err gt_manifest_check(const gt_manifest *m);
// Reads DIR/manifest.gtm and parses it.
GT_MUST_USE gt_err gt_manifest_load(gt_manifest *m, const char *dsdir);
// Serialises and signs m (m->holder_pub must be sec's public key); m->signature is set.
GT_MUST_USE gt_err gt_manifest_encode(gt_manifest *m, const uint8_t sec[GT_ED25519_SECRET_BYTES],
                                      gt_buf *out);
void gt_manifest_free(gt_manifest *m);
// Size in bytes of chunk i's file: header + plaintext + tag.
uint64_t gt_manifest_chunk_file_bytes(const gt_manifest *m, uint32_t index);
// "DIR/chunk-000007.gtc".
GT_MUST_USE gt_err gt_chunk_path(char *out, size_t cap, const char *dsdir, uint32_t index);

// Per-chunk key K_i (the caller wipes key_out). Fails on index >= chunk_count.
GT_MUST_USE gt_err gt_chunk_key_derive(uint8_t key_out[GT_AEAD_KEY_BYTES],
                                       const uint8_t dataset_key[GT_DATASET_KEY_BYTES],
                                       const gt_manifest *m, uint32_t index);
// AAD_i = dataset id || u32le i || u32le chunk count || u64le plaintext length.
GT_MUST_USE gt_err gt_chunk_aad_build(uint8_t aad[GT_CHUNK_AAD_BYTES], const gt_manifest *m,
                                      uint32_t index);
// The key check value stored in the manifest for this dataset id.
GT_MUST_USE gt_err gt_dataset_key_check(uint8_t out[GT_KEY_CHECK_BYTES],
                                        const uint8_t dataset_key[GT_DATASET_KEY_BYTES],
                                        const uint8_t dataset_id[GT_DATASET_ID_BYTES]);
// Checks a chunk file header (the first GT_CHUNK_HEADER_BYTES) against the manifest's chunk i,
// naming what disagrees: another dataset, another index (swapped), other sizes.
GT_MUST_USE gt_err gt_chunk_header_check(const uint8_t *hdr, size_t len, const gt_manifest *m,
                                         uint32_t index);
// Opens one whole chunk file held in memory with its chunk key alone: header check, then
// gt_aead_open. pt_cap >= plaintext length. On failure pt is zeroed and *pt_len = 0.
GT_MUST_USE gt_err gt_chunk_open(uint8_t *pt, size_t pt_cap, size_t *pt_len, const uint8_t *file,
                                 size_t file_len, const gt_manifest *m, uint32_t index,
                                 const uint8_t chunk_key[GT_AEAD_KEY_BYTES]);
// The same on up to `threads` threads (GTCHUNK2: segments split between the caller and
// threads - 1 workers; GTCHUNK1 opens on one).
GT_MUST_USE gt_err gt_chunk_open_threads(uint8_t *pt, size_t pt_cap, size_t *pt_len,
                                         const uint8_t *file, size_t file_len,
                                         const gt_manifest *m, uint32_t index,
                                         const uint8_t chunk_key[GT_AEAD_KEY_BYTES],
                                         int threads);

// ---- holder key folder (gputravel keygen) ---------------------------------------------------
// DIR/holder_ed25519.key (magic "GTEDSEC1" || seed 32 || public 32), DIR/holder_ed25519.pub
// (magic "GTEDPUB1" || public 32), DIR/dataset.key (magic "GTDSKEY1" || key 32); all mode 0600,
// the folder 0700, each written atomically.
#define GT_KEYDIR_HOLDER_SECRET "holder_ed25519.key"
#define GT_KEYDIR_HOLDER_PUBLIC "holder_ed25519.pub"
#define GT_KEYDIR_DATASET_KEY "dataset.key"

typedef struct {
    uint8_t holder_sec[GT_ED25519_SECRET_BYTES];
    uint8_t holder_pub[GT_ED25519_PUBLIC_BYTES];
    uint8_t dataset_key[GT_DATASET_KEY_BYTES];
} gt_holder_keys;

// Generates fresh keys into dir (created 0700). Refuses (GT_E_STATE) if any key file exists,
// unless overwrite. keys_out may be NULL; otherwise the caller wipes it (gt_holder_keys_wipe).
GT_MUST_USE gt_err gt_keydir_generate(const char *dir, bool overwrite, gt_holder_keys *keys_out);
// Loads and cross-checks (the public key must match the seed). On failure *keys is zeroed.
GT_MUST_USE gt_err gt_keydir_load(const char *dir, gt_holder_keys *keys);
// The identity key pair only (dataset_key left zero): a holder in enclave mode, whose dataset
// key is sealed in its enclave (holder.h), never reads dataset.key.
GT_MUST_USE gt_err gt_keydir_load_identity(const char *dir, gt_holder_keys *keys);
// Reads a holder public key from a .pub file, a key folder, or 64 hex digits.
GT_MUST_USE gt_err gt_holder_pub_load(const char *spec, uint8_t pub[GT_ED25519_PUBLIC_BYTES]);
void gt_holder_keys_wipe(gt_holder_keys *keys);

// ---- recipient keys (X25519) ----------------------------------------------------------------
// A holder's key for receiving sealed checkpoints: a separate X25519 key pair in its key folder,
// generated fresh (never converted from the Ed25519 identity). DIR/recipient_x25519.key (magic
// "GTXSEC01" || secret 32 || public 32) and DIR/recipient_x25519.pub (magic "GTXPUB01" ||
// public 32); mode 0600, written atomically. gt_keydir_generate makes it with the other keys;
// gt_keydir_recipient_generate adds it to a folder made before recipient keys existed.
#define GT_KEYDIR_RECIPIENT_SECRET "recipient_x25519.key"
#define GT_KEYDIR_RECIPIENT_PUBLIC "recipient_x25519.pub"

typedef struct {
    uint8_t sec[GT_X25519_BYTES];
    uint8_t pub[GT_X25519_BYTES];
} gt_recipient_keys;

// Adds a fresh recipient key pair to dir (which must already be a key folder: its identity key
// is kept). Refuses (GT_E_STATE) if a recipient key exists, unless overwrite. pub_out may be NULL.
GT_MUST_USE gt_err gt_keydir_recipient_generate(const char *dir, bool overwrite,
                                                uint8_t pub_out[GT_X25519_BYTES]);
// Loads and cross-checks (the public key must match the secret). A folder without one gets
// GT_E_NOTFOUND naming the command that adds it. On failure *k is zeroed.
GT_MUST_USE gt_err gt_keydir_recipient_load(const char *dir, gt_recipient_keys *k);
// Reads a recipient public key from a key folder, a .pub file, or 64 hex digits.
GT_MUST_USE gt_err gt_recipient_pub_load(const char *spec, uint8_t pub[GT_X25519_BYTES]);
void gt_recipient_keys_wipe(gt_recipient_keys *k);

// ---- sealed checkpoints (docs/formats.md "Sealed checkpoint") -------------------------------
// An llm.c fp32 checkpoint (model.bin: weights only, no optimizer state) encrypted once under a
// fresh random content key (AES-256-GCM), that key wrapped for each named recipient: X25519 with
// one ephemeral key per file, HKDF-SHA256 -> wrapping key and IV, AES-256-GCM. The header binds
// the agreement hash, the training step, the model config, the signer's Ed25519 public key and
// the recipient list: the wraps authenticate the header's bound part (everything before the
// wraps) and the body authenticates the whole header, so no field, recipient or wrap can be
// changed or swapped. Version 2 adds provenance: the file ends with an Ed25519 signature by the
// signer key over SHA-256(whole header || ciphertext || body tag), so the file says who sealed
// it. The signer key is the trainer's per-process signing key, presented in its HELLO to every
// holder inside the attested channel and recorded in each holder's ledger ("session" entry):
// a recipient that finds it there knows the attested trainer sealed this file.
//
//   bound part  magic "GTSCKPT1" | u32 version 2 | u32 suite | u32 content | agreement hash 32 |
//               u64 step | 6 x u32 config (maxT, V, L, NH, C, Vp) | u64 plaintext length |
//               body IV 12 | ephemeral X25519 public 32 | signer Ed25519 public 32 | u32 n |
//               n x (name 64 | X25519 pub 32)
//   wraps       n x (wrapped content key 32 | tag 16)
//   body        ciphertext (plaintext length bytes) | tag 16
//   signature   Ed25519(signer, SHA-256(bound part | wraps | ciphertext | tag)) 64
// Integers little-endian. Names are NUL-padded, 1..63 characters of [A-Za-z0-9._-].
#define GT_SCKPT_MAGIC "GTSCKPT1"
#define GT_SCKPT_VERSION 2            // 1: unsigned (no signer key, no signature); refused
#define GT_SCKPT_SUITE_X25519_HKDF_SHA256_AES256GCM 1
#define GT_SCKPT_CONTENT_LLMC_FP32 1  // llm.c checkpoint, header version 3, weights only
#define GT_SCKPT_MAX_RECIPIENTS 64
#define GT_SCKPT_NAME_BYTES 64
#define GT_SCKPT_SIGNER_OFFSET 136    // where the signer's Ed25519 public key sits
#define GT_SCKPT_FIXED_BYTES 172      // the bound part before the recipient entries
#define GT_SCKPT_RECIPIENT_BYTES 96   // name 64 | X25519 public key 32
#define GT_SCKPT_WRAP_BYTES 48        // wrapped key 32 | tag 16
#define GT_SCKPT_SIG_BYTES GT_ED25519_SIG_BYTES  // the trailer: 64
#define GT_SCKPT_MAX_HEADER_BYTES \
    (GT_SCKPT_FIXED_BYTES + GT_SCKPT_MAX_RECIPIENTS * (GT_SCKPT_RECIPIENT_BYTES + GT_SCKPT_WRAP_BYTES))
#define GT_SCKPT_MAX_PLAINTEXT (32ull << 30)  // below GCM's 2^39 - 256 bits per (key, IV)
#define GT_SCKPT_LLMC_MAGIC 20240326  // the first int32 of an llm.c checkpoint
#define GT_SCKPT_LLMC_VERSION 3        // fp32
#define GT_SCKPT_LLMC_HEADER_BYTES 1024  // 256 x int32: magic, version, the 6 shapes, zeros

typedef struct {
    char name[GT_SCKPT_NAME_BYTES];   // NUL-terminated
    uint8_t pub[GT_X25519_BYTES];
} gt_sckpt_recipient;

// The model shapes, in llm.c header order.
typedef struct {
    uint32_t max_seq_len, vocab_size, num_layers, num_heads, channels, padded_vocab_size;
} gt_sckpt_model;
// The llm.c fp32 checkpoint header for m (what precedes the parameters).
void gt_sckpt_llmc_header(uint8_t out[GT_SCKPT_LLMC_HEADER_BYTES], const gt_sckpt_model *m);
// Shapes positive, Vp >= V, each within int32 (GT_E_FORMAT).
GT_MUST_USE gt_err gt_sckpt_model_check(const gt_sckpt_model *m);

typedef struct {
    uint32_t version, suite, content;
    uint8_t agreement_hash[GT_SHA256_BYTES];
    uint64_t step;
    gt_sckpt_model model;
    uint64_t plaintext_len;
    uint8_t body_iv[GT_AEAD_IV_BYTES];
    uint8_t ephemeral_pub[GT_X25519_BYTES];
    uint8_t signer_pub[GT_ED25519_PUBLIC_BYTES];  // who sealed it (checked by opening)
    uint32_t recipient_count;
    gt_sckpt_recipient recipients[GT_SCKPT_MAX_RECIPIENTS];
    uint8_t wraps[GT_SCKPT_MAX_RECIPIENTS][GT_SCKPT_WRAP_BYTES];
    size_t bound_len;   // bytes of the bound part
    size_t header_len;  // bound part + wraps: where the body starts
} gt_sckpt_header;

// Parses a header from the first bytes of a file (data may go on into the body). Checks magic,
// version, suite, content, counts, names (valid, unique) and keys (unique), the plaintext limit;
// no keys needed, nothing authenticated (the signer key is only what the file claims until
// gt_sckpt_open verified the signature). On failure *h is zeroed.
GT_MUST_USE gt_err gt_sckpt_header_parse(gt_sckpt_header *h, const uint8_t *data, size_t len);
// Reads and parses the header of the file at path and checks the file's size is exactly
// header + plaintext + tag + signature (GT_E_TRUNCATED if shorter, GT_E_FORMAT if longer).
GT_MUST_USE gt_err gt_sckpt_read_header(const char *path, gt_sckpt_header *h);
// Total file size the header announces.
uint64_t gt_sckpt_file_bytes(const gt_sckpt_header *h);

typedef struct {
    const char *model_path;   // the llm.c fp32 checkpoint to seal (its header must match model)
    const char *out_path;     // written atomically, mode 0644 (it is ciphertext)
    uint8_t agreement_hash[GT_SHA256_BYTES];
    uint64_t step;
    gt_sckpt_model model;
    const gt_sckpt_recipient *recipients;  // 1..GT_SCKPT_MAX_RECIPIENTS, unique names and keys
    uint32_t recipient_count;
    // The signer's Ed25519 secret (RFC 8032 seed; borrowed, never copied past the call): its
    // public key goes in the header and it signs the file. Required.
    const uint8_t *signing_secret;
} gt_sckpt_seal_params;

// Where sealing reads its plaintext: read(ctx, out, n) fills out with the next n bytes, in
// order, until len bytes were read (pieces: a file, a span, device memory read in parts).
typedef struct {
    uint64_t len;
    gt_err (*read)(void *ctx, uint8_t *out, size_t n);
    void *ctx;
} gt_seal_source;
// Where a sealed file goes: write(ctx, data, n) gets its bytes in file order. On failure the
// sink has received part of a file: the caller discards it (what it received is ciphertext).
typedef struct {
    gt_err (*write)(void *ctx, const uint8_t *data, size_t n);
    void *ctx;
} gt_seal_sink;

// A sink appending to b (ciphertext: grow it with gt_buf_reserve first to avoid copies).
gt_seal_sink gt_seal_buf_sink(gt_buf *b);

// The one sealing path: the same file as gt_sckpt_seal, from src (src->len bytes, an llm.c
// checkpoint whose header matches p->model) to sink. p->model_path and p->out_path are unused.
GT_MUST_USE gt_err gt_sckpt_seal_to(const gt_sckpt_seal_params *p, const gt_seal_source *src,
                                    const gt_seal_sink *sink, gt_sckpt_header *hdr_out);
// The same from memory into out (its length is set to the file's; on failure out->len = 0).
GT_MUST_USE gt_err gt_sckpt_seal_mem(const gt_sckpt_seal_params *p, gt_span plaintext,
                                     gt_buf *out, gt_sckpt_header *hdr_out);

// Seals p->model_path for p's recipients into p->out_path (streamed: constant memory, the
// signature's hash taken as the ciphertext is written). The content key, ephemeral secret and
// wrapping keys are wiped; on failure nothing is left at out_path. hdr_out (may be NULL)
// receives the header written.
GT_MUST_USE gt_err gt_sckpt_seal(const gt_sckpt_seal_params *p, gt_sckpt_header *hdr_out);

// Opens a sealed checkpoint with a recipient's keys into out_path (mode 0600): header, exact
// file size, the signer (when expect_signer is not NULL, the header's signer key must be it:
// GT_E_POLICY before anything is decrypted), the recipient entry whose key is k->pub
// (GT_E_NOTFOUND naming the recipients when none is), its wrap (GT_E_AUTH), then one streamed
// pass: the body is hashed as read and decrypted into a temporary file, and renamed only after
// the signature over header and body verified under the header's signer key (GT_E_AUTH), the
// body's tag verified (GT_E_AUTH) and its llm.c header matched the sealed model config. On
// failure nothing is left at out_path. hdr_out (may be NULL) receives the header;
// *recipient_index the entry used (may be NULL).
GT_MUST_USE gt_err gt_sckpt_open(const char *path, const gt_recipient_keys *k,
                                 const uint8_t *expect_signer, const char *out_path,
                                 gt_sckpt_header *hdr_out, uint32_t *recipient_index);

// Pieces in memory as one source (a checkpoint's header then its parameters; params, m, v):
// fill spans/count, then gt_seal_spans_source(&s) reads them in order.
typedef struct {
    const gt_span *spans;
    size_t count;
    size_t at_span, at_off;  // the cursor: start at zero
} gt_seal_spans;
gt_seal_source gt_seal_spans_source(gt_seal_spans *s);

// ---- device-sealed resume state (docs/formats.md "Resume state") ----------------------------
// Model and optimizer state sealed by a device to itself, so `--resume` needs only ciphertext:
// the parameters, the AdamW moments m and v, the step and the loader position, bound to the
// device (its id: a hash of its identity) and the agreement. One key per (device, agreement):
// K = HKDF-SHA256(ikm = the device's resume secret, salt = none, info = "gputravel resume v1" |
// agreement hash | device id); a fresh random IV per file; AAD = the whole header. The header
// also carries the label source ids (dataset ids) the state's buffers carried, so the device
// restores the labels from the authenticated state, never from whoever asks it to.
//
//   header  magic "GTRSUM01" | u32 version 1 | u32 suite 1 | device id 32 | agreement hash 32 |
//           u64 step | loader: u64 epoch, shard, sample, sample_tokens, seed | u32 shuffle |
//           6 x u32 config (maxT, V, L, NH, C, Vp) | u64 params, m, v bytes | u32 n |
//           n x label id 16 | IV 12
//   body    AES-256-GCM(K, IV, params | m | v, AAD = header) | tag 16
#define GT_RESUME_MAGIC "GTRSUM01"
#define GT_RESUME_VERSION 1
#define GT_RESUME_SUITE_HKDF_SHA256_AES256GCM 1
#define GT_RESUME_SECRET_BYTES 32
#define GT_RESUME_DEVICE_ID_BYTES 32
#define GT_RESUME_LABEL_BYTES 16     // a dataset id
#define GT_RESUME_MAX_LABELS 64
#define GT_RESUME_FIXED_BYTES 184    // the header before the label ids
#define GT_RESUME_MAX_HEADER_BYTES \
    (GT_RESUME_FIXED_BYTES + GT_RESUME_MAX_LABELS * GT_RESUME_LABEL_BYTES + GT_AEAD_IV_BYTES)
#define GT_RESUME_MAX_PARAM_BYTES GT_SCKPT_MAX_PLAINTEXT  // per part; the body is at most 3x

// Where the training loader was (train's gt_loader_pos, field for field).
typedef struct {
    uint64_t epoch, shard, sample, sample_tokens, seed;
    uint32_t shuffle;  // 0 or 1
} gt_resume_loader;

typedef struct {
    uint32_t version, suite;
    uint8_t device_id[GT_RESUME_DEVICE_ID_BYTES];
    uint8_t agreement_hash[GT_SHA256_BYTES];
    uint64_t step;
    gt_resume_loader loader;
    gt_sckpt_model model;
    uint64_t params_bytes, m_bytes, v_bytes;  // m, v: both 0 (no step yet) or params_bytes
    uint32_t label_count;
    uint8_t labels[GT_RESUME_MAX_LABELS][GT_RESUME_LABEL_BYTES];  // unique
    uint8_t iv[GT_AEAD_IV_BYTES];
    size_t header_len;
} gt_resume_header;

// Parses and checks a header (magic, version, suite, config, sizes, labels); data may go on
// into the body. Nothing authenticated. On failure *h is zeroed.
GT_MUST_USE gt_err gt_resume_header_parse(gt_resume_header *h, const uint8_t *data, size_t len);
// Total file size the header announces.
uint64_t gt_resume_file_bytes(const gt_resume_header *h);
// Seals src (params | m | v: exactly h's sizes) under secret into out (replaced). h gives every
// field but version, suite, IV and header_len, which are set here (the IV fresh and random).
// On failure out->len = 0.
GT_MUST_USE gt_err gt_resume_seal(gt_resume_header *h,
                                  const uint8_t secret[GT_RESUME_SECRET_BYTES],
                                  const gt_seal_source *src, gt_buf *out);
// Opens a whole state file: header; exact size (GT_E_TRUNCATED / GT_E_FORMAT); then, before
// anything is decrypted, GT_E_AUTH if it names another device id or another agreement hash;
// then the tag under the key derived from secret (GT_E_AUTH: tampered with, or sealed by
// another device secret). body (replaced) receives params | m | v only after the tag verified;
// on failure it is wiped and empty, and *h zeroed.
GT_MUST_USE gt_err gt_resume_open(gt_span file, const uint8_t secret[GT_RESUME_SECRET_BYTES],
                                  const uint8_t device_id[GT_RESUME_DEVICE_ID_BYTES],
                                  const uint8_t agreement_hash[GT_SHA256_BYTES],
                                  gt_resume_header *h, gt_buf *body);
// The same open in two passes, for a device that cannot hold the whole body in one place (devd
// under paging): gt_resume_verify makes every check of gt_resume_open, the tag over the whole
// body included, without giving out any plaintext (decrypted piecewise into a scratch buffer,
// wiped); then gt_resume_decrypt_to, with the header it filled, decrypts the same file again and
// hands the body to put(ctx, at, data, n) in order, GT_SEAL_IO_BYTES at a time. The caller must
// keep file's bytes unchanged between the two calls (its own memory), so the second pass
// gives exactly the bytes the first verified; the second pass checks the tag again all the same.
GT_MUST_USE gt_err gt_resume_verify(gt_span file, const uint8_t secret[GT_RESUME_SECRET_BYTES],
                                    const uint8_t device_id[GT_RESUME_DEVICE_ID_BYTES],
                                    const uint8_t agreement_hash[GT_SHA256_BYTES],
                                    gt_resume_header *h);
typedef gt_err (*gt_resume_put_fn)(void *ctx, uint64_t at, const uint8_t *data, size_t n);
GT_MUST_USE gt_err gt_resume_decrypt_to(gt_span file,
                                        const uint8_t secret[GT_RESUME_SECRET_BYTES],
                                        const gt_resume_header *h, gt_resume_put_fn put,
                                        void *ctx);

// ---- seal / verify / unseal -----------------------------------------------------------------
typedef struct {
    const char *const *shards;  // input llm.c shards, in order
    size_t shard_count;
    const char *out_dir;        // must not exist, or be an empty folder
    uint64_t chunk_size;        // even, 2 .. GT_SEAL_MAX_CHUNK_BYTES; 0 = default 512 MiB
    uint32_t vocab_size;        // every token must be < vocab_size (1 .. 65536)
    bool progress;              // progress bar on stderr (a TTY only)
    // 0: the pipeline (input read through a mapped window straight into the cipher, hashing
    // and writing on worker threads). 1: the single-threaded reference: read() into the
    // buffer, encrypt in place, hash and write inline. Same bytes out either way.
    int threads;
    // Chunk format: 0 = GT_SEAL_DEFAULT_FORMAT, 1 = GTCHUNK1 (manifest version 1), 2 =
    // GTCHUNK2 (segmented, manifest version 2) with segments of segment_bytes (0 = 4 MiB).
    int format;
    uint32_t segment_bytes;
} gt_seal_params;

typedef struct {
    uint8_t dataset_id[GT_DATASET_ID_BYTES];
    uint64_t token_count;
    uint64_t plaintext_bytes;
    uint64_t stored_bytes;  // manifest + chunk files
    uint32_t chunk_count;
} gt_seal_result;

// Streams the shards through AES-256-GCM into a staging folder next to out_dir, signs the
// manifest, and renames the folder to out_dir only when complete. On failure nothing remains.
// Memory: one GT_SEAL_IO_BYTES buffer whatever the sizes.
GT_MUST_USE gt_err gt_seal(const gt_seal_params *p, const gt_holder_keys *keys,
                           gt_seal_result *result);

// Keyless: manifest signature (and, when expect_holder is not NULL, that it is that holder's),
// then every chunk's presence, size, header and SHA-256. m_out (may be NULL) receives the manifest
// on success (caller gt_manifest_free).
GT_MUST_USE gt_err gt_dataset_verify(const char *dsdir, const uint8_t *expect_holder,
                                     bool progress, gt_manifest *m_out);

// Decrypts every chunk into one llm.c shard at out_path (mode 0600), written to a temporary
// name and renamed only after every chunk's tag verified; on failure nothing remains.
GT_MUST_USE gt_err gt_unseal(const char *dsdir, const gt_holder_keys *keys, const char *out_path,
                             bool progress, gt_manifest *m_out);

#endif
