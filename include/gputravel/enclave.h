// gputravel/enclave.h: SGX enclave identity, computed exactly as SGX computes it (Intel SDM
// vol. 3D, ECREATE/EADD/EEXTEND/EINIT), for enclaves that run on another TEE (vSGX; DESIGN §5b).
//
//   measurement  MRENCLAVE from the measurement blocks: an SGXS stream (Fortanix), an Intel SGX
//                SDK *.signed.so (ELF + .note.sgxmeta, laid out as the SDK's loader does), or a
//                flat image (page 0 TCS, every other page REG RWX: the Linux selftest layout)
//   SIGSTRUCT    parse (1808 bytes, little-endian), verify (RSA-3072 e=3 PKCS#1 v1.5 over
//                SHA-256 of [0,128) || [900,1028); q1/q2), build and sign
//   EINIT        gt_enclave_einit_check: everything EINIT checks before an enclave may run
//   keys         EGETKEY (gt_sgx_egetkey) from a platform root sealed to the host TEE
//                (gt_sgx_platform_open), sealing on top (gt_sgx_seal / gt_sgx_unseal)
//   quoting      the virtual quoting enclave (gt_vqe_*): SGX quotes rooted in host evidence
//
// Trusts: nothing it parses. Every image, SIGSTRUCT and metadata byte is read through gt_reader
// and every offset in them is checked against what is there. A SIGSTRUCT that parses is only a
// set of claims; gt_sgx_sigstruct_verify / gt_enclave_einit_check say whether to believe them.
// Limits: images up to GT_SGX_IMAGE_MAX_BYTES; SDK metadata of the elrange kind (major version
// above 10) and enclaves with text relocations are refused (GT_E_UNSUPPORTED).
#ifndef GPUTRAVEL_ENCLAVE_H
#define GPUTRAVEL_ENCLAVE_H

#include <gputravel/attest.h>
#include <gputravel/crypto.h>
#include <gputravel/util.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GT_SGX_SIGSTRUCT_BYTES 1808
#define GT_SGX_KEY_BYTES 384          // RSA-3072 modulus, signature, q1, q2
#define GT_SGX_HASH_BYTES 32          // MRENCLAVE, MRSIGNER
#define GT_SGX_PAGE_BYTES 4096
#define GT_SGX_CHUNK_BYTES 256        // one EEXTEND
#define GT_SGX_IMAGE_MAX_BYTES ((size_t)1 << 31)

// SECINFO.FLAGS (SDM table "Layout of SECINFO Data Structure").
#define GT_SGX_SECINFO_R 0x1ull
#define GT_SGX_SECINFO_W 0x2ull
#define GT_SGX_SECINFO_X 0x4ull
#define GT_SGX_PAGE_TYPE(flags) ((unsigned)(((flags) >> 8) & 0xff))
enum { GT_SGX_PT_SECS = 0, GT_SGX_PT_TCS = 1, GT_SGX_PT_REG = 2, GT_SGX_PT_VA = 3,
       GT_SGX_PT_TRIM = 4, GT_SGX_PT_COUNT_ = 5 };
#define GT_SGX_SECINFO_TCS ((uint64_t)GT_SGX_PT_TCS << 8)
#define GT_SGX_SECINFO_REG ((uint64_t)GT_SGX_PT_REG << 8)
// "SECS", "TCS", "REG", "VA", "TRIM"; NULL for another value.
const char *gt_sgx_page_type_name(unsigned type);

// ATTRIBUTES.FLAGS bits.
#define GT_SGX_ATTR_INIT 0x1ull
#define GT_SGX_ATTR_DEBUG 0x2ull
#define GT_SGX_ATTR_MODE64BIT 0x4ull
#define GT_SGX_ATTR_PROVISIONKEY 0x10ull
#define GT_SGX_ATTR_EINITTOKEN_KEY 0x20ull
// "DEBUG", "MODE64BIT", ...; NULL for a bit without a name.
const char *gt_sgx_attribute_name(unsigned bit);

typedef struct {
    uint64_t flags;
    uint64_t xfrm;
} gt_sgx_attributes;

// ---------------------------------------------------------------------------------------------
// Measurement. A measurer hashes the 64-byte blocks SGX hashes, built from the fields given
// (reserved bytes are always zero, as the hardware's are), and counts what it saw.

#define GT_SGX_PROBLEMS_KEPT 8

typedef struct {
    uint8_t mrenclave[GT_SGX_HASH_BYTES];
    uint32_t ssaframesize;        // ECREATE
    uint64_t size;                // ECREATE
    uint64_t records;             // ECREATE + EADD + EEXTEND blocks measured
    uint64_t eadd_pages;
    uint64_t eextend_chunks;
    uint64_t unmeasured_chunks;   // SGXS UNMEASRD records (loaded, not measured)
    uint64_t page_types[GT_SGX_PT_COUNT_];  // EADDs by SECINFO page type
    uint64_t page_types_other;    // EADDs of any other page type (hardware refuses them)
    // What a real EINIT of this image would trip over or what makes a stream non-canonical
    // (EADD not page aligned, offsets not increasing, reserved bytes set, page past SIZE, ...):
    // the measurement is still computed, and problem_count says how many there were.
    uint32_t problem_count;
    char problems[GT_SGX_PROBLEMS_KEPT][112];
} gt_sgx_measurement;

typedef struct gt_sgx_measurer gt_sgx_measurer;
// ECREATE is measured by new; *out is zeroed and filled as blocks arrive; gt_sgx_measurer_finish
// writes out->mrenclave and frees the measurer (as gt_sgx_measurer_free does on any path).
GT_MUST_USE gt_err gt_sgx_measurer_new(gt_sgx_measurer **mz, gt_sgx_measurement *out,
                                       uint32_t ssaframesize, uint64_t size);
// offset: from the enclave base, page aligned (otherwise recorded as a problem).
GT_MUST_USE gt_err gt_sgx_measurer_eadd(gt_sgx_measurer *mz, uint64_t offset,
                                        uint64_t secinfo_flags);
// offset: 256-aligned, inside the page last added (otherwise a problem).
GT_MUST_USE gt_err gt_sgx_measurer_eextend(gt_sgx_measurer *mz, uint64_t offset,
                                           const uint8_t data[GT_SGX_CHUNK_BYTES]);
// EADD of a page and, when extend is set, EEXTEND of its 16 chunks. page NULL: a zero page.
GT_MUST_USE gt_err gt_sgx_measurer_page(gt_sgx_measurer *mz, uint64_t offset,
                                        uint64_t secinfo_flags, const uint8_t *page,
                                        bool extend);
GT_MUST_USE gt_err gt_sgx_measurer_finish(gt_sgx_measurer *mz);
void gt_sgx_measurer_free(gt_sgx_measurer *mz);
// Records a problem in m (kept text up to GT_SGX_PROBLEMS_KEPT; always counted).
void gt_sgx_measurement_problem(gt_sgx_measurement *m, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

// An SGXS stream (Fortanix doc/SGXS.md, and its enhanced form's UNMEASRD records): ECREATE
// first, then EADD / EEXTEND (+256 data bytes) / UNMEASRD (+256, skipped). MRENCLAVE is rebuilt
// from the parsed fields. GT_E_FORMAT for an unknown tag, a stream not starting with ECREATE, a
// second ECREATE or a truncated record; GT_E_UNSUPPORTED for UNSIZED (no size yet: no MRENCLAVE).
GT_MUST_USE gt_err gt_sgx_measure_sgxs(const uint8_t *data, size_t len, gt_sgx_measurement *out);

// A flat image: len a positive multiple of 4096; page 0 is the TCS, every other page REG RWX,
// everything measured. size 0: the next power of two >= len (the Linux selftest's choice).
GT_MUST_USE gt_err gt_sgx_measure_flat(const uint8_t *data, size_t len, uint32_t ssaframesize,
                                       uint64_t size, gt_sgx_measurement *out);

// ---------------------------------------------------------------------------------------------
// Intel SGX SDK signed enclaves: ELF64 + the metadata_t in .note.sgxmeta.

#define GT_SGX_META_MAGIC 0x86A80294635D0E4Cull

typedef struct {
    uint64_t version;             // major << 32 | minor
    uint32_t size;                // of metadata_t as written
    uint32_t tcs_policy;
    uint32_t ssa_frame_size;      // pages
    uint32_t max_save_buffer_size;
    uint32_t desired_misc_select;
    uint32_t tcs_min_pool;
    uint64_t enclave_size;
    gt_sgx_attributes attributes;  // the XFRM/flags the SDK asks for
    size_t metadata_offset;       // in the file
    size_t sigstruct_offset;      // in the file (metadata_offset + 64)
    uint32_t patch_offset, patch_size;    // DIR_PATCH (relative to the metadata)
    uint32_t layout_offset, layout_size;  // DIR_LAYOUT
    uint32_t patch_count, layout_count;
    uint32_t load_segments;       // PT_LOAD segments measured
} gt_sgx_meta;

// Finds and parses the metadata (only; no measuring). GT_E_NOTFOUND when the ELF has no
// .note.sgxmeta; GT_E_FORMAT when it is malformed.
GT_MUST_USE gt_err gt_sgx_meta_parse(const uint8_t *elf, size_t len, gt_sgx_meta *out);
// MRENCLAVE as the SDK's loader and sgx_sign build it: ECREATE (metadata SSA frame size and
// enclave size); the patch table applied to a copy of the file; each PT_LOAD segment page by
// page (partial pages zero-padded, .bss as zero pages, SECINFO REG + the segment's R/W/X, all
// measured; metadata 1.3's extra page after the last segment); then the layout table (heap,
// TCS with its offsets relocated, SSA, stack, guard pages, thread groups repeated load_times at
// load_step). meta may be NULL.
GT_MUST_USE gt_err gt_sgx_measure_signed_so(const uint8_t *elf, size_t len,
                                            gt_sgx_measurement *out, gt_sgx_meta *meta);

// Open Enclave signed enclaves: where the SIGSTRUCT in .oeinfo (oe_sgx_enclave_properties_t)
// starts in the file. GT_E_NOTFOUND without .oeinfo or when it holds no SIGSTRUCT (unsigned).
// Only the SIGSTRUCT is read: measuring OE's own image layout is not supported.
GT_MUST_USE gt_err gt_sgx_oeinfo_sigstruct(const uint8_t *elf, size_t len, size_t *offset);

typedef enum {
    GT_SGX_IMAGE_AUTO = 0,   // ELF -> signed-so, "ECREATE\0" -> sgxs, else refused
    GT_SGX_IMAGE_SGXS,
    GT_SGX_IMAGE_SIGNED_SO,
    GT_SGX_IMAGE_FLAT,
} gt_sgx_image_kind;
const char *gt_sgx_image_kind_name(gt_sgx_image_kind k);  // "auto", "sgxs", "signed-so", "flat"
// Measures an image of the given kind (AUTO: detected; *kind_out says which, may be NULL).
// Flat images take ssaframesize (0: 1) and size (0: next power of two).
GT_MUST_USE gt_err gt_sgx_measure_image(const uint8_t *data, size_t len, gt_sgx_image_kind kind,
                                        uint32_t ssaframesize, uint64_t size,
                                        gt_sgx_measurement *out, gt_sgx_image_kind *kind_out);

// ---------------------------------------------------------------------------------------------
// SIGSTRUCT (SDM "Enclave Signature Structure"), every field in spec order.

#define GT_SGX_HEADER_TYPE_DEBUG 0x80000000u   // Intel SDK: a debug-signed SIGSTRUCT
#define GT_SGX_VENDOR_INTEL 0x8086u

typedef struct {
    uint8_t header[16];           // @0: 06000000E100000000000100 + u32 type
    uint32_t header_type;         // the last 4 bytes of header: 0 or GT_SGX_HEADER_TYPE_DEBUG
    uint32_t vendor;              // @16: 0 or 0x8086
    uint32_t date;                // @20: BCD 0xYYYYMMDD (Gramine 2022: u16 year, u8 month, u8 day)
    uint8_t header2[16];          // @24
    uint32_t swdefined;           // @40
    uint8_t reserved1[84];        // @44
    uint8_t modulus[GT_SGX_KEY_BYTES];     // @128, little-endian
    uint32_t exponent;            // @512
    uint8_t signature[GT_SGX_KEY_BYTES];   // @516, little-endian
    uint32_t miscselect;          // @900
    uint32_t miscmask;            // @904
    uint8_t cet_attributes;       // @908
    uint8_t cet_attributes_mask;  // @909
    uint8_t reserved2[2];         // @910
    uint8_t isvfamilyid[16];      // @912
    gt_sgx_attributes attributes;     // @928
    gt_sgx_attributes attributemask;  // @944
    uint8_t enclavehash[GT_SGX_HASH_BYTES];  // @960: MRENCLAVE
    uint8_t reserved3[16];        // @992
    uint8_t isvextprodid[16];     // @1008
    uint16_t isvprodid;           // @1024
    uint16_t isvsvn;              // @1026
    uint8_t reserved4[12];        // @1028
    uint8_t q1[GT_SGX_KEY_BYTES];  // @1040
    uint8_t q2[GT_SGX_KEY_BYTES];  // @1424
    uint8_t raw[GT_SGX_SIGSTRUCT_BYTES];  // the bytes parsed (what the signature covers)
} gt_sgx_sigstruct;

// Parses exactly 1808 bytes (GT_E_TRUNCATED / GT_E_FORMAT otherwise). Nothing is judged here.
GT_MUST_USE gt_err gt_sgx_sigstruct_parse(const uint8_t *data, size_t len, gt_sgx_sigstruct *out);
// Finds the SIGSTRUCT in a file: 1808 bytes (raw, Gramine .sig, Fortanix .sig), an SDK signed
// ELF (the one in its metadata) or an Open Enclave signed ELF (.oeinfo). *offset: where it
// starts in data.
GT_MUST_USE gt_err gt_sgx_sigstruct_find(const uint8_t *data, size_t len, gt_sgx_sigstruct *out,
                                         size_t *offset);
// Writes the 1808 bytes of s's fields (raw is ignored, then set to them).
void gt_sgx_sigstruct_encode(gt_sgx_sigstruct *s);

typedef enum { GT_SGX_DATE_BCD, GT_SGX_DATE_BINARY, GT_SGX_DATE_INVALID } gt_sgx_date_encoding;
// Decodes DATE: BCD (SDM), or the binary u16 year / u8 month / u8 day that Gramine wrote until
// 2022. A zero DATE is BCD 0000-00-00. iso: "YYYY-MM-DD" (cap >= 11).
gt_sgx_date_encoding gt_sgx_date_decode(uint32_t date, char *iso, size_t cap);
const char *gt_sgx_date_encoding_name(gt_sgx_date_encoding e);  // "bcd", "binary", "invalid"

// Every check of a SIGSTRUCT on its own (no image): each bool is one line of EINIT's list.
typedef struct {
    bool header_ok;        // HEADER constant (type 0 or debug)
    bool header2_ok;
    bool vendor_ok;        // 0 or 0x8086
    bool exponent_ok;      // 3
    bool modulus_ok;       // exactly 3072 bits
    bool signature_lt_modulus;
    bool reserved_ok[4];   // reserved1..4 all zero
    bool signature_ok;     // RSA PKCS#1 v1.5 SHA-256
    bool q1_ok, q2_ok;
    bool all_ok;
    uint8_t mrsigner[GT_SGX_HASH_BYTES];      // SHA-256 of the modulus bytes as stored
    uint8_t signed_digest[GT_SGX_HASH_BYTES];  // SHA-256 of [0,128) || [900,1028)
} gt_sgx_sigstruct_checks;
// Runs every check (a failed check is a result, not an error: errors are library failures).
GT_MUST_USE gt_err gt_sgx_sigstruct_verify(const gt_sgx_sigstruct *s, gt_sgx_sigstruct_checks *c);

// The signed body's digest: SHA-256 of raw[0,128) || raw[900,1028).
GT_MUST_USE gt_err gt_sgx_sigstruct_digest(const gt_sgx_sigstruct *s,
                                           uint8_t out[GT_SGX_HASH_BYTES]);

// What a signer chooses; the rest of the SIGSTRUCT is constants or comes from the key.
typedef struct {
    uint8_t enclavehash[GT_SGX_HASH_BYTES];
    uint32_t vendor;              // 0 (default) or 0x8086
    uint32_t date;                // BCD 0xYYYYMMDD
    uint32_t header_type;         // 0 (default) or GT_SGX_HEADER_TYPE_DEBUG
    uint32_t swdefined;
    uint32_t miscselect, miscmask;
    gt_sgx_attributes attributes, attributemask;
    uint8_t isvfamilyid[16], isvextprodid[16];
    uint16_t isvprodid, isvsvn;
} gt_sgx_sign_params;
// Defaults: MODE64BIT, XFRM 3 (x87 + SSE); mask: every flag (DEBUG included, so a production
// signature cannot launch a debug enclave), XFRM mask 0xffffffffffffff1b; miscmask all ones;
// date = BCD of `now` (seconds since the epoch, UTC).
void gt_sgx_sign_params_default(gt_sgx_sign_params *p, int64_t now);
// Builds and signs: key must be RSA-3072 with e = 3 (GT_E_ARG otherwise). q1/q2 filled.
GT_MUST_USE gt_err gt_sgx_sigstruct_sign(gt_sgx_sigstruct *out, const gt_sgx_sign_params *p,
                                         const gt_pkey *key);

// ---------------------------------------------------------------------------------------------
// EINIT: everything that must hold before an enclave with this SIGSTRUCT may run.

typedef struct {
    const uint8_t *mrenclave;          // the measured MRENCLAVE (32 bytes); required
    gt_sgx_attributes secs_attributes;  // the enclave's SECS.ATTRIBUTES (INIT is ignored)
    uint32_t secs_miscselect;
    uint8_t secs_cet_attributes;
    bool allow_debug;                  // policy: may a DEBUG enclave run at all
    uint16_t min_isvsvn;               // policy: refuse a lower ISVSVN
} gt_sgx_einit_params;

// The identity EINIT establishes.
typedef struct {
    uint8_t mrenclave[GT_SGX_HASH_BYTES];
    uint8_t mrsigner[GT_SGX_HASH_BYTES];
    uint16_t isvprodid, isvsvn;
    gt_sgx_attributes attributes;      // SECS.ATTRIBUTES with INIT set
    uint32_t miscselect;
    bool debug;
} gt_sgx_identity;

// Checks, in order: header constants (HEADER, HEADER2, VENDOR, EXPONENT, 3072-bit modulus),
// reserved fields zero, the RSA signature, q1 and q2, ENCLAVEHASH == mrenclave (constant time),
// SECS.ATTRIBUTES & ATTRIBUTEMASK == SIGSTRUCT.ATTRIBUTES & ATTRIBUTEMASK (INIT cleared), the
// same for MISCSELECT/MISCMASK and CET, the debug policy (DEBUG needs allow_debug; a
// debug-signed header needs DEBUG), and ISVSVN >= min_isvsvn. The first failure is returned:
// GT_E_FORMAT (header, reserved), GT_E_AUTH (signature, q1/q2, measurement), GT_E_POLICY
// (attributes, miscselect, debug, svn); *id is written only on success.
GT_MUST_USE gt_err gt_enclave_einit_check(const gt_sgx_sigstruct *s, const gt_sgx_einit_params *p,
                                          gt_sgx_identity *id);

// ---------------------------------------------------------------------------------------------
// EGETKEY (issue 15 item 5): the SDM's key derivation as a pure function. The key is
// AES-128-CMAC under the platform root of the KEYDEPENDENCIES the SDM lists for each key name;
// which inputs enter depends on the key name and, for the seal key, on KEYPOLICY. The root is
// gputravel's own (sealed to the host TEE: gt_sgx_platform_open below), so keys match real SGX CPUs in which inputs
// they depend on, never in value.

enum {
    GT_SGX_KEYNAME_EINITTOKEN = 0,
    GT_SGX_KEYNAME_PROVISION = 1,
    GT_SGX_KEYNAME_PROVISION_SEAL = 2,
    GT_SGX_KEYNAME_REPORT = 3,
    GT_SGX_KEYNAME_SEAL = 4,
};
#define GT_SGX_KEYPOLICY_MRENCLAVE 0x0001u
#define GT_SGX_KEYPOLICY_MRSIGNER 0x0002u
#define GT_SGX_KEYPOLICY_NOISVPRODID 0x0004u
#define GT_SGX_KEYPOLICY_CONFIGID 0x0008u
#define GT_SGX_KEYPOLICY_ISVFAMILYID 0x0010u
#define GT_SGX_KEYPOLICY_ISVEXTPRODID 0x0020u
#define GT_SGX_ATTR_KSS 0x80ull
#define GT_SGX_KEY_BYTES_128 16
#define GT_SGX_CPUSVN_BYTES 16

// KEYREQUEST (what the enclave asks for).
typedef struct {
    uint16_t keyname;
    uint16_t keypolicy;
    uint16_t isvsvn;                         // may not exceed the enclave's
    uint16_t configsvn;                      // may not exceed the enclave's (CONFIGID policy)
    uint8_t cpusvn[GT_SGX_CPUSVN_BYTES];     // may not exceed the platform's, byte by byte
    gt_sgx_attributes attributemask;
    uint32_t miscmask;
    uint8_t keyid[32];
} gt_sgx_keyrequest;

// The requesting enclave, as its SECS holds it after EINIT.
typedef struct {
    uint8_t mrenclave[GT_SGX_HASH_BYTES];
    uint8_t mrsigner[GT_SGX_HASH_BYTES];
    uint16_t isvprodid, isvsvn;
    gt_sgx_attributes attributes;
    uint32_t miscselect;
    uint8_t configid[64];
    uint16_t configsvn;
    uint8_t isvfamilyid[16], isvextprodid[16];
} gt_sgx_secs_identity;

// The platform: its secret root and the values the CPU would hold.
typedef struct {
    uint8_t root[GT_AES128_KEY_BYTES];           // secret
    uint8_t cpusvn[GT_SGX_CPUSVN_BYTES];         // the current CPUSVN
    uint8_t ownerepoch[16];
    uint8_t seal_key_fuses[16];
} gt_sgx_platform;

// Derives the requested key into key (16 bytes, the caller's to wipe). Refused (GT_E_POLICY,
// key zeroed): an ISVSVN, CONFIGSVN or CPUSVN above the current one, EINITTOKEN without the
// EINITTOKEN_KEY attribute, PROVISION(_SEAL) without PROVISIONKEY, KSS policy bits without KSS;
// GT_E_ARG: an unknown key name or reserved KEYPOLICY bits.
GT_MUST_USE gt_err gt_sgx_egetkey(uint8_t key[GT_SGX_KEY_BYTES_128], const gt_sgx_platform *pf,
                                  const gt_sgx_secs_identity *secs,
                                  const gt_sgx_keyrequest *req);

// ---------------------------------------------------------------------------------------------
// EREPORT and local attestation (issue 15 item 6), as pure functions. Layouts as the SDM gives
// them (little-endian): TARGETINFO 512 bytes, REPORTDATA 64, REPORT 432 = REPORTBODY 384 ·
// KEYID 32 · MAC 16, the MAC being AES-128-CMAC of REPORTBODY under the *target's* report key
// (gt_sgx_egetkey REPORT for the identity TARGETINFO names, KEYID the report's).

#define GT_SGX_TARGETINFO_BYTES 512
#define GT_SGX_REPORTDATA_BYTES 64
#define GT_SGX_REPORT_BYTES 432
#define GT_SGX_REPORTBODY_BYTES 384
#define GT_SGX_KEYREQUEST_BYTES 512

typedef struct {
    uint8_t mrenclave[GT_SGX_HASH_BYTES];   // @0 MEASUREMENT
    gt_sgx_attributes attributes;          // @32
    uint8_t cet_attributes;                // @48
    uint16_t configsvn;                    // @50
    uint32_t miscselect;                   // @52
    uint8_t configid[64];                  // @64
} gt_sgx_targetinfo;

typedef struct {
    uint8_t cpusvn[GT_SGX_CPUSVN_BYTES];   // @0
    uint32_t miscselect;                   // @16
    uint8_t cet_attributes;                // @20
    uint8_t isvextprodid[16];              // @32
    gt_sgx_attributes attributes;          // @48
    uint8_t mrenclave[GT_SGX_HASH_BYTES];   // @64
    uint8_t mrsigner[GT_SGX_HASH_BYTES];    // @128
    uint8_t configid[64];                  // @192
    uint16_t isvprodid, isvsvn, configsvn; // @256, @258, @260
    uint8_t isvfamilyid[16];               // @304
    uint8_t reportdata[GT_SGX_REPORTDATA_BYTES];  // @320
    uint8_t keyid[32];                     // @384
    uint8_t mac[GT_CMAC_BYTES];            // @416
} gt_sgx_report;

// The TARGETINFO that names secs as the target of a report.
void gt_sgx_targetinfo_of(gt_sgx_targetinfo *ti, const gt_sgx_secs_identity *secs);
void gt_sgx_targetinfo_encode(const gt_sgx_targetinfo *ti, uint8_t out[GT_SGX_TARGETINFO_BYTES]);
// Parses 512 bytes; reserved bytes set: GT_E_FORMAT (EREPORT would #GP).
GT_MUST_USE gt_err gt_sgx_targetinfo_parse(const uint8_t *data, size_t len,
                                           gt_sgx_targetinfo *ti);
void gt_sgx_report_write(const gt_sgx_report *r, uint8_t out[GT_SGX_REPORT_BYTES]);
// Parses 432 bytes; reserved bytes set: GT_E_FORMAT (the MAC is checked on the re-encoding).
GT_MUST_USE gt_err gt_sgx_report_decode(const uint8_t *data, size_t len, gt_sgx_report *r);
// KEYREQUEST (512 bytes): KEYNAME 2 · KEYPOLICY 2 · ISVSVN 2 · reserved 2 · CPUSVN 16 ·
// ATTRIBUTEMASK 16 · KEYID 32 · MISCMASK 4 · CONFIGSVN 2 · reserved 434. Reserved bytes set:
// GT_E_FORMAT.
GT_MUST_USE gt_err gt_sgx_keyrequest_parse(const uint8_t *data, size_t len,
                                           gt_sgx_keyrequest *req);
void gt_sgx_keyrequest_encode(const gt_sgx_keyrequest *req,
                              uint8_t out[GT_SGX_KEYREQUEST_BYTES]);

// EREPORT by the enclave secs for the target ti: the body from secs and the platform's CPUSVN,
// KEYID the platform's current report KEYID (keyid), the MAC under the target's report key.
GT_MUST_USE gt_err gt_sgx_ereport(gt_sgx_report *out, const gt_sgx_platform *pf,
                                  const gt_sgx_secs_identity *secs, const gt_sgx_targetinfo *ti,
                                  const uint8_t reportdata[GT_SGX_REPORTDATA_BYTES],
                                  const uint8_t keyid[32]);
// What the target enclave `me` does with a report: its own report key for the report's KEYID,
// the MAC recomputed over the body and compared in constant time. GT_E_AUTH when it differs
// (a report for another target, or any changed byte of the body or KEYID).
GT_MUST_USE gt_err gt_sgx_report_verify(const gt_sgx_report *r, const gt_sgx_platform *pf,
                                        const gt_sgx_secs_identity *me);
// The report MAC over an encoded report's body under key (for tests and the enclave runtime).
GT_MUST_USE gt_err gt_sgx_report_mac(uint8_t mac[GT_CMAC_BYTES],
                                     const uint8_t report[GT_SGX_REPORT_BYTES],
                                     const uint8_t key[GT_SGX_KEY_BYTES_128]);

// ---------------------------------------------------------------------------------------------
// The platform root, sealed to the host TEE (issue 15 item 5; docs/enclave.md "Sealing").
// DIR/GT_SGX_PLATFORM_FILE holds the root, CPUSVN, OWNEREPOCH and SEAL_KEY_FUSES, AES-256-GCM
// under a key only this host TEE instance can derive: SEV-SNP, the SNP_GET_DERIVED_KEY key
// (VCEK root, bound to the launch measurement and guest policy); sim, a key derived from the sim
// root's private key (insecure-simulation: whoever holds that file derives it too); TDX 1.x has
// no sealing key (GT_E_UNSUPPORTED: a vTPM-sealed root is not built yet).

#define GT_SGX_PLATFORM_FILE "sgx-platform.sealed"
#define GT_SGX_PLATFORM_ID_BYTES 32

typedef struct {
    gt_tee_type host;        // GT_TEE_SIM, GT_TEE_SNP or GT_TEE_TDX
    const char *sim_root;    // sim: the sim root directory (NULL: the process-wide one)
    const char *dev_path;    // snp: the guest device (NULL: /dev/sev-guest)
} gt_sgx_platform_options;

typedef struct {
    gt_tee_type host;
    bool created;                 // this call made the root
    bool insecure_simulation;     // host sim
    uint8_t platform_id[GT_SGX_PLATFORM_ID_BYTES];  // public: names this root
} gt_sgx_platform_info;

// Opens DIR's platform, creating a random one on first use (DIR is created 0700). A sealed
// file another host TEE instance wrote, or any changed byte, is refused (GT_E_AUTH); another
// host type than o->host, GT_E_STATE. pf holds the root: gt_secure_zero it when done.
GT_MUST_USE gt_err gt_sgx_platform_open(const char *dir, const gt_sgx_platform_options *o,
                                        gt_sgx_platform *pf, gt_sgx_platform_info *info);
// HMAC-SHA256(root, "gputravel/sgx-platform-id/v1"): public, one per root.
GT_MUST_USE gt_err gt_sgx_platform_id(const gt_sgx_platform *pf,
                                      uint8_t out[GT_SGX_PLATFORM_ID_BYTES]);

// ---------------------------------------------------------------------------------------------
// Running enclaves (issue 15 item 4; docs/enclave.md "Running enclaves"). INSECURE SIMULATION:
// the enclave runs in a process of its own (the counterpart of vSGX's enclave VM; on TDX/SNP a
// separate confidential VM), not dumpable (no ptrace by the host's uid, no core dumps), with
// ENCLU emulated on #UD. Its memory is the kernel's to protect, not a TEE's.
//
// The host starts the enclave process (gputravel-enclave-process), hands it the image, the
// SIGSTRUCT, the platform and its X25519 public key; the enclave process loads and measures the
// image (flat format, linked at the SDK's base), runs gt_enclave_einit_check (a SIGSTRUCT that
// does not match never runs), and answers with its identity, its X25519 key and a REPORT whose
// REPORTDATA binds both keys and the host's nonce, MACed for the host's target (below). Every
// later message is AES-256-GCM under keys derived from the X25519 secret and that transcript.

// The target the enclave reports to: the host, named by MRENCLAVE = SHA-256 of this string.
#define GT_ENCLAVE_HOST_TARGET "gputravel enclave host v1"
#define GT_ENCLAVE_MSG_MAX_PAYLOAD 32768   // = the SDK's staging buffers
#define GT_ENCLAVE_IMAGE_MAX_BYTES ((size_t)64 << 20)

typedef enum {
    GT_ENCLAVE_MSG_ECALL = 1,   // host -> enclave: code = ECALL number
    GT_ENCLAVE_MSG_ERET = 2,    // enclave -> host: code = the ECALL's status (int64)
    GT_ENCLAVE_MSG_OCALL = 3,   // enclave -> host: code = OCALL number
    GT_ENCLAVE_MSG_ORET = 4,    // host -> enclave: code = the OCALL's status (int64)
    GT_ENCLAVE_MSG_CLOSE = 5,   // host -> enclave: stop
    GT_ENCLAVE_MSG_RING = 6,    // host -> enclave (socket): the shared-memory ring's memfd
                                // follows; enclave -> host (ring): it is mapped
} gt_enclave_msg_type;

// One session message's plaintext: type u8 · code u64 · payload length u32 · payload.
typedef struct {
    uint8_t type;
    uint64_t code;
    gt_span payload;   // borrowed from the bytes parsed
} gt_enclave_msg;
// GT_E_FORMAT for an unknown type, a length that is not what follows, a payload over
// GT_ENCLAVE_MSG_MAX_PAYLOAD.
GT_MUST_USE gt_err gt_enclave_msg_parse(const uint8_t *data, size_t len, gt_enclave_msg *m);
GT_MUST_USE gt_err gt_enclave_msg_encode(gt_writer *w, const gt_enclave_msg *m);

// The start message (host -> enclave process, over the socketpair before the session exists).
typedef struct {
    bool allow_debug;
    uint16_t min_isvsvn;
    gt_sgx_platform platform;
    uint8_t host_pub[GT_X25519_BYTES];
    uint8_t host_nonce[32];
    uint8_t sigstruct[GT_SGX_SIGSTRUCT_BYTES];
    gt_span image;     // borrowed
} gt_enclave_start_msg;
GT_MUST_USE gt_err gt_enclave_start_parse(const uint8_t *data, size_t len,
                                          gt_enclave_start_msg *m);
GT_MUST_USE gt_err gt_enclave_start_encode(gt_writer *w, const gt_enclave_start_msg *m);

// The enclave process's answer: refused (with why) or its identity, key and report.
typedef struct {
    bool ok;
    char refusal[160];
    gt_sgx_identity identity;
    uint8_t enclave_pub[GT_X25519_BYTES];
    uint8_t report[GT_SGX_REPORT_BYTES];
} gt_enclave_hello_msg;
GT_MUST_USE gt_err gt_enclave_hello_parse(const uint8_t *data, size_t len,
                                          gt_enclave_hello_msg *m);
GT_MUST_USE gt_err gt_enclave_hello_encode(gt_writer *w, const gt_enclave_hello_msg *m);

// REPORTDATA of the hello: SHA-256("gputravel enclave session v1" · host_nonce · host_pub ·
// enclave_pub) then 32 zero bytes.
GT_MUST_USE gt_err gt_enclave_session_reportdata(uint8_t out[GT_SGX_REPORTDATA_BYTES],
                                                 const uint8_t host_nonce[32],
                                                 const uint8_t host_pub[GT_X25519_BYTES],
                                                 const uint8_t enclave_pub[GT_X25519_BYTES]);
// The host's identity as a report target (MRENCLAVE = SHA-256(GT_ENCLAVE_HOST_TARGET)).
GT_MUST_USE gt_err gt_enclave_host_target(gt_sgx_secs_identity *host);

// An OCALL served by the host: the request, a reply to fill (at most GT_ENCLAVE_MSG_MAX_PAYLOAD
// bytes) and a status for the enclave. An error ends the ECALL that made it (the enclave is
// stopped: it cannot be left inside an OCALL).
typedef gt_err (*gt_enclave_ocall_fn)(void *ctx, uint64_t number, const uint8_t *in,
                                      size_t in_len, gt_buf *reply, int64_t *status);

typedef struct {
    const char *process_path;    // NULL: $GPUTRAVEL_ENCLAVE_PROCESS, else the
                                 // gputravel-enclave-process beside this executable
    const uint8_t *image;        // a flat image built with the SDK (linked at its base)
    size_t image_len;
    const uint8_t *sigstruct;    // GT_SGX_SIGSTRUCT_BYTES
    // The platform, one of: platform_dir, opened with gt_sgx_platform_open(platform_dir,
    // platform_options) (the root sealed to the host TEE: what the CLI and the product use), or
    // platform, a root the caller already holds (tests that fix one).
    const char *platform_dir;
    const gt_sgx_platform_options *platform_options;
    const gt_sgx_platform *platform;
    bool allow_debug;
    uint16_t min_isvsvn;
    gt_enclave_ocall_fn ocall;   // NULL: every OCALL gets status -1 and no reply
    void *ocall_ctx;
} gt_enclave_spec;

typedef struct gt_enclave gt_enclave;
// Starts the enclave process and waits (10 s at most) for its hello: GT_E_AUTH / GT_E_POLICY /
// GT_E_FORMAT with EINIT's reason when the enclave is refused, GT_E_AUTH when the report or
// identity does not verify, GT_E_PEER when the process dies or cannot be started.
GT_MUST_USE gt_err gt_enclave_start(gt_enclave **out, const gt_enclave_spec *spec);
// Runs ECALL number with in; out receives its output, status its return value. OCALLs made
// meanwhile go to spec->ocall. GT_E_PEER (and the enclave unusable) if the process dies.
GT_MUST_USE gt_err gt_enclave_ecall(gt_enclave *e, uint64_t number, const void *in,
                                    size_t in_len, gt_buf *out, int64_t *status);
const gt_sgx_identity *gt_enclave_identity(const gt_enclave *e);
int gt_enclave_pid(const gt_enclave *e);
// Asks it to stop, waits briefly, kills it if needed, reaps it, wipes the session keys.
void gt_enclave_stop(gt_enclave *e);

// The request of gputravel's seal leaves (ENCLU 0x47540000 seal / 0x47540001 unseal; not SGX
// leaves), 64 bytes read from enclave memory: KEYPOLICY u16 | 6 reserved | in u64 | in_len u64 |
// out u64 | out_cap u64 | out_len u64 (the runtime writes it) | 16 reserved. The enclave
// process seals with the enclave's own SEAL key (docs/enclave.md "Joining the halves").
#define GT_ENCLAVE_SEAL_REQUEST_BYTES 64
#define GT_ENCLAVE_SEAL_REQUEST_OUT_LEN 40   // offset of out_len
typedef struct {
    uint16_t keypolicy;
    uint64_t in, in_len, out, out_cap, out_len;
} gt_enclave_seal_request;
// GT_E_FORMAT: not 64 bytes, or reserved bytes set.
GT_MUST_USE gt_err gt_enclave_seal_request_parse(const uint8_t *data, size_t len,
                                                 gt_enclave_seal_request *q);
void gt_enclave_seal_request_encode(const gt_enclave_seal_request *q,
                                    uint8_t out[GT_ENCLAVE_SEAL_REQUEST_BYTES]);

// gputravel's wrap leaf (ENCLU 0x47540003; not SGX's): the request is the seal leaves' 64-byte
// layout (KEYPOLICY 0), its `in` this input, its `out` GT_KEYWRAP_BYTES. The runtime first has
// the recipient appraised (the wrap appraiser below: the device's own evidence, from the hellos
// of its attested session, against the agreement whose bytes come with the request), then
// derives K = HKDF-SHA256(ikm, salt, info) and writes gt_x25519_wrap(K, recipient, aad): K never
// enters enclave memory or leaves the enclave process unwrapped (src/enclave/wrap_leaf.c).
// Layout: ikm 32 | salt 16 | u16 info_len | info | recipient 32 | u16 aad_len | aad
//   | u32 n, agreement document | u32 n, CLIENT_HELLO body | u32 n, SERVER_HELLO body.
#define GT_ENCLAVE_WRAP_INFO_MAX 64
#define GT_ENCLAVE_WRAP_AAD_MAX 256
#define GT_ENCLAVE_WRAP_APPRAISAL_MAX 32768  // each of the three: what one ECALL can carry
typedef struct {
    uint8_t ikm[32];
    uint8_t salt[16];
    size_t info_len;
    uint8_t info[GT_ENCLAVE_WRAP_INFO_MAX];
    uint8_t recipient[GT_X25519_BYTES];
    size_t aad_len;
    uint8_t aad[GT_ENCLAVE_WRAP_AAD_MAX];
    // What the recipient is appraised from; borrowed from the parsed bytes.
    gt_span agreement, client_hello, server_hello;
} gt_enclave_wrap_input;
// GT_E_FORMAT / GT_E_TRUNCATED: too long, short, or bytes left over.
GT_MUST_USE gt_err gt_enclave_wrap_input_parse(const uint8_t *data, size_t len,
                                               gt_enclave_wrap_input *w);
GT_MUST_USE gt_err gt_enclave_wrap_input_encode(gt_writer *wr, const gt_enclave_wrap_input *w);
// The wrap appraiser: OK only if recipient is the X25519 key a device's attested session binds
// and that device is one the agreement accepts, with the AAD naming that agreement and session.
// It lives above this layer (travel: gt_release_wrap_appraise, which parses agreements and
// device evidence); the enclave process installs it (tools/enclave_process.c). Without one the
// wrap leaf wraps nothing.
typedef gt_err (*gt_enclave_wrap_appraiser)(gt_span agreement, gt_span client_hello,
                                            gt_span server_hello,
                                            const uint8_t recipient[GT_X25519_BYTES],
                                            const uint8_t *aad, size_t aad_len);
void gt_enclave_set_wrap_appraiser(gt_enclave_wrap_appraiser fn);
// Parse, appraise, derive, wrap (what the runtime does for the leaf); key material wiped.
// GT_E_POLICY / GT_E_AUTH: the appraisal refused the recipient (nothing derived).
GT_MUST_USE gt_err gt_enclave_wrap_derived(uint8_t out[GT_KEYWRAP_BYTES], const uint8_t *in,
                                           size_t in_len);

// The enclave process's main (tools/enclave_process.c): serves one enclave over fd. Returns the
// process's exit status.
int gt_enclave_process_main(int fd);

// ---------------------------------------------------------------------------------------------
// Sealing on top of EGETKEY (SEAL key). A blob carries the KEYREQUEST fields needed to derive
// the key again (KEYPOLICY, ISVSVN, CONFIGSVN, CPUSVN, attribute mask, MISCMASK, a random KEYID
// per blob), then AES-256-GCM under HKDF-SHA256(seal key, salt KEYID): the 128-bit SGX key
// keeps its strength, and sealing uses the crypto layer's one AEAD. Layout (little-endian):
//   "GTSD" | u16 version 1 | u16 KEYNAME 4 | u16 KEYPOLICY | u16 ISVSVN | u16 CONFIGSVN |
//   CPUSVN 16 | ATTRIBUTEMASK flags u64, xfrm u64 | MISCMASK u32 | KEYID 32 | IV 12 |
//   u32 AAD length | u32 ciphertext length (plaintext + 16-byte tag) | AAD | ciphertext
// The GCM AAD is the whole header (bytes 0..102) and the AAD: no field can change unseen.

#define GT_SGX_SEALED_HEADER_BYTES 102
#define GT_SGX_SEAL_MAX_BYTES ((size_t)64 << 20)

typedef struct {
    uint16_t keypolicy;                // GT_SGX_KEYPOLICY_MRENCLAVE and/or _MRSIGNER (, KSS bits)
    gt_sgx_attributes attributemask;   // {0,0}: the SGX SDK's default (INIT, DEBUG, MODE64BIT,
    uint32_t miscmask;                 // the reserved high flags; XFRM 0); MISCMASK 0: 0xF0000000
} gt_sgx_seal_params;

typedef struct {
    gt_sgx_keyrequest req;     // as the blob says (keyname SEAL)
    uint8_t iv[GT_AEAD_IV_BYTES];
    gt_span header;            // the GT_SGX_SEALED_HEADER_BYTES
    gt_span aad;
    gt_span ciphertext;        // plaintext + tag
} gt_sgx_sealed;

// Parses a blob (borrowing data). GT_E_FORMAT / GT_E_TRUNCATED / GT_E_UNSUPPORTED; nothing after.
GT_MUST_USE gt_err gt_sgx_sealed_parse(gt_sgx_sealed *s, const uint8_t *data, size_t len);
// Seals pt for the enclave secs on platform pf at its current ISVSVN, CONFIGSVN and the
// platform's CPUSVN; appends the blob to out. aad may be NULL (aad_len 0).
GT_MUST_USE gt_err gt_sgx_seal(gt_buf *out, const gt_sgx_platform *pf,
                               const gt_sgx_secs_identity *secs, const gt_sgx_seal_params *p,
                               const uint8_t *pt, size_t pt_len, const uint8_t *aad,
                               size_t aad_len);
// Unseals into pt (replaced; wipe with gt_buf_free). EGETKEY's refusals come through
// (GT_E_POLICY: a blob sealed at a higher ISVSVN or CPUSVN); another key (MRENCLAVE or MRSIGNER
// per policy, another platform, a changed byte): GT_E_AUTH. aad (optional) borrows the blob's.
GT_MUST_USE gt_err gt_sgx_unseal(gt_buf *pt, gt_span *aad, const gt_sgx_platform *pf,
                                 const gt_sgx_secs_identity *secs, const uint8_t *blob,
                                 size_t len);

// ---------------------------------------------------------------------------------------------
// The virtual quoting enclave (issue 15 item 7; attest.h "vsgx"). Its attestation key (ECDSA
// P-256) is sealed on the platform with an MRSIGNER-policy key of the QE's identity
// (DIR/GT_VQE_KEY_FILE). At open it builds its QE report (REPORTDATA = SHA-256(key || QE auth
// data)) and collects the host TEE's evidence once, bound to gt_vsgx_host_report_data(platform
// id, key, QE report); each quote is then one signature.

#define GT_VQE_KEY_FILE "vqe-attestation-key.sealed"
typedef struct gt_vqe gt_vqe;

GT_MUST_USE gt_err gt_vqe_open(gt_vqe **q, const char *dir, const gt_sgx_platform *pf,
                               const gt_collect_params *host);
// A vsgx evidence (enveloped) for the enclave id with REPORTDATA reportdata.
GT_MUST_USE gt_err gt_vqe_quote(const gt_vqe *q, const gt_sgx_identity *id,
                                const uint8_t reportdata[GT_REPORT_DATA_BYTES], gt_evidence *out);
// The vQE as a report target (its MRENCLAVE, ATTRIBUTES, MISCSELECT): what an enclave passes to
// EREPORT when it wants a quote.
void gt_vqe_targetinfo(const gt_vqe *q, gt_sgx_targetinfo *ti);
// Quotes a running enclave's own REPORT (GT_SGX_REPORT_BYTES, as ENCLU[EREPORT] wrote it for
// gt_vqe_targetinfo): the vQE first checks the MAC with its own report key (gt_sgx_report_verify
// on the platform it was opened with; another target, another platform or a changed bit:
// GT_E_AUTH), then signs the REPORT's body unchanged, so the quote's identity and REPORTDATA
// are the enclave's EREPORT's and nobody else's.
GT_MUST_USE gt_err gt_vqe_quote_report(const gt_vqe *q, const uint8_t *report, size_t len,
                                       gt_evidence *out);
void gt_vqe_free(gt_vqe *q);

// ---------------------------------------------------------------------------------------------
// JSON views for the CLI and tests (caller cJSON_Deletes).

// Every SIGSTRUCT field and check (keys as docs/enclave.md lists them).
GT_MUST_USE gt_err gt_sgx_sigstruct_json(const gt_sgx_sigstruct *s,
                                         const gt_sgx_sigstruct_checks *c, size_t offset,
                                         cJSON **out);
GT_MUST_USE gt_err gt_sgx_measurement_json(const gt_sgx_measurement *m, cJSON **out);

#endif
