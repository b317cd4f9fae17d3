/* cuda_synth.cu — fill_synthetic: the synthetic data set's batches made on
 * the device (data/synth.h), so that no host byte moves for them.
 *
 * The sample indices travel in the kernel's parameters (up to
 * CU_SYNTH_CHUNK samples per launch, one launch per chunk; 2 KiB of 4 KiB),
 * so nothing is allocated on the device. A launch is a grid of (blocks per
 * sample) x (samples): each thread derives its sample's key and template
 * key once and then writes elements j, j + stride, ... of that sample. The
 * formula's integer steps and its one __fmul_rn give the CPU backend's bits;
 * bf16 and fp16 round them to nearest even (vd_synth_bf16; __float2half_rn,
 * the CPU's RNE float -> half) into the channels-last position, where float
 * ones go with b->nhwc (math tf32). */
#include "backend/cuda/cuda_internal.h"

static const int CU_SYNTH_CHUNK = 256, CU_SYNTH_THREADS = 256, CU_SYNTH_MAX_BLOCKS = 64;

struct cu_synth_args {
    uint64_t seed;
    int64_t numel;              /* elements per sample */
    int split, classes, channels;
    bool nhwc;                  /* float: channels-last positions */
    int64_t index[CU_SYNTH_CHUNK];
};
static_assert(sizeof(cu_synth_args) <= 4000, "kernel parameters are limited to 4 KiB");

/* __grid_constant__: the parameter block is read in place (index[] is
 * indexed by blockIdx.y), not copied per thread. */
template <vd_dtype DT>
__global__ void synth_kernel(const __grid_constant__ cu_synth_args a, void *x) {
    int s = blockIdx.y;
    uint64_t key = vd_synth_key(a.seed, a.split, a.index[s]);
    uint64_t tkey = vd_synth_template_key(a.seed, vd_synth_label(key, a.classes));
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < a.numel; j += stride) {
        float v = vd_synth_value(key, tkey, j);
        int64_t o = (int64_t)s * a.numel + j;
        if (DT == VD_DT_F32) {
            ((float *)x)[a.nhwc ? (int64_t)s * a.numel + vd_synth_bf16_pos(j, a.numel, a.channels)
                                : o] = v;
        } else {
            uint16_t h = DT == VD_DT_BF16 ? vd_synth_bf16(v) : __half_as_ushort(__float2half_rn(v));
            ((uint16_t *)x)[(int64_t)s * a.numel + vd_synth_bf16_pos(j, a.numel, a.channels)] = h;
        }
    }
}

int cu_fill_synthetic(vd_backend *be, int stream, void *x, vd_dtype dt, const vd_synth_batch *b,
                      vd_err *e) {
    cu_ctx *c = (cu_ctx *)be->ctx;
    if (stream < 0 || stream >= VD_N_STREAMS)
        return vd_errf(e, VD_EINTERNAL, "cuda backend: stream %d does not exist", stream);
    if (b->n < 0 || b->sample_numel < 0 || b->classes < 1 || (b->n && !b->index))
        return vd_errf(e, VD_EINTERNAL, "cuda backend: bad synthetic batch");
    if (b->n == 0 || b->sample_numel == 0) return VD_OK;
    int64_t per = (b->sample_numel + CU_SYNTH_THREADS - 1) / CU_SYNTH_THREADS;
    unsigned gx = (unsigned)(per < CU_SYNTH_MAX_BLOCKS ? per : (int64_t)CU_SYNTH_MAX_BLOCKS);
    size_t esz = (size_t)vd_dtype_bytes(dt);
    cu_synth_args a;
    a.seed = b->seed;
    a.numel = b->sample_numel;
    a.split = b->split;
    a.classes = b->classes;
    a.channels = b->channels;
    a.nhwc = b->nhwc;
    for (int s0 = 0; s0 < b->n; s0 += CU_SYNTH_CHUNK) {
        int ns = b->n - s0 < CU_SYNTH_CHUNK ? b->n - s0 : CU_SYNTH_CHUNK;
        for (int i = 0; i < ns; i++) a.index[i] = b->index[s0 + i];
        void *dst = (char *)x + (size_t)s0 * (size_t)b->sample_numel * esz;
        dim3 grid(gx, (unsigned)ns);
        cudaStream_t st = c->stream[stream];
        if (dt == VD_DT_BF16) synth_kernel<VD_DT_BF16><<<grid, CU_SYNTH_THREADS, 0, st>>>(a, dst);
        else if (dt == VD_DT_F16) synth_kernel<VD_DT_F16><<<grid, CU_SYNTH_THREADS, 0, st>>>(a, dst);
        else synth_kernel<VD_DT_F32><<<grid, CU_SYNTH_THREADS, 0, st>>>(a, dst);
        KERNEL_CHECK(e);
    }
    if (c->sync_debug) {            /* --sync-debug: a fault shows here, not later */
        cudaError_t st = cudaStreamSynchronize(c->stream[stream]);
        if (st != cudaSuccess)
            return vd_errf(e, VD_EDEVICE, "synthetic batch failed on the device: %s (%s)",
                           cudaGetErrorName(st), cudaGetErrorString(st));
    }
    return VD_OK;
}
