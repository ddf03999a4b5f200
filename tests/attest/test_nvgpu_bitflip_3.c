// attest/: exhaustive single-bit flips of the nvtrust Hopper sample, shard 3 of 6. The 32,936
// bits cost one ECDSA P-384 verification each (~0.85 ms: ~28 s in all), so six shards keep each
// test near 5 s and let ctest -j run them side by side. Every flip must be rejected.
#include "nvgpu_fixture.h"

#define SHARD 3
#define SHARDS 6

static void bit_flips_rejected(void **state)
{
    (void)state;
    nv_sample s;
    nv_sample_load(0, &s);
    size_t bits = s.evidence.len * 8;  // signed region + signature (no trailing bytes)
    nv_flip_bits(&s, bits * SHARD / SHARDS, bits * (SHARD + 1) / SHARDS);
    nv_sample_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bit_flips_rejected),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
