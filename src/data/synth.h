/* synth.h — the synthetic data set's formula: every value a pure function
 * of (seed, split, sample index, element index), computed with integer
 * operations and one correctly rounded float multiply, so that the host
 * (synthetic.c, the CPU backend) and the CUDA kernel (cuda_synth.cu) give
 * the same bits. Included by C and by CUDA (nvcc) code; no state.
 *
 *   key(i)   = mix(seed ^ mix((split << 56) ^ i))       sample i of a split
 *   label(i) = key(i) mod classes
 *   t        = mix(seed ^ mix(0x7E3B1A7E + label))      the class template's key
 *   u(k, j)  = mix(k + j * G)                            = the (j+1)-th output of
 *              splitmix64 started at state k (mix: splitmix64's step and
 *              finalizer, G = 0x9E3779B97F4A7C15)
 *   c(h)     = h0 + h1 + h2 + h3 - 131070                the four 16-bit parts of h:
 *              Irwin-Hall, mean 0, variance 4 (65536^2 - 1) / 12
 *   x[j]     = (float)(2 c(u(key, j)) + c(u(t, j))) * VD_SYNTH_SCALE
 *
 * so x[j] = (noise + 0.5 template[label][j]) / sqrt(1.25) with noise and
 * template of variance 1 (sums of four uniforms, within +-3.47): the pixels
 * are ~N(0,1) and the class is learnable from the template. The integer
 * 2 c + c is at most 393210 in magnitude, exactly a float; the product is
 * rounded once (no fused multiply-add can apply). bf16 batches are these
 * floats rounded to nearest even (vd_synth_bf16, vd_f32_to_bf16's formula),
 * fp16 batches the same to binary16 (vd_f32_to_f16, __float2half_rn). */
#ifndef VD_SYNTH_H
#define VD_SYNTH_H

#include <stdint.h>
#include <stdbool.h>

#ifdef __CUDACC__
#define VD_SYNTH_FN static inline __host__ __device__
#else
#define VD_SYNTH_FN static inline
#endif

/* 1 / sqrt(5 * (65536^2 - 1) / 3): 2 c + c has variance 5 (65536^2 - 1) / 3 */
#define VD_SYNTH_SCALE 1.1819407185846838e-5f
#define VD_SYNTH_GAMMA 0x9E3779B97F4A7C15ull

/* One batch of synthetic samples, as the loader describes it for a backend's
 * fill_synthetic (backend.h): sample s (s < n) is sample index[s] of split
 * (0 train, 1 test) of the data set opened with seed; it has sample_numel
 * elements (C x H x W; element j counts in NCHW order) and its label is in
 * [0, classes). A 16-bit (bf16 or fp16) batch is stored channels-last
 * (math bf16's and fp16's layout, as vd_loader_next_as writes it): element
 * j = c*HW + p of a sample at p*C + c (vd_synth_bf16_pos); a float batch
 * NCHW, or channels-last where nhwc says so (math tf32's layout; the
 * executor sets it, vd_loader_next_synth leaves it false). */
typedef struct vd_synth_batch {
    uint64_t seed;
    int split;
    int classes;
    int64_t sample_numel;
    int channels;               /* C (sample_numel / channels = H x W) */
    bool nhwc;                  /* float batches channels-last too */
    int n;
    int64_t *index;             /* [n] */
} vd_synth_batch;

VD_SYNTH_FN uint64_t vd_synth_mix(uint64_t x) {
    x += VD_SYNTH_GAMMA;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

VD_SYNTH_FN uint64_t vd_synth_key(uint64_t seed, int split, int64_t index) {
    return vd_synth_mix(seed ^ vd_synth_mix(((uint64_t)split << 56) ^ (uint64_t)index));
}

/* Where a channels-last sample (16-bit, or float with nhwc) stores its element j
 * (NCHW count). */
VD_SYNTH_FN int64_t vd_synth_bf16_pos(int64_t j, int64_t numel, int channels) {
    if (channels <= 1) return j;
    int64_t hw = numel / channels, c = j / hw;
    return (j - c * hw) * channels + c;
}

VD_SYNTH_FN int32_t vd_synth_label(uint64_t key, int classes) {
    return (int32_t)(key % (uint64_t)classes);
}

VD_SYNTH_FN uint64_t vd_synth_template_key(uint64_t seed, int32_t label) {
    return vd_synth_mix(seed ^ vd_synth_mix(0x7E3B1A7Eull + (uint64_t)label));
}

/* Irwin-Hall of the four 16-bit parts of h, centred: -131070..131070. */
VD_SYNTH_FN int32_t vd_synth_ih(uint64_t h) {
    return (int32_t)((h & 0xFFFF) + ((h >> 16) & 0xFFFF) + ((h >> 32) & 0xFFFF) + (h >> 48)) -
           131070;
}

/* Element j of the sample with key `key` whose class template has key tkey. */
VD_SYNTH_FN float vd_synth_value(uint64_t key, uint64_t tkey, int64_t j) {
    uint64_t g = (uint64_t)j * VD_SYNTH_GAMMA;
    int32_t v = 2 * vd_synth_ih(vd_synth_mix(key + g)) + vd_synth_ih(vd_synth_mix(tkey + g));
#ifdef __CUDA_ARCH__
    return __fmul_rn(__int2float_rn(v), VD_SYNTH_SCALE);
#else
    return (float)v * VD_SYNTH_SCALE;
#endif
}

/* f rounded to the nearest bf16, ties to even (f is finite: no NaN case). */
VD_SYNTH_FN uint16_t vd_synth_bf16(float f) {
#ifdef __CUDA_ARCH__
    uint32_t u = __float_as_uint(f);
#else
    union { float f; uint32_t u; } b = { f };
    uint32_t u = b.u;
#endif
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

#endif
