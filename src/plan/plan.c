/* plan.c — the planner's entry points: check the inputs, dispatch to the
 * policy (auto.c for auto, policy.c for the others, both on build.c's
 * builds), explain a budget that does not fit, add the evaluation plan.
 * Nothing below calls back up here. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "plan/plan.h"
#include "plan/plan_internal.h"

static int find_loss(const vd_net *net, vd_err *e) {
    int loss = -1;
    for (int i = 0; i < net->n_layers; i++)
        if (net->layers[i].op == VD_OP_SOFTMAX_XENT) {
            if (loss >= 0)
                return -1 - vd_errf(e, VD_EUNSUPPORTED, "net '%s' has more than one loss layer "
                                    "('%s' and '%s'); vdnn plans exactly one, the last layer",
                                    net->name, net->layers[loss].name, net->layers[i].name);
            loss = i;
        }
    if (loss < 0)
        return -1 - vd_errf(e, VD_ESPEC, "net '%s' has no softmax_cross_entropy layer; "
                            "training needs one as the last layer", net->name);
    if (loss != net->n_layers - 1)
        return -1 - vd_errf(e, VD_EUNSUPPORTED, "loss layer '%s' must be the last layer of net '%s'",
                            net->layers[loss].name, net->name);
    /* consumers of each layer's output, counted in one pass (a count per
     * layer was quadratic in depth) */
    int *n_cons = vd_calloc((size_t)net->n_layers, sizeof *n_cons, NULL);
    if (!n_cons) return -1 - vd_errf(e, VD_ENOMEM, "out of memory");
    for (int j = 0; j < net->n_layers; j++)
        for (int k = 0; k < net->layers[j].n_in; k++)
            if (net->layers[j].in[k] >= 0 && net->layers[j].in[k] < net->n_layers)
                n_cons[net->layers[j].in[k]]++;
    for (int i = 0; i < net->n_layers - 1; i++)
        if (n_cons[i] == 0) {
            vd_free(n_cons);
            return -1 - vd_errf(e, VD_EUNSUPPORTED, "layer '%s' of net '%s' feeds no other layer; "
                                "every layer except the loss must be used",
                                net->layers[i].name, net->name);
        }
    vd_free(n_cons);
    return loss;
}

static int chunks_check(const vd_net *net, int batch, const int *chunks, bool fwd, vd_err *e);

static int check_inputs(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                        vd_err *e) {
    if (!opts || opts->batch <= 0)
        return vd_errf(e, VD_EUSAGE, "plan: batch must be positive");
    if ((unsigned)opts->policy >= VD_POLICY_COUNT)
        return vd_errf(e, VD_EUSAGE, "plan: unknown policy %d", (int)opts->policy);
    if (net->n_layers <= 0)
        return vd_errf(e, VD_ESPEC, "net '%s' has no layers", net->name);
    if (!prof || prof->n_layers != net->n_layers)
        return vd_errf(e, VD_EDATA, "profile has %d layers but net '%s' has %d",
                       prof ? prof->n_layers : 0, net->name, net->n_layers);
    /* feature-map bytes come from net->train.math; times from the profile */
    if (vd_math_act_bytes(prof->math) != vd_math_act_bytes(net->train.math))
        return vd_errf(e, VD_EDATA, "profile was made for math %s, the net runs in %s",
                       vd_math_name(prof->math), vd_math_name(net->train.math));
    for (int i = 0; i < net->n_layers; i++) {
        if (prof->layers[i].n_algos <= 0 || prof->layers[i].n_algos > VD_PROFILE_MAX_ALGOS)
            return vd_errf(e, VD_EDATA, "profile layer '%s' has %d algorithm options",
                           prof->layers[i].name, prof->layers[i].n_algos);
        if (opts->algos && (opts->algos[i] < 0 || opts->algos[i] >= prof->layers[i].n_algos))
            return vd_errf(e, VD_EUSAGE, "algorithm %d of layer '%s' out of range (0..%d)",
                           opts->algos[i], net->layers[i].name, prof->layers[i].n_algos - 1);
        if (opts->algos_bwd && (opts->algos_bwd[i] < 0 || opts->algos_bwd[i] >= prof->layers[i].n_algos))
            return vd_errf(e, VD_EUSAGE, "backward algorithm %d of layer '%s' out of range (0..%d)",
                           opts->algos_bwd[i], net->layers[i].name, prof->layers[i].n_algos - 1);
    }
    int loss = find_loss(net, e);
    if (loss < 0) return -1 - loss;
    int rc = chunks_check(net, opts->batch, opts->chunks, opts->forward_only, e);
    if (rc) return rc;
    if (opts->disp) {
        bool *ip = vd_malloc((size_t)net->n_layers * sizeof *ip, NULL);
        if (!ip) return vd_errf(e, VD_ENOMEM, "out of memory");
        vd_schedule_inplace_flags(net, ip);
        for (int i = 0; i <= net->n_layers && !rc; i++) {
            const char *who = i ? net->layers[i - 1].name : "the net input";
            if ((unsigned)opts->disp[i] >= VD_DISP_COUNT)
                rc = vd_errf(e, VD_EUSAGE, "disposition %d of %s out of range", (int)opts->disp[i], who);
            else if (i && ip[i - 1] && opts->disp[i] != VD_DISP_AUTO)
                rc = vd_errf(e, VD_EUSAGE, "layer '%s' runs in place (its output is its producer's "
                             "tensor): give its disposition to the producer", who);
        }
        vd_free(ip);
        if (rc) return rc;
    }
    return VD_OK;
}

/* The runs of a split and the layers that run in place: ra[i] and
 * ra[n_layers + i] the first and last layer of layer i's run (vdp_runs),
 * ip[i] layer i runs in place (vd_schedule_inplace_flags). */
typedef struct split_runs { int *ra; bool *ip; } split_runs;

static void runs_free(split_runs *r) {
    vd_free(r->ra);
    vd_free(r->ip);
    r->ra = NULL;
    r->ip = NULL;
}

/* r's runs for chunks again (after chunks changed). */
static int runs_update(const vd_net *net, const int *chunks, split_runs *r, vd_err *e) {
    return vdp_runs(net, chunks, r->ra, r->ra + net->n_layers) < 0
               ? vd_errf(e, VD_ENOMEM, "out of memory") : VD_OK;
}

static int runs_get(const vd_net *net, const int *chunks, split_runs *r, vd_err *e) {
    size_t n = (size_t)(net->n_layers > 0 ? net->n_layers : 1);
    r->ra = vd_malloc(2 * n * sizeof *r->ra, NULL);
    r->ip = vd_malloc(n * sizeof *r->ip, NULL);
    int rc = r->ra && r->ip ? runs_update(net, chunks, r, e) : vd_errf(e, VD_ENOMEM, "out of memory");
    if (rc) runs_free(r);
    else vd_schedule_inplace_flags(net, r->ip);
    return rc;
}

/* Does layer i run in place at either end of its run? */
static bool inplace_run_end(const vd_net *net, const split_runs *r, int i) {
    return r->ip[i] && (r->ra[i] == i || r->ra[net->n_layers + i] == i);
}

/* vd_plan_chunks_check for a forward-only plan (fwd: the evaluation
 * forward's chunkable ops, vd_op_chunkable) or any. */
static int chunks_check(const vd_net *net, int batch, const int *chunks, bool fwd, vd_err *e) {
    if (!chunks) return VD_OK;
    int NL = net->n_layers;
    split_runs r;
    int rc = runs_get(net, chunks, &r, e);
    for (int i = 0; i < NL && !rc; i++) {
        const vd_layer *l = &net->layers[i];
        int k = chunks[i];
        const char *why = NULL;
        if (k < 0) why = "a negative chunk count";
        else if (k < 2) continue;
        else if (k > batch) why = "more chunks than samples in the batch";
        else if (!vd_op_chunkable(&vd_op_table[l->op], fwd))
            why = "its op needs the whole batch at once";
        else if (i == NL - 1) why = "it is the loss";
        else if (inplace_run_end(net, &r, i))
            why = "it runs in place over its input, so its run must hold the layers before "
                  "and after it (split those too)";
        if (why)
            rc = vd_errf(e, VD_EUSAGE, "layer '%s' cannot be split in %d chunks: %s", l->name, k,
                         why);
    }
    runs_free(&r);
    return rc;
}

int vd_plan_chunks_check(const vd_net *net, int batch, const int *chunks, vd_err *e) {
    return chunks_check(net, batch, chunks, false, e);
}

/* The most values per sample among layer i's output and inputs. */
static int64_t map_numel(const vd_net *net, int i) {
    int64_t m = vd_net_out_numel(net, i);
    for (int k = 0; k < net->layers[i].n_in; k++) {
        int64_t x = vd_net_out_numel(net, net->layers[i].in[k]);
        if (x > m) m = x;
    }
    return m;
}

/* chunks[n_layers]: every layer that can be split (in a forward-only plan
 * when fwd: vd_op_chunkable) whose output or an input
 * holds at least min_numel values per sample (map_numel), in k chunks (so
 * a run of large maps ends at the layer that shrinks them, a pooling: its
 * whole-batch output is the small one); no layer that runs in
 * place at either end of a run (each pass unsplits such ends: fewer
 * layers split each time, so it ends); the others 1. */
static int chunks_fill(const vd_net *net, int batch, int k, int64_t min_numel, bool fwd,
                       int *chunks, vd_err *e) {
    int NL = net->n_layers;
    for (int i = 0; i < NL; i++)
        chunks[i] = k > 1 && k <= batch && vd_op_chunkable(&vd_op_table[net->layers[i].op], fwd) &&
                    i < NL - 1 && map_numel(net, i) >= min_numel ? k : 1;
    split_runs r;
    int rc = runs_get(net, chunks, &r, e);
    for (bool again = !rc; again && !rc;) {
        again = false;
        for (int i = 0; i < NL; i++)
            if (chunks[i] > 1 && inplace_run_end(net, &r, i)) { chunks[i] = 1; again = true; }
        if (again) rc = runs_update(net, chunks, &r, e);
    }
    runs_free(&r);
    return rc;
}

int vd_plan_chunks_all(const vd_net *net, int batch, int k, int *chunks, vd_err *e) {
    return chunks_fill(net, batch, k, 0, false, chunks, e);
}

/* ---- auto's split layers ---------------------------------------------------
 * Under policy auto with no chunks given, a training plan that does not fit
 * unsplit (or that a split can make faster: split_first) splits layers:
 * the smallest k of AUTO_KS (up to the batch) whose
 * plan fits, each layer whose output or an input holds at least 1/k of the
 * largest map's bytes in k chunks (the maps that set the floor; the smaller
 * ones later in the net stay whole and fast). Three counts: each is a
 * search of its own, dearer with k (the units multiply); why these, with
 * the floors and planning times that chose them: docs/chunking.md, "Auto"
 * (--chunks gives any split). */
static const int AUTO_KS[] = {2, 4, 8};

static bool auto_splits(const vd_plan_opts *o) {
    return o->policy == VD_POLICY_AUTO && !o->forward_only && !o->chunks;
}

/* Auto's chunks at k into chunks[n_layers], runs of two layers at least (a
 * layer split alone keeps its input and output whole: it saves nothing):
 * the layers whose output or an input holds at least 1/share of the
 * largest map (share k: auto's split; 1: the largest maps' layers alone,
 * AUTO_LARGEST_K); fwd: for a forward-only plan (batch norm splits too:
 * vd_op_chunkable); *any: some layer is split. */
static int auto_chunks_of(const vd_net *net, int batch, int k, int share, bool fwd, int *chunks,
                          bool *any, vd_err *e) {
    int64_t most = 0;
    int NL = net->n_layers;
    for (int i = 0; i < NL; i++)
        if (map_numel(net, i) > most) most = map_numel(net, i);
    int rc = chunks_fill(net, batch, k, most / share, fwd, chunks, e);
    split_runs r = {0};
    if (!rc) rc = runs_get(net, chunks, &r, e);
    *any = false;
    for (int i = 0; i < NL && !rc; i++) {
        if (chunks[i] > 1 && r.ra[i] == r.ra[NL + i]) chunks[i] = 1;
        *any |= chunks[i] > 1;
    }
    runs_free(&r);
    return rc;
}

static int auto_chunks(const vd_net *net, int batch, int k, bool fwd, int *chunks, bool *any,
                       vd_err *e) {
    return auto_chunks_of(net, batch, k, k, fwd, chunks, any, e);
}

/* ---- forward-only plans ----------------------------------------------------
 * An evaluation plan (train->eval) and an inference plan (vd_plan_build with
 * opts->forward_only) are one build: policy none (every feature map lives
 * from its writer to its last reader, nothing is offloaded: no backward
 * pass reads a map later), first with the given forward options, then,
 * when that does not fit the budget, with each layer's least-workspace
 * option; an inference plan may split layers and offload maps between
 * their forward readers too (below). */

/* Each layer's forward option of least workspace into algos[2L] (both
 * halves; the backward half is not run). */
static void least_ws_fwd(const vd_net *net, const vd_profile *prof, int *algos) {
    int L = net->n_layers;
    for (int i = 0; i < L; i++) {
        int best = 0;
        for (int k = 1; k < prof->layers[i].n_algos; k++)
            if (vd_profile_algo_ws(&prof->layers[i].algos[k], false) <
                vd_profile_algo_ws(&prof->layers[i].algos[best], false)) best = k;
        algos[i] = algos[L + i] = best;
    }
}

/* Each layer's fastest forward option into algos[2L] (both halves). */
static void fastest_fwd(const vd_net *net, const vd_profile *prof, int *algos) {
    int L = net->n_layers;
    for (int i = 0; i < L; i++) algos[i] = algos[L + i] = vdp_fastest_pass(&prof->layers[i], false);
}

/* The forward-only plan of o (o->forward_only) with the options algos[2L]
 * into *out, pin's persistent regions at pin's offsets (the evaluation
 * plan of training plan pin; NULL: an inference plan); when it does not fit
 * o->budget, again with the least-workspace options (algos is overwritten).
 * Returns like vdp_build_fixed (VD_EBUDGET: *out valid, infeasible). */
static int build_forward(const vd_net *net, const vd_profile *prof, const vd_plan_opts *o,
                         int *algos, const vd_plan *pin, vd_plan *out, vd_err *e) {
    int rc = vdp_build_fixed(net, prof, o, VD_POLICY_NONE, algos, pin, out, e);
    if (rc != VD_EBUDGET) return rc;
    least_ws_fwd(net, prof, algos);
    vdp_plan_release(out);
    return vdp_build_fixed(net, prof, o, VD_POLICY_NONE, algos, pin, out, e);
}


/* ---- inference's split layers and offloads --------------------------------
 * An inference plan given a budget that does not fit whole with the
 * fastest forward options splits its large layers in batch chunks as auto
 * does (auto_chunks at k: the layers whose output or an input holds at
 * least 1/k of the largest map, runs of two at least), k = 2, 4, 8, ...
 * and the batch itself: a run's working set is then its chunk's (its first
 * input and last output stay whole); batch norm splits too (its
 * evaluation forward: vd_op_chunkable). A map whose readers leave a gap (a
 * residual block's input waiting for the add, an inception branch's output
 * waiting for the concat) may be offloaded across it instead (plan.h; the
 * build's offload policy ALL offers every such map, its fitting keeps
 * those that save memory). For each option set, fastest and least-workspace, two plans:
 * the fewest chunks that fit without offloads, and the fewest that fit
 * with them, no more than the first; the fastest of those four is taken
 * (inference_search, the unsplit plan without offloads at a tie): offloads
 * come in only where splitting alone does not fit or is predicted slower.
 * An inference build is one placement, no search, so every count is tried,
 * not auto's two. With chunks given (vd_plan_opts.chunks), only those. */

static bool inference_splits(const vd_plan_opts *o) {
    return o->forward_only && !o->chunks;
}

/* The chunk count tried after k (1: unsplit, or o's own chunks) at batch:
 * doubled, the batch last; 0 after the batch, or after 1 when o gives its
 * chunks. */
static int inference_next_k(const vd_plan_opts *o, int k) {
    if (k >= o->batch || !inference_splits(o)) return 0;
    return 2 * k < o->batch ? 2 * k : o->batch;
}

/* The inference build of o (policy none, o->budget) with the options
 * algos[2L] at chunk count k (1: o's chunks; else auto_chunks into ch),
 * offloading or not, into *p; *built false (nothing to free) when k splits
 * no layer. Returns like vdp_build_fixed. */
static int inference_build(const vd_net *net, const vd_profile *prof, const vd_plan_opts *o,
                           const int *algos, int k, bool offload, int *ch, vd_plan *p,
                           bool *built, vd_err *e) {
    vd_plan_opts ok = *o;
    *built = false;
    if (k > 1) {
        bool any = false;
        int rc = auto_chunks(net, o->batch, k, true, ch, &any, e);
        if (rc || !any) return rc;
        ok.chunks = ch;
    }
    *built = true;
    return vdp_build_fixed(net, prof, &ok, offload ? VD_POLICY_ALL : VD_POLICY_NONE, algos, NULL,
                           p, e);
}

/* The least live peak of any offloading build like p (an inference build
 * of the same split and options, whatever its budget or offloads): every
 * map it could offload (rd_after set) absent between its two reads, the
 * rest resident from their first step to their last. VD_ENOMEM: 0. */
static uint64_t least_live(const vd_plan *p) {
    int n = p->n_steps;
    uint64_t *mem = vd_calloc((size_t)n + 1, sizeof *mem, NULL), peak = 0;
    if (!mem) return 0;
    for (int t = 0; t < p->n_tensors; t++) {
        const vd_tensor *T = &p->tensors[t];
        const vd_interval *a = &p->intervals[T->iv[0]], *z = &p->intervals[T->iv[T->n_iv - 1]];
        int span[2][2] = {{a->first, z->last}, {0, -1}};
        if (T->rd_after >= 0) {
            span[0][1] = T->rd_before;
            span[1][0] = T->rd_after;
            span[1][1] = z->last;
        }
        for (int k = 0; k < 2; k++) {
            if (span[k][1] < span[k][0]) continue;
            mem[span[k][0]] += a->bytes;
            mem[span[k][1] + 1] -= a->bytes;   /* (unsigned wrap-around cancels) */
        }
    }
    for (int s = 0; s < n; s++) {
        if (s) mem[s] += mem[s - 1];
        if (mem[s] > peak) peak = mem[s];
    }
    vd_free(mem);
    return peak;
}

/* The smallest budget the offloading inference build at k with algos fits,
 * into *floor, given least, its least live peak (least_live), need, what
 * the build without offloads needs there (its live bytes at every step are
 * at least the offloading one's), and best, the least floor found so far:
 * UINT64_MAX when it cannot beat hi = min(need, best). A build at least
 * (where the placement often packs the live bytes exactly: then that is
 * the floor), one at 256 bytes below hi (whether it beats hi at all: most
 * splits' do not), then a binary search between. */
static int offload_floor(const vd_net *net, const vd_profile *prof, const vd_plan_opts *o,
                         const int *algos, int k, int *ch, uint64_t least, uint64_t need,
                         uint64_t best, uint64_t *floor, vd_err *e) {
    *floor = UINT64_MAX;
    uint64_t hi = need < best ? need : best;
    if (least >= hi) return VD_OK;
    uint64_t lo = least - VD_PLAN_ALIGN;   /* below the least live peak: cannot fit */
    vd_plan_opts q = *o;
    vd_plan p;
    bool built;
    vd_err te = {0};
    for (int probe = 0; probe < 2 || hi - lo > VD_PLAN_ALIGN; probe++) {
        if (vdp_stopped(o)) return vd_errf(e, VD_ESTOP, "the smallest-budget search stopped");
        uint64_t mid = probe == 0 ? least
                     : probe == 1 ? hi - VD_PLAN_ALIGN
                     : (lo + (hi - lo) / 2) / VD_PLAN_ALIGN * VD_PLAN_ALIGN;
        if (mid <= lo) mid = lo + VD_PLAN_ALIGN;
        q.budget = mid;
        int rc = inference_build(net, prof, &q, algos, k, true, ch, &p, &built, &te);
        if (rc != VD_OK && rc != VD_EBUDGET) { *e = te; return rc; }
        vdp_plan_release(&p);
        if (rc == VD_OK) hi = mid;
        else if (probe == 1) return VD_OK;   /* not below hi: no gain */
        else lo = mid;
        if (hi == least) break;               /* (nothing fits below it) */
    }
    *floor = hi;
    return VD_OK;
}

/* The smallest budget an inference plan fits (vd_plan_min_budget of a
 * forward-only plan): the least over the chunk counts (inference_next_k),
 * option sets and with or without offloads of their needs; *k_out the
 * smallest count that gives it (1: unsplit, or opts' chunks), *off_out
 * whether it offloads. */
static int inference_min_budget(const vd_net *net, const vd_profile *prof,
                                const vd_plan_opts *opts, uint64_t *min_budget, int *k_out,
                                bool *off_out, vd_err *e) {
    vd_plan_opts o = *opts;
    o.policy = VD_POLICY_NONE;
    o.prefetch = VD_PREFETCH_AUTO;
    o.disp = NULL;
    o.budget = 0;
    int L = net->n_layers;
    int *algos = vd_malloc(3 * (size_t)L * sizeof *algos, NULL);   /* [fwd L | bwd L], chunks */
    if (!algos) return vd_errf(e, VD_ENOMEM, "out of memory");
    int *ch = algos + 2 * L;
    int rc = VD_OK;
    *min_budget = UINT64_MAX;
    *k_out = 1;
    *off_out = false;
    for (int k = 1; k && !rc; k = inference_next_k(&o, k)) {
        for (int set = 0; set < 2 && !rc; set++) {
            if (set == 0) fastest_fwd(net, prof, algos);
            else least_ws_fwd(net, prof, algos);
            vd_plan p;
            bool built;
            if ((rc = inference_build(net, prof, &o, algos, k, false, ch, &p, &built, e)) || !built)
                break;
            uint64_t need = p.hwm, least = least_live(&p), f;
            vdp_plan_release(&p);
            if (!least) { rc = vd_errf(e, VD_ENOMEM, "out of memory"); break; }
            if (need < *min_budget) { *min_budget = need; *k_out = k; *off_out = false; }
            if (o.no_offload) continue;
            rc = offload_floor(net, prof, &o, algos, k, ch, least, need, *min_budget, &f, e);
            if (!rc && f < *min_budget) { *min_budget = f; *k_out = k; *off_out = true; }
        }
    }
    vd_free(algos);
    return rc;
}

/* Inference's search for o->budget (o: policy none): for each option set,
 * the fastest forward options then the least-workspace ones, the fewest
 * chunks that fit without offloads and the fewest that fit with them
 * (inference_next_k from 1: whole, or o's chunks), no more than those;
 * the fastest plan found (earlier in that order at a tie) into *out, whose
 * infeasible whole plan of the least-workspace options without offloads is
 * left there (VD_EBUDGET) when none fits. The fastest options whole
 * without offloads end it. */
enum { INF_CANDS = 4 };   /* per option set: without offloads, with */
static int inference_search(const vd_net *net, const vd_profile *prof, const vd_plan_opts *o,
                            int *algos, vd_plan *out, vd_err *e) {
    int *ch = vd_malloc((size_t)net->n_layers * sizeof *ch, NULL);
    if (!ch) return vd_errf(e, VD_ENOMEM, "out of memory");
    vd_plan cand[INF_CANDS];   /* [2 * set + offloads] */
    bool have[INF_CANDS] = {false};
    int rc = VD_OK;
    memset(out, 0, sizeof *out);
    for (int set = 0; set < 2 && !rc && !(have[0] && cand[0].n_units == cand[0].n_layers); set++) {
        if (set == 0) fastest_fwd(net, prof, algos);
        else least_ws_fwd(net, prof, algos);
        bool *plain = &have[2 * set], *offl = &have[2 * set + 1];
        for (int k = 1; k && !rc && !*plain && (k == 1 || !vdp_stopped(o));
             k = inference_next_k(o, k)) {   /* (whole always: out's plan) */
            for (int off = 0; off < 2 - o->no_offload && !rc && !*plain && !(off && *offl); off++) {
                vd_plan p;
                bool built;
                int r2 = inference_build(net, prof, o, algos, k, off, ch, &p, &built, e);
                if (!built) { rc = r2; break; }
                if (r2 == VD_EBUDGET && k == 1 && !off) { vdp_plan_release(out); *out = p; }
                else if (r2 == VD_EBUDGET) vdp_plan_release(&p);
                else if (r2) rc = r2;
                else { cand[2 * set + off] = p; have[2 * set + off] = true; }
            }
        }
    }
    vd_free(ch);
    int w = -1;
    for (int c = 0; c < INF_CANDS; c++)
        if (have[c] && (w < 0 || cand[c].sim.iter_s < cand[w].sim.iter_s)) w = c;
    for (int c = 0; c < INF_CANDS; c++)
        if (have[c] && (rc || c != w)) vdp_plan_release(&cand[c]);
    if (rc || w >= 0) vdp_plan_release(out);
    if (rc) return rc;
    if (w < 0) return VD_EBUDGET;
    *out = cand[w];
    return VD_OK;
}

/* The inference plan (vd_plan_build with opts->forward_only): without a
 * budget, the fastest forward options whole (or split as opts->chunks);
 * with one, as inference_search finds; with pool_to_need the pool is what
 * it needs. */
static int build_inference(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                           vd_plan *out, vd_err *e) {
    vd_plan_opts o = *opts;
    o.policy = VD_POLICY_NONE;
    o.prefetch = VD_PREFETCH_AUTO;   /* (the paper's rule is for backward prefetches) */
    o.disp = NULL;
    int *algos = vd_malloc(2 * (size_t)net->n_layers * sizeof *algos, NULL);
    if (!algos) return vd_errf(e, VD_ENOMEM, "out of memory");
    int rc;
    if (opts->budget) {
        rc = inference_search(net, prof, &o, algos, out, e);
    } else {
        fastest_fwd(net, prof, algos);
        rc = build_forward(net, prof, &o, algos, NULL, out, e);
    }
    vd_free(algos);
    if (rc == VD_OK && o.pool_to_need && out->hwm < out->budget) out->budget = out->hwm;
    return rc;
}


/* The policy's search: auto's (on `share` of its effort cap, 1: all of
 * it), or one of the others'; forward only: the inference plan. */
static int build_any(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                     double share, vd_plan *out, vd_err *e) {
    if (opts->forward_only) return build_inference(net, prof, opts, out, e);
    if (opts->policy == VD_POLICY_AUTO)
        return share < 1.0 ? vdp_build_auto_share(net, prof, opts, share, out, e)
                           : vdp_build_auto(net, prof, opts, false, out, e);
    return vdp_build_policy(net, prof, opts, out, e);
}

/* The lower bound (vd_plan_lower_bound: compute, each pass's fastest option
 * whose workspace fits beside its operands) at `budget` of every plan
 * split as o->chunks (policy and budget aside), from the split's keep-all
 * plan (one build) into *bound: INFINITY when some pass's operands alone
 * exceed the budget, so that no plan so split fits (exact: a search it
 * skips could not have fitted). */
static int split_bound(const vd_net *net, const vd_profile *prof, const vd_plan_opts *o,
                       uint64_t budget, double *bound, vd_err *e) {
    vd_plan_opts ko = *o;
    ko.policy = VD_POLICY_NONE;
    ko.budget = 0;
    vd_plan k;
    int rc = vdp_build_policy(net, prof, &ko, &k, e);
    if (rc) return rc;
    *bound = vd_plan_lower_bound(net, prof, &k, budget);
    vdp_plan_release(&k);
    return VD_OK;
}

/* A candidate plan *q built with result rc (build_checked) against *best
 * (a plan where *have): *q replaces *best where it fits and predicts a
 * faster iteration, or where there is no *best, else it is released; a
 * budget *q does not fit is no error (VD_OK). Another error is returned,
 * *best released (*have false). */
static int keep_faster(vd_plan *best, bool *have, vd_plan *q, int rc) {
    if (rc == VD_OK && (!*have || q->sim.iter_s < best->sim.iter_s * (1.0 - 1e-9))) {
        if (*have) vdp_plan_release(best);
        *best = *q;
        *have = true;
        return VD_OK;
    }
    if (rc == VD_OK || rc == VD_EBUDGET) {
        vdp_plan_release(q);
        return VD_OK;
    }
    if (*have) vdp_plan_release(best);
    *have = false;
    return rc;
}

/* A split of auto's (auto_chunks_of at k and share) into ch[n_layers] and *o
 * (opts with those chunks); *worth: some layer is split and the split could
 * fit `budget`; *bound: its plans' lower bound there (split_bound; budget
 * 0: neither asked, *bound 0). auto_split_at: auto's split at AUTO_KS[q]. */
static int split_candidate(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                           uint64_t budget, int k, int share, int *ch, vd_plan_opts *o,
                           bool *worth, double *bound, vd_err *e) {
    *o = *opts;
    o->chunks = ch;
    bool any = false;
    *bound = 0;
    int rc = auto_chunks_of(net, opts->batch, k, share, false, ch, &any, e);
    if (!rc && any && budget) rc = split_bound(net, prof, o, budget, bound, e);
    *worth = !rc && any && !isinf(*bound);
    return rc;
}

static int auto_split_at(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                         uint64_t budget, size_t q, int *ch, vd_plan_opts *o, bool *worth,
                         double *bound, vd_err *e) {
    return split_candidate(net, prof, opts, budget, AUTO_KS[q], AUTO_KS[q], ch, o, worth, bound,
                           e);
}

/* Auto's smallest budget, m unsplit, with its split layers: the least over
 * AUTO_KS (the smallest k at a tie, as vd_plan_build tries them). *min_budget
 * and *k_out (1: unsplit) the smallest found. */
static int split_min_budget(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                            uint64_t m, uint64_t *min_budget, int *k_out, vd_err *e) {
    *min_budget = m;
    *k_out = 1;
    if (!auto_splits(opts)) return VD_OK;
    int *ch = vd_malloc((size_t)net->n_layers * sizeof *ch, NULL);
    if (!ch) return vd_errf(e, VD_ENOMEM, "out of memory");
    int rc = VD_OK;
    for (size_t q = 0; q < VD_ARRAY_LEN(AUTO_KS) && AUTO_KS[q] <= opts->batch && !rc; q++) {
        uint64_t mk = 0;
        vd_plan_opts o;
        bool worth = false;
        double kb;
        /* (below the least so far or nothing: mins are VD_PLAN_ALIGN apart) */
        uint64_t below = *min_budget > VD_PLAN_ALIGN ? *min_budget - VD_PLAN_ALIGN : 0;
        if ((rc = auto_split_at(net, prof, opts, below, q, ch, &o, &worth, &kb, e))) break;
        if (!worth) continue;
        if ((rc = vdp_min_budget_auto_below(net, prof, &o, *min_budget, &mk, e))) break;
        if (mk >= *min_budget) continue;
        *min_budget = mk;
        *k_out = AUTO_KS[q];
    }
    vd_free(ch);
    return rc;
}

/* vd_plan_min_budget with the chunk count of auto's or an inference plan's
 * smallest (*k, 1: unsplit, or another policy) and whether the inference
 * plan's offloads (*off). */
static int min_budget_k(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                        uint64_t *min_budget, int *k, bool *off, vd_err *e) {
    *k = 1;
    *off = false;
    int rc = check_inputs(net, prof, opts, e);
    if (rc) return rc;
    if (opts->forward_only) return inference_min_budget(net, prof, opts, min_budget, k, off, e);
    if (opts->policy == VD_POLICY_AUTO) {
        uint64_t m = 0;
        rc = vdp_min_budget_auto(net, prof, opts, &m, e);
        return rc ? rc : split_min_budget(net, prof, opts, m, min_budget, k, e);
    }
    return vdp_min_budget_policy(net, prof, opts, min_budget, e);
}

int vd_plan_min_budget(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                       uint64_t *min_budget, vd_err *e) {
    int k;
    bool off;
    return min_budget_k(net, prof, opts, min_budget, &k, &off, e);
}

int vd_plan_min_budgets(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                        uint64_t *mins, vd_err *e) {
    /* none, all and conv first: dyn's first candidates are those searches
     * when the algorithms are free, and auto starts from dyn's result */
    static const vd_policy order[] = {VD_POLICY_NONE, VD_POLICY_ALL, VD_POLICY_CONV, VD_POLICY_DYN,
                                      VD_POLICY_AUTO};
    _Static_assert(sizeof order / sizeof order[0] == VD_POLICY_COUNT, "every policy once");
    bool free_algos = !opts->algos && !opts->algos_bwd && opts->fixed_algo < 0;
    for (int k = 0; k < VD_POLICY_COUNT; k++) {
        vd_plan_opts o = *opts;
        o.policy = order[k];
        int rc = check_inputs(net, prof, &o, e);
        if (rc) return rc;
        if (o.policy == VD_POLICY_DYN && free_algos)
            rc = vdp_min_budget_dyn_from(net, prof, &o, mins, &mins[o.policy], e);
        else if (o.policy == VD_POLICY_AUTO && free_algos && !o.forward_only) {
            uint64_t m = 0;
            int ks;
            rc = vdp_min_budget_auto_from(net, prof, &o, mins[VD_POLICY_DYN], &m, e);
            if (!rc) rc = split_min_budget(net, prof, &o, m, &mins[o.policy], &ks, e);
        }
        else
            rc = vd_plan_min_budget(net, prof, &o, &mins[o.policy], e);
        if (rc) return rc;
    }
    return VD_OK;
}

/* The evaluation (forward-only) plan, its persistent regions at train's
 * offsets, its layers split as train's (chunks, opts->chunks): train->eval. */
static int build_eval(const vd_net *net, const vd_profile *prof, const int *chunks,
                      vd_plan *train, vd_err *e) {
    vd_plan_opts o = {0};
    vd_plan_opts_init(&o);
    o.batch = train->batch;
    o.policy = VD_POLICY_NONE;
    o.budget = train->budget;
    o.forward_only = true;
    o.chunks = chunks;
    int L = net->n_layers;
    int *algos = vd_malloc(2 * (size_t)L * sizeof *algos, NULL);   /* [fwd L | bwd L] */
    if (!algos) return vd_errf(e, VD_ENOMEM, "out of memory");
    for (int i = 0; i < L; i++) algos[i] = algos[L + i] = train->layers[train->first_unit[i]].algo_fwd;
    vd_plan *ev = vd_calloc(1, sizeof *ev, NULL);
    if (!ev) { vd_free(algos); return vd_errf(e, VD_ENOMEM, "out of memory"); }
    int rc = build_forward(net, prof, &o, algos, train, ev, e);
    if (rc == VD_EBUDGET) vd_err_prefix(e, "the evaluation (forward-only) placement does not fit");
    vd_free(algos);
    if (rc != VD_OK && rc != VD_EBUDGET) { vdp_plan_release(ev); vd_free(ev); return rc; }
    if (rc == VD_EBUDGET) { vdp_plan_release(ev); vd_free(ev); return rc; }
    train->eval = ev;
    return VD_OK;
}

static void explain_infeasible(const vd_net *net, const vd_profile *prof,
                               const vd_plan_opts *opts, vd_plan *p, vd_err *e) {
    char b1[32], b2[32], b3[32], b4[32], lab[160];
    int bad = -1;
    if (p->live_peak > p->budget) bad = p->peak_step;   /* live bytes alone do not fit */
    else
        for (int s = 0; s < p->n_steps; s++)
            if (p->steps[s].mem_top > p->budget) { bad = s; break; }
    if (bad < 0) bad = p->peak_step;
    const vd_step *st = &p->steps[bad];
    uint64_t need = st->mem_top;
    uint64_t minb = 0;
    int k = 1;
    bool off = false;
    vd_err te = {0};
    int rc = min_budget_k(net, prof, opts, &minb, &k, &off, &te);
    char minmsg[200], kmsg[128] = "";
    if (k > 1)   /* (an inference plan tries every count: inference_min_budget) */
        snprintf(kmsg, sizeof kmsg, ", its largest layers split in %d batch chunks%s", k,
                 opts->forward_only ? "" : " (--chunks splits finer)");
    if (off)
        snprintf(kmsg + strlen(kmsg), sizeof kmsg - strlen(kmsg), "%s maps offloaded between "
                 "their readers", k > 1 ? " and" : ",");
    if (rc == VD_OK)
        /* (the exact bytes too: the rounded size may lie below them) */
        snprintf(minmsg, sizeof minmsg, "the smallest budget that fits is %s (%llu bytes)%s",
                 vd_fmt_bytes(minb, b4, sizeof b4), (unsigned long long)minb, kmsg);
    else
        snprintf(minmsg, sizeof minmsg, "no budget fits (%s)", te.msg);
    vd_plan_step_label(p, net, bad, lab, sizeof lab);
    const char *why = st->mem_in_use > p->budget ? "live tensors need"
                                                 : "after placement (fragmentation) the pool needs";
    uint64_t shown = st->mem_in_use > p->budget ? st->mem_in_use : need;
    char what[160];
    if (opts->forward_only)   /* an inference plan (build_inference) */
        snprintf(what, sizeof what, "the forward pass (every feature map kept until its last "
                 "reader or offloaded between two, whole or split in batch chunks)");
    else
        snprintf(what, sizeof what, "policy %s", vd_policy_name(opts->policy));
    snprintf(p->note, sizeof p->note,
             "budget %s too small for %s: step %d (%s): %s %s, %s over; %s",
             vd_fmt_bytes(p->budget, b1, sizeof b1), what, bad, lab, why,
             vd_fmt_bytes(shown, b2, sizeof b2), vd_fmt_bytes(shown - p->budget, b3, sizeof b3),
             minmsg);
    vd_errf(e, VD_EBUDGET, "%s", p->note);
}

static int fits_checked(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                        bool *fits, vd_err *e);
static int build_checked(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                         double share, vd_plan *out, bool *eval_failed, vd_err *e);

/* Auto's plan with split layers (see above) for a budget its unsplit search
 * does not fit: into *out (released first) when one fits; VD_EBUDGET (out
 * untouched) when none does. The smallest k that fits, and the next k of
 * AUTO_KS too, the faster plan kept: finer chunks overlap their copies
 * better. Splitting every layer instead of the large maps' predicts faster
 * still, but splitting the classifier's matrix products reads their
 * weights once per chunk at a small batch, which the chunk time model does
 * not see (docs/chunking.md, "Auto", has the measurements). */
static int build_split(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                       vd_plan *out, vd_err *e) {
    int *ch = vd_malloc((size_t)net->n_layers * sizeof *ch, NULL);
    if (!ch) return vd_errf(e, VD_ENOMEM, "out of memory");
    int rc = VD_EBUDGET, r2 = VD_OK;
    size_t nk = VD_ARRAY_LEN(AUTO_KS);
    for (size_t q = 0, tried = 0; q < nk && AUTO_KS[q] <= opts->batch && tried < 2 &&
                                  !vdp_stopped(opts); q++) {
        vd_plan_opts o;
        bool fits = false, worth = false;
        double kb;
        if ((r2 = auto_split_at(net, prof, opts, opts->budget, q, ch, &o, &worth, &kb, e))) break;
        if (!worth) continue;
        if (rc == VD_EBUDGET && (r2 = fits_checked(net, prof, &o, &fits, e))) break;
        if (rc == VD_EBUDGET && !fits) continue;
        tried++;
        vd_plan sp;
        bool ef;
        r2 = build_checked(net, prof, &o, 1.0, &sp, &ef, e);
        if (r2 == VD_EBUDGET) { vdp_plan_release(&sp); r2 = VD_OK; continue; }
        if (r2) break;
        if (rc == VD_OK && sp.sim.iter_s >= out->sim.iter_s) { vdp_plan_release(&sp); continue; }
        vdp_plan_release(out);
        *out = sp;
        rc = VD_OK;
    }
    vd_free(ch);
    if (r2) {
        if (rc == VD_OK) vdp_plan_release(out);
        return r2;
    }
    return rc;
}

/* Auto's split plan where it can beat the unsplit one: a split needs less
 * workspace beside a pass's operands, so its convolutions can take their
 * fastest options where the whole batch's cannot, and the split plans that
 * auto finds below the unsplit floor fit above it too: more memory must not
 * plan slower than they do (docs/results/2026-12-06-s19/search.md: VGG-16
 * fp32 planned slower unsplit at 12 GiB than split at 10). So where some k
 * of AUTO_KS splits to a lower bound (split_bound) over AUTO_SPLIT_GAIN
 * below `against` (the unsplit bound; after the unsplit search, its plan's
 * time), the finest k that could fit is searched on `share` of the effort
 * cap (as below the floor, its chunks overlap their copies better):
 * *searched, and *have when its plan fits, then in *sp. Then the next
 * coarser k that could fit, where its bound is below that plan, on
 * AUTO_COARSER_SHARE of that share, the faster plan kept: fewer, larger
 * chunks run nearer the whole batch's speed, and where the budget leaves
 * room for them they win, near the floor the finest does
 * (docs/chunking.md, "Auto"); last, the largest maps' split
 * (split_largest). Where
 * splitting lowers the bound by less (on the ResNets and GoogLeNet it moves
 * it by under 0.2%, either way) nothing is searched: the planning time
 * stays. docs/chunking.md, "Auto". */
static const double AUTO_SPLIT_GAIN = 0.005, AUTO_COARSER_SHARE = 0.25;
/* A split plan wins over an unsplit one that fits only where it is
 * predicted AUTO_SPLIT_MARGIN faster: split plans run a few percent over
 * their predictions where unsplit ones run within 1% (docs/chunking.md,
 * "Auto"). So the unsplit search runs after a split plan unless that plan
 * is AUTO_SPLIT_MARGIN below the unsplit bound (no unsplit plan can then
 * come within the margin). */
static const double AUTO_SPLIT_MARGIN = 0.03;
/* Where no split was searched (its bound no lower) and the unsplit plan is
 * over AUTO_LATE_SPLIT_GAP above the unsplit bound, the split is searched
 * after it, against that plan's time, on what the unsplit search left of
 * the effort cap, at most AUTO_LATE_SPLIT_SHARE of it (so both together
 * spend at most the cap: on the ResNets, whose searches spend it all, it
 * does not run). The bound does not see what the unsplit search fails to
 * reach: a split's convolutions take their fastest options where the whole
 * batch's workspace does not fit, and near the floor its smaller steps
 * leave the rest of the net more room (GoogLeNet fp32 analytic at 2.52 GB:
 * 143.4 ms unsplit, 127.7 split; docs/results/2026-12-07-s25). */
static const double AUTO_LATE_SPLIT_GAP = 0.01, AUTO_LATE_SPLIT_SHARE = 0.25;
/* nor on iterations under AUTO_LATE_SPLIT_MIN_S (LeNet and the tests' tiny
 * nets, where a split, its chunks' gradients summed in another order, would
 * gain microseconds: auto's second opinion stops there too) */
static const double AUTO_LATE_SPLIT_MIN_S = 0.01;
/* split_first's last candidate: the largest maps' layers alone in
 * AUTO_LARGEST_K chunks (auto_chunks_of at share 1), where that differs
 * from auto's split at that k, searched on AUTO_LARGEST_SHARE of `share`
 * where its bound lies AUTO_SPLIT_GAIN below `against` and below the split
 * plan so far (*sp where *have), the faster plan kept. Auto's split at k
 * takes every layer with 1/k of the largest map, whose chunks run slower
 * per sample than the whole batch; where the memory is short only around
 * the largest maps (their convolutions' workspace, the maps themselves) a
 * split of those alone keeps the rest of the net whole and fast
 * (docs/chunking.md, "Auto"). ch: scratch of n_layers. */
enum { AUTO_LARGEST_K = 4 };
static const double AUTO_LARGEST_SHARE = 0.25;
static int split_largest(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                         double against, double share, int *ch, vd_plan *sp, bool *have,
                         bool *searched, vd_err *e) {
    if (AUTO_LARGEST_K > opts->batch) return VD_OK;
    int NL = net->n_layers;
    int *wide = vd_malloc((size_t)NL * sizeof *wide, NULL);
    if (!wide) return vd_errf(e, VD_ENOMEM, "out of memory");
    bool any = false, worth = false;
    vd_plan_opts o;
    double kb;
    int rc = auto_chunks(net, opts->batch, AUTO_LARGEST_K, false, wide, &any, e);
    if (!rc) rc = split_candidate(net, prof, opts, opts->budget, AUTO_LARGEST_K, 1, ch, &o, &worth,
                                  &kb, e);
    bool same = !rc && !memcmp(wide, ch, (size_t)NL * sizeof *ch);
    vd_free(wide);
    if (rc || !worth || same || kb >= against * (1.0 - AUTO_SPLIT_GAIN) ||
        (*have && kb >= sp->sim.iter_s))
        return rc;
    vd_plan lp;
    bool ef;
    *searched = true;
    rc = build_checked(net, prof, &o, AUTO_LARGEST_SHARE * share, &lp, &ef, e);
    return keep_faster(sp, have, &lp, rc);
}

static int split_first(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                       double against, double share, vd_plan *sp, bool *have, bool *searched,
                       vd_err *e) {
    *have = false;
    *searched = false;
    int rc = VD_OK;
    int *ch = vd_malloc((size_t)net->n_layers * sizeof *ch, NULL);
    if (!ch) return vd_errf(e, VD_ENOMEM, "out of memory");
    double least = INFINITY, finest_bound = INFINITY, coarser_bound = INFINITY, kb;
    size_t finest = 0, coarser = 0;
    bool any = false, worth = false;
    vd_plan_opts o;
    for (size_t q = 0; q < VD_ARRAY_LEN(AUTO_KS) && AUTO_KS[q] <= opts->batch && !rc; q++) {
        rc = auto_split_at(net, prof, opts, opts->budget, q, ch, &o, &worth, &kb, e);
        if (rc || !worth) continue;
        if (any) {   /* the finest so far is the next coarser now */
            coarser = finest;
            coarser_bound = finest_bound;
        }
        finest = q;
        finest_bound = kb;
        any = true;
        if (kb < least) least = kb;
    }
    if (!rc && any && least < against * (1.0 - AUTO_SPLIT_GAIN) && !vdp_stopped(opts) &&
        !(rc = auto_split_at(net, prof, opts, opts->budget, finest, ch, &o, &worth, &kb, e))) {
        bool ef;
        *searched = true;
        rc = build_checked(net, prof, &o, share, sp, &ef, e);
        *have = rc == VD_OK;
        if (rc == VD_EBUDGET) { vdp_plan_release(sp); rc = VD_OK; }
    }
    /* (no coarser k: its bound stays INFINITY) */
    if (!rc && *have && coarser_bound < sp->sim.iter_s && !vdp_stopped(opts) &&
        !(rc = auto_split_at(net, prof, opts, opts->budget, coarser, ch, &o, &worth, &kb, e))) {
        vd_plan cp;
        bool ef;
        rc = build_checked(net, prof, &o, AUTO_COARSER_SHARE * share, &cp, &ef, e);
        rc = keep_faster(sp, have, &cp, rc);
    }
    if (!rc && !vdp_stopped(opts)) rc = split_largest(net, prof, opts, against, share, ch, sp, have,
                                                      searched, e);
    vd_free(ch);
    return rc;
}

/* The flips, after auto's plan is chosen: where it does not stall and lies
 * over AUTO_FLIP_GAP above the copies' bound, its AUTO_FLIP_MAPS recomputed
 * maps of dearest recompute (their writer's forward; AUTO_FLIP_MIN of the
 * iteration at least: below it a flip rarely gains and costs a search)
 * each offloaded instead, every other map's disposition and the split held, the options
 * searched again (auto with opts->disp) on AUTO_FLIP_SHARE of the effort;
 * kept where faster. An offloaded map holds its memory until its copy
 * drains, so the flip fits only with other passes at options of less
 * workspace; refine changes one decision at a time, and in a plan that
 * does not stall tries no slower option, so the search does not reach
 * such plans (docs/planner.md, after "The search"). */
enum { AUTO_FLIP_MAPS = 1 };
static const double AUTO_FLIP_GAP = 0.05, AUTO_FLIP_SHARE = 0.5, AUTO_FLIP_MIN = 0.02;
static int flip_recomputes(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                           vd_plan *out, vd_err *e) {
    if (out->sim.stall_s > 1e-4 * out->sim.iter_s) return VD_OK;
    vd_plan_bound bd;
    bool have = true;   /* *out (released, with rc, on an error) */
    int rc = vd_plan_copy_bound(net, prof, out, opts->budget, &bd, e);
    if (rc) vdp_plan_release(out);
    if (rc || !(out->sim.iter_s > (1.0 + AUTO_FLIP_GAP) * bd.bound_s)) return rc;
    int L = net->n_layers;
    int *ch = vd_malloc((size_t)L * sizeof *ch, NULL);
    vd_disp *d = vd_calloc((size_t)L + 1, sizeof *d, NULL);
    double *gain = vd_calloc((size_t)L + 1, sizeof *gain, NULL);
    if (!ch || !d || !gain) {
        rc = vd_errf(e, VD_ENOMEM, "out of memory");
        goto out;
    }
    for (int i = 0; i < L; i++) ch[i] = out->layers[out->first_unit[i]].n_chunks;
    for (int t = 0; t < out->n_tensors; t++) {   /* each map's disposition (chunk 0's) */
        const vd_tensor *T = &out->tensors[t];
        vd_disp v = T->recompute ? VD_DISP_RECOMPUTE : T->offload ? VD_DISP_OFFLOAD : VD_DISP_KEEP;
        if (T->kind == VD_T_INPUT) d[0] = v;
        if (T->kind != VD_T_ACT || T->layer < 0 || out->layers[T->unit].chunk > 0) continue;
        d[T->layer + 1] = v;
        if (v == VD_DISP_RECOMPUTE)
            gain[T->layer + 1] = vd_profile_rc_s(prof, T->layer, out->layers[T->unit].algo_fwd);
    }
    for (int n = 0; n < AUTO_FLIP_MAPS && !vdp_stopped(opts); n++) {
        int k = 0;
        for (int j = 1; j <= L; j++)
            if (gain[j] > gain[k]) k = j;
        if (gain[k] < AUTO_FLIP_MIN * out->sim.iter_s) break;
        gain[k] = 0;
        vd_plan_opts fo = *opts;
        fo.chunks = ch;
        fo.disp = d;
        d[k] = VD_DISP_OFFLOAD;
        vd_plan q;
        bool ef;
        rc = build_checked(net, prof, &fo, AUTO_FLIP_SHARE, &q, &ef, e);
        d[k] = VD_DISP_RECOMPUTE;
        if ((rc = keep_faster(out, &have, &q, rc))) break;
    }
out:
    if (rc && have) vdp_plan_release(out);
    vd_free(ch);
    vd_free(d);
    vd_free(gain);
    return rc;
}

/* vd_plan_build's plan of checked inputs, every plan priced as issued op
 * by op (opts->graph ignored). */
static int build_eager(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                       vd_plan *out, vd_err *e);

int vd_plan_build(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                  vd_plan *out, vd_err *e) {
    memset(out, 0, sizeof *out);
    int rc = check_inputs(net, prof, opts, e);
    if (rc) return rc;
    rc = build_eager(net, prof, opts, out, e);
    if (rc == VD_OK || rc == VD_EBUDGET) out->graph = opts->graph;
    /* the plan chosen, priced as it will run: replayed where opts->graph
     * captures it and it offloads nothing (vd_plan_opts.graph; the auto
     * search's replayed pick is priced so already) */
    if (rc == VD_OK && !out->forward_only && !out->captured && out->offload_bytes == 0 &&
        vd_graph_captures(opts->graph, 0)) {
        out->captured = true;
        rc = vdp_simulate(out, prof, false, NULL, e);
        if (rc) vdp_plan_release(out);
    }
    return rc;
}

static int build_chosen(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                        vd_plan *out, vd_err *e);

static int build_eager(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                       vd_plan *out, vd_err *e) {
    int rc = build_chosen(net, prof, opts, out, e);
    /* the flips: auto's own choices only (no caller's dispositions), not
     * on iterations as short as the late split skips */
    if (rc == VD_OK && opts->policy == VD_POLICY_AUTO && opts->budget && !opts->forward_only &&
        !opts->disp && out->sim.iter_s >= AUTO_LATE_SPLIT_MIN_S && !vdp_stopped(opts))
        rc = flip_recomputes(net, prof, opts, out, e);   /* (releases *out on an error) */
    return rc;
}

/* build_eager's plan before the flips: the unsplit search's, or a split's. */
static int build_chosen(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                        vd_plan *out, vd_err *e) {
    int rc = VD_OK;
    bool eval_failed = false, splits = auto_splits(opts) && opts->budget, have = false;
    bool searched = false;   /* split_first searched a split */
    vd_plan sp;
    double own = INFINITY;   /* the unsplit plans' lower bound (split_bound) */
    if (splits && ((rc = split_bound(net, prof, opts, opts->budget, &own, e)) ||
                   (rc = split_first(net, prof, opts, own, 1.0, &sp, &have, &searched, e))))
        return rc;
    if (have && sp.sim.iter_s < own * (1.0 - AUTO_SPLIT_MARGIN)) {   /* no unsplit search */
        *out = sp;
        return VD_OK;
    }
    rc = build_checked(net, prof, opts, 1.0, out, &eval_failed, e);
    /* the split searched after the unsplit plan (AUTO_LATE_SPLIT_SHARE) */
    if (rc == VD_OK && splits && !searched && out->sim.iter_s >= AUTO_LATE_SPLIT_MIN_S &&
        out->sim.iter_s > own * (1.0 + AUTO_LATE_SPLIT_GAP) && !vdp_stopped(opts)) {
        double late = fmin(AUTO_LATE_SPLIT_SHARE, 1.0 - out->search_effort / AUTO_EFFORT_CAP);
        if (late > 0 &&
            (rc = split_first(net, prof, opts, out->sim.iter_s, late, &sp, &have, &searched, e))) {
            vdp_plan_release(out);
            return rc;
        }
    }
    if (rc == VD_EBUDGET && splits && !have) {
        vd_err te = {0};
        int r2 = build_split(net, prof, opts, out, &te);
        if (r2 == VD_OK) return VD_OK;
        if (r2 != VD_EBUDGET) { vdp_plan_release(out); *e = te; return r2; }
    }
    if (have) {   /* the split one where the unsplit does not fit or is AUTO_SPLIT_MARGIN slower */
        if (rc == VD_EBUDGET ||
            (rc == VD_OK && sp.sim.iter_s < out->sim.iter_s * (1.0 - AUTO_SPLIT_MARGIN))) {
            vdp_plan_release(out);
            *out = sp;
            return VD_OK;
        }
        vdp_plan_release(&sp);
    }
    if (rc == VD_EBUDGET && !eval_failed) explain_infeasible(net, prof, opts, out, e);
    return rc;
}

/* vd_plan_build of checked inputs, without auto's split layers and the
 * explanation of a budget that does not fit, auto on `share` of its effort
 * cap (build_any); *eval_failed: the training plan fits, its evaluation
 * plan does not (e says so). */
static int build_checked(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                         double share, vd_plan *out, bool *eval_failed, vd_err *e) {
    memset(out, 0, sizeof *out);
    *eval_failed = false;
    int rc = build_any(net, prof, opts, share, out, e);
    if (opts->forward_only || rc) return rc;
    rc = build_eval(net, prof, opts->chunks, out, e);
    *eval_failed = rc == VD_EBUDGET;
    if (rc) {
        if (rc == VD_EBUDGET) {
            out->feasible = false;
            snprintf(out->note, sizeof out->note, "%s", e->msg);
        } else {
            vdp_plan_release(out);
        }
        return rc;
    }
    if (opts->pool_to_need && out->budget) {
        /* every offset of both placements lies below its high-water mark */
        uint64_t need = out->hwm > out->eval->hwm ? out->hwm : out->eval->hwm;
        if (need < out->budget) out->budget = out->eval->budget = need;
    }
    return VD_OK;
}

int vd_plan_fits(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                 bool *fits, vd_err *e) {
    *fits = false;
    int rc = check_inputs(net, prof, opts, e);
    if (rc) return rc;
    if (opts->budget == 0) return vd_errf(e, VD_EUSAGE, "plan: vd_plan_fits needs a budget");
    rc = fits_checked(net, prof, opts, fits, e);
    if (rc || *fits || !auto_splits(opts)) return rc;
    int *ch = vd_malloc((size_t)net->n_layers * sizeof *ch, NULL);
    if (!ch) return vd_errf(e, VD_ENOMEM, "out of memory");
    for (size_t q = 0; q < VD_ARRAY_LEN(AUTO_KS) && AUTO_KS[q] <= opts->batch && !rc && !*fits &&
                       !vdp_stopped(opts); q++) {
        vd_plan_opts o;
        bool worth = false;
        double kb;
        rc = auto_split_at(net, prof, opts, opts->budget, q, ch, &o, &worth, &kb, e);
        if (!rc && worth) rc = fits_checked(net, prof, &o, fits, e);
    }
    vd_free(ch);
    return rc;
}

/* vd_plan_fits of checked inputs with a budget, without auto's split layers. */
static int fits_checked(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                        bool *fits, vd_err *e) {
    *fits = false;
    int rc;
    vd_plan p;
    memset(&p, 0, sizeof p);
    vd_err te = {0};    /* a budget that does not fit is an answer, not an error */
    if (opts->forward_only)   /* as vd_plan_build: split layers too */
        rc = build_inference(net, prof, opts, &p, &te);
    else if (opts->policy == VD_POLICY_AUTO)
        rc = vdp_build_auto(net, prof, opts, true, &p, &te);
    else
        rc = vdp_build_policy(net, prof, opts, &p, &te);
    if (rc == VD_OK && !opts->forward_only) rc = build_eval(net, prof, opts->chunks, &p, &te);
    vdp_plan_release(&p);
    if (rc == VD_EBUDGET) return VD_OK;
    if (rc) { *e = te; return rc; }
    *fits = true;
    return VD_OK;
}
