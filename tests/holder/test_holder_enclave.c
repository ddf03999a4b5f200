// holder/: enclave mode (docs/holder-enclave.md), INSECURE SIMULATION. The dataset key sealed
// in the holder enclave under its MRSIGNER policy; the release decision inside the enclave; K_i
// leaving only wrapped to one device and one binding; a host that lies getting no extra
// release; the host process never holding the dataset key or a K_i.
#include "testlib.h"

#include <gputravel/holder.h>

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

// The test never holds the dataset key or a chunk key in the clear (so that scanning its own
// memory for them means something): children make them and hand them over XORed with MASK.
#define MASK 0x5a

static gt_sgx_platform test_platform(void)
{
    gt_sgx_platform pf;
    for (int i = 0; i < 16; i++) {
        pf.root[i] = (uint8_t)(0x31 + i);
        pf.cpusvn[i] = 2;
        pf.ownerepoch[i] = (uint8_t)(0x40 + i);
        pf.seal_key_fuses[i] = (uint8_t)(0x90 + i);
    }
    return pf;
}

static gt_holder_enclave *start(const char *name, const gt_sgx_platform *pf)
{
    char image[512], sig[512];
    snprintf(image, sizeof image, "%s/%s.bin", GT_ENCLAVE_DIR, name);
    snprintf(sig, sizeof sig, "%s/%s.sig", GT_ENCLAVE_DIR, name);
    gt_holder_enclave_config cfg = {.image_path = image, .sigstruct_path = sig,
                                    .process_path = GT_ENCLAVE_PROCESS_PATH, .platform = pf};
    gt_holder_enclave *he = NULL;
    GT_ASSERT_OK(gt_holder_enclave_start(&he, &cfg));
    return he;
}

static const uint8_t DATASET_ID[GT_DATASET_ID_BYTES] = {0xd1, 0xd2, 0xd3, 4, 5, 6, 7, 8,
                                                       9, 10, 11, 12, 13, 14, 15, 16};

// In a child: a random dataset key, imported into the holder enclave. The parent gets the
// sealed blob, the key masked, and each chunk's K_i masked (gt_chunk_key_derive, as the plain
// holder computes them). The plain values live only in the child.
typedef struct {
    uint8_t sealed[512];
    size_t sealed_len;
    uint8_t key_masked[GT_DATASET_KEY_BYTES];
    uint8_t ki_masked[4][GT_AEAD_KEY_BYTES];
} imported;

static void import_in_child(const gt_sgx_platform *pf, imported *out)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        imported r = {0};
        uint8_t key[GT_DATASET_KEY_BYTES];
        if (!gt_is_ok(gt_random_bytes(key, sizeof key))) {
            _exit(2);
        }
        gt_holder_enclave *he = start("holder", pf);
        gt_buf sealed = {0};
        if (!gt_is_ok(gt_holder_enclave_import(he, key, &sealed)) || sealed.len > 512) {
            _exit(3);
        }
        memcpy(r.sealed, sealed.data, sealed.len);
        r.sealed_len = sealed.len;
        gt_manifest m = {.chunk_count = 4};
        memcpy(m.dataset_id, DATASET_ID, sizeof DATASET_ID);
        for (uint32_t c = 0; c < 4; c++) {
            uint8_t ki[GT_AEAD_KEY_BYTES];
            if (!gt_is_ok(gt_chunk_key_derive(ki, key, &m, c))) {
                _exit(4);
            }
            for (int i = 0; i < GT_AEAD_KEY_BYTES; i++) {
                r.ki_masked[c][i] = ki[i] ^ MASK;
            }
        }
        for (int i = 0; i < GT_DATASET_KEY_BYTES; i++) {
            r.key_masked[i] = key[i] ^ MASK;
        }
        gt_holder_enclave_stop(he);
        _exit(write(fds[1], &r, sizeof r) == (ssize_t)sizeof r ? 0 : 5);
    }
    close(fds[1]);
    size_t got = 0;
    while (got < sizeof *out) {
        ssize_t n = read(fds[0], (uint8_t *)out + got, sizeof *out - got);
        assert_true(n > 0);
        got += (size_t)n;
    }
    close(fds[0]);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

// Does `masked ^ MASK` occur anywhere in a readable mapping of this process (below 1 GiB each)?
// Compared byte by byte under the mask, so the needle itself is never in memory.
static bool memory_holds(const uint8_t *masked, size_t n)
{
    FILE *maps = fopen("/proc/self/maps", "r");
    int mem = open("/proc/self/mem", O_RDONLY);
    assert_non_null(maps);
    assert_true(mem >= 0);
    char line[512];
    bool found = false;
    static uint8_t page[1 << 16];
    while (!found && fgets(line, sizeof line, maps) != NULL) {
        unsigned long lo = 0, hi = 0;
        char perms[8] = {0};
        // Mappings of 1 GiB and more are a sanitizer's shadow (reserved, untouched: reading
        // them through /proc would take hours); this process's heap, stacks and data are small.
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3 || perms[0] != 'r' ||
            strstr(line, "[vvar") != NULL || hi - lo >= (1ul << 30)) {
            continue;
        }
        for (unsigned long at = lo; at < hi && !found; at += sizeof page - n) {
            size_t want = hi - at < sizeof page ? hi - at : sizeof page;
            ssize_t got = pread(mem, page, want, (off_t)at);
            if (got < (ssize_t)n) {
                break;
            }
            for (size_t i = 0; i + n <= (size_t)got && !found; i++) {
                size_t k = 0;
                while (k < n && (page[i + k] ^ MASK) == masked[k]) {
                    k++;
                }
                found = k == n;
            }
            if (want < sizeof page) {
                break;
            }
        }
    }
    memset(page, 0, sizeof page);
    close(mem);
    fclose(maps);
    return found;
}

static const uint64_t TOKENS[4] = {100, 100, 100, 5000};

static void set_terms(gt_holder_enclave *he, const uint8_t agreement[32])
{
    gt_holder_enclave_terms t = {.max_uses_per_chunk = 1, .token_budget = 1000,
                                 .chunk_count = 4, .tokens = TOKENS};
    memcpy(t.agreement_hash, agreement, 32);
    memcpy(t.dataset_id, DATASET_ID, sizeof DATASET_ID);
    GT_ASSERT_OK(gt_holder_enclave_set_terms(he, &t));
}

// The sealed key opens in a restarted enclave and in a new version by the same signer, never
// in the same code signed by another signer, never with any byte changed, and never holds the
// key in the clear.
static void test_sealed_key_mrsigner(void **state)
{
    (void)state;
    gt_sgx_platform pf = test_platform();
    imported im;
    import_in_child(&pf, &im);
    assert_false(memory_holds(im.key_masked, sizeof im.key_masked));
    gt_holder_enclave *again = start("holder", &pf);
    GT_ASSERT_OK(gt_holder_enclave_open_key(again, im.sealed, im.sealed_len));
    gt_holder_enclave *v2 = start("holder_v2", &pf);
    assert_memory_not_equal(gt_holder_enclave_identity(v2)->mrenclave,
                            gt_holder_enclave_identity(again)->mrenclave, 32);
    GT_ASSERT_OK(gt_holder_enclave_open_key(v2, im.sealed, im.sealed_len));
    gt_holder_enclave *other = start("holder_other_signer", &pf);
    assert_memory_equal(gt_holder_enclave_identity(other)->mrenclave,
                        gt_holder_enclave_identity(again)->mrenclave, 32);
    GT_ASSERT_CODE(gt_holder_enclave_open_key(other, im.sealed, im.sealed_len), GT_E_AUTH);
    // another platform (another host TEE instance) does not open it either
    gt_sgx_platform pf2 = pf;
    pf2.root[0] ^= 1;
    gt_holder_enclave *elsewhere = start("holder", &pf2);
    GT_ASSERT_CODE(gt_holder_enclave_open_key(elsewhere, im.sealed, im.sealed_len), GT_E_AUTH);
    for (size_t i = 0; i < im.sealed_len; i++) {
        uint8_t b[512];
        memcpy(b, im.sealed, im.sealed_len);
        b[i] ^= 0x01;
        gt_err e = gt_holder_enclave_open_key(again, b, im.sealed_len);
        if (gt_is_ok(e)) {
            fail_msg("byte %zu of the sealed key changed: opened", i);
        }
    }
    GT_ASSERT_CODE(gt_holder_enclave_open_key(again, im.sealed, im.sealed_len - 1), GT_E_AUTH);
    gt_holder_enclave_stop(elsewhere);
    gt_holder_enclave_stop(other);
    gt_holder_enclave_stop(v2);
    gt_holder_enclave_stop(again);
}

// An agreement document for the tests: any device, or only `device_hex` (a measurement).
static size_t agreement_doc(char *doc, size_t cap, const char *name, const char *device_hex)
{
    char device[160] = "{}";
    if (device_hex != NULL) {
        snprintf(device, sizeof device, "{\"accepted_measurements\":[\"%s\"]}", device_hex);
    }
    int n = snprintf(doc, cap,
                     "{\"version\":1,\"name\":\"%s\",\"model\":{\"layers\":1,\"channels\":16,"
                     "\"heads\":2,\"vocab\":64,\"max_seq\":8,\"init_seed\":5},\"training\":"
                     "{\"steps\":2,\"batch\":2,\"seq\":8,\"learning_rate\":0.001},\"holders\":"
                     "[{\"name\":\"h0\",\"identity_key\":\"11%062d\",\"endpoint\":\"127.0.0.1:1\","
                     "\"dataset_id\":\"d1d2d30405060708090a0b0c0d0e0f10\",\"token_budget\":1000,"
                     "\"max_uses_per_chunk\":1}],\"trainer\":{},\"device\":%s,"
                     "\"allow_simulation\":true,\"output\":{\"kind\":\"loss_only\"}}",
                     name, 0, device);
    assert_true(n > 0 && (size_t)n < cap);
    return (size_t)n;
}

// A devd session as the holder's host sees it: the agreement it is under, both hellos (the
// server's with sim device evidence from a sim identity, bound as devd binds it), devd's key,
// and the release binding (trip; device id = SHA-256 of the server hello).
typedef struct {
    uint8_t agreement[32], trip[32], device_id[32];
    uint8_t dev_pub[GT_X25519_BYTES], dev_sec[GT_X25519_BYTES];
    char doc[2048];
    gt_buf ch, sh;
    gt_holder_enclave_appraisal ap;
} binding;

static char g_dir[256];  // this test's sim root (vendor root of the devices) and identities

static void hellos_make(binding *b, const char *identity, const char *vendor,
                        const uint8_t evidence_pub[32])
{
    gt_sim_client_hello ch = {.version = GT_SIM_VERSION};
    GT_ASSERT_OK(gt_random_bytes(ch.nonce, sizeof ch.nonce));
    GT_ASSERT_OK(gt_random_bytes(ch.server_nonce, sizeof ch.server_nonce));
    GT_ASSERT_OK(gt_random_bytes(ch.pub, sizeof ch.pub));
    memcpy(ch.agreement, b->agreement, 32);
    ch.evidence = (gt_span){(const uint8_t *)"client evidence", 15};
    gt_writer w = gt_writer_init_dynamic();
    GT_ASSERT_OK(gt_sim_client_hello_write(&w, &ch));
    gt_buf_free_nowipe(&b->ch);
    GT_ASSERT_OK(gt_buf_append(&b->ch, w.data, w.len));
    gt_writer_free(&w);
    // the evidence binds evidence_pub; the hello names dev_pub (they differ in an attack)
    gt_sim_server_hello sh = {.version = GT_SIM_VERSION, .slot_count = 2, .slot_bytes = 4096,
                              .mem_limit = 1u << 20};
    memcpy(sh.pub, evidence_pub, 32);
    uint8_t rd[GT_REPORT_DATA_BYTES];
    GT_ASSERT_OK(gt_sim_device_report_data(rd, ch.nonce, &sh, gt_buf_span(&b->ch)));
    char dir[300];
    snprintf(dir, sizeof dir, "%s/%s", g_dir, identity);
    gt_sim_identity *id = NULL;
    GT_ASSERT_OK(gt_sim_identity_open(&id, dir, vendor));
    gt_buf ev = {0};
    GT_ASSERT_OK(gt_sim_identity_produce(id, rd, &ev));
    gt_sim_identity_free(id);
    memcpy(sh.pub, b->dev_pub, 32);
    sh.evidence = gt_buf_span(&ev);
    w = gt_writer_init_dynamic();
    GT_ASSERT_OK(gt_sim_server_hello_write(&w, &sh));
    gt_buf_free_nowipe(&b->sh);
    GT_ASSERT_OK(gt_buf_append(&b->sh, w.data, w.len));
    gt_writer_free(&w);
    gt_buf_free_nowipe(&ev);
    GT_ASSERT_OK(gt_hash(GT_HASH_SHA256, b->device_id, b->sh.data, b->sh.len));
    b->ap.client_hello = gt_buf_span(&b->ch);
    b->ap.server_hello = gt_buf_span(&b->sh);
}

static void binding_make_for(binding *b, const char *device_hex)
{
    memset(b, 0, sizeof *b);
    size_t n = agreement_doc(b->doc, sizeof b->doc, "enclave-test", device_hex);
    static gt_agreement ag;
    GT_ASSERT_OK(gt_agreement_parse(&ag, (const uint8_t *)b->doc, n));
    memcpy(b->agreement, ag.hash, 32);
    b->ap.agreement = (gt_span){(const uint8_t *)b->doc, n};
    GT_ASSERT_OK(gt_random_bytes(b->trip, 32));
    GT_ASSERT_OK(gt_x25519_keypair(b->dev_pub, b->dev_sec));
    hellos_make(b, "devd-identity", NULL, b->dev_pub);
}

static void binding_make(binding *b)
{
    binding_make_for(b, NULL);
}

static void binding_free(binding *b)
{
    gt_buf_free_nowipe(&b->ch);
    gt_buf_free_nowipe(&b->sh);
}

#define RELEASE(he, c, b, w) \
    gt_holder_enclave_release((he), (c), (b).dev_pub, (b).trip, (b).device_id, &(b).ap, (w))

// What devd does with a wrapped key: unwrap under the binding it knows. Compares the result
// with the expected K_i under the mask and wipes it; true when it opened and matched.
static bool device_opens(const binding *b, const uint8_t *wrapped, uint32_t chunk,
                         const uint8_t ki_masked[GT_AEAD_KEY_BYTES])
{
    uint8_t aad[GT_RELEASE_AAD_BYTES], k[GT_AEAD_KEY_BYTES];
    gt_release_aad_build(aad, b->agreement, DATASET_ID, chunk, b->trip, b->device_id);
    bool ok = gt_is_ok(gt_release_unwrap(k, wrapped, GT_KEYWRAP_BYTES, b->dev_sec, aad));
    bool same = true;
    for (int i = 0; i < GT_AEAD_KEY_BYTES; i++) {
        same &= (k[i] ^ MASK) == ki_masked[i];
    }
    gt_secure_zero(k, sizeof k);
    return ok && same;
}

// The decision in the enclave: one use per chunk (plus one resend of an unconfirmed release),
// the token budget as a hard cap; each grant is K_i wrapped, which the device opens to exactly
// the key the plain holder would have derived.
static void test_release_decision(void **state)
{
    (void)state;
    gt_sgx_platform pf = test_platform();
    imported im;
    import_in_child(&pf, &im);
    gt_holder_enclave *he = start("holder", &pf);
    binding b;
    binding_make(&b);
    uint8_t w[GT_KEYWRAP_BYTES];
    GT_ASSERT_CODE(RELEASE(he, 0, b, w),
                   GT_E_STATE);  // no key, no terms
    GT_ASSERT_OK(gt_holder_enclave_open_key(he, im.sealed, im.sealed_len));
    set_terms(he, b.agreement);
    GT_ASSERT_OK(RELEASE(he, 0, b, w));
    assert_true(device_opens(&b, w, 0, im.ki_masked[0]));
    GT_ASSERT_OK(RELEASE(he, 0, b, w));  // resend
    GT_ASSERT_ERR(RELEASE(he, 0, b, w),  // about this chunk only: GT_E_RETRY (travel.h REFUSE)
                  GT_E_RETRY, "max_uses_per_chunk + 1");
    GT_ASSERT_OK(RELEASE(he, 1, b, w));
    GT_ASSERT_OK(gt_holder_enclave_used(he, 1));
    GT_ASSERT_CODE(gt_holder_enclave_used(he, 1), GT_E_POLICY);  // only one use was released
    GT_ASSERT_ERR(RELEASE(he, 1, b, w),
                  GT_E_POLICY, "uses");
    GT_ASSERT_ERR(RELEASE(he, 3, b, w),
                  GT_E_POLICY, "token budget");  // 5000 > 1000
    GT_ASSERT_OK(RELEASE(he, 2, b, w));
    assert_true(device_opens(&b, w, 2, im.ki_masked[2]));
    GT_ASSERT_ERR(RELEASE(he, 4, b, w),
                  GT_E_POLICY, "no such chunk");
    binding_free(&b);
    gt_holder_enclave_stop(he);
}

// A wrapped K_i replayed to another device, trip, chunk, agreement or device identity, or with
// any one bit changed, does not open.
static void test_wrapped_key_bound(void **state)
{
    (void)state;
    gt_sgx_platform pf = test_platform();
    imported im;
    import_in_child(&pf, &im);
    gt_holder_enclave *he = start("holder", &pf);
    binding b;
    binding_make(&b);
    GT_ASSERT_OK(gt_holder_enclave_open_key(he, im.sealed, im.sealed_len));
    set_terms(he, b.agreement);
    uint8_t w[GT_KEYWRAP_BYTES];
    GT_ASSERT_OK(RELEASE(he, 1, b, w));
    assert_true(device_opens(&b, w, 1, im.ki_masked[1]));
    binding other = b;
    GT_ASSERT_OK(gt_x25519_keypair(other.dev_pub, other.dev_sec));  // another devd
    assert_false(device_opens(&other, w, 1, im.ki_masked[1]));
    other = b;
    other.trip[5] ^= 1;  // another trip
    assert_false(device_opens(&other, w, 1, im.ki_masked[1]));
    assert_false(device_opens(&b, w, 2, im.ki_masked[1]));  // another chunk
    other = b;
    other.agreement[0] ^= 0x80;
    assert_false(device_opens(&other, w, 1, im.ki_masked[1]));
    other = b;
    other.device_id[31] ^= 1;
    assert_false(device_opens(&other, w, 1, im.ki_masked[1]));
    for (size_t bit = 0; bit < 8 * sizeof w; bit++) {
        uint8_t f[GT_KEYWRAP_BYTES];
        memcpy(f, w, sizeof w);
        f[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        if (device_opens(&b, f, 1, im.ki_masked[1])) {
            fail_msg("bit %zu of the wrapped key flipped: it opened", bit);
        }
    }
    binding_free(&b);
    gt_holder_enclave_stop(he);
}

// A host that lies: new terms (a forged agreement, counts reset) once the run's are fixed are
// refused and the counts stand; terms under a forged agreement hash get no key wrapped (the
// agreement bytes do not hash to it); a use claimed for a chunk never sent is refused.
static void test_lying_host(void **state)
{
    (void)state;
    gt_sgx_platform pf = test_platform();
    imported im;
    import_in_child(&pf, &im);
    gt_holder_enclave *he = start("holder", &pf);
    binding b;
    binding_make(&b);
    GT_ASSERT_OK(gt_holder_enclave_open_key(he, im.sealed, im.sealed_len));
    GT_ASSERT_CODE(gt_holder_enclave_used(he, 0), GT_E_POLICY);  // before any terms
    set_terms(he, b.agreement);
    uint8_t w[GT_KEYWRAP_BYTES];
    GT_ASSERT_OK(RELEASE(he, 0, b, w));
    GT_ASSERT_OK(RELEASE(he, 0, b, w));
    // new terms: a more generous forged agreement with the counts at zero
    gt_holder_enclave_terms forged = {.max_uses_per_chunk = 100, .token_budget = 1u << 30,
                                      .chunk_count = 4, .tokens = TOKENS};
    memcpy(forged.agreement_hash, b.agreement, 32);
    memcpy(forged.dataset_id, DATASET_ID, sizeof DATASET_ID);
    GT_ASSERT_CODE(gt_holder_enclave_set_terms(he, &forged), GT_E_STATE);
    GT_ASSERT_CODE(RELEASE(he, 0, b, w),
                   GT_E_RETRY);  // the resend limit stands
    GT_ASSERT_CODE(gt_holder_enclave_used(he, 2), GT_E_POLICY);  // never sent
    gt_holder_enclave_stop(he);
    // a fresh run given a forged agreement: its keys are bound to the forged hash
    he = start("holder", &pf);
    GT_ASSERT_OK(gt_holder_enclave_open_key(he, im.sealed, im.sealed_len));
    forged.agreement_hash[0] ^= 1;
    GT_ASSERT_OK(gt_holder_enclave_set_terms(he, &forged));
    // the enclave's wrap leaf sees that the agreement given does not hash to the terms' hash
    GT_ASSERT_ERR(RELEASE(he, 0, b, w), GT_E_POLICY, "appraisal refused the device");
    binding_free(&b);
    gt_holder_enclave_stop(he);
}

// Device appraisal inside the enclave's trust boundary (the wrap leaf): a host that lies about
// the device gets nothing wrapped. Each attack alone; the honest release beside them works.
static void test_device_appraised_in_enclave(void **state)
{
    (void)state;
    gt_sgx_platform pf = test_platform();
    imported im;
    import_in_child(&pf, &im);
    binding b;
    binding_make(&b);
    gt_holder_enclave *he = start("holder", &pf);
    GT_ASSERT_OK(gt_holder_enclave_open_key(he, im.sealed, im.sealed_len));
    set_terms(he, b.agreement);
    uint8_t w[GT_KEYWRAP_BYTES];
    // 1. the host names an X25519 key of its own (the hellos are devd's)
    binding lie = b;
    uint8_t host_sec[GT_X25519_BYTES];
    GT_ASSERT_OK(gt_x25519_keypair(lie.dev_pub, host_sec));
    GT_ASSERT_ERR(RELEASE(he, 0, lie, w), GT_E_POLICY, "appraisal refused the device");
    // 2. a server hello with the host's key whose evidence binds devd's key (not the host's)
    lie = b;
    memset(&lie.ch, 0, sizeof lie.ch);
    memset(&lie.sh, 0, sizeof lie.sh);
    GT_ASSERT_OK(gt_x25519_keypair(lie.dev_pub, host_sec));
    hellos_make(&lie, "devd-identity", NULL, b.dev_pub);
    GT_ASSERT_ERR(RELEASE(he, 0, lie, w), GT_E_POLICY, "appraisal refused the device");
    binding_free(&lie);
    // 3. the device id in the AAD is not the hello's (another session's binding)
    lie = b;
    lie.device_id[0] ^= 1;
    GT_ASSERT_ERR(RELEASE(he, 0, lie, w), GT_E_POLICY, "appraisal refused the device");
    // 4. another agreement's bytes (a host-forged document): not the terms' hash
    lie = b;
    char forged[2048];
    size_t n = agreement_doc(forged, sizeof forged, "forged", NULL);
    lie.ap.agreement = (gt_span){(const uint8_t *)forged, n};
    GT_ASSERT_ERR(RELEASE(he, 0, lie, w), GT_E_POLICY, "appraisal refused the device");
    // 4b. ... with a real devd session under that forged agreement (its hellos name it)
    binding forged_session;
    binding_make_for(&forged_session, NULL);  // "enclave-test" again: same doc, so re-make
    n = agreement_doc(forged_session.doc, sizeof forged_session.doc, "forged", NULL);
    forged_session.ap.agreement = (gt_span){(const uint8_t *)forged_session.doc, n};
    GT_ASSERT_OK(gt_hash(GT_HASH_SHA256, forged_session.agreement, forged_session.doc, n));
    hellos_make(&forged_session, "devd-identity", NULL, forged_session.dev_pub);
    GT_ASSERT_ERR(RELEASE(he, 0, forged_session, w), GT_E_POLICY, "appraisal refused the device");
    // 4c. the real agreement's bytes, but devd's session is under the forged one
    memcpy(forged_session.doc, b.doc, sizeof b.doc);
    forged_session.ap.agreement = b.ap.agreement;
    GT_ASSERT_ERR(RELEASE(he, 0, forged_session, w), GT_E_POLICY, "appraisal refused the device");
    binding_free(&forged_session);
    // the honest release of the same chunk still goes (nothing above counted a use)
    GT_ASSERT_OK(RELEASE(he, 0, b, w));
    assert_true(device_opens(&b, w, 0, im.ki_masked[0]));
    gt_holder_enclave_stop(he);

    // 5. a device whose measurement the agreement does not accept
    binding strict;
    binding_make_for(&strict, "0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20"
                              "2122232425262728292a2b2c2d2e2f30");
    he = start("holder", &pf);
    GT_ASSERT_OK(gt_holder_enclave_open_key(he, im.sealed, im.sealed_len));
    set_terms(he, strict.agreement);
    GT_ASSERT_ERR(RELEASE(he, 0, strict, w), GT_E_POLICY, "appraisal refused the device");
    gt_holder_enclave_stop(he);
    binding_free(&strict);

    // ... and one whose measurement it does accept (this executable's: the sim device's)
    cJSON *claims = NULL;
    gt_sim_device_bundle bundle;
    gt_sim_server_hello sh;
    GT_ASSERT_OK(gt_sim_server_hello_parse(gt_buf_span(&b.sh), &sh));
    GT_ASSERT_OK(gt_sim_device_bundle_parse(sh.evidence, &bundle));
    uint8_t rd[GT_REPORT_DATA_BYTES];
    gt_sim_client_hello ch;
    GT_ASSERT_OK(gt_sim_client_hello_parse(gt_buf_span(&b.ch), &ch));
    GT_ASSERT_OK(gt_sim_device_report_data(rd, ch.nonce, &sh, gt_buf_span(&b.ch)));
    GT_ASSERT_OK(gt_sim_device_evidence_appraise(sh.evidence, rd, NULL, NULL, &claims));
    char m[2 * GT_MEASUREMENT_BYTES + 1];
    snprintf(m, sizeof m, "%s",
             cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(claims, "measurement")));
    cJSON_Delete(claims);
    binding ok;
    binding_make_for(&ok, m);
    he = start("holder", &pf);
    GT_ASSERT_OK(gt_holder_enclave_open_key(he, im.sealed, im.sealed_len));
    set_terms(he, ok.agreement);
    GT_ASSERT_OK(RELEASE(he, 1, ok, w));
    assert_true(device_opens(&ok, w, 1, im.ki_masked[1]));
    gt_holder_enclave_stop(he);
    binding_free(&ok);

    // 6. evidence from a device identity the vendor root never certified
    binding rogue = b;
    memset(&rogue.ch, 0, sizeof rogue.ch);
    memset(&rogue.sh, 0, sizeof rogue.sh);
    char other_root[300];
    snprintf(other_root, sizeof other_root, "%s/other-vendor", g_dir);
    hellos_make(&rogue, "rogue-identity", other_root, b.dev_pub);
    he = start("holder", &pf);
    GT_ASSERT_OK(gt_holder_enclave_open_key(he, im.sealed, im.sealed_len));
    set_terms(he, b.agreement);
    GT_ASSERT_ERR(RELEASE(he, 2, rogue, w), GT_E_POLICY, "appraisal refused the device");
    gt_holder_enclave_stop(he);
    binding_free(&rogue);
    binding_free(&b);
}

// After a key import (in a child), an open and releases, this process (the holder's host side)
// holds neither the dataset key nor any K_i in any readable mapping. Control: the scanner finds
// a masked needle placed in memory in the clear.
static void test_host_memory_holds_no_key(void **state)
{
    (void)state;
    gt_sgx_platform pf = test_platform();
    imported im;
    import_in_child(&pf, &im);
    gt_holder_enclave *he = start("holder", &pf);
    binding b;
    binding_make(&b);
    GT_ASSERT_OK(gt_holder_enclave_open_key(he, im.sealed, im.sealed_len));
    set_terms(he, b.agreement);
    uint8_t w[GT_KEYWRAP_BYTES];
    for (uint32_t c = 0; c < 3; c++) {
        GT_ASSERT_OK(RELEASE(he, c, b, w));
    }
    assert_false(memory_holds(im.key_masked, sizeof im.key_masked));
    for (uint32_t c = 0; c < 4; c++) {
        assert_false(memory_holds(im.ki_masked[c], sizeof im.ki_masked[c]));
    }
    static uint8_t control[32];
    uint8_t control_masked[32];
    GT_ASSERT_OK(gt_random_bytes(control, sizeof control));
    for (int i = 0; i < 32; i++) {
        control_masked[i] = control[i] ^ MASK;
    }
    assert_true(memory_holds(control_masked, sizeof control_masked));
    binding_free(&b);
    gt_holder_enclave_stop(he);
}

int main(void)
{
    // The devices' vendor root (the sim root): the enclave process inherits GT_SIM_ROOT.
    snprintf(g_dir, sizeof g_dir, "/tmp/gt-holder-enclave-XXXXXX");
    if (mkdtemp(g_dir) == NULL || setenv("GT_SIM_ROOT", g_dir, 1) != 0 ||
        !gt_is_ok(gt_sim_root_set(g_dir))) {
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sealed_key_mrsigner),
        cmocka_unit_test(test_release_decision),
        cmocka_unit_test(test_wrapped_key_bound),
        cmocka_unit_test(test_lying_host),
        cmocka_unit_test(test_device_appraised_in_enclave),
        cmocka_unit_test(test_host_memory_holds_no_key),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
