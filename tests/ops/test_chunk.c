/* test_chunk.c — every chunkable op of the table on the CPU backend, run on
 * chunks of a batch (vd_op_io's n0, n_batch, dw_beta: backend.h) against the
 * same op on the whole batch, in fp32, bf16 and fp16 (a loop test over
 * dts[]).
 *
 * A batch of N = 5 samples runs once whole, then in k = 2 chunks (3 + 2) and
 * k = 3 chunks (2 + 2 + 1): each chunk's forward in the order of n0, then
 * each chunk's backward in that order, the first with dw_beta 0 and the
 * others with dw_beta 1, every operand pointing at the chunk's slice of the
 * batch's buffers. What the contract promises, and how it is checked:
 *   - y and dx: each sample's values are computed exactly as in the whole
 *     batch (per-sample arithmetic; dropout's mask and the loss's 1/n_batch
 *     depend on the batch, not the chunk): byte-equal, no tolerance;
 *   - the loss (aux[0]): the chunks' parts (each rounded to float) added
 *     in n0 order, where the whole batch rounds one sum: relative REL
 *     (below; the sample losses are positive, so no part exceeds the sum);
 *   - dw, db: each chunk's sum added to the chunks' before it, where the
 *     whole batch sums once in its own order: the same terms reassociated,
 *     within REL of the whole tensor's scale (below);
 *   - 16-bit conv dW (rounded to 16 bits where the CUDA path stores it):
 *     exactly the float sum, in chunk order, of each chunk's own rounded
 *     dW (the chunk run alone with dw_beta 0), and within the rounding
 *     bound of the whole batch's rounded dW (see check_grad).
 * An op chunkable only in its evaluation forward (batch norm, running
 * statistics: vd_op_chunkable) runs its evaluation forward only, y and aux
 * byte-equal. non_chunkable_op_fails_loudly: batch norm's training forward
 * and its backward (full-batch statistics) and a chunk outside its batch
 * fail with VD_EINTERNAL naming the layer, in fp32 and 16-bit alike. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ops_common.h"

enum { N = 5 };   /* the whole batch */
/* k = 2 and k = 3 chunks, uneven: 3 + 2 and 2 + 2 + 1 */
static const int splits[2][4] = {{2, 3, 2}, {3, 2, 2, 1}};

/* Relative tolerance of a reassociated fp32 sum: a chunked sum adds at most
 * k - 1 = 2 more roundings (2^-24 = 6e-8 each, relative to partial sums no
 * larger than the scale used) to the whole batch's own: 1e-6 leaves a factor
 * of 8 over that and still fails any term counted twice or lost (of the
 * order of the scale itself). */
static const double REL = 1e-6;

static const vd_dtype dts[] = {VD_DT_F32, VD_DT_BF16, VD_DT_F16};
static vd_dtype DT;
static const char *dt_name(void) {
    return DT == VD_DT_F32 ? "fp32" : DT == VD_DT_BF16 ? "bf16" : "fp16";
}

static vd_backend *be;
static bool seen_op[VD_OP_COUNT];

static void setup(void) {
    vd_err e = {0};
    ck_assert_int_eq(vd_backend_cpu_create(&be, &e), 0);
}
static void teardown(void) { be->destroy(be); be = NULL; }

/* ------------------------------------------------------------------ buffers */

/* n feature-map elements of type DT, 0xFF filled (NaN in every type). */
static void *fm_alloc(int64_t n) {
    size_t bytes = (size_t)(n > 0 ? n : 1) * (size_t)vd_dtype_bytes(DT);
    void *p = malloc(bytes);
    ck_assert_ptr_nonnull(p);
    memset(p, 0xFF, bytes);
    return p;
}

/* The float values f[n] as type DT (rounded in 16 bits). */
static void *fm_of(const float *f, int64_t n) {
    void *p = fm_alloc(n);
    if (DT == VD_DT_F32) memcpy(p, f, (size_t)n * sizeof *f);
    else vd_f32_to_h16_n(DT, f, p, (size_t)n);
    return p;
}

/* Element i of a DT buffer, for messages. */
static double fm_at(const void *p, int64_t i) {
    if (DT == VD_DT_F32) return ((const float *)p)[i];
    return vd_h16_to_f32(DT, ((const uint16_t *)p)[i]);
}

/* Sample s of a DT buffer of `per` elements per sample. */
static void *fm_slice(void *p, int64_t per, int64_t s) {
    return (char *)p + (size_t)(s * per) * (size_t)vd_dtype_bytes(DT);
}

/* One run's results: y, dx[k] (DT), dw, db, aux (fp32). */
typedef struct run_out {
    void *y, *dx[VD_MAX_INPUTS];
    float *dw, *db, *aux;
} run_out;

static void out_alloc(run_out *o, const t_op *t) {
    memset(o, 0, sizeof *o);
    o->y = fm_alloc(t->yn);
    for (int k = 0; k < t->n_in; k++) o->dx[k] = fm_alloc(t->xn[k]);
    if (t->dw) o->dw = t_alloc(t->wn);
    if (t->db) o->db = t_alloc(t->bn);
    if (t->aux) o->aux = t_alloc(t->auxn);
}

static void out_free(run_out *o, int n_in) {
    free(o->y);
    for (int k = 0; k < n_in; k++) free(o->dx[k]);
    free(o->dw);
    free(o->db);
    free(o->aux);
}

/* ------------------------------------------------------------------ running */

typedef struct chunk_case {
    const char *what;
    int algo;
    bool training;
    bool fwd_only;      /* the evaluation forward only (training false) */
} chunk_case;

/* The operands of one call of layer t->layer: samples [n0, n0 + n) of the
 * batch's x (xs[k]) and dy (dys), o's y, dx, dw, db and aux; n_batch and
 * dw_beta as given (0, 0 for the whole batch). */
static vd_op_io chunk_io(const t_op *t, void *const *xs, void *dys, run_out *o, int64_t n0, int n,
                         int n_batch, float dw_beta, const chunk_case *cc) {
    const vd_net *net = t->net;
    const vd_layer *l = &net->layers[t->layer];
    int64_t per_y = vd_net_out_numel(net, t->layer);
    vd_op_io io = t->io;
    io.act = DT;
    io.n = n;
    io.n0 = n0;
    io.n_batch = n_batch;
    io.dw_beta = dw_beta;
    io.algo = cc->algo;
    io.training = cc->training;
    for (int k = 0; k < l->n_in; k++) {
        int64_t per_x = vd_net_out_numel(net, l->in[k]);
        io.x[k] = fm_slice(xs[k], per_x, n0);
        io.dx[k] = fm_slice(o->dx[k], per_x, n0);
        io.dx_beta[k] = 0.0f;
    }
    io.y = fm_slice(o->y, per_y, n0);
    io.dy = fm_slice(dys, per_y, n0);
    io.dw = o->dw;
    io.db = o->db;
    io.aux = o->aux;
    io.labels = t->labels + n0;
    /* math fp16 scales the loss's gradient, as the executor asks */
    io.loss_scaled = DT == VD_DT_F16 && l->op == VD_OP_SOFTMAX_XENT;
    return io;
}

static void call(const t_op *t, const vd_op_io *io, bool bwd, const char *what) {
    vd_err e = {0};
    int rc = bwd ? be->backward(be, t->net, t->layer, io, &e) : be->forward(be, t->net, t->layer, io, &e);
    ck_assert_msg(rc == 0, "%s %s: %s samples [%lld, +%d) of %d: %s", dt_name(), what,
                  bwd ? "backward" : "forward", (long long)io->n0, io->n, io->n_batch, e.msg);
}

/* ------------------------------------------------------------------ checks */

/* Byte equality of two DT buffers of n elements. */
static void check_same(const void *got, const void *want, int64_t n, const char *what,
                       const char *tensor, int k) {
    size_t es = (size_t)vd_dtype_bytes(DT);
    for (int64_t i = 0; i < n; i++)
        if (memcmp((const char *)got + (size_t)i * es, (const char *)want + (size_t)i * es, es))
            ck_abort_msg("%s %s, %d chunks: %s[%lld] = %a, the whole batch's %a", dt_name(), what,
                         k, tensor, (long long)i, fm_at(got, i), fm_at(want, i));
}

/* dw or db of the chunked run (got) against the whole batch's (want), n
 * values; alone[c] the gradient of chunk c run by itself (dw_beta 0).
 * fp32 (and every 16-bit gradient kept fp32): within REL of the scale, the
 * largest of |want| and of sum_c |alone[c]| (the partial sums' size). conv
 * dW in 16 bits (rounded): got is exactly the float sum of the alone[c]
 * (each chunk's rounded dW, then added); each rounding of a value v moves it
 * by at most u |rn(v)| (u = 2^-8 bf16, 2^-11 fp16; plus 2^-25 absolute for
 * fp16's subnormals), so |got - want| <= u (sum_c |alone[c]| + |want|) + the
 * fp32 reassociation (REL of the scale) per element. */
static void check_grad(const float *got, const float *want, float *const *alone, int n_chunks,
                       int64_t n, bool rounded16, const char *what, const char *tensor) {
    double scale = 0;
    for (int64_t i = 0; i < n; i++) {
        double s = 0;
        for (int c = 0; c < n_chunks; c++) s += fabs((double)alone[c][i]);
        scale = fmax(scale, fmax(s, fabs((double)want[i])));
    }
    double u = DT == VD_DT_F16 ? 1.0 / 2048.0 : 1.0 / 256.0;
    double tiny = DT == VD_DT_F16 ? ldexp(1.0, -25) : 0.0;
    for (int64_t i = 0; i < n; i++) {
        if (rounded16) {
            float sum = alone[0][i];
            double mag = fabs((double)alone[0][i]);
            for (int c = 1; c < n_chunks; c++) {
                sum += alone[c][i];
                mag += fabs((double)alone[c][i]);
            }
            ck_assert_msg(got[i] == sum, "%s %s, %d chunks: %s[%lld] = %a, not the sum %a of the "
                          "chunks' rounded gradients", dt_name(), what, n_chunks, tensor,
                          (long long)i, (double)got[i], (double)sum);
            double bound = u * (mag + fabs((double)want[i])) + (n_chunks + 1) * tiny + REL * scale;
            ck_assert_msg(fabs((double)got[i] - want[i]) <= bound, "%s %s, %d chunks: %s[%lld] = "
                          "%a, the whole batch's %a: beyond the rounding bound %g", dt_name(),
                          what, n_chunks, tensor, (long long)i, (double)got[i], (double)want[i],
                          bound);
        } else {
            ck_assert_msg(fabs((double)got[i] - want[i]) <= REL * scale,
                          "%s %s, %d chunks: %s[%lld] = %a, the whole batch's %a (scale %g)",
                          dt_name(), what, n_chunks, tensor, (long long)i, (double)got[i],
                          (double)want[i], scale);
        }
    }
}

/* ------------------------------------------------------------------ one case */

/* Layer `layer` of net: the whole batch, then each split, compared. */
static void chunk_check(const vd_net *net, int layer, chunk_case cc) {
    const vd_layer *l = &net->layers[layer];
    ck_assert_msg(vd_op_chunkable(&vd_op_table[l->op], cc.fwd_only && !cc.training),
                  "%s: op '%s' is not chunkable", cc.what, vd_op_table[l->op].name);
    seen_op[l->op] = true;
    t_op t;
    t_op_init(&t, be, net, layer, N, 41);
    void *xs[VD_MAX_INPUTS], *dys = fm_of(t.r, t.yn);
    for (int k = 0; k < t.n_in; k++) xs[k] = fm_of(t.x[k], t.xn[k]);
    bool conv16 = l->op == VD_OP_CONV && DT != VD_DT_F32;

    run_out full;
    out_alloc(&full, &t);
    vd_op_io io = chunk_io(&t, xs, dys, &full, 0, N, 0, 0.0f, &cc);
    call(&t, &io, false, cc.what);
    if (!cc.fwd_only) call(&t, &io, true, cc.what);

    for (int s = 0; s < 2; s++) {
        int k = splits[s][0];
        const int *len = splits[s] + 1;
        run_out ch;
        out_alloc(&ch, &t);
        int64_t n0 = 0;
        for (int c = 0; c < k; n0 += len[c++]) {
            io = chunk_io(&t, xs, dys, &ch, n0, len[c], N, 0.0f, &cc);
            call(&t, &io, false, cc.what);
        }
        n0 = 0;
        for (int c = 0; c < k && !cc.fwd_only; n0 += len[c++]) {
            io = chunk_io(&t, xs, dys, &ch, n0, len[c], N, c > 0 ? 1.0f : 0.0f, &cc);
            call(&t, &io, true, cc.what);
        }
        check_same(ch.y, full.y, t.yn, cc.what, "y", k);
        if (cc.fwd_only) {   /* batch norm's evaluation aux: the running statistics' */
            ck_assert_msg(!t.aux || !memcmp(ch.aux, full.aux, (size_t)t.auxn * sizeof(float)),
                          "%s %s, %d chunks: aux differs", dt_name(), cc.what, k);
            out_free(&ch, t.n_in);
            continue;
        }
        for (int q = 0; q < t.n_in; q++) check_same(ch.dx[q], full.dx[q], t.xn[q], cc.what, "dx", k);
        if (t.aux) {
            ck_assert_msg(fabs((double)ch.aux[0] - full.aux[0]) <= REL * fabs((double)full.aux[0]),
                          "%s %s, %d chunks: loss %a, the whole batch's %a", dt_name(), cc.what, k,
                          (double)ch.aux[0], (double)full.aux[0]);
            /* the top-1 hits: a count, summed over the chunks exactly */
            ck_assert_msg(ch.aux[1] == full.aux[1], "%s %s, %d chunks: hits %g, the whole "
                          "batch's %g", dt_name(), cc.what, k, (double)ch.aux[1],
                          (double)full.aux[1]);
        }
        if (t.dw || t.db) {
            /* each chunk's own gradient: its backward alone, dw_beta 0 (dx into
             * a scratch run, so that ch's stays as compared) */
            float *adw[4] = {NULL}, *adb[4] = {NULL};
            run_out scratch;
            out_alloc(&scratch, &t);
            memcpy(scratch.y, ch.y, (size_t)t.yn * (size_t)vd_dtype_bytes(DT));
            n0 = 0;
            for (int c = 0; c < k; n0 += len[c++]) {
                io = chunk_io(&t, xs, dys, &scratch, n0, len[c], N, 0.0f, &cc);
                call(&t, &io, true, cc.what);
                if (t.dw) adw[c] = t_copy(scratch.dw, t.wn);
                if (t.db) adb[c] = t_copy(scratch.db, t.bn);
            }
            if (t.dw) check_grad(ch.dw, full.dw, adw, k, t.wn, conv16, cc.what, "dw");
            if (t.db) check_grad(ch.db, full.db, adb, k, t.bn, false, cc.what, "db");
            for (int c = 0; c < k; c++) { free(adw[c]); free(adb[c]); }
            out_free(&scratch, t.n_in);
        }
        out_free(&ch, t.n_in);
    }
    if (l->op == VD_OP_SOFTMAX_XENT) {
        /* loss_n 3 of 5 (an evaluation's padded batch) in 2 + 2 + 1 chunks:
         * the count ends inside the second chunk; the chunks' loss and hits
         * count the samples the whole batch's do */
        run_out ch;
        out_alloc(&ch, &t);
        io = chunk_io(&t, xs, dys, &full, 0, N, 0, 0.0f, &cc);
        io.loss_n = 3;
        call(&t, &io, false, cc.what);
        int64_t n0 = 0;
        for (int c = 0; c < splits[1][0]; n0 += splits[1][1 + c++]) {
            io = chunk_io(&t, xs, dys, &ch, n0, splits[1][1 + c], N, 0.0f, &cc);
            io.loss_n = 3;
            call(&t, &io, false, cc.what);
        }
        ck_assert_msg(fabs((double)ch.aux[0] - full.aux[0]) <= REL * fabs((double)full.aux[0]) &&
                      ch.aux[1] == full.aux[1], "%s %s, loss_n 3: loss %a hits %g, the whole "
                      "batch's %a %g", dt_name(), cc.what, (double)ch.aux[0], (double)ch.aux[1],
                      (double)full.aux[0], (double)full.aux[1]);
        out_free(&ch, t.n_in);
    }
    out_free(&full, t.n_in);
    for (int k = 0; k < t.n_in; k++) free(xs[k]);
    free(dys);
    t_op_free(&t);
}

static chunk_case C(const char *what) { return (chunk_case){what, 0, true, false}; }

static void one(int c, int h, int w, vd_layer l, chunk_case cc) {
    vd_net net;
    int i = t_net_one(&net, c, h, w, l);
    chunk_check(&net, i, cc);
    vd_net_free(&net);
}

static void multi(vd_op op, int n_in, const int *chans, chunk_case cc) {
    vd_net net;
    int i = t_net_multi(&net, op, n_in, chans);
    chunk_check(&net, i, cc);
    vd_net_free(&net);
}

/* ------------------------------------------------------------------ tests */

START_TEST(every_op_chunked_matches_full) {
    DT = dts[_i];
    memset(seen_op, 0, sizeof seen_op);
    for (int algo = 0; algo < 2; algo++) {
        chunk_case c = C(algo ? "conv 3x3 p1 bias [direct]" : "conv 3x3 p1 bias [im2col]");
        c.algo = algo;
        one(3, 7, 6, vdt_conv(-1, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, true), c);
        c.what = algo ? "conv groups 2 s2 [direct]" : "conv groups 2 s2 [im2col]";
        one(4, 7, 6, vdt_conv(-1, 6, 3, 3, 2, 2, 1, 1, 1, 1, 2, true), c);
    }
    one(2, 6, 6, vdt_pool(-1, VD_POOL_MAX, 2, 2, 2, 2, 0, 0, false), C("max pool 2x2 s2"));
    one(2, 7, 7, vdt_pool(-1, VD_POOL_AVG, 3, 3, 2, 2, 1, 1, true), C("avg pool 3x3 s2 p1 ceil"));
    one(3, 4, 5, t_adaptive(-1, VD_POOL_AVG, 2, 3), C("adaptive avg pool"));
    one(3, 4, 5, vdt_simple(-1, VD_OP_RELU), C("relu"));
    vd_layer lrn = vdt_simple(-1, VD_OP_LRN);
    lrn.u.lrn.size = 3; lrn.u.lrn.alpha = 0.5f; lrn.u.lrn.beta = 0.75f; lrn.u.lrn.k = 1.0f;
    one(6, 3, 2, lrn, C("lrn size 3"));
    vd_layer fc = vdt_simple(-1, VD_OP_FC);
    fc.u.fc.out = 5; fc.u.fc.bias = true;
    one(3, 2, 2, fc, C("fc bias"));
    fc.u.fc.out = 4; fc.u.fc.bias = false;
    one(7, 1, 1, fc, C("fc no bias"));
    /* p 0.3: the mask of each chunk must be its part of the batch's */
    vd_layer dr = vdt_simple(-1, VD_OP_DROPOUT);
    dr.u.dropout.p = 0.3f;
    one(3, 4, 5, dr, C("dropout p 0.3"));
    chunk_case de = C("dropout eval");
    de.training = false;
    one(3, 4, 5, dr, de);
    one(3, 2, 4, vdt_simple(-1, VD_OP_FLATTEN), C("flatten"));
    int c2[] = {3, 3}, c3[] = {1, 3, 2};
    multi(VD_OP_ADD, 2, c2, C("add 2"));
    multi(VD_OP_CONCAT, 3, c3, C("concat 1+3+2"));
    one(3, 4, 5, vdt_simple(-1, VD_OP_GELU), C("gelu"));
    chunk_case be_ = C("batchnorm eval forward");
    be_.training = false;
    be_.fwd_only = true;
    one(3, 4, 5, vdt_simple(-1, VD_OP_BATCHNORM), be_);
    {   /* the loss: mean over the batch, its parts added chunk by chunk */
        vd_net net;
        t_net_begin(&net, 7, 1, 1);
        vdt_finish(&net, -1);
        chunk_check(&net, 0, C("softmax xent 7 classes"));
        vd_net_free(&net);
    }
    for (int op = 0; op < VD_OP_COUNT; op++)
        ck_assert_msg(seen_op[op] || !vd_op_chunkable(&vd_op_table[op], true),
                      "op '%s' is chunkable but has no case here", vd_op_table[op].name);
}
END_TEST

/* rc of layer `layer`'s forward (bwd false) or backward with io. */
static int try_call(const t_op *t, const vd_op_io *io, bool bwd, vd_err *e) {
    return bwd ? be->backward(be, t->net, t->layer, io, e) : be->forward(be, t->net, t->layer, io, e);
}

static void expect_fail(const t_op *t, const vd_op_io *io, bool bwd, const char *what) {
    vd_err e = {0};
    int rc = try_call(t, io, bwd, &e);
    const char *name = t->net->layers[t->layer].name;
    ck_assert_msg(rc == VD_EINTERNAL, "%s %s: rc %d, want VD_EINTERNAL", dt_name(), what, rc);
    char quoted[VD_NAME_MAX + 2];
    snprintf(quoted, sizeof quoted, "'%s'", name);
    ck_assert_msg(strstr(e.msg, quoted), "%s %s: the message does not name layer %s: %s",
                  dt_name(), what, quoted, e.msg);
}

START_TEST(non_chunkable_op_fails_loudly) {
    DT = dts[_i];
    for (int op = 0; op < VD_OP_COUNT; op++)   /* the one op that cannot, for now */
        ck_assert_msg(vd_op_table[op].chunkable == (op != VD_OP_BATCHNORM),
                      "op '%s': chunkable %d", vd_op_table[op].name, vd_op_table[op].chunkable);
    vd_net net;
    t_net_begin(&net, 3, 4, 5);
    int i = vdt_add(&net, vdt_simple(-1, VD_OP_BATCHNORM));
    int r = vdt_add(&net, vdt_simple(i, VD_OP_RELU));
    vdt_finish(&net, r);
    t_op t;
    t_op_init(&t, be, &net, i, N, 5);
    void *xs[1] = {fm_of(t.x[0], t.xn[0])}, *dys = fm_of(t.r, t.yn);
    run_out o;
    out_alloc(&o, &t);
    chunk_case cc = C("batchnorm");
    vd_op_io io = chunk_io(&t, xs, dys, &o, 0, N, 0, 0.0f, &cc);
    vd_err e = {0};
    ck_assert_msg(try_call(&t, &io, false, &e) == 0, "whole batch forward: %s", e.msg);
    ck_assert_msg(try_call(&t, &io, true, &e) == 0, "whole batch backward: %s", e.msg);
    io = chunk_io(&t, xs, dys, &o, 0, N, N, 0.0f, &cc);   /* n_batch = n: whole */
    ck_assert_msg(try_call(&t, &io, false, &e) == 0, "n_batch = n forward: %s", e.msg);
    io = chunk_io(&t, xs, dys, &o, 0, 2, N, 0.0f, &cc);
    expect_fail(&t, &io, false, "batchnorm forward of samples [0, 2) of 5");
    /* its evaluation forward runs on a chunk (running statistics), its
     * evaluation backward does not */
    chunk_case ev = C("batchnorm eval");
    ev.training = false;
    io = chunk_io(&t, xs, dys, &o, 0, 2, N, 0.0f, &ev);
    ck_assert_msg(try_call(&t, &io, false, &e) == 0, "evaluation forward of samples [0, 2): %s",
                  e.msg);
    io = chunk_io(&t, xs, dys, &o, 2, 3, N, 0.0f, &ev);
    expect_fail(&t, &io, true, "batchnorm evaluation backward of samples [2, 5) of 5");
    io = chunk_io(&t, xs, dys, &o, 2, 3, N, 1.0f, &cc);
    expect_fail(&t, &io, true, "batchnorm backward of samples [2, 5) of 5");
    io = chunk_io(&t, xs, dys, &o, 0, N, N, 1.0f, &cc);
    expect_fail(&t, &io, true, "batchnorm backward with dw_beta 1");
    out_free(&o, t.n_in);
    free(xs[0]);
    free(dys);
    t_op_free(&t);

    /* a chunk outside its batch, on a chunkable op */
    t_op_init(&t, be, &net, r, N, 6);
    xs[0] = fm_of(t.x[0], t.xn[0]);
    dys = fm_of(t.r, t.yn);
    out_alloc(&o, &t);
    cc = C("relu");
    io = chunk_io(&t, xs, dys, &o, 3, 2, N, 0.0f, &cc);
    io.n0 = 4;   /* [4, 6) of 5 (the pointers stay inside the buffers) */
    expect_fail(&t, &io, false, "relu forward of samples [4, 6) of 5");
    out_free(&o, t.n_in);
    free(xs[0]);
    free(dys);
    t_op_free(&t);
    vd_net_free(&net);
}
END_TEST

static TCase *case_of(Suite *s, const TTest *t) { return t_case(s, t, setup, teardown); }

static Suite *suite(void) {
    Suite *s = suite_create("ops_chunk");
    int nd = (int)(sizeof dts / sizeof dts[0]);   /* _i: dts[_i] */
    tcase_add_loop_test(case_of(s, every_op_chunked_matches_full), every_op_chunked_matches_full,
                        0, nd);
    tcase_add_loop_test(case_of(s, non_chunkable_op_fails_loudly), non_chunkable_op_fails_loudly,
                        0, nd);
    return s;
}

int main(void) {
    return vdt_run(suite());
}
