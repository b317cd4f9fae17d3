/* test_bf16.c — every op of the table on the CPU backend in the two 16-bit
 * maths, bf16 and fp16 (vd_op_io.act VD_DT_BF16 / VD_DT_F16: cpu_run_h16),
 * against the fp32 CPU op on the same 16-bit-representable inputs. Each
 * test runs once per type (a loop test over dts[]: DT, U and TINY below);
 * "bf16" in the comments stands for the type under test, whose unit
 * roundoff u is 2^-8 (bf16) or 2^-11 (fp16).
 *
 * What bf16 math promises (src/backend/cpu/cpu_backend.c, backend.h): the
 * feature-map operands (x, y, dy, dx) are bf16 storage; the op itself runs
 * in fp32 on their exact float values, and what it writes is rounded to
 * nearest even once, where the CUDA path stores bf16. Conv and fc multiply
 * with bf16-rounded weights and add their bias after the product was stored
 * (y rounded twice); conv dW passes through bf16, fc dW, every bias gradient
 * and batch-norm values stay fp32. So, per op and per tensor:
 *
 *  1. Storage: the op writes 16-bit elements, exactly their 2-byte slots, so
 *     every stored value is one of the type's (guard
 *     words after each bf16 buffer stay untouched; every element is
 *     compared, so one left unwritten shows too).
 *  2. The contract, exactly: y (and dx, dx accumulated with dx_beta = 1) is
 *     bit-for-bit vd_f32_to_bf16 of the fp32 op's result on the same values
 *     (conv / fc: of the product with the rounded weight, rounded, plus the
 *     bias). No tolerance: both run the same fp32 code on the same floats.
 *  3. The error against fp32 proper (fp32 weights, no intermediate store),
 *     bounded from bf16's unit roundoff u = 2^-8 (8 significant bits, round
 *     to nearest: |rn(v) - v| <= u |rn(v)| and <= u |v|):
 *       - one rounding of the fp32 result v (every op but conv / fc):
 *         |y_bf - v| <= u |v| per element, so also the normalized error
 *         max |y_bf - v| / max |v| <= u;
 *       - conv / fc, y = rn(rn(sum x w^) + b) with w^ = rn(w) against
 *         sum x w + b: the weight rounding moves the sum by at most
 *         u sum |x||w| = u A, the stored product by u |sum x w^| <=
 *         u (1 + u) A, the bias add by u |y_bf|; the two fp32 sums with
 *         different weights add at most 2 K 2^-24 A (K <= 200 terms here:
 *         < 0.01 u A). Bound u (|y_bf| + 2.05 A) per element (0.05: the
 *         (1 + u) factors and the fp32 sums); dx of conv / fc (one
 *         rounding): u (|dx_bf| + 1.05 A) with A = sum |dy||w|. A is the
 *         fp32 op itself run on |x|, |w| (|dy|, |w|).
 *       fp16 adds TINY = 2^-25 to each bound (and TINY / u to the
 *       normalized one's denominator): a result in binary16's subnormal
 *       range is rounded with that absolute error, not u |v|.
 *  4. What must not change at all: aux (batch-norm mean / invstd, the loss),
 *     running statistics, bias and batch-norm gradients, fc dW equal the
 *     fp32 ones bit for bit; conv dW is exactly rn(fp32 dW), its low 16 bits
 *     zero. An op whose fp32 output is one of its inputs' values (relu, max
 *     pooling, concat, flatten, dropout with scale 2 or in eval) gives
 *     bit-identical results in both maths; so do their gradients where each
 *     dx element is one dy element (and add's).
 *  5. In-place aliasing: relu and dropout with x == y forward and dx == dy
 *     backward, and add(a, a) with both gradients in one buffer, give what
 *     the out-of-place call gives.
 * checker_catches_errors shows that the comparisons fail on a one-ulp
 * error, on truncation instead of rounding and on a bias added before the
 * store, and that a conv named by vd_backend_cpu_bias_rounding (the oracle
 * of a CUDA conv whose cuDNN graph fuses its bias) rounds once instead. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ops_common.h"

/* The type under test, set by each test from its loop index. */
static const vd_dtype dts[] = {VD_DT_BF16, VD_DT_F16};
static vd_dtype DT;
/* Its unit roundoff (see 3. above): 2^-8 (bf16: 8 significant bits) or
 * 2^-11 (binary16: 11). */
static double U;
/* The absolute error a rounding may add beyond u |v|: half the smallest
 * subnormal step, 2^-25, for binary16, whose subnormals begin at 2^-14 and
 * which the test's values (gelu near 0, small gradients) can reach; 0 for
 * bf16 (float's range: its subnormals are below 1e-38, out of reach). */
static double TINY;
static const char *dt_name(void) { return DT == VD_DT_F16 ? "fp16" : "bf16"; }
static void set_dtype(int i) {
    DT = dts[i];
    U = DT == VD_DT_F16 ? 1.0 / 2048.0 : 1.0 / 256.0;
    TINY = DT == VD_DT_F16 ? ldexp(1.0, -25) : 0.0;
}
enum { GUARD = 8 };
#define GUARD_WORD 0xA5C3u

static vd_backend *be;
static bool verbose;

static void setup(void) {
    vd_err e = {0};
    ck_assert_int_eq(vd_backend_cpu_create(&be, &e), 0);
    verbose = getenv("VD_TEST_VERBOSE") != NULL;
}
static void teardown(void) { be->destroy(be); be = NULL; }

/* ------------------------------------------------------------------ buffers */

/* n bf16 slots, 0xFFFF (a NaN) filled, then GUARD guard words. */
static uint16_t *bf_alloc(int64_t n) {
    uint16_t *p = malloc((size_t)(n + GUARD) * sizeof *p);
    ck_assert_ptr_nonnull(p);
    for (int64_t i = 0; i < n; i++) p[i] = 0xFFFFu;
    for (int64_t i = n; i < n + GUARD; i++) p[i] = GUARD_WORD;
    return p;
}

static uint16_t *bf_of(const float *f, int64_t n) {
    uint16_t *p = bf_alloc(n);
    vd_f32_to_h16_n(DT, f, p, (size_t)n);
    return p;
}

static uint16_t *bf_dup(const uint16_t *p, int64_t n) {
    uint16_t *q = bf_alloc(n);
    memcpy(q, p, (size_t)n * sizeof *q);
    return q;
}

static float *f_of(const uint16_t *p, int64_t n) {
    float *f = t_alloc(n);
    vd_h16_to_f32_n(DT, p, f, (size_t)n);
    return f;
}

static void guard_ok(const uint16_t *p, int64_t n, const char *what, const char *tensor) {
    for (int64_t i = n; i < n + GUARD; i++)
        ck_assert_msg(p[i] == GUARD_WORD, "%s: %s written past its %lld bf16 elements", what,
                      tensor, (long long)n);
}

static float *f_abs(const float *p, int64_t n) {
    float *q = t_alloc(n);
    for (int64_t i = 0; i < n; i++) q[i] = fabsf(p[i]);
    return q;
}

/* ------------------------------------------------------------------ comparisons */

/* Elements where got != vd_f32_to_h16(DT, want[i]); the first one in *first. */
static int64_t bf_mismatch(const uint16_t *got, const float *want, int64_t n, int64_t *first) {
    int64_t bad = 0;
    *first = -1;
    for (int64_t i = 0; i < n; i++)
        if (got[i] != vd_f32_to_h16(DT, want[i]) && bad++ == 0) *first = i;
    return bad;
}

/* Error of got against ref under the bounds of the header (3.): the largest
 * |got - ref| / (u scale_i) (<= 1 passes; NaN fails) and the normalized
 * error max |got - ref| / max scale_i in *norm (<= u passes). One rounding
 * (A NULL): scale_i = |ref_i|; conv / fc: scale_i = |got_i| + ca A_i. */
static double bf_err(const uint16_t *got, const float *ref, const float *A, double ca, int64_t n,
                     double *norm) {
    double worst = 0, dmax = 0, smax = 0;
    for (int64_t i = 0; i < n; i++) {
        double g = vd_h16_to_f32(DT, got[i]), r = ref[i];
        double scale = A ? fabs(g) + ca * A[i] : fabs(r);
        double d = fabs(g - r);
        double q = d == 0 ? 0 : d / (U * scale + TINY);   /* scale 0, d > 0: inf (bf16) */
        if (!(q <= worst)) worst = q;
        if (!(d <= dmax)) dmax = d;
        if (scale > smax) smax = scale;
    }
    *norm = smax > 0 ? dmax / (smax + TINY / U) : dmax;
    return worst;
}

/* ------------------------------------------------------------------ one op */

typedef struct bf_case {
    const char *what;
    int n;              /* batch */
    int algo;
    bool training;
    bool same_fwd;      /* y_bf == y_fp32 bit for bit (the output is input values) */
    bool same_bwd;      /* dx_bf == dx_fp32 bit for bit (each dx is one dy value) */
} bf_case;

static bool seen_op[VD_OP_COUNT];

static void check_fwd_result(const char *what, const uint16_t *yb, const float *exact,
                             const float *y32, const float *A, int64_t yn, bool same) {
    int64_t first;
    int64_t bad = bf_mismatch(yb, exact, yn, &first);
    ck_assert_msg(bad == 0, "%s: y: %lld elements are not the rounded fp32 result (first [%lld]: "
                  "got %a, want %a)", what, (long long)bad, (long long)first,
                  first >= 0 ? (double)vd_h16_to_f32(DT, yb[first]) : 0.0,
                  first >= 0 ? (double)exact[first] : 0.0);
    double norm, q = bf_err(yb, y32, A, 2.05, yn, &norm);
    if (verbose) fprintf(stderr, "  %-34s y   err/bound %.3f  normalized %.3g\n", what, q, norm);
    ck_assert_msg(q <= 1.0 && norm <= U, "%s: y error %.3g of its bound, normalized %.3g > u",
                  what, q, norm);
    if (same) {
        float *g = f_of(yb, yn);
        ck_assert_msg(memcmp(g, y32, (size_t)yn * sizeof *g) == 0, "%s: y differs from fp32's",
                      what);
        free(g);
    }
}

/* The fp32 op on t's buffers (t->io as set). */
static void run32(t_op *t, bool bwd) {
    vd_err e = {0};
    int rc = bwd ? be->backward(be, t->net, t->layer, &t->io, &e)
                 : be->forward(be, t->net, t->layer, &t->io, &e);
    ck_assert_msg(rc == 0, "%s: %s", bwd ? "backward" : "forward", e.msg);
}

/* Permute n images of c x hw bf16 values in place: NCHW to NHWC (to_nhwc)
 * or back. */
static void relayout_u16(uint16_t *p, int64_t n, int64_t c, int64_t hw, bool to_nhwc) {
    if (hw <= 1 || c <= 1) return;
    int64_t total = n * c * hw;
    uint16_t *t = malloc((size_t)total * sizeof *t);
    ck_assert(t);
    memcpy(t, p, (size_t)total * sizeof *t);
    for (int64_t i = 0; i < n; i++)
        for (int64_t ch = 0; ch < c; ch++)
            for (int64_t q = 0; q < hw; q++) {
                int64_t a = (i * c + ch) * hw + q, b = (i * hw + q) * c + ch;
                if (to_nhwc) p[b] = t[a];
                else p[a] = t[b];
            }
    free(t);
}

/* The checks here hold bf16 feature maps in NCHW order, as their fp32
 * counterparts; the backend stores them channels-last (vd_math_nhwc). So a
 * bf16 call permutes every feature-map operand (each buffer once, aliases
 * included) to NHWC before it and back after it. */
static void run_io(const vd_net *net, int layer, const vd_op_io *io, bool bwd) {
    vd_err e = {0};
    const vd_layer *l = &net->layers[layer];
    void *ptr[2 * VD_MAX_INPUTS + 2];
    int64_t pc[2 * VD_MAX_INPUTS + 2], phw[2 * VD_MAX_INPUTS + 2];
    int np = 0;
    if (io->act != VD_DT_F32) {
        const void *cand[2 * VD_MAX_INPUTS + 2];
        int64_t cc[2 * VD_MAX_INPUTS + 2], ch[2 * VD_MAX_INPUTS + 2];
        int nc = 0;
        for (int k = 0; k < l->n_in; k++) {
            int src = l->in[k];
            int64_t c = src < 0 ? net->in_c : net->layers[src].c;
            int64_t hw = src < 0 ? (int64_t)net->in_h * net->in_w
                                 : (int64_t)net->layers[src].h * net->layers[src].w;
            cand[nc] = io->x[k]; cc[nc] = c; ch[nc++] = hw;
            if (bwd) { cand[nc] = io->dx[k]; cc[nc] = c; ch[nc++] = hw; }
        }
        cand[nc] = io->y; cc[nc] = l->c; ch[nc++] = (int64_t)l->h * l->w;
        if (bwd) { cand[nc] = io->dy; cc[nc] = l->c; ch[nc++] = (int64_t)l->h * l->w; }
        for (int i = 0; i < nc; i++) {
            bool dup = !cand[i];
            for (int j = 0; j < np && !dup; j++) dup = ptr[j] == cand[i];
            if (dup) continue;
            ptr[np] = (void *)cand[i];
            pc[np] = cc[i];
            phw[np++] = ch[i];
        }
        for (int i = 0; i < np; i++) relayout_u16(ptr[i], io->n, pc[i], phw[i], true);
    }
    int rc = bwd ? be->backward(be, net, layer, io, &e) : be->forward(be, net, layer, io, &e);
    for (int i = 0; i < np; i++) relayout_u16(ptr[i], io->n, pc[i], phw[i], false);
    ck_assert_msg(rc == 0, "%s %s: %s", dt_name(), bwd ? "backward" : "forward", e.msg);
}

/* The checks 1.-4. of the header for layer `layer` of net. */
static void bf_check(const vd_net *net, int layer, bf_case c) {
    const vd_layer *l = &net->layers[layer];
    seen_op[l->op] = true;
    char what[160];
    snprintf(what, sizeof what, "%s %s", dt_name(), c.what);
    t_op t;
    t_op_init(&t, be, net, layer, c.n, 17);
    vd_err e = {0};
    ck_assert_msg(be->layer_setup(be, net, c.n, DT == VD_DT_F16 ? VD_MATH_FP16 : VD_MATH_BF16, true,
                                  &e) == 0, "%s", e.msg);
    t.io.training = c.training;
    t.io.algo = c.algo;
    bool gemm = l->op == VD_OP_CONV || l->op == VD_OP_FC;
    /* bf16-representable feature-map inputs and output gradient */
    for (int k = 0; k < t.n_in; k++) vd_round_h16_n(DT, t.x[k], (size_t)t.xn[k]);
    vd_round_h16_n(DT, t.r, (size_t)t.yn);
    int64_t cn = l->c;      /* channels: the size of bn / bias vectors */
    float *rm0 = t.rm ? t_copy(t.rm, cn) : NULL, *rv0 = t.rv ? t_copy(t.rv, cn) : NULL;

    /* ---- forward: fp32 */
    run32(&t, false);
    float *y32 = t_copy(t.y, t.yn);
    float *aux32 = t.aux ? t_copy(t.aux, t.auxn) : NULL;
    float *rm32 = t.rm ? t_copy(t.rm, cn) : NULL, *rv32 = t.rv ? t_copy(t.rv, cn) : NULL;
    /* the contract's exact value (gemm: rn(product with rn(w)) + b) and A */
    float *exact = y32, *A = NULL, *wr = NULL;
    if (gemm) {
        wr = t_copy(t.w, t.wn);
        vd_round_h16_n(DT, wr, (size_t)t.wn);
        vd_op_io io = t.io;
        float *zero = calloc((size_t)cn, sizeof *zero);   /* the layer's b is required */
        ck_assert_ptr_nonnull(zero);
        io.w = wr;
        io.b = t.b ? zero : NULL;
        io.y = exact = t_alloc(t.yn);
        run_io(net, layer, &io, false);
        vd_round_h16_n(DT, exact, (size_t)t.yn);
        if (t.b) {
            int64_t hw = (int64_t)l->h * l->w;
            for (int64_t i = 0; i < t.yn; i++) exact[i] += t.b[(i / hw) % cn];
        }
        float *ax = f_abs(t.x[0], t.xn[0]), *aw = f_abs(t.w, t.wn);
        io.x[0] = ax;
        io.w = aw;
        io.y = A = t_alloc(t.yn);
        run_io(net, layer, &io, false);
        free(ax);
        free(aw);
        free(zero);
    }

    /* ---- forward: bf16, from the same running statistics */
    if (rm0) memcpy(t.rm, rm0, (size_t)cn * sizeof(float));
    if (rv0) memcpy(t.rv, rv0, (size_t)cn * sizeof(float));
    if (t.aux) memset(t.aux, 0xFF, (size_t)t.auxn * sizeof(float));
    uint16_t *xb[VD_MAX_INPUTS] = {0}, *yb = bf_alloc(t.yn);
    vd_op_io bio = t.io;
    bio.act = DT;
    for (int k = 0; k < t.n_in; k++) bio.x[k] = (const float *)(xb[k] = bf_of(t.x[k], t.xn[k]));
    bio.y = (float *)yb;
    run_io(net, layer, &bio, false);
    guard_ok(yb, t.yn, what, "y");
    check_fwd_result(what, yb, exact, y32, A, t.yn, c.same_fwd);
    if (t.aux)
        ck_assert_msg(memcmp(t.aux, aux32, (size_t)t.auxn * sizeof(float)) == 0,
                      "%s: aux (fp32) differs from fp32 math's", what);
    if (t.rm)
        ck_assert_msg(memcmp(t.rm, rm32, (size_t)cn * 4) == 0 && memcmp(t.rv, rv32, (size_t)cn * 4) == 0,
                      "%s: running statistics differ from fp32 math's", what);

    /* ---- backward, twice: dx_beta 0, then 1 (accumulating into D) */
    float *yq = f_of(yb, t.yn);   /* the y that the bf16 backward reads */
    float *D[VD_MAX_INPUTS] = {0};
    for (int k = 0; k < t.n_in; k++) {
        D[k] = t_alloc(t.xn[k]);
        t_fill_uniform(D[k], t.xn[k], -1, 1, 300 + (uint64_t)k);
        vd_round_h16_n(DT, D[k], (size_t)t.xn[k]);
    }
    for (int acc = 0; acc < 2; acc++) {
        char wh[160];
        snprintf(wh, sizeof wh, "%s%s", what, acc ? " (dx_beta 1)" : "");
        /* fp32: the same x, y (as stored), dy */
        memcpy(t.y, yq, (size_t)t.yn * sizeof(float));
        for (int k = 0; k < t.n_in; k++) {
            t.io.dx_beta[k] = (float)acc;
            if (acc) memcpy(t.dx[k], D[k], (size_t)t.xn[k] * sizeof(float));
        }
        t_bwd(&t);   /* dy = r; dx (beta 0), dw, db NaN first */
        float *dx32[VD_MAX_INPUTS] = {0}, *dxe[VD_MAX_INPUTS] = {0}, *adx[VD_MAX_INPUTS] = {0};
        for (int k = 0; k < t.n_in; k++) dxe[k] = dx32[k] = t_copy(t.dx[k], t.xn[k]);
        float *dw32 = t.dw ? t_copy(t.dw, t.wn) : NULL, *db32 = t.db ? t_copy(t.db, t.bn) : NULL;
        if (gemm) {   /* exact: with rn(w); A = |dy| |w| */
            vd_op_io io = t.io;
            float *sdw = t_alloc(t.wn), *sdb = t.bn ? t_alloc(t.bn) : NULL;
            io.dw = sdw;
            io.db = sdb;
            io.w = wr;
            io.dx[0] = dxe[0] = acc ? t_copy(D[0], t.xn[0]) : t_alloc(t.xn[0]);
            run_io(net, layer, &io, true);
            float *ady = f_abs(t.dy, t.yn), *aw = f_abs(t.w, t.wn);
            io.dy = ady;
            io.w = aw;
            io.dx_beta[0] = 0;
            io.dx[0] = adx[0] = t_alloc(t.xn[0]);
            run_io(net, layer, &io, true);
            free(ady);
            free(aw);
            free(sdw);
            free(sdb);
        }
        /* bf16 */
        uint16_t *dyb = bf_of(t.r, t.yn), *dxb[VD_MAX_INPUTS] = {0};
        float *dw = t.dw ? t_alloc(t.wn) : NULL, *db = t.db ? t_alloc(t.bn) : NULL;
        bio.y = (float *)yb;
        bio.dy = (const float *)dyb;
        bio.dw = dw;
        bio.db = db;
        for (int k = 0; k < t.n_in; k++) {
            dxb[k] = acc ? bf_of(D[k], t.xn[k]) : bf_alloc(t.xn[k]);
            bio.dx[k] = (float *)dxb[k];
            bio.dx_beta[k] = (float)acc;
        }
        run_io(net, layer, &bio, true);
        guard_ok(dyb, t.yn, wh, "dy");
        for (int k = 0; k < t.n_in; k++) {
            char tn[16];
            snprintf(tn, sizeof tn, "dx%d", k);
            guard_ok(dxb[k], t.xn[k], wh, tn);
            int64_t first;
            int64_t bad = bf_mismatch(dxb[k], dxe[k], t.xn[k], &first);
            ck_assert_msg(bad == 0, "%s: %s: %lld elements are not the rounded fp32 result "
                          "(first [%lld]: got %a, want %a)", wh, tn, (long long)bad,
                          (long long)first, first >= 0 ? (double)vd_h16_to_f32(DT, dxb[k][first]) : 0.0,
                          first >= 0 ? (double)dxe[k][first] : 0.0);
            double norm, q = bf_err(dxb[k], dx32[k], adx[k], 1.05, t.xn[k], &norm);
            if (verbose) fprintf(stderr, "  %-34s %s err/bound %.3f  normalized %.3g\n", wh, tn, q, norm);
            ck_assert_msg(q <= 1.0 && norm <= U, "%s: %s error %.3g of its bound, "
                          "normalized %.3g > u", wh, tn, q, norm);
            if (c.same_bwd && !acc) {
                float *g = f_of(dxb[k], t.xn[k]);
                ck_assert_msg(memcmp(g, dx32[k], (size_t)t.xn[k] * sizeof *g) == 0,
                              "%s: %s differs from fp32's", wh, tn);
                free(g);
            }
        }
        if (dw) {
            if (l->op == VD_OP_CONV) {   /* through bf16: exactly rn(fp32 dW) */
                for (int64_t i = 0; i < t.wn; i++) {
                    ck_assert_msg(dw[i] == vd_h16_to_f32(DT, vd_f32_to_h16(DT, dw32[i])),
                                  "%s: conv dW[%lld] = %a, want rn(%a)", wh, (long long)i,
                                  (double)dw[i], (double)dw32[i]);
                }
            } else {                     /* fc dW and batch-norm dgamma: fp32 */
                ck_assert_msg(memcmp(dw, dw32, (size_t)t.wn * 4) == 0, "%s: dW differs", wh);
            }
        }
        if (db) ck_assert_msg(memcmp(db, db32, (size_t)t.bn * 4) == 0, "%s: db differs", wh);
        for (int k = 0; k < t.n_in; k++) {
            if (dxe[k] != dx32[k]) free(dxe[k]);
            free(dx32[k]);
            free(adx[k]);
            free(dxb[k]);
        }
        free(dyb);
        free(dw);
        free(db);
        free(dw32);
        free(db32);
    }
    for (int k = 0; k < t.n_in; k++) {
        free(xb[k]);
        free(D[k]);
    }
    if (exact != y32) free(exact);
    free(A);
    free(wr);
    free(yq);
    free(yb);
    free(y32);
    free(aux32);
    free(rm0); free(rv0); free(rm32); free(rv32);
    t_op_free(&t);
}

/* ------------------------------------------------------------------ every op */

static void one(int c, int h, int w, vd_layer l, bf_case bc) {
    vd_net net;
    int i = t_net_one(&net, c, h, w, l);
    bf_check(&net, i, bc);
    vd_net_free(&net);
}

static void multi(vd_op op, int n_in, const int *chans, bf_case bc) {
    vd_net net;
    int i = t_net_multi(&net, op, n_in, chans);
    bf_check(&net, i, bc);
    vd_net_free(&net);
}

static bf_case C(const char *what) { return (bf_case){what, 2, 0, true, false, false}; }
static bf_case SAME(bf_case c, bool fwd, bool bwd) { c.same_fwd = fwd; c.same_bwd = bwd; return c; }

START_TEST(every_op_h16_vs_fp32) {
    set_dtype(_i);
    memset(seen_op, 0, sizeof seen_op);
    for (int algo = 0; algo < 2; algo++) {
        bf_case c = C(algo ? "conv 3x3 p1 bias [direct]" : "conv 3x3 p1 bias [im2col]");
        c.algo = algo;
        one(3, 7, 6, vdt_conv(-1, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, true), c);
        c.what = algo ? "conv groups 2 s2 [direct]" : "conv groups 2 s2 [im2col]";
        one(4, 7, 6, vdt_conv(-1, 6, 3, 3, 2, 2, 1, 1, 1, 1, 2, true), c);
        c.what = algo ? "conv 1x1 no bias [direct]" : "conv 1x1 no bias [im2col]";
        one(5, 4, 4, vdt_conv(-1, 3, 1, 1, 1, 1, 0, 0, 1, 1, 1, false), c);
    }
    /* 2x2 stride 2: each dx element receives at most one dy (bit-identical);
     * 3x3 stride 2 windows overlap, where dx sums two dy values */
    one(2, 6, 6, vdt_pool(-1, VD_POOL_MAX, 2, 2, 2, 2, 0, 0, false), SAME(C("max pool 2x2 s2"), true, true));
    one(2, 7, 7, vdt_pool(-1, VD_POOL_MAX, 3, 3, 2, 2, 1, 1, false), SAME(C("max pool 3x3 s2 p1"), true, false));
    one(2, 7, 7, vdt_pool(-1, VD_POOL_AVG, 3, 3, 2, 2, 1, 1, true), C("avg pool 3x3 s2 p1 ceil"));
    one(3, 4, 5, t_adaptive(-1, VD_POOL_AVG, 2, 3), C("adaptive avg pool"));
    one(3, 4, 5, vdt_simple(-1, VD_OP_RELU), SAME(C("relu"), true, true));
    vd_layer lrn = vdt_simple(-1, VD_OP_LRN);
    lrn.u.lrn.size = 3; lrn.u.lrn.alpha = 0.5f; lrn.u.lrn.beta = 0.75f; lrn.u.lrn.k = 1.0f;
    one(6, 3, 2, lrn, C("lrn size 3"));
    one(3, 4, 5, vdt_simple(-1, VD_OP_BATCHNORM), C("batchnorm train"));
    bf_case ev = C("batchnorm eval");
    ev.training = false;
    one(3, 4, 5, vdt_simple(-1, VD_OP_BATCHNORM), ev);
    vd_layer fc = vdt_simple(-1, VD_OP_FC);
    fc.u.fc.out = 5; fc.u.fc.bias = true;
    bf_case fcb = C("fc bias");
    fcb.n = 3;
    one(3, 2, 2, fc, fcb);
    fc.u.fc.out = 4; fc.u.fc.bias = false;
    one(7, 1, 1, fc, C("fc no bias"));
    /* scale 1/(1-p) = 2 at p = 0.5: x * 2 is exact, so is dy * 2 */
    vd_layer dr = vdt_simple(-1, VD_OP_DROPOUT);
    dr.u.dropout.p = 0.5f;
    one(3, 4, 5, dr, SAME(C("dropout p 0.5"), true, true));
    dr.u.dropout.p = 0.3f;
    one(3, 4, 5, dr, C("dropout p 0.3"));
    bf_case de = SAME(C("dropout eval"), true, true);
    de.training = false;
    one(3, 4, 5, dr, de);
    one(3, 2, 4, vdt_simple(-1, VD_OP_FLATTEN), SAME(C("flatten"), true, true));
    int c2[] = {3, 3}, c22[] = {2, 2, 2}, c3[] = {1, 3, 2};
    multi(VD_OP_ADD, 2, c2, SAME(C("add 2"), false, true));
    multi(VD_OP_ADD, 3, c22, SAME(C("add 3"), false, true));
    multi(VD_OP_CONCAT, 3, c3, SAME(C("concat 1+3+2"), true, true));
    one(3, 4, 5, vdt_simple(-1, VD_OP_GELU), C("gelu"));
    {   /* the loss: softmax y in bf16, the loss itself (aux) fp32 */
        vd_net net;
        t_net_begin(&net, 7, 1, 1);
        vdt_finish(&net, -1);
        bf_case x = C("softmax xent 7 classes");
        x.n = 3;
        bf_check(&net, 0, x);
        vd_net_free(&net);
    }
    for (int op = 0; op < VD_OP_COUNT; op++)
        ck_assert_msg(seen_op[op], "op '%s' has no 16-bit case here", vd_op_table[op].name);
}
END_TEST

/* ------------------------------------------------------------------ aliasing */

/* forward x == y and backward dx == dy (relu reads y, dropout nothing) give
 * the out-of-place results; add(a, a) accumulates both gradients in one
 * bf16 buffer: 2 dy exactly. */
START_TEST(in_place_aliasing) {
    set_dtype(_i);
    for (int which = 0; which < 2; which++) {
        vd_net net;
        t_net_begin(&net, 3, 4, 5);
        vd_layer l = vdt_simple(-1, which ? VD_OP_DROPOUT : VD_OP_RELU);
        l.u.dropout.p = 0.3f;
        int i = vdt_add(&net, l);
        vdt_finish(&net, i);
        const char *what = which ? "dropout" : "relu";
        t_op t;
        t_op_init(&t, be, &net, i, 2, 23);
        int64_t n = t.yn;
        uint16_t *xb = bf_of(t.x[0], n), *yb = bf_alloc(n), *dyb = bf_of(t.r, n), *dxb = bf_alloc(n);
        vd_op_io io = t.io;
        io.act = DT;
        io.x[0] = (const float *)xb;
        io.y = (float *)yb;
        run_io(&net, i, &io, false);
        io.dy = (const float *)dyb;
        io.dx[0] = (float *)dxb;
        run_io(&net, i, &io, true);
        /* in place */
        uint16_t *s = bf_dup(xb, n), *g = bf_dup(dyb, n);
        io.x[0] = (const float *)s;
        io.y = (float *)s;
        run_io(&net, i, &io, false);
        ck_assert_msg(memcmp(s, yb, (size_t)n * 2) == 0, "%s: in-place forward differs", what);
        guard_ok(s, n, what, "y (in place)");
        io.dy = (const float *)g;
        io.dx[0] = (float *)g;
        run_io(&net, i, &io, true);
        ck_assert_msg(memcmp(g, dxb, (size_t)n * 2) == 0, "%s: in-place backward differs", what);
        guard_ok(g, n, what, "dx (in place)");
        /* and the out-of-place result is not trivial: relu zeroed some */
        int zeros = 0;
        for (int64_t j = 0; j < n; j++) zeros += (yb[j] & 0x7FFFu) == 0;
        ck_assert_int_gt(zeros, 0);
        ck_assert_int_lt(zeros, n);
        free(xb); free(yb); free(dyb); free(dxb); free(s); free(g);
        t_op_free(&t);
        vd_net_free(&net);
    }
    /* add(a, a) */
    vd_net net;
    t_net_begin(&net, 2, 3, 4);
    int a = vdt_add(&net, vdt_conv(-1, 2, 1, 1, 1, 1, 0, 0, 1, 1, 1, false));
    int ins[2] = {a, a};
    int i = vdt_add(&net, vdt_multi(VD_OP_ADD, 2, ins));
    vdt_finish(&net, i);
    t_op t;
    t_op_init(&t, be, &net, i, 2, 3);
    int64_t n = t.yn;
    vd_round_h16_n(DT, t.x[0], (size_t)n);
    uint16_t *xb = bf_of(t.x[0], n), *yb = bf_alloc(n), *dyb = bf_of(t.r, n), *dxb = bf_alloc(n);
    vd_op_io io = t.io;
    io.act = DT;
    io.x[0] = io.x[1] = (const float *)xb;
    io.y = (float *)yb;
    run_io(&net, i, &io, false);
    for (int64_t j = 0; j < n; j++)   /* x + x: exact in fp32, so rn(2x) = 2x */
        ck_assert(vd_h16_to_f32(DT, yb[j]) == 2.0f * t.x[0][j]);
    io.dy = (const float *)dyb;
    io.dx[0] = io.dx[1] = (float *)dxb;
    io.dx_beta[0] = 0.0f;
    io.dx_beta[1] = 1.0f;
    run_io(&net, i, &io, true);
    for (int64_t j = 0; j < n; j++)
        ck_assert(vd_h16_to_f32(DT, dxb[j]) == 2.0f * vd_h16_to_f32(DT, dyb[j]));
    guard_ok(dxb, n, "add(a, a)", "dx");
    free(xb); free(yb); free(dyb); free(dxb);
    t_op_free(&t);
    vd_net_free(&net);
}
END_TEST

/* ------------------------------------------------------------------ the checker */

/* The comparisons above must fail on: one element one ulp off; rounding by
 * truncation; a conv bias added before the product is stored. */
START_TEST(checker_catches_errors) {
    set_dtype(_i);
    vd_net net;
    t_net_begin(&net, 3, 7, 6);
    int i = vdt_add(&net, vdt_conv(-1, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, true));
    vdt_finish(&net, i);
    t_op t;
    t_op_init(&t, be, &net, i, 2, 17);
    vd_round_h16_n(DT, t.x[0], (size_t)t.xn[0]);
    run32(&t, false);
    int64_t n = t.yn, first;
    float *y32 = t_copy(t.y, n);
    uint16_t *good = bf_of(y32, n), *bad = bf_dup(good, n);
    double norm;
    ck_assert(bf_mismatch(good, y32, n, &first) == 0);
    ck_assert(bf_err(good, y32, NULL, 0, n, &norm) <= 1.0 && norm <= U);
    /* one element one ulp off */
    bad[n / 2] ^= 1u;
    ck_assert(bf_mismatch(bad, y32, n, &first) == 1 && first == n / 2);
    /* truncation (the rounded value stepped one ulp toward zero where it
     * rounded away: the bits order magnitudes within a sign): somewhere an
     * error over half an ulp, so over the bound */
    for (int64_t j = 0; j < n; j++) {
        uint16_t h = vd_f32_to_h16(DT, y32[j]);
        bad[j] = fabs(vd_h16_to_f32(DT, h)) > fabsf(y32[j]) ? (uint16_t)(h - 1u) : h;
    }
    ck_assert(bf_mismatch(bad, y32, n, &first) > 0);
    ck_assert_msg(bf_err(bad, y32, NULL, 0, n, &norm) > 1.0, "truncation went unnoticed");
    /* the bias added before the store (one rounding instead of two): the
     * bf16 call must differ from that somewhere */
    float *wr = t_copy(t.w, t.wn);
    vd_round_h16_n(DT, wr, (size_t)t.wn);
    vd_op_io io = t.io;
    io.w = wr;
    io.y = t_alloc(n);
    run_io(&net, i, &io, false);                 /* rn(x w^ + b): one rounding */
    uint16_t *yb = bf_alloc(n), *xb = bf_of(t.x[0], t.xn[0]);
    vd_op_io bio = t.io;
    bio.act = DT;
    bio.x[0] = (const float *)xb;
    bio.y = (float *)yb;
    run_io(&net, i, &bio, false);
    ck_assert_msg(bf_mismatch(yb, io.y, n, &first) > 0,
                  "a bias added before the store gives the same bf16 y: the test cannot tell");
    /* ... which is what the layer gives, exactly, once the oracle is told
     * that CUDA's graph fuses its bias (vd_backend_cpu_bias_rounding) */
    bool once[8] = {false};
    vd_err e = {0};
    ck_assert_int_le(net.n_layers, 8);
    once[i] = true;
    ck_assert_int_eq(vd_backend_cpu_bias_rounding(be, net.n_layers, once, &e), 0);
    run_io(&net, i, &bio, false);
    ck_assert_msg(bf_mismatch(yb, io.y, n, &first) == 0, "bias rounded once: [%lld] differs",
                  (long long)first);
    ck_assert_int_eq(vd_backend_cpu_bias_rounding(be, 0, NULL, &e), 0);
    run_io(&net, i, &bio, false);
    ck_assert(bf_mismatch(yb, io.y, n, &first) > 0);   /* twice again */
    free(io.y); free(wr); free(yb); free(xb);
    free(y32); free(good); free(bad);
    t_op_free(&t);
    vd_net_free(&net);
}
END_TEST

static TCase *case_of(Suite *s, const TTest *t) { return t_case(s, t, setup, teardown); }

static Suite *suite(void) {
    Suite *s = suite_create("ops_bf16");
    int nd = (int)(sizeof dts / sizeof dts[0]);   /* _i: dts[_i] */
    tcase_add_loop_test(case_of(s, every_op_h16_vs_fp32), every_op_h16_vs_fp32, 0, nd);
    tcase_add_loop_test(case_of(s, in_place_aliasing), in_place_aliasing, 0, nd);
    tcase_add_loop_test(case_of(s, checker_catches_errors), checker_catches_errors, 0, nd);
    return s;
}

int main(void) {
    return vdt_run(suite());
}
