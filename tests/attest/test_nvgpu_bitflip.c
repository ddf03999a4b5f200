// attest/: exhaustive single-bit flips of the nvtrust Hopper sample, one shard of six per run
// (argv[1], default 0). The 32,936 bits cost one ECDSA P-384 verification each (~0.85 ms: ~28 s
// in all), so tests/CMakeLists.txt registers six runs (attest/nvgpu_bitflip_0 .. _5) that
// ctest -j runs side by side. Every flip must be rejected.
#include "nvgpu_fixture.h"

#include <stdlib.h>

#define SHARDS 6

static unsigned shard;

static void bit_flips_rejected(void **state)
{
    (void)state;
    nv_sample s;
    nv_sample_load(0, &s);
    size_t bits = s.evidence.len * 8;  // signed region + signature (no trailing bytes)
    nv_flip_bits(&s, bits * shard / SHARDS, bits * (shard + 1) / SHARDS);
    nv_sample_free(&s);
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        char *end = NULL;
        unsigned long v = strtoul(argv[1], &end, 10);
        if (*end != '\0' || v >= SHARDS) {
            fprintf(stderr, "usage: test_nvgpu_bitflip [SHARD 0..%d]\n", SHARDS - 1);
            return 64;
        }
        shard = (unsigned)v;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bit_flips_rejected),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
