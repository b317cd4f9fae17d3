/* cuda_convgraph_run.cu — the graph-API conv at run time: an option's
 * direction through its setup plan, as sub-batch chunks, or through a plan
 * built for the call (see cuda_convgraph.h). */
#include <string.h>
#include "backend/cuda/cuda_convgraph.h"

/* One direction of a split option: k chunks of batch n/k (the sub-batch
 * of q: the option's split of the whole batch, or fewer of them for a
 * chunk of the batch), each through the sub-batch plan q; backward-filter
 * chunks after the first (and the first too with beta 1: a call that adds
 * to dw) write their dw into the workspace front and are added to dw.
 * Chunks advance by elements of io->act (split options exist in fp32
 * (NCHW) only, split_setup: 4 bytes; a 16-bit map's elements are 2, and a
 * channels-last conv's dW the KRSC one of conv_cl_io). */
static int run_split(cu_ctx *c, const cu_layer *L, const cu_graph *g, int d, int k,
                     const gcand *q, void *const ptr[3], const vd_op_io *io, float beta,
                     vd_err *e) {
    const uint64_t es = (uint64_t)vd_dtype_bytes(io->act);
    const uint64_t xs = (uint64_t)L->in_c[0] * L->in_h * L->in_w * es * (uint64_t)(io->n / k);
    const uint64_t ys = (uint64_t)L->c * L->h * L->w * es * (uint64_t)(io->n / k);
    const bool filt = d == CU_GD_BWD_FILTER;
    char *tmp = (char *)io->ws;
    char *ws = filt ? tmp + g->dw_tmp : tmp;
    for (int i = 0; i < k; i++) {
        const bool add = filt && (i > 0 || beta != 0.0f);
        void *p[3] = {(char *)ptr[0] + (uint64_t)i * xs, add ? (void *)tmp : ptr[1],
                      (char *)ptr[2] + (uint64_t)i * ys};
        CUDNN_CHECK(e, cg_exec_plan(c->dnn, q->plan, p, NULL, q->ws ? (void *)ws : NULL));
        if (add) {
            int rc = cuk_axpby_copy(cu_compute(c), c->sm_count, (const float *)tmp, (float *)ptr[1],
                                    1.0f, g->dw_numel, io->act, e);
            if (rc) return rc;
        }
    }
    return VD_OK;
}

/* The global engine index of the plan option o's setup runs for direction
 * d (dx accumulation without plans of its own: dx's), or -1 where that is
 * no cuDNN plan (none, the cuBLAS backward-filter, the direct kernel). */
static int64_t setup_engine(const cu_graph *g, const cu_conv_opt *o, int d) {
    if (d == CU_GD_BWD_DATA_ACC && o->gplan[d] < 0) d = CU_GD_BWD_DATA;
    const gdir *D = cg_opt_dir(g, o, d);
    const int k = o->gplan[d];
    if (k < 0 || k >= D->n || D->c[k].gemm || D->c[k].direct) return -1;
    return D->c[k].engine;
}

/* Direction d with output beta (cu_graph_conv_run's) through a plan built
 * for the call's batch, beta, alignment and workspace, cached in g->alt. A
 * fused forward's call (epi, its bias aligned) gets a fused plan at the
 * call's batch where a runtime-fusion engine fits the workspace, so that a
 * chunk runs as the whole batch does; *done_epi says which epilogue the
 * plan applied (CG_EPI_NONE: the caller adds it). pref (>= 0), the engine
 * the option's setup plan runs (timed the fastest at the setup batch, for
 * a graph with epilogue pref_epi), is tried first: the heuristics' first
 * engine at a chunk's batch can be several times slower (docs/chunking.md,
 * "Engines"). */
static int run_alt(cu_ctx *c, const vd_net *net, int li, int d, float beta, const vd_op_io *io,
                   void *const ptr[3], int64_t ax, int64_t aw, int epi, int64_t pref,
                   int pref_epi, int *done_epi, uint64_t *ws_used, vd_err *e) {
    cu_layer *L = &c->layers[li];
    cu_graph *g = L->g;
    const vd_layer *l = &net->layers[li];
    const int ldir = d == CU_GD_BWD_DATA_ACC ? CU_GD_BWD_DATA : d;
    void *ws = io->ws_bytes ? io->ws : NULL;
    uint64_t wsb = io->ws ? io->ws_bytes : 0;
    *done_epi = CG_EPI_NONE;
    for (int i = 0; i < G_MAXALT; i++) {
        const galt *a = &g->alt[i];
        if (!a->used || a->dir != d || a->beta != beta || a->n != io->n || a->ax != ax ||
            a->aw != aw || a->want_epi != epi || a->pref != pref)
            continue;
        if (a->legacy && wsb <= a->ws_limit) {
            *ws_used = wsb;
            return cu_legacy_conv_dir(c, net, li, ldir, io, beta, e);
        }
        if (!a->legacy && a->p.ws <= wsb && wsb <= a->ws_limit) {
            CUDNN_CHECK(e, cg_exec_plan(c->dnn, a->p.plan, ptr, a->epi ? io->b : NULL,
                                        a->p.ws ? ws : NULL));
            *done_epi = a->epi;
            *ws_used = a->p.ws;
            return VD_OK;
        }
    }
    galt *a = &g->alt[g->alt_next];
    g->alt_next = (g->alt_next + 1) % G_MAXALT;
    cg_gcand_free(&a->p);
    cg_gop_free(&a->op);
    memset(a, 0, sizeof *a);
    a->used = true;
    a->dir = d;
    a->n = io->n;
    a->beta = beta;
    a->ax = ax;
    a->aw = aw;
    a->want_epi = epi;
    a->pref = pref;
    a->ws_limit = wsb;
    bool ok;
    cudnnStatus_t st;
    int rc, n = 0;
    /* the fused graph first (its engines are runtime-fusion ones), then the
     * convolution alone */
    for (int try_epi = epi; !n; try_epi = CG_EPI_NONE) {
        const bool fused = try_epi != CG_EPI_NONE;
        cg_gop_free(&a->op);
        if ((rc = cg_build_op(c, L, l, d, beta, io->n, ax, aw, g->ab, try_epi, &a->op, &ok, &st,
                              e)))
            goto fail;
        /* the setup engine first (either list), then the heuristics' first */
        for (int pass = pref >= 0 && try_epi == pref_epi ? 0 : 2; ok && !n && pass < 4; pass++)
            if ((rc = cg_add_from_heur(c, g, l->name, d, a->op.graph,
                                       pass % 2 ? CUDNN_HEUR_MODE_FALLBACK : CUDNN_HEUR_MODE_A,
                                       1, wsb, fused, pass < 2 ? pref : -1, &a->p, &n, 1, e)))
                goto fail;
        if (n) a->epi = try_epi;
        if (!fused) break;
    }
    if (!n) {
        a->legacy = true;
        cg_dbg(c, 1, "layer '%s' %s: batch %d, alignment %lld/%lld, workspace %llu: no graph "
               "engine; legacy API", l->name, cg_dir_name[d], io->n, (long long)ax, (long long)aw,
               (unsigned long long)wsb);
        *ws_used = wsb;
        return cu_legacy_conv_dir(c, net, li, ldir, io, beta, e);
    }
    cg_dbg(c, 1, "layer '%s' %s: batch %d, alignment %lld/%lld, workspace %llu: runtime plan%s, "
           "engine %lld", l->name, cg_dir_name[d], io->n, (long long)ax, (long long)aw,
           (unsigned long long)wsb, a->epi ? " with its bias (and ReLU) fused" : "",
           (long long)a->p.engine);
    CUDNN_CHECK(e, cg_exec_plan(c->dnn, a->p.plan, ptr, a->epi ? io->b : NULL,
                                a->p.ws ? ws : NULL));
    *done_epi = a->epi;
    *ws_used = a->p.ws;
    return VD_OK;
fail:
    cg_gcand_free(&a->p);
    cg_gop_free(&a->op);
    a->used = false;
    cg_tmp_clear(g);
    return rc;
}

/* cu_graph_conv_run's call; *used: the workspace bytes it used (a plan's
 * need; all it was given where the legacy API ran it). */
static int conv_run(cu_ctx *c, const vd_net *net, int li, int dir, const vd_op_io *io, float beta,
                    uint64_t *used, vd_err *e) {
    cu_layer *L = &c->layers[li];
    cu_graph *g = L->g;
    if (!g) return vd_errf(e, VD_EINTERNAL, "conv '%s': no graph plans", net->layers[li].name);
    if (io->n > L->desc_batch)   /* cu_conv_* run larger calls as sub-batches */
        return vd_errf(e, VD_EINTERNAL, "conv '%s': %d samples in one call, over the describe "
                       "batch %d", net->layers[li].name, io->n, L->desc_batch);
    void *ptr[3];
    if (dir == CU_GD_FWD) {
        ptr[0] = (void *)io->x[0]; ptr[1] = (void *)io->w; ptr[2] = io->y;
    } else if (dir == CU_GD_BWD_FILTER) {
        ptr[0] = (void *)io->x[0]; ptr[1] = io->dw; ptr[2] = (void *)io->dy;
    } else {
        ptr[0] = io->dx[0]; ptr[1] = (void *)io->w; ptr[2] = (void *)io->dy;
    }
    for (int i = 0; i < 3; i++)
        if (!ptr[i])
            return vd_errf(e, VD_EINTERNAL, "conv '%s' %s: a tensor pointer is NULL",
                           net->layers[li].name, cg_dir_name[dir]);
    int d = dir == CU_GD_BWD_DATA && beta != 0.0f ? CU_GD_BWD_DATA_ACC : dir;
    /* the setup plans of d have beta cg_dir_beta(d): backward-filter adding
     * to dw (beta 1) has none, but the split and GEMM paths add on their own */
    const bool setup_beta = beta == cg_dir_beta(d);
    int64_t ax = cg_ptr_align(ptr[0]), aw = cg_ptr_align(ptr[1]);
    if (cg_ptr_align(ptr[2]) < ax) ax = cg_ptr_align(ptr[2]);
    const cu_conv_opt *o = &L->conv_opts[io->algo];
    int k = o->gplan[d];
    if (cg_opt_split_dir(o, d)) {
        /* the whole batch, or a chunk of whole sub-batches (a split layer's:
         * batch 256 in 4 chunks through "b/8" runs each chunk as 2 sub-batches
         * of 32), through the sub-batch plan its option was timed with */
        const int piece = L->desc_batch / o->split;
        if (k >= 0 && L->desc_batch % o->split == 0 && io->n <= L->desc_batch &&
            io->n % piece == 0 && ax >= g->ax && aw >= g->aw) {
            const gcand *q = &g->s[o->sset][d].c[k];
            uint64_t need = q->ws + (dir == CU_GD_BWD_FILTER ? g->dw_tmp : 0);
            if (need == 0 || (io->ws && need <= io->ws_bytes)) {
                *used = need;
                return run_split(c, L, g, d, io->n / piece, q, ptr, io, beta, e);
            }
        }
        int none;   /* a split option's forward adds no bias (cu_graph_fwd_fuses_bias) */
        return run_alt(c, net, li, d, beta, io, ptr, ax, aw, CG_EPI_NONE, setup_engine(g, o, d),
                       CG_EPI_NONE, &none, used, e);
    }
    if (k >= 0 && g->d[d].c[k].direct) {   /* any batch, any alignment; adds the bias */
        const vd_layer *l = &net->layers[li];
        return cg_direct_fwd(c, L, l, io->n, ptr, l->u.conv.bias ? io->b : NULL, L->fwd_relu, e);
    }
    /* a fused forward's plan also takes the bias, at its declared alignment */
    const int epi = d == CU_GD_FWD ? g->d[d].epi : CG_EPI_NONE;
    const bool bias_ok = epi == CG_EPI_NONE || (io->b && cg_ptr_align(io->b) >= g->ab);
    if (k >= 0 && io->n == L->desc_batch && ax >= g->ax && aw >= g->aw && bias_ok) {
        const gcand *q = &g->d[d].c[k];
        if (q->ws == 0 || (io->ws && q->ws <= io->ws_bytes)) {
            *used = q->ws;
            if (q->gemm) return cg_gemm_filter(c, L, io->n, ptr, io->ws, beta, e);
            if (setup_beta) {
                CUDNN_CHECK(e, cg_exec_plan(c->dnn, q->plan, ptr, epi ? io->b : NULL,
                                            q->ws ? io->ws : NULL));
                return VD_OK;
            }
        }
    }
    /* another batch (a chunk), alignment or workspace: a plan built for the
     * call, fused where an engine fits; else the epilogue's own passes */
    int done = CG_EPI_NONE;
    int rc = run_alt(c, net, li, d, beta, io, ptr, ax, aw, bias_ok ? epi : CG_EPI_NONE,
                     setup_engine(g, o, d), epi, &done, used, e);
    return rc || !epi || done == epi ? rc : cg_epilogue(c, L, &net->layers[li], io, epi, e);
}

int cu_graph_conv_run(cu_ctx *c, const vd_net *net, int li, int dir, const vd_op_io *io,
                      float beta, vd_err *e) {
    uint64_t used = 0;
    int rc = conv_run(c, net, li, dir, io, beta, &used, e);
    if (!rc && used > c->conv_ws_used) c->conv_ws_used = used;
    return rc;
}
