/* cuda_synth.cu — fill_synthetic and synth_set: the synthetic data set's
 * batches made on the device (data/synth.h), so that no host byte moves for
 * them but their sample indices.
 *
 * The indices go through a synthetic slot (backend.h), as the step scalars
 * go through step_set: the slot's pinned host-side copy, an async copy of it
 * into the slot's device copy on the fill's stream, and the kernel reads
 * that. So a captured fill bakes only the slot's two addresses, and a
 * launch generates the samples synth_set last wrote. A slot's host copy is
 * rewritten only after what read it ran: its eager fills (an event per
 * stream, recorded after the kernel, so the device copy is no longer read
 * either) and the last graph launched (graph_ev).
 *
 * A launch is a grid of (blocks per sample) x (samples, at most 65535; a
 * block row loops over the samples gridDim.y apart): each thread derives
 * its sample's key and template key once and then writes elements j, j +
 * stride, ... of that sample. The formula's integer steps and its one
 * __fmul_rn give the CPU backend's bits; bf16 and fp16 round them to
 * nearest even (vd_synth_bf16; __float2half_rn, the CPU's RNE float -> half)
 * into the channels-last position, where float ones go with b->nhwc (math
 * tf32). */
#include "backend/cuda/cuda_internal.h"

static const int CU_SYNTH_THREADS = 256, CU_SYNTH_MAX_BLOCKS = 64, CU_SYNTH_MAX_ROWS = 65535;

struct cu_synth_args {
    uint64_t seed;
    int64_t numel;              /* elements per sample */
    int split, classes, channels;
    int n;                      /* samples */
    bool nhwc;                  /* float: channels-last positions */
};

template <vd_dtype DT>
__global__ void synth_kernel(cu_synth_args a, const int64_t *__restrict__ index, void *x) {
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int s = blockIdx.y; s < a.n; s += gridDim.y) {
        uint64_t key = vd_synth_key(a.seed, a.split, index[s]);
        uint64_t tkey = vd_synth_template_key(a.seed, vd_synth_label(key, a.classes));
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
}

/* ---- slots ------------------------------------------------------------------------ */

int cu_synth_create(cu_ctx *c, vd_err *e) {
    for (int k = 0; k < VD_SYNTH_SLOTS; k++)
        for (int s = 0; s < VD_N_STREAMS; s++)
            CUDA_CHECK(e, cudaEventCreateWithFlags(&c->synth[k].ev[s], cudaEventDisableTiming));
    return VD_OK;
}

void cu_synth_free(cu_ctx *c) {
    for (int k = 0; k < VD_SYNTH_SLOTS; k++) {
        cu_synth_slot *S = &c->synth[k];
        if (S->dev) cudaFree(S->dev);
        vd_mem_untrack(S->host);
        if (S->host) cudaFreeHost(S->host);
        for (int s = 0; s < VD_N_STREAMS; s++)
            if (S->ev[s]) cudaEventDestroy(S->ev[s]);
    }
}

/* The host waits until slot S's eager fills have run. */
static int slot_idle(const cu_synth_slot *S, vd_err *e) {
    for (int s = 0; s < VD_N_STREAMS; s++) CUDA_CHECK(e, cudaEventSynchronize(S->ev[s]));
    return VD_OK;
}

int cu_synth_idle(cu_ctx *c, vd_err *e) {
    int rc = VD_OK;
    for (int k = 0; k < VD_SYNTH_SLOTS && !rc; k++) rc = slot_idle(&c->synth[k], e);
    return rc;
}

/* b's indices into the slot's host-side copy (backend.h's fill_synthetic and
 * synth_set): after what read it ran, unless it holds them already; inside
 * a capture capture_begin waited. */
static int slot_write(cu_ctx *c, int slot, const vd_synth_batch *b, vd_err *e) {
    cu_synth_slot *S = &c->synth[slot];
    size_t bytes = (size_t)b->n * sizeof *b->index;
    if (S->n == b->n && (b->n == 0 || memcmp(S->host, b->index, bytes) == 0)) return VD_OK;
    if (c->capturing && S->capture_no == c->capture_no)
        return vd_errf(e, VD_EINTERNAL, "cuda backend: two batches into synthetic slot %d in one "
                       "capture", slot);
    int rc;
    if (!c->capturing) {
        if ((rc = slot_idle(S, e))) return rc;
        if (c->graph_launched) CUDA_CHECK(e, cudaEventSynchronize(c->graph_ev));
    }
    if (b->n > S->cap) {
        if (c->capturing || c->n_graphs > 0)
            return vd_errf(e, VD_EINTERNAL, "cuda backend: synthetic slot %d grows to %d samples "
                           "while a graph lives (it holds the slot's address)", slot, b->n);
        if (S->dev) CUDA_CHECK(e, cudaFree(S->dev));
        vd_mem_untrack(S->host);
        if (S->host) CUDA_CHECK(e, cudaFreeHost(S->host));
        S->dev = S->host = NULL;
        S->n = S->cap = 0;
        CUDA_CHECK(e, cudaMalloc((void **)&S->dev, bytes));
        CUDA_CHECK(e, cudaMallocHost((void **)&S->host, bytes));
        vd_mem_track(S->host, bytes);   /* host memory accounting (util.h) */
        S->cap = b->n;
    }
    if (b->n) memcpy(S->host, b->index, bytes);
    S->n = b->n;
    return VD_OK;
}

static int check_synth(int slot, const vd_synth_batch *b, vd_err *e) {
    if (slot < 0 || slot >= VD_SYNTH_SLOTS || b->n < 0 || b->sample_numel < 0 ||
        b->classes < 1 || (b->n && !b->index))
        return vd_errf(e, VD_EINTERNAL, "cuda backend: bad synthetic batch (slot %d)", slot);
    return VD_OK;
}

int cu_synth_set(vd_backend *be, int slot, const vd_synth_batch *b, vd_err *e) {
    cu_ctx *c = (cu_ctx *)be->ctx;
    int rc = check_synth(slot, b, e);
    if (rc) return rc;
    if (c->capturing) return vd_errf(e, VD_EINTERNAL, "cuda backend: synth_set inside a capture");
    return slot_write(c, slot, b, e);
}

/* ---- fill_synthetic ------------------------------------------------------------------ */

int cu_fill_synthetic(vd_backend *be, int stream, int slot, void *x, vd_dtype dt,
                      const vd_synth_batch *b, vd_err *e) {
    cu_ctx *c = (cu_ctx *)be->ctx;
    if (stream < 0 || stream >= VD_N_STREAMS)
        return vd_errf(e, VD_EINTERNAL, "cuda backend: stream %d does not exist", stream);
    int rc = check_synth(slot, b, e);
    if (rc) return rc;
    if (b->n == 0 || b->sample_numel == 0) return VD_OK;
    if ((rc = slot_write(c, slot, b, e))) return rc;
    cu_synth_slot *S = &c->synth[slot];
    if (c->capturing) S->capture_no = c->capture_no;
    cudaStream_t st = c->stream[stream];
    CUDA_CHECK(e, cudaMemcpyAsync(S->dev, S->host, (size_t)b->n * sizeof *S->host,
                                  cudaMemcpyHostToDevice, st));
    int64_t per = (b->sample_numel + CU_SYNTH_THREADS - 1) / CU_SYNTH_THREADS;
    unsigned gx = (unsigned)(per < CU_SYNTH_MAX_BLOCKS ? per : (int64_t)CU_SYNTH_MAX_BLOCKS);
    cu_synth_args a;
    a.seed = b->seed;
    a.numel = b->sample_numel;
    a.split = b->split;
    a.classes = b->classes;
    a.channels = b->channels;
    a.n = b->n;
    a.nhwc = b->nhwc;
    dim3 grid(gx, (unsigned)(b->n < CU_SYNTH_MAX_ROWS ? b->n : CU_SYNTH_MAX_ROWS));
    if (dt == VD_DT_BF16) synth_kernel<VD_DT_BF16><<<grid, CU_SYNTH_THREADS, 0, st>>>(a, S->dev, x);
    else if (dt == VD_DT_F16) synth_kernel<VD_DT_F16><<<grid, CU_SYNTH_THREADS, 0, st>>>(a, S->dev, x);
    else synth_kernel<VD_DT_F32><<<grid, CU_SYNTH_THREADS, 0, st>>>(a, S->dev, x);
    KERNEL_CHECK(e);
    if (!c->capturing) CUDA_CHECK(e, cudaEventRecord(S->ev[stream], st));
    if (c->sync_debug) {            /* --sync-debug: a fault shows here, not later */
        cudaError_t se = cudaStreamSynchronize(st);
        if (se != cudaSuccess)
            return vd_errf(e, VD_EDEVICE, "synthetic batch failed on the device: %s (%s)",
                           cudaGetErrorName(se), cudaGetErrorString(se));
    }
    return VD_OK;
}
