// Private to src/kernels/ (here so the CUDA kernels can include it; plain C, built in every
// build): rounding a float to fewer mantissa bits, shared by the cpu kernels
// (through gt_round_mantissa) and the CUDA release kernels, so both round a released value alike.
#ifndef GT_KERNELS_MANTISSA_H
#define GT_KERNELS_MANTISSA_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define GT_HOST_DEVICE __host__ __device__
#else
#define GT_HOST_DEVICE
#endif

// To nearest, ties to the even kept bit; bits outside 1..22 and NaN/infinity leave f as it is.
// A carry out of the mantissa lands in the exponent, which is the correct rounding.
static inline GT_HOST_DEVICE float gt_mantissa_round(float f, int bits)
{
    uint32_t u = 0;
    memcpy(&u, &f, 4);
    if (bits >= 23 || bits < 1 || (u & 0x7f800000u) == 0x7f800000u) {
        return f;
    }
    uint32_t drop = 23u - (uint32_t)bits, half = 1u << (drop - 1), mask = (1u << drop) - 1;
    uint32_t rest = u & mask;
    u &= ~mask;
    if (rest > half || (rest == half && (u & (1u << drop)))) {
        u += 1u << drop;
    }
    memcpy(&f, &u, 4);
    return f;
}

#endif
