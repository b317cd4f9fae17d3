/* cuda_convgraph_tune.cu — the graph-API conv's setup: timing the candidate
 * plans, choosing the options and the split options (see cuda_convgraph.h). */
#include <stdio.h>
#include <string.h>
#include "backend/cuda/cuda_convgraph.h"

/* Split options: a layer whose fastest option needs more than
 * SPLIT_MIN (1 GiB) of workspace also gets, for each target t, the option
 * "b/k": every direction runs as k sub-batch convolutions of batch/k (the
 * batch: the layer's describe batch, cu_layer.desc_batch)
 * (k the smallest power of two dividing the batch with
 * fastest workspace / k <= t), each the fastest engine timed at batch/k with
 * workspace <= t. Backward-filter chunks after the first write their partial
 * dw into the front of the workspace and are added to dw (the workspace
 * counts those bytes). The FFT / Winograd engines' workspace grows with the
 * batch, so this keeps them under a budget where the whole-batch "ws<=1G"
 * engines are 2-3x slower (VGG-16 b256: features.2 backward 38 ms with 19 GiB
 * of workspace, 70 ms within 289 MiB). Not in deterministic mode (the
 * summation order of dw would differ between options). The 8 and 4 GiB
 * targets keep the big engines at sub-batches large enough to run them
 * well, for budgets with a few GiB of workspace to spend: VGG-16 b256 fp32
 * features.2's backward is 38.5 ms whole (19 GiB), 46.3 ms as "b/4 w"
 * (4.8 GiB), 50.3 as "b/8 w" (1.7 GiB), 51.4 as "b/32 w"; without b/4 w,
 * auto at 16 GiB runs 0.962x of no offload, with it 0.9697x. */
static const uint64_t split_target[G_SPLITS] = {8ull << 30, 4ull << 30, 1ull << 30, 256ull << 20};
static const uint64_t SPLIT_MIN = 1ull << 30;

/* Timing order of the directions on shared buffers: forward writes y,
 * backward-filter writes dw, backward-data writes x: last. */
static const int time_order[CU_GD_COUNT] = {CU_GD_FWD, CU_GD_BWD_FILTER, CU_GD_BWD_DATA,
                                            CU_GD_BWD_DATA_ACC};

static uint64_t out_bytes(const cu_layer *L, int n) {
    return (uint64_t)n * (uint64_t)L->c * (uint64_t)L->h * (uint64_t)L->w * 4;
}

static inline uint64_t u64max(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* ---- timing ------------------------------------------------------------------------------ */
/* Scratch for timing: bytes at c->scratch (grown as needed), or NULL when
 * that much device memory is not free (then the layer stays untimed). */
static void *scratch_get(cu_ctx *c, uint64_t bytes) {
    if (c->scratch && c->scratch_bytes >= bytes) return c->scratch;
    if (c->scratch) cudaFree(c->scratch);
    c->scratch = NULL;
    c->scratch_bytes = 0;
    size_t fr = 0, tot = 0;
    if (cudaMemGetInfo(&fr, &tot) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    const uint64_t reserve = 512ull << 20;   /* CUDA / cuDNN / cuBLAS keep working */
    if (bytes + reserve > fr) return NULL;
    if (cudaMalloc(&c->scratch, bytes) != cudaSuccess) {
        cudaGetLastError();
        c->scratch = NULL;
        return NULL;
    }
    c->scratch_bytes = bytes;
    return c->scratch;
}

int cu_relu_bias_setup(cu_ctx *c, const vd_net *net, int li, cu_layer *L, vd_err *e) {
    const vd_layer *l = &net->layers[li];
    L->bias_bwd = !c->no_fuse && l->inplace && vd_op_bias_taker(net, li) >= 0;
    if (!L->bias_bwd || !c->tune) return VD_OK;
    /* one pass each way on zeroed maps (the traffic is the same whatever
     * the values), the faster of two runs after a warm-up */
    const vd_dtype dt = vd_math_act_dtype(c->math);
    const int64_t n = c->batch, ch = L->c, hw = (int64_t)L->h * L->w, ne = n * ch * hw;
    const int split = cu_chan_split(n, ch, hw, c->sm_count, L->cl);
    const uint64_t map = VD_ALIGN_UP((uint64_t)ne * vd_dtype_bytes(dt), (uint64_t)256);
    const uint64_t sums = ((uint64_t)split + 1) * (uint64_t)ch * sizeof(float);   /* part, db */
    char *m = (char *)scratch_get(c, 3 * map + sums);
    if (!m) {
        cg_dbg(c, 1, "layer '%s': relu backward + conv bias gradient fused (untimed: no scratch)",
               l->name);
        return VD_OK;
    }
    const float *y = (const float *)m, *dy = (const float *)(m + map);
    float *dx = (float *)(m + 2 * map), *part = (float *)(m + 3 * map);
    float *db = part + (int64_t)split * ch;
    cudaStream_t s = cu_compute(c);
    CUDA_CHECK(e, cudaMemsetAsync(m, 0, 2 * map, s));
    for (int i = 0; i < 2; i++)
        if (!c->tev[i]) CUDA_CHECK(e, cudaEventCreate(&c->tev[i]));
    float t[2][3];
    for (int r = 0; r < 3; r++)
        for (int f = 0; f < 2; f++) {
            CUDA_CHECK(e, cudaEventRecord(c->tev[0], s));
            int rc = f ? cuk_relu_bwd_bias(s, c->sm_count, y, dy, dx, n, ch, hw, split, part, db,
                                           dt, L->cl, e)
                       : cuk_relu_bwd(s, c->sm_count, y, dy, dx, 0.0f, ne, dt, e);
            if (!rc && !f) rc = cuk_chan_sum(s, dx, n, ch, hw, split, part, 0.0f, db, dt, L->cl, e);
            if (rc) return rc;
            CUDA_CHECK(e, cudaEventRecord(c->tev[1], s));
            CUDA_CHECK(e, cudaEventSynchronize(c->tev[1]));
            CUDA_CHECK(e, cudaEventElapsedTime(&t[f][r], c->tev[0], c->tev[1]));
        }
    const float sep = t[0][1] < t[0][2] ? t[0][1] : t[0][2];
    const float fused = t[1][1] < t[1][2] ? t[1][1] : t[1][2];
    L->bias_bwd = fused < sep;
    cg_dbg(c, 1, "layer '%s': relu backward + conv bias gradient fused: %s (fused %.3f ms, "
           "separate %.3f ms)", l->name, L->bias_bwd ? "yes" : "no, slower", (double)fused,
           (double)sep);
    return VD_OK;
}

void cu_tune_release(cu_ctx *c) {
    if (c->scratch) cudaFree(c->scratch);
    c->scratch = NULL;
    c->scratch_bytes = 0;
    for (int i = 0; i < 2; i++)
        if (c->tev[i]) cudaEventDestroy(c->tev[i]);
    c->tev[0] = c->tev[1] = NULL;
}

/* Time D's candidates with workspace <= ws_avail; the others stay untimed.
 * bias: a fused forward's (D->epi), which its candidates add. */
static int time_dir(cu_ctx *c, const cu_layer *L, int n, const vd_layer *l, int dir, gdir *D,
                    void *const ptr[3], const float *bias, void *ws, uint64_t ws_avail,
                    vd_err *e) {
    const float *b = D->epi != CG_EPI_NONE ? bias : NULL;
    cudaStream_t s = cu_compute(c);
    float best = -1.0f;
    for (int k = 0; k < D->n; k++) {
        gcand *q = &D->c[k];
        if (q->bad || q->ws > ws_avail) continue;
        float t[3] = {0, 0, 0};
        int runs = 0;
        for (int r = 0; r < 3; r++) {
            CUDA_CHECK(e, cudaEventRecord(c->tev[0], s));
            cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
            if (q->gemm || q->direct) {
                int rc = q->gemm ? cg_gemm_filter(c, L, n, ptr, ws, 0.0f, e)
                                 : cg_direct_fwd(c, L, l, n, ptr, b, D->epi == CG_EPI_BIAS_RELU, e);
                if (rc) return rc;
            } else {
                CUDNN_SOFT(e, st, cg_exec_plan(c->dnn, q->plan, ptr, b, q->ws ? ws : NULL));
            }
            if (st != CUDNN_STATUS_SUCCESS) {
                cg_dbg(c, 2, "  '%s' %s: engine %lld does not run: %s", l->name, cg_dir_name[dir],
                       (long long)q->engine, cudnnGetErrorString(st));
                q->bad = true;
                break;
            }
            CUDA_CHECK(e, cudaEventRecord(c->tev[1], s));
            CUDA_CHECK(e, cudaEventSynchronize(c->tev[1]));
            CUDA_CHECK(e, cudaEventElapsedTime(&t[r], c->tev[0], c->tev[1]));
            runs = r + 1;
            if (r == 0 && best >= 0.0f && t[0] > 2.0f * best) break;   /* clearly slower */
        }
        if (q->bad) continue;
        q->ms = runs == 3 ? (t[1] < t[2] ? t[1] : t[2]) : t[0];
        if (best < 0.0f || q->ms < best) best = q->ms;
        cg_dbg(c, 2, "  '%s' %s%s: engine %lld: %.3f ms (%d runs)", l->name, cg_dir_name[dir],
               b ? "+bias" : "", (long long)q->engine, (double)q->ms, runs);
    }
    return VD_OK;
}

/* *ms: the time of the separate passes that epilogue epi costs an unfused
 * forward at batch n (cg_epilogue on y), timed as time_dir's candidates. */
static int time_epilogue(cu_ctx *c, const cu_layer *L, const vd_layer *l, int n, int epi, void *y,
                         const float *bias, float *ms, vd_err *e) {
    cudaStream_t s = cu_compute(c);
    vd_op_io io;
    memset(&io, 0, sizeof io);
    io.n = n;
    io.y = (float *)y;
    io.b = bias;
    io.act = vd_math_act_dtype(c->math);
    float t[3];
    for (int r = 0; r < 3; r++) {
        CUDA_CHECK(e, cudaEventRecord(c->tev[0], s));
        int rc = cg_epilogue(c, L, l, &io, epi, e);
        if (rc) return rc;
        CUDA_CHECK(e, cudaEventRecord(c->tev[1], s));
        CUDA_CHECK(e, cudaEventSynchronize(c->tev[1]));
        CUDA_CHECK(e, cudaEventElapsedTime(&t[r], c->tev[0], c->tev[1]));
    }
    *ms = t[1] < t[2] ? t[1] : t[2];
    return VD_OK;
}

/* ---- choosing ---------------------------------------------------------------------------- */
/* Fastest timed candidate within lim, or (untimed) the first within lim; -1 none. */
static int pick_fast(const gdir *D, uint64_t lim, bool timed) {
    int best = -1;
    for (int k = 0; k < D->n; k++) {
        const gcand *q = &D->c[k];
        if (q->bad || q->ws > lim) continue;
        if (!timed) return k;
        if (q->ms < 0.0f) continue;
        if (best < 0 || q->ms < D->c[best].ms) best = k;
    }
    return best;
}

/* Least workspace; among equals the faster timed one, else the first. */
static int pick_minws(const gdir *D) {
    int best = -1;
    for (int k = 0; k < D->n; k++) {
        const gcand *q = &D->c[k];
        if (q->bad) continue;
        if (best < 0 || q->ws < D->c[best].ws) { best = k; continue; }
        const gcand *b = &D->c[best];
        if (q->ws == b->ws && q->ms >= 0.0f && (b->ms < 0.0f || q->ms < b->ms)) best = k;
    }
    return best;
}

/* Summed timed milliseconds of picks pick[] from the whole-batch (sset < 0)
 * or split set sset's candidates; < 0 if a direction was not timed. */
static float picks_ms(const cu_graph *g, int split, int sset, const int pick[CU_GD_COUNT]) {
    float t = 0.0f;
    for (int d = 0; d < CU_GD_COUNT; d++) {
        if (pick[d] < 0 || d == CU_GD_BWD_DATA_ACC) continue;
        const gdir *D = split > 1 && sset >= 0 ? &g->s[sset][d] : &g->d[d];
        float m = D->c[pick[d]].ms;
        if (m < 0) return -1.0f;
        t += m;
    }
    return t;
}

/* Channels-last maps (tf32, bf16, fp16): the engines without tensor cores
 * that cuDNN offers as their low-workspace fallbacks run 20-7000x slower
 * than the fastest (measured in bf16 on the H200: ResNet-50's 3x3
 * backward-filter 0.1 ms vs 700 ms; tf32's NHWC floats take the same
 * rule); an option that slow is never worth its workspace (offloading or
 * recomputing costs less), and timing it in the profile takes minutes. So
 * an option timed over OPT_SLOW_X times option 0 is not listed. */
enum { OPT_SLOW_X = 8 };
static bool opt_too_slow(const cu_layer *L, const cu_graph *g, int split, int sset,
                         const int pick[CU_GD_COUNT]) {
    const cu_conv_opt *o0 = &L->conv_opts[0];
    float t0 = picks_ms(g, o0->split, o0->sset, o0->gplan), t = picks_ms(g, split, sset, pick);
    return t0 > 0.0f && t > OPT_SLOW_X * t0;
}

/* Append the option of per-direction picks pick[] (chosen under workspace
 * cap cap; split > 1: the directions not in whole_mask index split set
 * sset's plans and run as split chunks) unless an option with the same
 * picks from the same plans in every direction is listed already. */
static void add_gopt_in(cu_layer *L, const cu_graph *g, int split, int sset, unsigned whole_mask,
                        const char *label, const int pick[CU_GD_COUNT], uint64_t cap,
                        uint64_t bias_ws) {
    for (int k = 0; k < L->n_opts; k++)
        if (!memcmp(L->conv_opts[k].gplan, pick, sizeof L->conv_opts[k].gplan) &&
            L->conv_opts[k].sset == sset && L->conv_opts[k].whole_mask == whole_mask)
            return;
    if (L->n_opts >= CU_MAX_OPTS) return;
    if (L->cl && L->n_opts > 0 && opt_too_slow(L, g, split, sset, pick))
        return;
    cu_conv_opt *co = &L->conv_opts[L->n_opts];
    vd_algo_opt *o = &L->opts[L->n_opts];
    memset(co, 0, sizeof *co);
    memset(o, 0, sizeof *o);
    co->split = split;
    co->sset = sset;
    co->whole_mask = whole_mask;
    const gcand *q[CU_GD_COUNT];
    uint64_t dws[CU_GD_COUNT];
    for (int d = 0; d < CU_GD_COUNT; d++) {
        co->gplan[d] = pick[d];
        q[d] = pick[d] >= 0 ? &cg_opt_dir(g, co, d)->c[pick[d]] : NULL;
        /* a split backward-filter also keeps the partial dw in the workspace */
        bool part = d == CU_GD_BWD_FILTER && cg_opt_split_dir(co, d);
        dws[d] = q[d] ? q[d]->ws + (part ? g->dw_tmp : 0) : 0;
    }
    /* backward: bwd-data (and its accumulate variant), bwd-filter, bias scratch */
    uint64_t ws_bwd = bias_ws;
    for (int d = 0; d < CU_GD_COUNT; d++)
        if (q[d] && d != CU_GD_FWD) ws_bwd = u64max(ws_bwd, dws[d]);
    co->fwd_ws = dws[CU_GD_FWD];
    co->bwd_data_ws = dws[CU_GD_BWD_DATA];
    co->bwd_filter_ws = dws[CU_GD_BWD_FILTER];
    co->cap = cap;
    o->fwd_algo = q[CU_GD_FWD] ? (int)q[CU_GD_FWD]->engine : -1;
    o->bwd_data_algo = q[CU_GD_BWD_DATA] ? (int)q[CU_GD_BWD_DATA]->engine : -1;
    o->bwd_filter_algo = q[CU_GD_BWD_FILTER] ? (int)q[CU_GD_BWD_FILTER]->engine : -1;
    o->ws_fwd = co->fwd_ws;
    o->ws_bwd = ws_bwd;
    o->workspace = u64max(o->ws_fwd, o->ws_bwd);
    snprintf(o->label, sizeof o->label, "%s", label);
    L->n_opts++;
}

static void add_gopt(cu_layer *L, const cu_graph *g, const char *label, const int pick[CU_GD_COUNT],
                     uint64_t cap, uint64_t bias_ws) {
    add_gopt_in(L, g, 1, -1, 0, label, pick, cap, bias_ws);   /* whole batch: sset -1 */
}

/* Per direction the fastest (timed) or first (untimed) candidate within lim,
 * else mw's (the least workspace); directions without candidates: -1. */
static void pick_within(const cu_graph *g, uint64_t lim, bool timed, const int mw[CU_GD_COUNT],
                        int out[CU_GD_COUNT]) {
    for (int d = 0; d < CU_GD_COUNT; d++) {
        out[d] = mw[d] < 0 ? -1 : pick_fast(&g->d[d], lim, timed);
        if (out[d] < 0) out[d] = mw[d];
    }
}

/* ---- setup -------------------------------------------------------------------------------- */
/* The split options (see split_target) of layer li, from the timing buffers
 * of graph_setup (tptr: x, w, y, dw at the whole batch; ws, ws_avail). Called
 * before cu_conv_opts_order, so option 0 is "fastest". A set whose
 * directions do not all get a timed engine within its target is dropped. */
static int split_setup(cu_ctx *c, const vd_layer *l, cu_layer *L, cu_graph *g, int ndir,
                       void *const tptr[4], void *ws, uint64_t ws_avail, uint64_t bias_ws,
                       vd_err *e) {
    const int nb = L->desc_batch;   /* c->batch, or its sub-batch past INT32_MAX elements */
    const uint64_t fastest = L->n_opts ? L->opts[0].workspace : 0;
    const bool force = c->conv_split == 2;
    /* no split options with channels-last maps (tf32, bf16, fp16: the split
     * partial dW sums are the fp32 NCHW path's code) */
    if (c->conv_split == 0 || vd_math_nhwc(c->math) || (!force && fastest <= SPLIT_MIN))
        return VD_OK;
    const uint64_t xs = (uint64_t)L->in_c[0] * L->in_h * L->in_w * 4;
    const uint64_t ys = (uint64_t)L->c * L->h * L->w * 4;
    if (xs % 16 || ys % 16) return VD_OK;   /* chunks would lose the declared alignment */
    int gr = l->u.conv.groups > 0 ? l->u.conv.groups : 1;
    g->dw_numel = (int64_t)l->u.conv.out * (L->in_c[0] / gr) * l->u.conv.kh * l->u.conv.kw;
    g->dw_tmp = VD_ALIGN_UP((uint64_t)g->dw_numel * 4, 256);
    int prev = 1, rc;
    for (int i = 0; i < (force ? G_SPLITS_FORCE : G_SPLITS); i++) {
        const uint64_t t = force ? UINT64_MAX : split_target[i];
        int k = 1;
        if (force) k = nb % (2 << i) == 0 ? 2 << i : 1;
        else
            while ((fastest + (uint64_t)k - 1) / (uint64_t)k > t && nb % (2 * k) == 0) k *= 2;
        if (k <= prev || t <= g->dw_tmp) continue;
        prev = k;
        const int n = nb / k;
        bool all = true;
        int pick[CU_GD_COUNT];
        for (int d = 0; d < CU_GD_COUNT; d++) pick[d] = -1;
        for (int d = 0; d < ndir && all; d++) {
            gdir *D = &g->s[i][d];
            bool ok;
            cudnnStatus_t st;
            uint64_t cap = force ? c->total_mem / 4 : t - (d == CU_GD_BWD_FILTER ? g->dw_tmp : 0);
            if ((rc = cg_gdir_build(c, g, L, l, d, n, cap, D, &ok, &st, e))) return rc;
            all = D->n > 0;
        }
        for (int j = 0; j < ndir && all; j++) {
            int d = time_order[j];
            void *ptr[3] = {tptr[0], d == CU_GD_BWD_FILTER ? tptr[3] : tptr[1], tptr[2]};
            if ((rc = time_dir(c, L, n, l, d, &g->s[i][d], ptr, NULL, ws, ws_avail, e)))
                return rc;
            pick[d] = pick_fast(&g->s[i][d], UINT64_MAX, true);
            all = pick[d] >= 0;
        }
        if (all) CUDA_CHECK(e, cudaStreamSynchronize(cu_compute(c)));
        if (!all) {
            cg_dbg(c, 1, "layer '%s': no split option at batch %d (an engine is missing)", l->name,
                   n);
            for (int d = 0; d < CU_GD_COUNT; d++) cg_gdir_free(&g->s[i][d]);
            continue;
        }
        char label[32];
        snprintf(label, sizeof label, "b/%d", k);
        add_gopt_in(L, g, k, i, 0, label, pick, t, bias_ws);
        /* Mixed: a direction whose best whole-batch engine within t was
         * timed faster than its k chunks runs at the whole batch (VGG-16
         * b256 features.2: backward-data whole, backward-filter split). The
         * label names the split directions: f forward, d backward-data, w
         * backward-filter ("b/2 w", "b/4 fd" with --conv-split force). */
        unsigned whole = 0;
        int mix[CU_GD_COUNT];
        char dirs[8] = {0};
        int nd = 0;
        for (int d = 0; d < CU_GD_COUNT; d++) {
            mix[d] = pick[d];
            if (pick[d] < 0) continue;
            int wb = pick_fast(&g->d[d], t, true);
            float split_ms = (float)k * g->s[i][d].c[pick[d]].ms;
            /* --conv-split force (tests): the first set splits only
             * backward-filter, the second only the others */
            bool w = force ? (d == CU_GD_BWD_FILTER) == (i == 1)
                           : wb >= 0 && g->d[d].c[wb].ms < split_ms;
            if (w && wb >= 0) {
                whole |= 1u << d;
                mix[d] = wb;
            } else if (d != CU_GD_BWD_DATA_ACC) {
                dirs[nd++] = d == CU_GD_FWD ? 'f' : d == CU_GD_BWD_DATA ? 'd' : 'w';
            }
        }
        unsigned every = 0;
        for (int d = 0; d < CU_GD_COUNT; d++)
            if (pick[d] >= 0) every |= 1u << d;
        if (whole && whole != every) {
            snprintf(label, sizeof label, "b/%d %s", k, dirs);
            add_gopt_in(L, g, k, i, whole, label, mix, t, bias_ws);
        }
    }
    return VD_OK;
}

/* The options "fastest" (picks fa) with direction d's candidate of engine
 * (GEMM_ENGINE, DIRECT_ENGINE) instead, labelled label (tests). */
static void add_forced(cu_layer *L, const cu_graph *g, const int fa[CU_GD_COUNT], int d,
                       int64_t engine, const char *label, uint64_t bias_ws) {
    const gdir *D = &g->d[d];
    for (int k = 0; k < D->n; k++)
        if (D->c[k].engine == engine && !D->c[k].bad) {
            int gp[CU_GD_COUNT];
            memcpy(gp, fa, sizeof gp);
            gp[d] = k;
            add_gopt(L, g, label, gp, UINT64_MAX, bias_ws);
        }
}

/* The forward with the bias (+ ReLU) fused (g->fz) replaces the plain one
 * where its fastest candidate was timed faster than the plain fastest plus
 * the separate passes (g->epi_ms) (untimed: where cuDNN's heuristics offer
 * one, as they order the other engines) and its least workspace is within
 * the min-ws option's (so no budget loses its smallest option);
 * c->conv_fuse_force: wherever it has a candidate. Every option then picks
 * its forward from the fused candidates: all apply the epilogue, as
 * cu_fuse_setup needs to fuse the ReLU. */
static void fuse_choose(cu_ctx *c, const vd_layer *l, cu_graph *g, int ndir, bool timed) {
    gdir *P = &g->d[CU_GD_FWD], *F = &g->fz;
    if (F->epi != CG_EPI_NONE && F->n > 0) {
        int kp = pick_fast(P, UINT64_MAX, timed), kf = pick_fast(F, UINT64_MAX, timed);
        int mf = pick_minws(F);
        uint64_t mws = 0;   /* the min-ws option's workspace, over its directions */
        for (int d = 0; d < ndir; d++) {
            int m = pick_minws(&g->d[d]);
            if (m >= 0) mws = u64max(mws, g->d[d].c[m].ws);
        }
        bool faster = !timed || (kp >= 0 && kf >= 0 && F->c[kf].ms < P->c[kp].ms + g->epi_ms);
        bool win = mf >= 0 && (c->conv_fuse_force || (faster && F->c[mf].ws <= mws));
        cg_dbg(c, 1, "layer '%s': conv + bias%s fused: %s (fused %.3f ms, engine %lld, min "
               "workspace %llu; conv %.3f + separate %.3f ms, min workspace %llu)", l->name,
               F->epi == CG_EPI_BIAS_RELU ? " + ReLU" : "",
               win ? (timed ? "yes" : "yes (untimed)") : !faster ? "no, slower" : "no, workspace",
               kf >= 0 ? (double)F->c[kf].ms : -1.0, kf >= 0 ? (long long)F->c[kf].engine : -1ll,
               mf >= 0 ? (unsigned long long)F->c[mf].ws : 0ull,
               kp >= 0 ? (double)P->c[kp].ms : -1.0, (double)g->epi_ms, (unsigned long long)mws);
        if (win) {
            gdir t = *P;
            *P = *F;
            *F = t;
        }
    }
    cg_gdir_free(F);
    F->epi = CG_EPI_NONE;
    if (P->epi == CG_EPI_NONE) g->epi_ms = 0.0f;
}

static int graph_setup(cu_ctx *c, const vd_net *net, int li, cu_layer *L, cu_graph *g,
                       uint64_t bias_ws, bool *no_engine, char *why, size_t why_n, vd_err *e) {
    const vd_layer *l = &net->layers[li];
    /* the describe batch: c->batch, or its sub-batch past INT32_MAX elements
     * (cuda_cudnn.cu): plans, timings and options are at that batch */
    const int nb = L->desc_batch;
    uint64_t ybytes = out_bytes(L, nb);
    /* Like cudnn.benchmark, "fastest" may take any workspace the device can
     * spare (the planner falls back to balanced / min-ws under a budget):
     * with the legacy cap of max(2 GiB, output bytes) the FFT / Winograd
     * engines of the 56x56 and 28x28 VGG layers dropped out (measured). */
    uint64_t cap = c->total_mem / 4;
    bool acc = cu_conv_input_shared(net, li);
    int ndir = acc ? CU_GD_COUNT : CU_GD_BWD_DATA_ACC;
    int rc;
    for (int d = 0; d < ndir; d++) {
        gdir *D = &g->d[d];
        bool ok;
        cudnnStatus_t st;
        if ((rc = cg_gdir_build(c, g, L, l, d, nb, cap, D, &ok, &st, e))) return rc;
        if (d == CU_GD_BWD_FILTER && D->n > 0) cg_add_gemm(c, L, l, nb, cap, D);
        if (d == CU_GD_FWD && D->n > 0) cg_add_direct(c, L, l, nb, D);
        /* the forward with the bias (+ ReLU) fused, timed against it below */
        if (d == CU_GD_FWD && D->n > 0) g->fz.epi = cu_conv_fwd_epi(c, net, li);
        if (d == CU_GD_FWD && g->fz.epi != CG_EPI_NONE) {
            bool fok;
            cudnnStatus_t fst;
            if ((rc = cg_gdir_build(c, g, L, l, d, nb, cap, &g->fz, &fok, &fst, e))) return rc;
            if (!fok)
                cg_dbg(c, 1, "layer '%s': conv + bias%s graph not supported (%s)", l->name,
                       g->fz.epi == CG_EPI_BIAS_RELU ? " + ReLU" : "", cudnnGetErrorString(fst));
            if (g->fz.n > 0) cg_add_direct(c, L, l, nb, &g->fz);
        }
        if (D->n == 0) {
            if (d == CU_GD_BWD_DATA_ACC) {   /* beta-1 plans come at run time, or legacy */
                cg_dbg(c, 1, "layer '%s': no graph engine for %s at setup", l->name,
                       cg_dir_name[d]);
                continue;
            }
            *no_engine = true;
            if (!ok)
                snprintf(why, why_n, "%s operation graph not supported (%s)", cg_dir_name[d],
                         cudnnGetErrorString(st));
            else
                snprintf(why, why_n, "no usable %s engine in %s%s mode", cg_dir_name[d],
                         vd_math_name(c->math),
                         c->deterministic ? " deterministic" : "");
            return VD_OK;
        }
    }
    /* timing */
    bool timed = false;
    void *tptr[4] = {NULL, NULL, NULL, NULL};   /* x, w, y, dw of the timing runs */
    void *tws = NULL;
    uint64_t tws_avail = 0;
    if (c->tune) {
        const uint64_t A = 256;
        int gr = l->u.conv.groups > 0 ? l->u.conv.groups : 1;
        uint64_t xb = VD_ALIGN_UP((uint64_t)nb * L->in_c[0] * L->in_h * L->in_w * 4, A);
        uint64_t yb = VD_ALIGN_UP(ybytes, A);
        uint64_t wb = VD_ALIGN_UP((uint64_t)l->u.conv.out * (L->in_c[0] / gr) * l->u.conv.kh *
                                      l->u.conv.kw * 4, A);
        uint64_t bb = VD_ALIGN_UP((uint64_t)L->c * 4, A);   /* a fused forward's bias */
        uint64_t fixed = xb + yb + 2 * wb + bb, wsmax = 0;
        for (int d = 0; d < ndir; d++)
            for (int k = 0; k < g->d[d].n; k++) wsmax = u64max(wsmax, g->d[d].c[k].ws);
        for (int k = 0; k < g->fz.n; k++) wsmax = u64max(wsmax, g->fz.c[k].ws);
        char *buf = (char *)scratch_get(c, fixed + wsmax);
        uint64_t ws_avail = wsmax;
        if (!buf) {   /* not all: the candidates that fit in what is free */
            size_t fr = 0, tot = 0;
            CUDA_CHECK(e, cudaMemGetInfo(&fr, &tot));
            uint64_t room = fr > (1ull << 30) ? fr - (1ull << 30) : 0;
            if (room > fixed) {
                ws_avail = room - fixed;
                buf = (char *)scratch_get(c, fixed + ws_avail);
            }
        }
        if (buf) {
            for (int i = 0; i < 2; i++)
                if (!c->tev[i]) CUDA_CHECK(e, cudaEventCreate(&c->tev[i]));
            cudaStream_t s = cu_compute(c);
            float *x = (float *)buf, *y = (float *)(buf + xb), *w = (float *)(buf + xb + yb),
                  *dw = (float *)(buf + xb + yb + wb), *bias = (float *)(buf + xb + yb + 2 * wb);
            void *ws = buf + fixed;
            const vd_dtype ft = vd_math_act_dtype(c->math);   /* 16-bit: no inf / NaN */
            if ((rc = cuk_fill_uniform(s, c->sm_count, x, (int64_t)(xb / 4), 11, -1.0f, 1.0f, ft, e)) ||
                (rc = cuk_fill_uniform(s, c->sm_count, y, (int64_t)(yb / 4), 12, -1.0f, 1.0f, ft, e)) ||
                (rc = cuk_fill_uniform(s, c->sm_count, w, (int64_t)(wb / 4), 13, -0.1f, 0.1f, ft, e)) ||
                (rc = cuk_fill_uniform(s, c->sm_count, bias, L->c, 14, -0.1f, 0.1f, VD_DT_F32, e)))
                return rc;
            for (int i = 0; i < ndir; i++) {
                int d = time_order[i];
                void *ptr[3] = {x, d == CU_GD_BWD_FILTER ? (void *)dw : (void *)w, y};
                if ((rc = time_dir(c, L, nb, l, d, &g->d[d], ptr, NULL, ws, ws_avail, e)))
                    return rc;
                if (d == CU_GD_FWD && g->fz.n > 0 &&
                    ((rc = time_dir(c, L, nb, l, d, &g->fz, ptr, bias, ws, ws_avail, e)) ||
                     (rc = time_epilogue(c, L, l, nb, g->fz.epi, y, bias, &g->epi_ms, e))))
                    return rc;
            }
            CUDA_CHECK(e, cudaStreamSynchronize(s));
            timed = true;
            tptr[0] = x; tptr[1] = w; tptr[2] = y; tptr[3] = dw;
            tws = ws;
            tws_avail = ws_avail;
        } else {
            cg_dbg(c, 1, "layer '%s': not enough free device memory to time engines; heuristic "
                   "order", l->name);
        }
    }
    fuse_choose(c, l, g, ndir, timed);
    /* options */
    uint64_t lim = timed ? u64max(16ull << 20, ybytes / 4) : u64max(16ull << 20, ybytes);
    int fa[CU_GD_COUNT], mw[CU_GD_COUNT], ba[CU_GD_COUNT];
    bool any_timed = false;
    for (int d = 0; d < CU_GD_COUNT; d++) {
        const gdir *D = &g->d[d];
        fa[d] = mw[d] = -1;
        if (D->n == 0) continue;
        mw[d] = pick_minws(D);
        if (mw[d] < 0) {   /* every candidate failed to run */
            if (d == CU_GD_BWD_DATA_ACC) continue;
            *no_engine = true;
            snprintf(why, why_n, "no %s engine ran", cg_dir_name[d]);
            return VD_OK;
        }
        fa[d] = timed ? pick_fast(D, UINT64_MAX, true) : -1;
        if (fa[d] >= 0) any_timed = true;
        if (fa[d] < 0) fa[d] = pick_fast(D, UINT64_MAX, false);
    }
    pick_within(g, lim, timed, mw, ba);
    L->n_opts = 0;
    L->tuned = any_timed;
    add_gopt(L, g, "fastest", fa, UINT64_MAX, bias_ws);
    add_gopt(L, g, "min-ws", mw, 0, bias_ws);
    add_gopt(L, g, "balanced", ba, lim, bias_ws);
    /* the workspace ladder between fastest and balanced, from the same timings */
    for (int r = 0; r < CU_WS_RUNGS; r++) {
        uint64_t rcap;
        const char *rlabel;
        cu_ws_rung(r, &rcap, &rlabel);
        int rp[CU_GD_COUNT];
        pick_within(g, rcap, timed, mw, rp);
        add_gopt(L, g, rlabel, rp, rcap, bias_ws);
    }
    /* tests: the GEMM backward-filter and the direct forward as options of their own */
    if (c->conv_gemm_force) add_forced(L, g, fa, CU_GD_BWD_FILTER, GEMM_ENGINE, "gemm w", bias_ws);
    if (c->conv_direct_force) add_forced(L, g, fa, CU_GD_FWD, DIRECT_ENGINE, "direct", bias_ws);
    if (timed && !c->deterministic &&
        (rc = split_setup(c, l, L, g, ndir, tptr, tws, tws_avail, bias_ws, e)))
        return rc;
    /* tests: and every option's forward the direct kernel, at the whole batch
     * (then a following ReLU in place fuses into it, cu_fuse_setup) */
    for (int k = 0; c->conv_direct_force && k < g->d[CU_GD_FWD].n; k++) {
        const gcand *q = &g->d[CU_GD_FWD].c[k];
        if (!q->direct || q->bad) continue;
        for (int o = 0; o < L->n_opts; o++) {
            L->conv_opts[o].gplan[CU_GD_FWD] = k;
            L->conv_opts[o].whole_mask |= 1u << CU_GD_FWD;
        }
        break;
    }
    cu_conv_opts_order(L);
    /* drop the plans no option uses (set -1: the whole-batch plans) */
    for (int set = -1; set < G_SPLITS; set++)
        for (int d = 0; d < CU_GD_COUNT; d++) {
            gdir *D = set < 0 ? &g->d[d] : &g->s[set][d];
            for (int k = 0; k < D->n; k++) {
                bool used = false;
                for (int o = 0; o < L->n_opts; o++) {
                    const cu_conv_opt *co = &L->conv_opts[o];
                    used |= co->gplan[d] == k &&
                            (cg_opt_split_dir(co, d) ? co->sset == set : set < 0);
                }
                if (!used) {
                    cg_gcand_free(&D->c[k]);
                    D->c[k].bad = true;
                }
            }
        }
    if (c->conv_debug >= 1) {
        for (int o = 0; o < L->n_opts; o++) {
            char line[400];
            size_t at = 0;
            const cu_conv_opt *co = &L->conv_opts[o];
            for (int d = 0; d < CU_GD_COUNT && at < sizeof line; d++) {
                int k = co->gplan[d];
                if (k < 0) continue;
                const gcand *q = &cg_opt_dir(g, co, d)->c[k];
                at += (size_t)snprintf(line + at, sizeof line - at, " %s=e%lld%s(%lluB,%.3fms)",
                                       cg_dir_name[d], (long long)q->engine, q->tc ? "tc" : "",
                                       (unsigned long long)q->ws, (double)q->ms);
            }
            cg_dbg(c, 1, "layer '%s': graph API, %s, option %d %s:%s", l->name,
                   timed ? "timed" : "heuristic order", o, L->opts[o].label, line);
        }
    }
    return VD_OK;
}

int cu_graph_conv_setup(cu_ctx *c, const vd_net *net, int li, cu_layer *L, uint64_t bias_ws,
                        bool *no_engine, char *why, size_t why_n, vd_err *e) {
    *no_engine = false;
    if (why_n) why[0] = '\0';
    cu_graph *g = (cu_graph *)vd_calloc(1, sizeof *g, e);
    if (!g) return VD_ENOMEM;
    g->ax = 16;
    /* channels-last: the weight is the 256-aligned KRSC copy in the workspace (conv_cl_io) */
    g->aw = vd_math_nhwc(c->math) ? 16 : cu_conv_weight_align(net, li);
    g->ab = cu_conv_param_align(net, li, VD_ROLE_BIAS);
    int rc = graph_setup(c, net, li, L, g, bias_ws, no_engine, why, why_n, e);
    if (rc || *no_engine) {
        cg_graph_free(g);
        L->n_opts = 0;
        return rc;
    }
    cg_tmp_clear(g);
    L->g = g;
    L->g_owner = true;
    return VD_OK;
}

float cu_graph_conv_fastest_ms(const cu_layer *L) {
    const cu_graph *g = L->g;
    if (!g || L->n_opts < 1 || !L->tuned) return -1.0f;
    const cu_conv_opt *co = &L->conv_opts[0];
    static const int dirs[3] = {CU_GD_FWD, CU_GD_BWD_DATA, CU_GD_BWD_FILTER};
    float sum = 0.0f;
    for (int i = 0; i < 3; i++) {
        int d = dirs[i], k = co->gplan[d];
        if (k < 0) return -1.0f;
        const gcand *q = &cg_opt_dir(g, co, d)->c[k];
        if (q->ms < 0.0f) return -1.0f;
        sum += (cg_opt_split_dir(co, d) ? (float)co->split : 1.0f) * q->ms;
    }
    /* a fused forward's time includes the bias (+ ReLU) the legacy path's
     * does not: compared without the separate passes it saves */
    return sum > g->epi_ms ? sum - g->epi_ms : 0.0f;
}
