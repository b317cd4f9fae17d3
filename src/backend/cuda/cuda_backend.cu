/* cuda_backend.cu — the CUDA backend: lifecycle, memory, streams, events,
 * copies, layer setup and op dispatch (see backend.h for the contract).
 *
 * Device memory: pool_create is the one cudaMalloc of the run; everything
 * the ops touch lives in it. Outside it live only what CUDA, cuDNN and
 * cuBLAS allocate for themselves at setup (context, handles) and, in math
 * fp16, the 32 bytes of the loss-scaling state (cu_ctx.scale_st, made at its
 * first use, freed at destroy, like the handles): cuBLAS gets no
 * workspace (cublasSetWorkspace(NULL, 0)) so it never allocates later, and
 * cuDNN calls get their workspace from the pool (io->ws).
 *
 * No call here synchronizes the device except synchronize() and, when
 * --sync-debug, the per-op stream synchronize for debugging.
 *
 * Step scalars and update tables (backend.h's step_set, ranges_create) also
 * live outside the pool: 40 bytes made at creation, 24 bytes a range; so do
 * the synthetic slots' device copies of the sample indices (fill_synthetic,
 * cuda_synth.cu): 8 bytes a sample of the largest batch a slot was given,
 * made at its first use (pinned host copies alike).
 *
 * Captures: stream capture on the compute stream (thread-local mode: this
 * thread may call nothing unsafe meanwhile), the copy streams forked from
 * it by an event at the start and joined to it at the end. An event
 * recorded inside a capture is no event outside it: a wait inside the
 * capture on an event recorded before it (or in another capture) is
 * dropped (graph_launch orders the graph after all earlier work on every
 * stream), and an eager wait or sync on an event last recorded inside a
 * capture waits for the last graph launched instead (graph_ev). */
#include <stdlib.h>
#include <string.h>
#include "vd_config.h"
#include "backend/cuda/cuda_internal.h"

static cu_ctx *ctx_of(vd_backend *be) { return (cu_ctx *)be->ctx; }

int cu_cuda_err(vd_err *e, cudaError_t st, const char *func, const char *file, int line,
                const char *expr) {
    return vd_errf(e, VD_EDEVICE, "CUDA error %s (%s) in %s at %s:%d: %s", cudaGetErrorName(st),
                   cudaGetErrorString(st), func, file, line, expr);
}

/* ---- memory ---------------------------------------------------------------- */
static int cu_pool_create(vd_backend *be, uint64_t bytes, void **base, vd_err *e) {
    cu_ctx *c = ctx_of(be);
    *base = NULL;
    if (bytes == 0) return vd_errf(e, VD_EINTERNAL, "pool of 0 bytes");
    cudaError_t st = cudaMalloc(base, (size_t)bytes);
    if (st != cudaSuccess) {
        size_t fr = 0, tot = 0;
        cudaGetLastError();   /* clear the (non-sticky) allocation error */
        cudaMemGetInfo(&fr, &tot);
        char b1[32], b2[32], b3[32];
        *base = NULL;
        return vd_errf(e, VD_EDEVICE,
                       "cannot allocate the device pool of %s on GPU %d (%s): %s; the driver "
                       "reports %s free of %s",
                       vd_fmt_bytes(bytes, b1, sizeof b1), c->device, c->dev_name,
                       cudaGetErrorString(st), vd_fmt_bytes(fr, b2, sizeof b2),
                       vd_fmt_bytes(tot, b3, sizeof b3));
    }
    return VD_OK;
}

static void cu_pool_destroy(vd_backend *be, void *base) {
    (void)be;
    if (base) cudaFree(base);
}

static int cu_host_alloc(vd_backend *be, uint64_t bytes, void **p, vd_err *e) {
    (void)be;
    *p = NULL;
    if (bytes == 0) bytes = 1;
    cudaError_t st = cudaMallocHost(p, (size_t)bytes);
    if (st != cudaSuccess) {
        char b[32];
        cudaGetLastError();
        *p = NULL;
        return vd_errf(e, VD_ENOMEM, "cannot allocate %s of pinned host memory: %s",
                       vd_fmt_bytes(bytes, b, sizeof b), cudaGetErrorString(st));
    }
    vd_mem_track(*p, bytes);   /* host memory accounting (util.h) */
    return VD_OK;
}

static void cu_host_free(vd_backend *be, void *p) {
    (void)be;
    vd_mem_untrack(p);
    if (p) cudaFreeHost(p);
}

/* ---- streams and events ------------------------------------------------------ */
static int check_stream(int s, vd_err *e) {
    if (s < 0 || s >= VD_N_STREAMS) return vd_errf(e, VD_EINTERNAL, "bad stream %d", s);
    return VD_OK;
}

static int check_event(const cu_ctx *c, int ev, vd_err *e) {
    if (ev < 0 || ev >= c->n_events)
        return vd_errf(e, VD_EINTERNAL, "bad event %d (have %d)", ev, c->n_events);
    return VD_OK;
}

static void events_free(cu_ctx *c) {
    for (int i = 0; i < c->n_events; i++)
        if (c->events[i]) cudaEventDestroy(c->events[i]);
    vd_free(c->events);
    vd_free(c->ev_capture);
    c->events = NULL;
    c->ev_capture = NULL;
    c->n_events = 0;
}

static int cu_events_create(vd_backend *be, int n, vd_err *e) {
    cu_ctx *c = ctx_of(be);
    events_free(c);
    if (n < 0) return vd_errf(e, VD_EINTERNAL, "events_create(%d)", n);
    if (n == 0) return VD_OK;
    c->events = (cudaEvent_t *)vd_calloc((size_t)n, sizeof *c->events, e);
    c->ev_capture = (int *)vd_calloc((size_t)n, sizeof *c->ev_capture, e);
    if (!c->events || !c->ev_capture) {
        events_free(c);
        return VD_ENOMEM;
    }
    c->n_events = n;
    /* timing enabled on all: event_elapsed may be asked about any of them */
    for (int i = 0; i < n; i++) CUDA_CHECK(e, cudaEventCreateWithFlags(&c->events[i], cudaEventDefault));
    return VD_OK;
}

static int cu_event_record(vd_backend *be, int ev, int s, vd_err *e) {
    cu_ctx *c = ctx_of(be);
    int rc;
    if ((rc = check_event(c, ev, e)) || (rc = check_stream(s, e))) return rc;
    CUDA_CHECK(e, cudaEventRecord(c->events[ev], c->stream[s]));
    c->ev_capture[ev] = c->capturing ? c->capture_no : 0;
    return VD_OK;
}

/* backend.h's event_mark: inside a capture an external event record node,
 * which each launch of the graph records (and which cudaEventElapsedTime
 * then times), outside one a plain record. */
static int cu_event_mark(vd_backend *be, int ev, int s, vd_err *e) {
    cu_ctx *c = ctx_of(be);
    int rc;
    if ((rc = check_event(c, ev, e)) || (rc = check_stream(s, e))) return rc;
    if (c->capturing)
        CUDA_CHECK(e, cudaEventRecordWithFlags(c->events[ev], c->stream[s], cudaEventRecordExternal));
    else
        CUDA_CHECK(e, cudaEventRecord(c->events[ev], c->stream[s]));
    c->ev_capture[ev] = c->capturing ? EV_MARKED : 0;
    return VD_OK;
}

/* The event an eager wait on plan event ev waits for: ev itself (also a
 * mark: its launches record it), or, last recorded inside a capture, the
 * end of the last graph launched (NULL: none launched yet, nothing to wait
 * for). */
static cudaEvent_t eager_event(const cu_ctx *c, int ev) {
    if (c->ev_capture[ev] == 0 || c->ev_capture[ev] == EV_MARKED) return c->events[ev];
    return c->graph_launched ? c->graph_ev : NULL;
}

static int cu_stream_wait(vd_backend *be, int s, int ev, vd_err *e) {
    cu_ctx *c = ctx_of(be);
    int rc;
    if ((rc = check_event(c, ev, e)) || (rc = check_stream(s, e))) return rc;
    if (c->capturing) {
        /* recorded before this capture: the graph runs after that work */
        if (c->ev_capture[ev] != c->capture_no) return VD_OK;
        CUDA_CHECK(e, cudaStreamWaitEvent(c->stream[s], c->events[ev], 0));
        return VD_OK;
    }
    cudaEvent_t x = eager_event(c, ev);
    if (x) CUDA_CHECK(e, cudaStreamWaitEvent(c->stream[s], x, 0));
    return VD_OK;
}

static int not_capturing(const cu_ctx *c, const char *what, vd_err *e) {
    if (!c->capturing) return VD_OK;
    return vd_errf(e, VD_EINTERNAL, "cuda backend: %s inside a capture (a host wait)", what);
}

static int cu_event_sync(vd_backend *be, int ev, vd_err *e) {
    cu_ctx *c = ctx_of(be);
    int rc;
    if ((rc = check_event(c, ev, e)) || (rc = not_capturing(c, "event_sync", e))) return rc;
    cudaEvent_t x = eager_event(c, ev);
    if (x) CUDA_CHECK(e, cudaEventSynchronize(x));
    return VD_OK;
}

static int cu_synchronize(vd_backend *be, vd_err *e) {
    int rc = not_capturing(ctx_of(be), "synchronize", e);
    if (rc) return rc;
    CUDA_CHECK(e, cudaDeviceSynchronize());
    return VD_OK;
}

static int cu_event_elapsed(vd_backend *be, int a, int b, float *ms, vd_err *e) {
    cu_ctx *c = ctx_of(be);
    int rc;
    if ((rc = check_event(c, a, e)) || (rc = check_event(c, b, e))) return rc;
    if (c->capturing || c->ev_capture[a] > 0 || c->ev_capture[b] > 0)
        return vd_errf(e, VD_EINTERNAL, "cuda backend: event_elapsed of an event recorded "
                       "inside a capture (a timed one is recorded with event_mark)");
    CUDA_CHECK(e, cudaEventElapsedTime(ms, c->events[a], c->events[b]));
    return VD_OK;
}

/* ---- copies -------------------------------------------------------------------- */
static int cu_copy_async(vd_backend *be, int s, void *dst, const void *src, uint64_t bytes,
                         vd_err *e) {
    cu_ctx *c = ctx_of(be);
    int rc;
    if ((rc = check_stream(s, e))) return rc;
    if (bytes == 0) return VD_OK;
    CUDA_CHECK(e, cudaMemcpyAsync(dst, src, (size_t)bytes, cudaMemcpyDefault, c->stream[s]));
    return VD_OK;
}

/* Fill bytes at dst with the byte value on stream s (poison: 0xFF, zero: 0). */
static int memset_async(vd_backend *be, int s, void *dst, int value, uint64_t bytes, vd_err *e) {
    cu_ctx *c = ctx_of(be);
    int rc;
    if ((rc = check_stream(s, e))) return rc;
    if (bytes == 0) return VD_OK;
    CUDA_CHECK(e, cudaMemsetAsync(dst, value, (size_t)bytes, c->stream[s]));
    return VD_OK;
}

static int cu_poison_async(vd_backend *be, int s, void *dst, uint64_t bytes, vd_err *e) {
    return memset_async(be, s, dst, 0xFF, bytes, e);
}

static int cu_zero_async(vd_backend *be, int s, void *dst, uint64_t bytes, vd_err *e) {
    return memset_async(be, s, dst, 0, bytes, e);
}

/* ---- layer setup ------------------------------------------------------------------ */
static void layers_free(cu_ctx *c) {
    for (int i = 0; i < c->n_layers; i++) cu_dnn_layer_free(&c->layers[i]);
    vd_free(c->layers);
    c->layers = NULL;
    c->n_layers = 0;
    c->net = NULL;
}

static void in_shape(const vd_net *net, int src, int *ch, int *h, int *w) {
    if (src < 0) { *ch = net->in_c; *h = net->in_h; *w = net->in_w; return; }
    *ch = net->layers[src].c; *h = net->layers[src].h; *w = net->layers[src].w;
}

static int cu_layer_setup(vd_backend *be, const vd_net *net, int batch, vd_math math,
                          bool deterministic, vd_err *e) {
    cu_ctx *c = ctx_of(be);
    if (batch <= 0) return vd_errf(e, VD_EINTERNAL, "layer_setup: batch %d", batch);
    /* bf16 tensor cores came with sm_80; below it cuDNN and cuBLAS have no
     * fast bf16 path (fp16 has one since sm_70) */
    if (math == VD_MATH_BF16 && c->cc_major < 8)
        return vd_errf(e, VD_EUNSUPPORTED,
                       "math bf16 needs compute capability 8.0 or newer (bf16 tensor cores); "
                       "GPU %d (%s) is sm_%d%d: use --math fp16", c->device, c->dev_name,
                       c->cc_major, c->cc_minor);
    for (int i = 0; i < net->n_layers; i++) {
        const vd_layer *l = &net->layers[i];
        if (!cu_op_supported(l->op, math))
            return vd_errf(e, VD_EUNSUPPORTED, "layer '%s': the cuda backend has no %s op%s", l->name,
                           vd_op_table[l->op].name, math != VD_MATH_FP32 ? " in this math mode" : "");
    }
    if (!c->dnn) {
        CUDNN_CHECK(e, cudnnCreate(&c->dnn));
        CUDNN_CHECK(e, cudnnSetStream(c->dnn, cu_compute(c)));
    }
    if (!c->blas) {
        CUBLAS_CHECK(e, cublasCreate(&c->blas));
        CUBLAS_CHECK(e, cublasSetStream(c->blas, cu_compute(c)));
        /* no workspace: cuBLAS must not allocate device memory outside the pool */
        CUBLAS_CHECK(e, cublasSetWorkspace(c->blas, NULL, 0));
        CUBLAS_CHECK(e, cublasSetPointerMode(c->blas, CUBLAS_POINTER_MODE_HOST));
    }
    /* fp32: no TF32 anywhere; tf32: tensor cores with TF32 inputs, fp32 accumulate */
    CUBLAS_CHECK(e, cublasSetMathMode(c->blas, math == VD_MATH_TF32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                                     : CUBLAS_DEFAULT_MATH));
    layers_free(c);
    c->batch = batch;
    c->math = math;
    c->deterministic = deterministic;
    {
        const vd_backend_opts *o = &be->opts;     /* vd_backend_cuda_create_opts */
        c->tune = !deterministic && o->conv_tune != VD_CONV_TUNE_OFF;
        c->retime = c->tune && o->conv_tune == VD_CONV_TUNE_RETIME;
        c->conv_legacy = o->conv_api == VD_CONV_API_LEGACY;
        c->conv_debug = o->conv_debug;
        c->conv_topk = o->conv_topk > 0 ? o->conv_topk : VD_CONV_TOPK_DEFAULT;
        if (c->conv_topk > VD_CONV_TOPK_MAX) c->conv_topk = VD_CONV_TOPK_MAX;
        c->conv_rtc = o->conv_rtc;
        c->conv_split = o->conv_split == VD_CONV_SPLIT_OFF ? 0
                      : o->conv_split == VD_CONV_SPLIT_FORCE ? 2 : 1;
        /* the forced split options (tests) live in the graph API's options */
        c->conv_gemm_force = o->conv_gemm_force;
        c->conv_direct_force = o->conv_direct_force;
        c->no_fuse = o->no_fuse;
        c->conv_fuse_force = o->conv_fuse_force && !o->no_fuse;
        c->conv_mix = c->tune && o->conv_api == VD_CONV_API_AUTO && c->conv_split != 2 &&
                      !c->conv_gemm_force && !c->conv_direct_force && !o->conv_fuse_force;
        /* channels-last (tf32, bf16, fp16): the graph API's tensor-core engines;
         * the legacy cudnnFind would also time its slow non-tensor-core algorithms */
        if (vd_math_nhwc(math)) c->conv_mix = false;
    }
    c->layers = (cu_layer *)vd_calloc((size_t)net->n_layers, sizeof *c->layers, e);
    if (!c->layers) return VD_ENOMEM;
    c->n_layers = net->n_layers;
    for (int i = 0; i < net->n_layers; i++) {
        const vd_layer *l = &net->layers[i];
        cu_layer *L = &c->layers[i];
        L->op = l->op;
        L->n_in = l->n_in;
        int h0 = 0, w0 = 0;
        for (int k = 0; k < l->n_in && k < VD_MAX_INPUTS; k++) {
            int ch, h, w;
            in_shape(net, l->in[k], &ch, &h, &w);
            L->in_c[k] = ch;
            if (k == 0) { h0 = h; w0 = w; }
        }
        L->in_h = h0;
        L->in_w = w0;
        L->c = l->c;
        L->h = l->h;
        L->w = l->w;
        L->dt = cu_dnn_dtype(math);
        L->cl = vd_math_nhwc(math);
        /* cuDNN's engine tuning takes seconds on large nets: a stop ends it */
        int rc = be->opts.stop && *be->opts.stop
                 ? vd_errf(e, VD_ESTOP, "setup stopped at layer %d of %d", i, net->n_layers)
                 : cu_op_setup(c, net, i, L, e);
        if (rc) {
            if (rc != VD_ESTOP) vd_err_prefix(e, "layer '%s' (%s)", l->name, vd_op_table[l->op].name);
            cudaStreamSynchronize(cu_compute(c));
            cu_tune_release(c);
            layers_free(c);
            return rc;
        }
        if (l->op != VD_OP_CONV) {
            memset(&L->opts[0], 0, sizeof L->opts[0]);
            snprintf(L->opts[0].label, sizeof L->opts[0].label, "default");
            L->n_opts = 1;
            /* the op's own workspace, if any (cu_ops: bf16 / fp16 batch norm's
             * partial sums, max pooling's backward argmax pass) */
            cu_op_default_ws(c, net, i, batch, &L->opts[0]);
        }
        /* channels-last maps: each conv pass copies the weight into its
         * workspace as KRSC (backward also keeps a KRSC dW there), a 16-bit fc
         * converts it; an fc over H*W > 1 reorders its input to NCHW there
         * (cu_wcopy_bytes, cu_fc_xt_bytes); fc's dW is written in fp32 */
        uint64_t wb = cu_wcopy_bytes(c, net, i), xb = cu_fc_xt_bytes(c, net, i, batch);
        for (int k = 0; (wb || xb) && k < L->n_opts; k++) {
            vd_algo_opt *o = &L->opts[k];
            uint64_t f = vd_algo_ws(o, false), b = vd_algo_ws(o, true);
            o->ws_fwd = f + wb + xb;
            o->ws_bwd = b + (l->op == VD_OP_CONV ? 2 * wb : wb + xb);
            o->workspace = o->ws_fwd > o->ws_bwd ? o->ws_fwd : o->ws_bwd;
        }
    }
    if (!be->opts.no_fuse) {   /* ReLUs into their producers' forward */
        cu_fuse_setup(c, net);
        cu_fuse_relu_setup(c, net);
    }
    /* timing scratch of the conv tuning: gone before any pool exists */
    CUDA_CHECK(e, cudaStreamSynchronize(cu_compute(c)));
    cu_tune_release(c);
    c->net = net;
    return VD_OK;
}

static int cu_layer_algos(vd_backend *be, int layer, const vd_algo_opt **opts, int *n,
                          vd_err *e) {
    cu_ctx *c = ctx_of(be);
    if (!c->net) return vd_errf(e, VD_EINTERNAL, "layer_algos before layer_setup");
    if (layer < 0 || layer >= c->n_layers)
        return vd_errf(e, VD_EINTERNAL, "layer_algos: layer %d of %d", layer, c->n_layers);
    *opts = c->layers[layer].opts;
    *n = c->layers[layer].n_opts;
    return VD_OK;
}

static bool cu_supports_op(vd_backend *, vd_op op, vd_math math) {
    return cu_op_supported(op, math);
}

/* ---- ops ------------------------------------------------------------------------------ */
static int op_prologue(cu_ctx *c, const vd_net *net, int layer, const vd_op_io *io, vd_err *e) {
    if (!c->net) return vd_errf(e, VD_EINTERNAL, "op before layer_setup");
    if (net != c->net || layer < 0 || layer >= c->n_layers)
        return vd_errf(e, VD_EINTERNAL, "op on layer %d of a net this backend was not set up for",
                       layer);
    if (io->n <= 0 || io->n > c->batch)
        return vd_errf(e, VD_EINTERNAL, "layer '%s': batch %d, set up for at most %d",
                       net->layers[layer].name, io->n, c->batch);
    return VD_OK;
}

static int op_epilogue(cu_ctx *c, const vd_net *net, int layer, const char *dir, int rc,
                       vd_err *e) {
    if (rc) {
        vd_err_prefix(e, "%s of layer '%s'", dir, net->layers[layer].name);
        return rc;
    }
    if (c->sync_debug) {
        cudaError_t st = cudaStreamSynchronize(cu_compute(c));
        if (st == cudaSuccess) st = cudaGetLastError();
        if (st != cudaSuccess)
            return vd_errf(e, VD_EDEVICE, "%s of layer '%s' failed on the device: %s (%s)", dir,
                           net->layers[layer].name, cudaGetErrorName(st), cudaGetErrorString(st));
    }
    return VD_OK;
}

static int cu_forward(vd_backend *be, const vd_net *net, int layer, const vd_op_io *io,
                      vd_err *e) {
    cu_ctx *c = ctx_of(be);
    int rc = op_prologue(c, net, layer, io, e);
    if (rc) return rc;
    rc = cu_op_forward(c, net, layer, io, e);
    return op_epilogue(c, net, layer, "forward", rc, e);
}

static int cu_backward(vd_backend *be, const vd_net *net, int layer, const vd_op_io *io,
                       vd_err *e) {
    cu_ctx *c = ctx_of(be);
    int rc = op_prologue(c, net, layer, io, e);
    if (rc) return rc;
    rc = cu_op_backward(c, net, layer, io, e);
    return op_epilogue(c, net, layer, "backward", rc, e);
}

/* --sync-debug: wait for the compute stream after an update-side launch, so
 * that a fault shows at its call. */
static int debug_sync(cu_ctx *c, int rc, vd_err *e) {
    if (rc || !c->sync_debug) return rc;
    CUDA_CHECK(e, cudaStreamSynchronize(cu_compute(c)));
    CUDA_CHECK(e, cudaGetLastError());
    return VD_OK;
}

/* ---- step scalars, update tables, the update ------------------------------------------ */

/* backend.h's step_set: the host-side copy is rewritten only once its last
 * transfer has run (steps_ev; a capture's transfer runs at graph_launch,
 * which records steps_ev after the graph). */
static int cu_step_set(vd_backend *be, const vd_step_scalars *s, vd_err *e) {
    cu_ctx *c = ctx_of(be);
    if (!c->capturing) CUDA_CHECK(e, cudaEventSynchronize(c->steps_ev));
    *c->steps_host = *s;
    CUDA_CHECK(e, cudaMemcpyAsync(c->steps_dev, c->steps_host, sizeof *s, cudaMemcpyHostToDevice,
                                  cu_compute(c)));
    if (!c->capturing) CUDA_CHECK(e, cudaEventRecord(c->steps_ev, cu_compute(c)));
    return debug_sync(c, VD_OK, e);
}

static void cu_ranges_free(vd_backend *be, void *table) {
    (void)be;
    cu_ranges *t = (cu_ranges *)table;
    if (!t) return;
    if (t->dev) cudaFree(t->dev);
    vd_free(t);
}

static int cu_ranges_create(vd_backend *be, const vd_update_range *r, int n, void **table,
                            vd_err *e) {
    cu_ctx *c = ctx_of(be);
    *table = NULL;
    if (n < 0 || c->capturing)
        return vd_errf(e, VD_EINTERNAL, "cuda backend: a table of %d ranges%s", n,
                       c->capturing ? " inside a capture" : "");
    cu_ranges *t = (cu_ranges *)vd_calloc(1, sizeof *t, e);
    if (!t) return VD_ENOMEM;
    t->n = n;
    for (int k = 0; k < n; k++) {
        if (r[k].offset < 0 || r[k].count < 0) {
            cu_ranges_free(be, t);
            return vd_errf(e, VD_EINTERNAL, "cuda backend: update range [%lld, +%lld)",
                           (long long)r[k].offset, (long long)r[k].count);
        }
        if (r[k].count > t->max_count) t->max_count = r[k].count;
    }
    int rc = VD_OK;
    if (n) {
        size_t bytes = (size_t)n * sizeof *r;
        CUDA_GOTO(e, rc, fail, cudaMalloc((void **)&t->dev, bytes));
        /* synchronous: r is the caller's, and this is setup */
        CUDA_GOTO(e, rc, fail, cudaMemcpy(t->dev, r, bytes, cudaMemcpyHostToDevice));
    }
    *table = t;
    return VD_OK;
fail:
    cu_ranges_free(be, t);
    return rc;
}

/* update / update_scaled (st: the loss scale's state, or NULL). */
static int update_table(cu_ctx *c, const vd_optim_step *o, float *params, const float *grads,
                        float *m, float *v, const void *table, const vd_loss_scale *st,
                        vd_err *e) {
    const cu_ranges *t = (const cu_ranges *)table;
    if (!t || (o->kind == VD_OPT_ADAMW && !v))
        return vd_errf(e, VD_EINTERNAL, "cuda backend: %s update %s", vd_optimizer_name(o->kind),
                       t ? "without exp_avg_sq" : "without a table");
    int rc = cuk_update(cu_compute(c), c->sm_count, o, params, grads, m, v, t->dev, t->n,
                        t->max_count, c->steps_dev, st, e);
    return debug_sync(c, rc, e);
}

static int cu_update(vd_backend *be, const vd_optim_step *o, float *params, const float *grads,
                     float *m, float *v, const void *table, vd_err *e) {
    return update_table(ctx_of(be), o, params, grads, m, v, table, NULL, e);
}

/* ---- captures (backend.h) ------------------------------------------------------------------ */

/* Ends a capture that failed midway, its graph dropped (the stream leaves
 * capture mode whatever the capture's state). */
static void capture_abort(cu_ctx *c) {
    cudaGraph_t g = NULL;
    if (cudaStreamEndCapture(cu_compute(c), &g) == cudaSuccess && g) cudaGraphDestroy(g);
    cudaGetLastError();
    c->capturing = false;
}

static int cu_capture_begin(vd_backend *be, vd_err *e) {
    cu_ctx *c = ctx_of(be);
    if (c->capturing) return vd_errf(e, VD_EINTERNAL, "cuda backend: capture_begin inside a capture");
    /* step_set and fill_synthetic inside the capture rewrite the host-side
     * copies: their last transfers must have run (steps_ev: also the last
     * graph launched) */
    CUDA_CHECK(e, cudaEventSynchronize(c->steps_ev));
    int rc = cu_synth_idle(c, e);
    if (rc) return rc;
    CUDA_CHECK(e, cudaStreamBeginCapture(cu_compute(c), cudaStreamCaptureModeThreadLocal));
    c->capturing = true;
    c->capture_no++;
    CUDA_GOTO(e, rc, fail, cudaEventRecord(c->fork_ev, cu_compute(c)));
    for (int s = 1; s < VD_N_STREAMS; s++)
        CUDA_GOTO(e, rc, fail, cudaStreamWaitEvent(c->stream[s], c->fork_ev, 0));
    return VD_OK;
fail:
    capture_abort(c);
    return rc;
}

static int cu_capture_end(vd_backend *be, void **graph, vd_err *e) {
    cu_ctx *c = ctx_of(be);
    *graph = NULL;
    if (!c->capturing) return vd_errf(e, VD_EINTERNAL, "cuda backend: capture_end without a capture");
    int rc = VD_OK;
    for (int s = 1; s < VD_N_STREAMS; s++) {
        CUDA_GOTO(e, rc, fail, cudaEventRecord(c->join_ev[s], c->stream[s]));
        CUDA_GOTO(e, rc, fail, cudaStreamWaitEvent(cu_compute(c), c->join_ev[s], 0));
    }
    {
        cudaGraph_t g = NULL;
        cudaError_t st = cudaStreamEndCapture(cu_compute(c), &g);
        c->capturing = false;
        if (st != cudaSuccess) {
            if (g) cudaGraphDestroy(g);
            return cu_cuda_err(e, st, __func__, __FILE__, __LINE__,
                               "cudaStreamEndCapture(compute, &g)");
        }
        cudaGraphExec_t x = NULL;
        st = cudaGraphInstantiate(&x, g, 0);
        cudaGraphDestroy(g);
        if (st != cudaSuccess)
            return cu_cuda_err(e, st, __func__, __FILE__, __LINE__, "cudaGraphInstantiate(&x, g, 0)");
        *graph = (void *)x;
        c->n_graphs++;
    }
    return VD_OK;
fail:
    capture_abort(c);
    return rc;
}

static int cu_graph_launch(vd_backend *be, void *graph, const vd_step_scalars *s, vd_err *e) {
    cu_ctx *c = ctx_of(be);
    if (c->capturing || !graph)
        return vd_errf(e, VD_EINTERNAL, "cuda backend: graph_launch %s",
                       graph ? "inside a capture" : "of no graph");
    CUDA_CHECK(e, cudaEventSynchronize(c->steps_ev));
    *c->steps_host = *s;
    /* after all earlier work on every stream (the graph's waits on events
     * recorded before it were dropped) */
    for (int k = 1; k < VD_N_STREAMS; k++) {
        CUDA_CHECK(e, cudaEventRecord(c->join_ev[k], c->stream[k]));
        CUDA_CHECK(e, cudaStreamWaitEvent(cu_compute(c), c->join_ev[k], 0));
    }
    CUDA_CHECK(e, cudaGraphLaunch((cudaGraphExec_t)graph, cu_compute(c)));
    CUDA_CHECK(e, cudaEventRecord(c->steps_ev, cu_compute(c)));
    CUDA_CHECK(e, cudaEventRecord(c->graph_ev, cu_compute(c)));
    c->graph_launched = true;
    return debug_sync(c, VD_OK, e);
}

static void cu_graph_destroy(vd_backend *be, void *graph) {
    if (!graph) return;
    ctx_of(be)->n_graphs--;
    cudaGraphExecDestroy((cudaGraphExec_t)graph);
}

/* ---- dynamic loss scaling (math fp16; backend.h) -----------------------------------------
 * The state stays on the device: the loss layer's backward reads the scale,
 * grad_check / update_scaled / scale_update read and write it in stream order on
 * the compute stream, so no step waits for the host. Only scale_set and
 * scale_get copy it, and wait (start, --resume, log points, checkpoints). */
int cu_scale_state(cu_ctx *c, vd_loss_scale **st, vd_err *e) {
    if (!c->scale_st) {
        vd_loss_scale init = vd_loss_scale_init();
        void *p = NULL;
        CUDA_CHECK(e, cudaMalloc(&p, sizeof init));
        c->scale_st = (vd_loss_scale *)p;
        CUDA_CHECK(e, cudaMemcpyAsync(p, &init, sizeof init, cudaMemcpyHostToDevice, cu_compute(c)));
        CUDA_CHECK(e, cudaStreamSynchronize(cu_compute(c)));   /* init is on this stack */
    }
    *st = c->scale_st;
    return VD_OK;
}

static int cu_scale_set(vd_backend *be, const vd_loss_scale *s, vd_err *e) {
    cu_ctx *c = ctx_of(be);
    vd_loss_scale *st;
    int rc = cu_scale_state(c, &st, e);
    if (rc) return rc;
    vd_loss_scale v = *s;
    v.found_inf = 0;
    CUDA_CHECK(e, cudaMemcpyAsync(st, &v, sizeof v, cudaMemcpyHostToDevice, cu_compute(c)));
    CUDA_CHECK(e, cudaStreamSynchronize(cu_compute(c)));       /* v is on this stack */
    return VD_OK;
}

static int cu_scale_get(vd_backend *be, vd_loss_scale *s, vd_err *e) {
    cu_ctx *c = ctx_of(be);
    vd_loss_scale *st;
    int rc = not_capturing(c, "scale_get", e);
    if (!rc) rc = cu_scale_state(c, &st, e);
    if (rc) return rc;
    CUDA_CHECK(e, cudaMemcpyAsync(s, st, sizeof *s, cudaMemcpyDeviceToHost, cu_compute(c)));
    CUDA_CHECK(e, cudaStreamSynchronize(cu_compute(c)));
    return VD_OK;
}

static int cu_grad_check(vd_backend *be, const float *grads, int64_t offset, int64_t count,
                         int layer, vd_err *e) {
    cu_ctx *c = ctx_of(be);
    vd_loss_scale *st;
    int rc = cu_scale_state(c, &st, e);
    if (rc || count <= 0) return rc;
    rc = cuk_grad_check(cu_compute(c), c->sm_count, grads + offset, count, layer, st, e);
    return debug_sync(c, rc, e);
}

static int cu_update_scaled(vd_backend *be, const vd_optim_step *o, float *params,
                            const float *grads, float *m, float *v, const void *table,
                            vd_err *e) {
    cu_ctx *c = ctx_of(be);
    vd_loss_scale *st;
    int rc = cu_scale_state(c, &st, e);
    return rc ? rc : update_table(c, o, params, grads, m, v, table, st, e);
}

static int cu_scale_update(vd_backend *be, vd_err *e) {
    cu_ctx *c = ctx_of(be);
    vd_loss_scale *st;
    int rc = cu_scale_state(c, &st, e);
    if (rc) return rc;
    return debug_sync(c, cuk_scale_update(cu_compute(c), st, e), e);
}

/* ---- lifecycle --------------------------------------------------------------------------- */
static void cu_destroy(vd_backend *be) {
    if (!be) return;
    cu_ctx *c = ctx_of(be);
    if (c) {
        if (c->stream[0]) cudaSetDevice(c->device);
        cu_tune_release(c);
        layers_free(c);
        events_free(c);
        if (c->capturing) capture_abort(c);
        if (c->scale_st) cudaFree(c->scale_st);
        if (c->steps_dev) cudaFree(c->steps_dev);
        if (c->steps_host) cudaFreeHost(c->steps_host);
        if (c->steps_ev) cudaEventDestroy(c->steps_ev);
        cu_synth_free(c);
        if (c->fork_ev) cudaEventDestroy(c->fork_ev);
        if (c->graph_ev) cudaEventDestroy(c->graph_ev);
        for (int s = 1; s < VD_N_STREAMS; s++)
            if (c->join_ev[s]) cudaEventDestroy(c->join_ev[s]);
        if (c->blas) cublasDestroy(c->blas);
        if (c->dnn) cudnnDestroy(c->dnn);
        for (int s = 0; s < VD_N_STREAMS; s++)
            if (c->stream[s]) cudaStreamDestroy(c->stream[s]);
        vd_free(c);
    }
    vd_free(be);
}

extern "C" bool vd_backend_cuda_available(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    return n > 0;
}

/* The start-up check: a kernel of this file, asked for its attributes, loads
 * this file's code for the device. Every .cu file is built with the same
 * -gencode list (meson.build), so a device none of it fits gets no kernel
 * image here, and that is said before any work starts. */
__global__ void k_arch_probe(int *p) { if (p) *p = 0; }

static int check_arch(const cudaDeviceProp *prop, vd_err *e) {
    cudaFuncAttributes fa;
    cudaError_t st = cudaFuncGetAttributes(&fa, k_arch_probe);
    if (st == cudaSuccess) return VD_OK;
    cudaGetLastError();
    if (st != cudaErrorNoKernelImageForDevice && st != cudaErrorInvalidDeviceFunction &&
        st != cudaErrorUnsupportedPtxVersion && st != cudaErrorInvalidPtx)
        return vd_errf(e, VD_EDEVICE, "CUDA error %s (%s) loading vdnn's kernels on '%s'",
                       cudaGetErrorName(st), cudaGetErrorString(st), prop->name);
    const char *ptx = VD_CUDA_PTX;
    return vd_errf(e, VD_EDEVICE,
                   "the GPU '%s' is sm_%d%d (compute capability %d.%d), and this vdnn holds "
                   "code for sm_{%s}%s%s only (%s); rebuild with meson -Dcudaarchs=%d%d",
                   prop->name, prop->major, prop->minor, prop->major, prop->minor, VD_CUDA_ARCHS,
                   *ptx ? " and PTX compute_" : "", ptx,
                   cudaGetErrorString(st), prop->major, prop->minor);
}

extern "C" int vd_backend_cuda_create(vd_backend **out, int device, vd_err *e) {
    return vd_backend_cuda_create_opts(out, device, NULL, e);
}

extern "C" int vd_backend_cuda_create_opts(vd_backend **out, int device, const vd_backend_opts *o,
                                           vd_err *e) {
    *out = NULL;
    int n = 0;
    cudaError_t st = cudaGetDeviceCount(&n);
    if (st != cudaSuccess || n == 0) {
        cudaGetLastError();
        return vd_errf(e, VD_EDEVICE, "no CUDA device available (%s); use --backend cpu",
                       st != cudaSuccess ? cudaGetErrorString(st) : "device count is 0");
    }
    if (device < 0 || device >= n)
        return vd_errf(e, VD_EDEVICE, "CUDA device %d does not exist (this machine has %d)",
                       device, n);
    vd_backend *be = (vd_backend *)vd_calloc(1, sizeof *be, e);
    if (!be) return VD_ENOMEM;
    cu_ctx *c = (cu_ctx *)vd_calloc(1, sizeof *c, e);
    if (!c) { vd_free(be); return VD_ENOMEM; }
    be->ctx = c;
    be->name = "cuda";
    be->destroy = cu_destroy;
    be->model = &vd_device_h200;
    be->mem_info = vd_cuda_mem_info;
    be->profile_measure = vd_profile_measure;
    be->pool_create = cu_pool_create;
    be->pool_destroy = cu_pool_destroy;
    be->host_alloc = cu_host_alloc;
    be->host_free = cu_host_free;
    be->events_create = cu_events_create;
    be->event_record = cu_event_record;
    be->event_mark = cu_event_mark;
    be->stream_wait = cu_stream_wait;
    be->event_sync = cu_event_sync;
    be->synchronize = cu_synchronize;
    be->event_elapsed = cu_event_elapsed;
    be->copy_async = cu_copy_async;
    be->poison_async = cu_poison_async;
    be->zero_async = cu_zero_async;
    be->fill_synthetic = cu_fill_synthetic;
    be->synth_set = cu_synth_set;
    be->layer_setup = cu_layer_setup;
    be->layer_algos = cu_layer_algos;
    be->supports_op = cu_supports_op;
    be->layer_aux_bytes = vd_op_aux_bytes;
    be->forward = cu_forward;
    be->backward = cu_backward;
    be->step_set = cu_step_set;
    be->ranges_create = cu_ranges_create;
    be->ranges_free = cu_ranges_free;
    be->update = cu_update;
    be->capture_begin = cu_capture_begin;
    be->capture_end = cu_capture_end;
    be->graph_launch = cu_graph_launch;
    be->graph_destroy = cu_graph_destroy;
    be->scale_set = cu_scale_set;
    be->scale_get = cu_scale_get;
    be->grad_check = cu_grad_check;
    be->update_scaled = cu_update_scaled;
    be->scale_update = cu_scale_update;
    c->device = device;
    if (o) be->opts = *o;
    c->sync_debug = be->opts.sync_debug;
    int rc = VD_OK;
    cudaDeviceProp prop;
    CUDA_GOTO(e, rc, fail, cudaSetDevice(device));
    CUDA_GOTO(e, rc, fail, cudaGetDeviceProperties(&prop, device));
    if ((rc = check_arch(&prop, e))) goto fail;
    c->sm_count = prop.multiProcessorCount;
    c->total_mem = prop.totalGlobalMem;
    c->cc_major = prop.major;
    c->cc_minor = prop.minor;
    snprintf(c->dev_name, sizeof c->dev_name, "%s", prop.name);
    for (int s = 0; s < VD_N_STREAMS; s++)
        CUDA_GOTO(e, rc, fail, cudaStreamCreateWithFlags(&c->stream[s], cudaStreamNonBlocking));
    /* the step scalars, zero until the first step_set (dropout's iteration
     * then is the op's own: the op tests) */
    CUDA_GOTO(e, rc, fail, cudaMalloc((void **)&c->steps_dev, sizeof *c->steps_dev));
    CUDA_GOTO(e, rc, fail, cudaMemset(c->steps_dev, 0, sizeof *c->steps_dev));
    CUDA_GOTO(e, rc, fail, cudaMallocHost((void **)&c->steps_host, sizeof *c->steps_host));
    memset(c->steps_host, 0, sizeof *c->steps_host);
    CUDA_GOTO(e, rc, fail, cudaEventCreateWithFlags(&c->steps_ev, cudaEventDisableTiming));
    CUDA_GOTO(e, rc, fail, cudaEventCreateWithFlags(&c->fork_ev, cudaEventDisableTiming));
    CUDA_GOTO(e, rc, fail, cudaEventCreateWithFlags(&c->graph_ev, cudaEventDisableTiming));
    if ((rc = cu_synth_create(c, e))) goto fail;
    for (int s = 1; s < VD_N_STREAMS; s++)
        CUDA_GOTO(e, rc, fail, cudaEventCreateWithFlags(&c->join_ev[s], cudaEventDisableTiming));
    CUDA_GOTO(e, rc, fail, cudaDeviceSynchronize());   /* the memset, before any stream's work */
    *out = be;
    return VD_OK;
fail:
    cu_destroy(be);
    return rc;
}

extern "C" bool vd_cuda_relu_fused(vd_backend *be, int layer) {
    if (!be || !be->name || strcmp(be->name, "cuda") != 0) return false;
    const cu_ctx *c = ctx_of(be);
    return c->layers && layer >= 0 && layer < c->n_layers && c->layers[layer].relu_fused;
}

extern "C" bool vd_cuda_relu_bwd_fused(vd_backend *be, int layer) {
    if (!be || !be->name || strcmp(be->name, "cuda") != 0) return false;
    const cu_ctx *c = ctx_of(be);
    return c->layers && layer >= 0 && layer < c->n_layers && c->layers[layer].relu_bwd_fused;
}

extern "C" bool vd_cuda_relu_bias_fused(vd_backend *be, int layer) {
    if (!be || !be->name || strcmp(be->name, "cuda") != 0) return false;
    const cu_ctx *c = ctx_of(be);
    return c->layers && layer >= 0 && layer < c->n_layers && c->layers[layer].bias_bwd;
}

extern "C" bool vd_cuda_conv_fused(vd_backend *be, int layer) {
    if (!be || !be->name || strcmp(be->name, "cuda") != 0) return false;
    const cu_ctx *c = ctx_of(be);
    return c->layers && layer >= 0 && layer < c->n_layers && c->layers[layer].op == VD_OP_CONV &&
           cu_graph_fwd_epi(&c->layers[layer]) != 0;
}

extern "C" int vd_cuda_mem_info(vd_backend *be, uint64_t *free_b, uint64_t *total_b, vd_err *e) {
    if (be && (!be->name || strcmp(be->name, "cuda") != 0))
        return vd_errf(e, VD_EUNSUPPORTED, "device memory info needs the cuda backend");
    if (be) CUDA_CHECK(e, cudaSetDevice(ctx_of(be)->device));
    size_t fr = 0, tot = 0;
    CUDA_CHECK(e, cudaMemGetInfo(&fr, &tot));
    *free_b = fr;
    *total_b = tot;
    return VD_OK;
}
