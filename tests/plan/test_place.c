/* test_place.c — the pool placement (src/plan/place.c, vdp_place) against
 * the straightforward algorithm it replaced: the same orderings, each
 * interval at the lowest offset found by a scan of every placed interval in
 * offset order. Random interval sets (sizes over nine decades with repeats,
 * whole multiples of 256 or not, whole-iteration intervals, pinned ones,
 * one-step ones, up to 65549 steps, quick mode; past 2,048 intervals short
 * lives, which take place.c's tree, and long nested ones, which do not):
 * every offset and the high-water mark must be equal, exactly, and the work
 * counted (what the scan does: entries visited and scanned). Asked only
 * whether they fit in a size (vdp_place's fit): the same placement when they
 * do; when they do not, a top above the size and at most the full
 * placement's. */
#include <stdlib.h>
#include <string.h>
#include <check.h>
#include "plan/plan_internal.h"
#include "plan_common.h"
#include "spec/spec.h"
#include "vdt.h"

/* ---- the reference: the placement before the offset-ordered arrays ------ */

typedef struct rkey { int idx; uint64_t k[4]; } rkey;

static int rkey_cmp(const void *a, const void *b) {
    const rkey *x = a, *y = b;
    for (int j = 0; j < 4; j++)
        if (x->k[j] != y->k[j]) return x->k[j] > y->k[j] ? -1 : 1;
    return x->idx - y->idx;
}

typedef struct rplaced { uint64_t o, e; int f, l; } rplaced;

/* Lowest offset for iv (bytes over [f, l]) among P[0..m-1] sorted by offset:
 * every entry looked at, those apart in time skipped. */
static uint64_t ref_gap(const rplaced *P, int m, int f, int l, uint64_t bytes, long *visits) {
    uint64_t cand = 0;
    for (int k = 0; k < m; k++) {
        if (P[k].l < f || P[k].f > l) continue;
        ++*visits;
        if (cand + bytes <= P[k].o) break;
        if (P[k].e > cand) cand = P[k].e;
    }
    return cand;
}

static void ref_insert(rplaced *P, int *m, const rplaced *x) {
    int k = *m;
    while (k > 0 && P[k - 1].o > x->o) { P[k] = P[k - 1]; k--; }
    P[k] = *x;
    (*m)++;
}

static uint64_t ref_order(const vd_interval *iv, int n, const bool *pinned, const rkey *order,
                          uint64_t *off, rplaced *P, uint64_t give_up, double *work) {
    long visits = 0, scanned = 0;
    uint64_t hwm = 0;
    int m = 0;
    bool *done = calloc((size_t)n + 1, sizeof *done);
    ck_assert_ptr_nonnull(done);
    for (int i = 0; i < n; i++)
        if (pinned && pinned[i]) {
            done[i] = true;
            off[i] = iv[i].offset;
            if (off[i] + iv[i].bytes > hwm) hwm = off[i] + iv[i].bytes;
            ref_insert(P, &m, &(rplaced){off[i], off[i] + iv[i].bytes, iv[i].first, iv[i].last});
        }
    for (int oi = 0; oi < n; oi++) {
        int i = order[oi].idx;
        if (done[i]) continue;
        off[i] = ref_gap(P, m, iv[i].first, iv[i].last, iv[i].bytes, &visits);
        scanned += m;
        if (off[i] + iv[i].bytes > hwm) hwm = off[i] + iv[i].bytes;
        if (hwm >= give_up) break;
        ref_insert(P, &m, &(rplaced){off[i], off[i] + iv[i].bytes, iv[i].first, iv[i].last});
    }
    free(done);
    *work += (double)n + (double)visits + 0.6 * (double)scanned;
    return hwm;
}

/* *work: as vdp_place's (the entries placed, visited, 0.6 per one scanned) */
static uint64_t ref_place(vd_interval *iv, int n, const bool *pinned, bool quick, double *work) {
    double pw = 0;
    rkey *order = calloc((size_t)n + 1, sizeof *order);
    uint64_t *off = calloc((size_t)n + 1, sizeof *off), *best = calloc((size_t)n + 1, sizeof *best);
    rplaced *P = calloc((size_t)n + 1, sizeof *P);
    ck_assert(order && off && best && P);
    int max_last = 0;
    for (int i = 0; i < n; i++) if (iv[i].last > max_last) max_last = iv[i].last;
    uint64_t bound = 0;
    for (int s = 0; s <= max_last; s++) {
        uint64_t live = 0;
        for (int i = 0; i < n; i++) if (iv[i].first <= s && s <= iv[i].last) live += iv[i].bytes;
        if (live > bound) bound = live;
    }
    uint64_t best_hwm = UINT64_MAX, big = 1u << 30;
    for (int strategy = 0; strategy < 4; strategy++) {
        for (int i = 0; i < n; i++) {
            uint64_t dur = (uint64_t)(iv[i].last - iv[i].first + 1), sz = iv[i].bytes;
            uint64_t late = big - (uint64_t)iv[i].first;
            bool whole = iv[i].first == 0 && iv[i].last == max_last && max_last > 0;
            uint64_t k[4][3] = {{sz, dur, late}, {late, sz, dur}, {dur, sz, late}, {sz / 256 * dur, sz, dur}};
            order[i] = (rkey){i, {whole, whole ? 0 : k[strategy][0], whole ? 0 : k[strategy][1],
                                  whole ? 0 : k[strategy][2]}};
        }
        qsort(order, (size_t)n, sizeof *order, rkey_cmp);
        uint64_t h = ref_order(iv, n, pinned, order, off, P, best_hwm, &pw);
        if (h < best_hwm) { best_hwm = h; memcpy(best, off, (size_t)n * sizeof *off); }
        if (best_hwm <= bound || quick) break;
    }
    for (int i = 0; i < n; i++) iv[i].offset = best[i];
    *work += pw;
    free(order); free(off); free(best); free(P);
    return n ? best_hwm : 0;
}

/* ---- random interval sets ---------------------------------------------- */

/* odd: any size (vdp_place's general key path), else whole multiples of 256
 * (every plan's; the packed keys) */
static uint64_t rnd_bytes(vd_rng *r, const uint64_t *pool, int n_pool, bool odd) {
    if (n_pool && vd_rng_u32(r) % 3 == 0) return pool[vd_rng_u32(r) % (uint32_t)n_pool];  /* a repeat */
    int dec = (int)(vd_rng_u32(r) % 22);                  /* 256 B .. 1 GiB */
    uint64_t b = ((uint64_t)1 << (8 + dec)) + (uint64_t)(vd_rng_u32(r) % 4096) * 256;
    return odd ? b + vd_rng_u32(r) % 256 : b;
}

START_TEST(test_place_matches_scan) {
    vd_rng r;
    vd_rng_seed(&r, 0x91ace, 13);
    long placed = 0;
    int fits = 0, stopped = 0;   /* asked with fit: fitted; stopped below the full top */
    for (int trial = 0; trial < 408; trial++) {
        /* some trials past 65535 steps (the general key path too); six over
         * 2,048 intervals and 256 steps with short lives (the tree over the
         * steps, see place.c: deep chains' placements), the last two as
         * many with long nested ones (the single array again, as ResNet-152's
         * plans: the maps kept from the forward pass to the backward); the
         * others the single array */
        bool long_run = trial % 50 == 17, odd = trial % 6 == 5, deep = trial >= 400 && trial < 406;
        bool nested = trial >= 406;
        int steps = deep || nested ? 256 + (int)(vd_rng_u32(&r) % 3000)
                  : long_run ? 65530 + (int)(vd_rng_u32(&r) % 20)
                  : 1 + (int)(vd_rng_u32(&r) % (trial % 4 == 0 ? 8 : 160));
        int n = deep || nested ? 2049 + (int)(vd_rng_u32(&r) % 1000)
                     : (int)(vd_rng_u32(&r) % (long_run ? 40 : trial % 5 == 0 ? 12 : 600));
        vd_interval *a = calloc((size_t)n + 1, sizeof *a), *b = calloc((size_t)n + 1, sizeof *b);
        vd_interval *c = calloc((size_t)n + 1, sizeof *c);
        bool *pin = calloc((size_t)n + 1, sizeof *pin);
        uint64_t pool[16];
        int n_pool = 0;
        ck_assert(a && b && c && pin);
        bool any_pin = trial % 3 == 1;
        uint64_t pin_top = 0;
        for (int i = 0; i < n; i++) {
            int f, l, kind = (int)(vd_rng_u32(&r) % 10);
            if (kind == 0) { f = 0; l = steps - 1; }                            /* whole iteration */
            else if (kind <= 3) { f = l = (int)(vd_rng_u32(&r) % (uint32_t)steps); }  /* one step */
            else if (deep) {   /* short lives, as in a chain's plan */
                f = (int)(vd_rng_u32(&r) % (uint32_t)steps);
                l = f + (int)(vd_rng_u32(&r) % (kind <= 8 ? 4 : 64));
                if (l >= steps) l = steps - 1;
            } else if (nested) {   /* a forward step to its backward one, give or take */
                f = (int)(vd_rng_u32(&r) % (uint32_t)(steps / 2));
                l = steps - 1 - f - (int)(vd_rng_u32(&r) % 8);
                if (l < f) l = f;
            }
            else {
                /* long runs: most near the end, past step 65535 */
                f = long_run ? steps - 1 - (int)(vd_rng_u32(&r) % 24) : (int)(vd_rng_u32(&r) % (uint32_t)steps);
                l = f + (int)(vd_rng_u32(&r) % (uint32_t)(steps - f));
            }
            a[i].first = f;
            a[i].last = l;
            a[i].bytes = rnd_bytes(&r, pool, n_pool, odd);
            if (n_pool < 16) pool[n_pool++] = a[i].bytes;
            if (any_pin && kind == 0 && vd_rng_u32(&r) % 2) {
                /* pinned whole-iteration regions, stacked (an eval plan's) */
                pin[i] = true;
                a[i].offset = pin_top;
                pin_top += a[i].bytes + (vd_rng_u32(&r) % 2) * 512;
            }
        }
        memcpy(b, a, (size_t)n * sizeof *a);
        memcpy(c, a, (size_t)n * sizeof *a);
        bool quick = trial % 7 == 3;
        uint64_t h_new = 0;
        vd_err e = {0};
        double w_new = 0, w_ref = 0;
        ck_assert_int_eq(vdp_place(a, n, any_pin ? pin : NULL, quick, 0, &h_new, &w_new, &e), VD_OK);
        uint64_t h_ref = ref_place(b, n, any_pin ? pin : NULL, quick, &w_ref);
        /* the work (the auto search's effort cap reads it) counts what the
         * scan does, exactly: the same sums in the same order */
        ck_assert_msg(w_new == w_ref, "trial %d: work %.1f, the scan's %.1f", trial, w_new, w_ref);
        ck_assert_msg(h_new == h_ref, "trial %d: hwm %llu, the scan %llu", trial,
                      (unsigned long long)h_new, (unsigned long long)h_ref);
        for (int i = 0; i < n; i++)
            ck_assert_msg(a[i].offset == b[i].offset, "trial %d interval %d: offset %llu, the scan %llu",
                          trial, i, (unsigned long long)a[i].offset, (unsigned long long)b[i].offset);
        placed += n;
        /* Asked only whether they fit in `fit` bytes: the top itself
         * (fits), one byte less (does not, unless an ordering other than
         * the best stops lower), or about a tenth less. Fits: the same
         * placement. Does not: a top above fit and at most the full one,
         * and the offsets (the report's top) reach at least it. */
        if (h_ref == 0) { free(a); free(b); free(c); free(pin); continue; }
        uint64_t fit = trial % 3 == 0 ? h_ref : trial % 3 == 1 ? h_ref - 1 : h_ref - h_ref / 10;
        if (fit == 0) fit = 1;
        uint64_t h_fit = 0;
        ck_assert_int_eq(vdp_place(c, n, any_pin ? pin : NULL, quick, fit, &h_fit, NULL, &e), VD_OK);
        if (fit >= h_ref) {
            ck_assert_msg(h_fit == h_ref, "trial %d: fits, hwm %llu, the full %llu", trial,
                          (unsigned long long)h_fit, (unsigned long long)h_ref);
            for (int i = 0; i < n; i++) ck_assert_uint_eq(c[i].offset, b[i].offset);
            fits++;
        } else {
            ck_assert_msg(h_fit > fit && h_fit <= h_ref, "trial %d: hwm %llu, fit %llu, the full %llu",
                          trial, (unsigned long long)h_fit, (unsigned long long)fit,
                          (unsigned long long)h_ref);
            uint64_t top = 0;
            for (int i = 0; i < n; i++)
                if (c[i].offset + c[i].bytes > top) top = c[i].offset + c[i].bytes;
            ck_assert_uint_ge(top, h_fit);
            stopped += h_fit < h_ref;
        }
        free(c);
        free(a); free(b); free(pin);
    }
    ck_assert_int_gt(placed, 40000);   /* the trials are not all empty */
    /* both outcomes of a fit question are met, and stopping early is seen */
    ck_assert_int_gt(fits, 50);
    ck_assert_int_gt(stopped, 50);
}
END_TEST

/* ---- a deep chain, planned whole ---------------------------------------- */

/* An 800-layer chain (conv 16x3x3 and relu in turn on 16x8x8, then fc and
 * the loss; tools/plan-bench --deep's net), batch 32, the analytic H200
 * profile: 2,413 intervals over 1,601 steps, so its placements take the
 * tree (place.c). The smallest budgets of policies all and conv, and the
 * placement of policy all at its smallest budget, must be what the planner
 * gave before the tree and the block skips (the offset-sorted array of
 * commit 123796a, vdnn-plan --min-budget and --format json): a hash of every
 * interval's (tensor, first step, offset), the top. One step (256 bytes)
 * below that budget does not fit. Since the ReLU backward + conv bias
 * gradient pairing (vd_plan_layer.db_unit) each conv's gradient tensor is
 * live from its ReLU's backward step, one step earlier: the same budgets,
 * hwm and interval count, the hash that of those first steps. */
START_TEST(test_deep_chain_exact) {
    enum { N = 800 };
    size_t cap = (size_t)N * 72 + 512, len = 0;
    char *spec = malloc(cap);
    ck_assert_ptr_nonnull(spec);
    len += (size_t)snprintf(spec + len, cap - len,
                            "name: deep%d\ninput: { channels: 16, height: 8, width: 8, classes: 10 }\n"
                            "train: { batch: 32 }\nlayers:\n", N);
    for (int k = 0; k < N - 2; k++)
        len += (size_t)snprintf(spec + len, cap - len,
                                k % 2 ? "  - { name: r%d, type: relu }\n"
                                      : "  - { name: c%d, type: conv, out: 16, kernel: 3, pad: 1 }\n", k);
    len += (size_t)snprintf(spec + len, cap - len,
                            "  - { name: fc, type: fc, out: 10 }\n"
                            "  - { name: loss, type: softmax_cross_entropy }\n");
    ck_assert_uint_lt(len, cap);
    vd_net net;
    vd_net_init(&net);
    vd_err e = {0};
    ck_assert_msg(vd_spec_parse(spec, len, "deep.yaml", &net, &e) == 0, "%s", e.msg);
    free(spec);
    net.train.batch = 32;
    ck_assert_msg(vd_net_finalize(&net, &e) == 0, "%s", e.msg);
    vd_profile prof;
    analytic_profile(&net, 32, &vd_device_h200, &prof);
    uint64_t m_all = 0, m_conv = 0;
    vd_plan_opts o = plan_opts(32, VD_POLICY_ALL);
    ck_assert_msg(vd_plan_min_budget(&net, &prof, &o, &m_all, &e) == 0, "%s", e.msg);
    ck_assert_uint_eq(m_all, 8316416);
    o.policy = VD_POLICY_CONV;
    ck_assert_msg(vd_plan_min_budget(&net, &prof, &o, &m_conv, &e) == 0, "%s", e.msg);
    ck_assert_uint_eq(m_conv, 8316416);
    o.policy = VD_POLICY_ALL;
    o.budget = m_all;
    vd_plan p;
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &p, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(p.n_intervals, 2413);
    ck_assert_uint_eq(p.hwm, 8316416);
    uint64_t h = 0;
    for (int t = 0; t < p.n_tensors; t++)
        for (int j = 0; j < p.tensors[t].n_iv; j++) {
            const vd_interval *iv = &p.intervals[p.tensors[t].iv[j]];
            h += ((uint64_t)t * 1000003u + (uint64_t)iv->first) * 0x9E3779B97F4A7C15u ^ iv->offset;
        }
    ck_assert_msg(h == 0x16fb1d7ce60f4ba5ULL, "offsets hash %#llx", (unsigned long long)h);
    vd_plan_free(&p);
    o.budget = m_all - VD_PLAN_ALIGN;
    bool fits = true;
    ck_assert_msg(vd_plan_fits(&net, &prof, &o, &fits, &e) == 0, "%s", e.msg);
    ck_assert(!fits);
    vd_profile_free(&prof);
    vd_net_free(&net);
}
END_TEST

VDT_MAIN("place", 0, test_place_matches_scan, test_deep_chain_exact)
