/* session.c — backend, layer setup, profile, plan and executor for a run;
 * see session.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "train/session.h"

void vd_session_opts_init(vd_session_opts *o) {
    memset(o, 0, sizeof *o);
    o->backend = "auto";
    o->math = VD_MATH_FP32;
    o->graph = VD_GRAPH_AUTO;
}

/* One driver sample: *used = total - free. Returns false when unknown. */
static bool mem_now(vd_session *s, uint64_t *used, uint64_t *free_b) {
    if (!s->be || !s->be->mem_info) return false;
    uint64_t fr = 0, tot = 0;
    vd_err e = {0};
    if (s->be->mem_info(s->be, &fr, &tot, &e) != VD_OK || tot < fr) return false;
    s->mem.known = true;
    s->mem.total = tot;
    *used = tot - fr;
    if (free_b) *free_b = fr;
    return true;
}

static void mem_record(vd_session *s, uint64_t used) {
    s->mem.used_last = used;
    if (s->mem.n_samples == 0 || used > s->mem.used_max) s->mem.used_max = used;
    s->mem.n_samples++;
}

void vd_session_mem_sample(vd_session *s) {
    uint64_t used;
    if (mem_now(s, &used, NULL)) mem_record(s, used);
}

void vd_session_mem_reset(vd_session *s) {
    s->mem.n_samples = 0;
    s->mem.used_max = 0;
    vd_session_mem_sample(s);
}

/* A loaded profile beside this setup's options: each option is matched to
 * this setup's option of the same label (the executor runs that one:
 * cuDNN's tuning can list the same engines in another order from one
 * process to the next; vd_algo_find), and one this setup does not offer is
 * dropped (prof_dropped), unless none of the layer's is offered (all are
 * kept: the executor then reports the profile as another setup's). An
 * option whose engine here needs more workspace than the profile says gets
 * this setup's workspace, so that the plan leaves room for it (the executor
 * refuses a plan that leaves less): a VGG-16 tf32 profile saved by one run
 * gave features.10's backward "fastest" 1,242,563,239 bytes, the next
 * run's engine needed 1,248,985,715. */
static int fit_profile_to_setup(vd_session *s, vd_err *e) {
    s->prof_raised = 0;
    s->prof_raised_max = 0;
    s->prof_dropped = 0;
    for (int i = 0; i < s->prof.n_layers && i < s->net->n_layers; i++) {
        const vd_algo_opt *opts = NULL;
        int n = 0;
        int rc = s->be->layer_algos(s->be, i, &opts, &n, e);
        if (rc) return rc;
        vd_profile_layer *pl = &s->prof.layers[i];
        int kept = 0;
        for (int a = 0; a < pl->n_algos; a++) {
            int b = vd_algo_find(opts, n, pl->algos[a].label, a);
            if (b < 0) continue;
            vd_profile_algo *pa = &pl->algos[kept++];
            *pa = pl->algos[a];
            uint64_t hf = vd_profile_algo_ws(pa, false), hb = vd_profile_algo_ws(pa, true);
            uint64_t nf = vd_algo_ws(&opts[b], false), nb = vd_algo_ws(&opts[b], true);
            if (hf >= nf && hb >= nb) continue;
            uint64_t uf = nf > hf ? nf - hf : 0, ub = nb > hb ? nb - hb : 0, up = uf > ub ? uf : ub;
            pa->fwd_workspace = nf > hf ? nf : hf;
            pa->bwd_workspace = nb > hb ? nb : hb;
            pa->workspace = pa->fwd_workspace > pa->bwd_workspace ? pa->fwd_workspace
                                                                   : pa->bwd_workspace;
            s->prof_raised++;
            if (up > s->prof_raised_max) s->prof_raised_max = up;
        }
        if (kept > 0) {
            s->prof_dropped += pl->n_algos - kept;
            pl->n_algos = kept;
        }
    }
    return VD_OK;
}

bool vd_session_profile_note(const vd_session *s, char *buf, size_t n) {
    if (!s->prof_raised && !s->prof_dropped) return false;
    char b[32];
    int k = 0;
    if (s->prof_raised)
        k = snprintf(buf, n, "the profile gives %d option%s less workspace than this setup needs "
                     "(up to %s less): planned with this setup's workspaces", s->prof_raised,
                     s->prof_raised == 1 ? "" : "s", vd_fmt_bytes(s->prof_raised_max, b, sizeof b));
    if (s->prof_dropped && k >= 0 && (size_t)k < n)
        snprintf(buf + k, n - (size_t)k, "%sthe profile has %d option%s this setup does not "
                 "offer: planned without %s", k ? "; " : "", s->prof_dropped,
                 s->prof_dropped == 1 ? "" : "s", s->prof_dropped == 1 ? "it" : "them");
    size_t len = strlen(buf);
    snprintf(buf + len, n - len, " (cuDNN's tuning can pick other engines from one run to the "
             "next)");
    return true;
}

/* The run's backend after measuring the profile: made again, its layers
 * set up again and the profile fitted to that setup, as a loaded profile
 * is. The process that kept the backend its profile was measured on ran
 * every kind of step slower, at the same clocks, than one that loaded that
 * profile; one made afresh runs as fast
 * (docs/results/2026-12-07-s33/INDEX.md, call 4). */
static int fresh_backend(vd_session *s, const vd_session_opts *o, const char *kind, vd_err *e) {
    s->be->destroy(s->be);
    int rc = vd_backend_create(&s->be, kind, o->device, &o->backend_opts, e);
    if (rc) {
        s->be = NULL;
        return rc;
    }
    if ((rc = s->be->layer_setup(s->be, s->net, s->batch, o->math, o->deterministic, e))) return rc;
    return fit_profile_to_setup(s, e);
}

static int get_profile(vd_session *s, const vd_session_opts *o, const char *kind, vd_err *e) {
    int rc;
    bool measured = false;
    double t0 = vd_now();
    if (o->profile_path) {
        rc = vd_profile_load(o->profile_path, s->net, s->batch, &s->prof, e);
        if (!rc) rc = fit_profile_to_setup(s, e);
        snprintf(s->prof_how, sizeof s->prof_how, "loaded");
    } else if (s->be->profile_measure && !o->analytic) {
        if (o->note) o->note(o->note_ctx, "measuring the profile on the device...");
        rc = s->be->profile_measure(s->be, s->net, s->batch, &s->prof, e);
        if (rc) vd_err_prefix(e, "measuring the profile (--profile FILE or an analytic "
                              "profile avoid it)");
        snprintf(s->prof_how, sizeof s->prof_how, "measured");
        measured = !rc;
    } else {
        rc = vd_profile_backend(s->net, s->batch, s->be, s->be->model, &s->prof, e);
        snprintf(s->prof_how, sizeof s->prof_how, "analytic");
    }
    s->prof_s = vd_now() - t0;
    if (!rc && o->profile_out) rc = vd_profile_save(o->profile_out, &s->prof, e);
    /* (the profile saved as measured, before the fresh setup fits it) */
    if (!rc && measured) rc = fresh_backend(s, o, kind, e);
    if (rc) vd_profile_free(&s->prof);
    return rc;
}

int vd_session_open(vd_session *s, const vd_net *net, int batch, const vd_session_opts *o,
                    vd_err *e) {
    memset(s, 0, sizeof *s);
    vd_session_opts def;
    if (!o) {
        vd_session_opts_init(&def);
        o = &def;
    }
    if (batch < 1) return vd_errf(e, VD_EUSAGE, "batch size must be >= 1 (got %d)", batch);
    const char *why;
    const char *kind = vd_backend_resolve(o->backend, &why);
    s->backend_why = why;
    s->net = net;
    s->batch = batch;
    s->math = o->math;
    s->deterministic = o->deterministic;
    int rc = vd_backend_create(&s->be, kind ? kind : o->backend, o->device, &o->backend_opts, e);
    if (rc) {
        s->be = NULL;
        goto fail;
    }
    s->mem_trace = o->mem_trace;
    s->step_times = o->step_times;
    s->graph = o->graph;
    s->allreduce = o->allreduce;
    s->bucket_bytes = o->bucket_bytes;
    s->rank = o->rank;
    {
        /* CUDA's own variable (not a vdnn knob), for the memory report only */
        const char *ml = getenv("CUDA_MODULE_LOADING");
        s->mem.lazy_loading = !(ml && strcmp(ml, "EAGER") == 0);
    }
    uint64_t used, fr;
    if (mem_now(s, &used, &fr)) s->mem.used_backend = used;
    if ((rc = s->be->layer_setup(s->be, net, batch, o->math, o->deterministic, e))) goto fail;
    if ((rc = get_profile(s, o, kind ? kind : o->backend, e))) goto fail;
    if (mem_now(s, &used, &fr)) {
        s->mem.used_setup = used;
        s->mem.free_setup = fr;
        s->mem.used_last = s->mem.used_max = used;
        s->mem.n_samples = 1;
    }
    return VD_OK;
fail:
    if (s->be) s->be->destroy(s->be);
    memset(s, 0, sizeof *s);
    return rc;
}

void vd_session_close(vd_session *s) {
    if (s->prof.layers) vd_profile_free(&s->prof);
    if (s->be) s->be->destroy(s->be);
    memset(s, 0, sizeof *s);
}

uint64_t vd_session_max_budget(const vd_session *s) {
    if (!s->mem.known) return UINT64_MAX;
    return s->mem.free_setup > VD_SESSION_MARGIN ? s->mem.free_setup - VD_SESSION_MARGIN : 0;
}

void vd_session_default_budget(const vd_session *s, vd_plan_opts *po) {
    po->budget = s->mem.known ? vd_session_max_budget(s) : 0;
    po->pool_to_need = true;
}

static int too_big(const vd_session *s, uint64_t budget, uint64_t max, vd_err *e) {
    char b1[32], b2[32], b3[32];
    return vd_errf(e, VD_EBUDGET,
                   "the budget %s is more than this device can give: %s free after setup "
                   "minus a margin of %s leaves %s",
                   vd_fmt_bytes(budget, b1, sizeof b1),
                   vd_fmt_bytes(s->mem.free_setup, b2, sizeof b2),
                   vd_fmt_bytes(VD_SESSION_MARGIN, b3, sizeof b3),
                   vd_fmt_bytes(max, (char[32]){0}, 32));
}

int vd_session_plan(vd_session *s, vd_plan_opts *po, vd_plan *plan, vd_err *e) {
    po->batch = s->batch;
    /* averaged before the update (math fp16 keeps the array too: the
     * planner sees to it, vd_plan_grads_array) */
    if (s->allreduce) po->grads_persistent = true;
    uint64_t max = vd_session_max_budget(s);
    if (po->budget > max) {     /* before the (possibly long) auto search */
        memset(plan, 0, sizeof *plan);
        return too_big(s, po->budget, max, e);
    }
    int rc = vd_plan_build(s->net, &s->prof, po, plan, e);
    if (rc) return rc;
    if (plan->budget > max) return too_big(s, plan->budget, max, e);
    return VD_OK;
}

/* vd_exec_opts.before_pool: the executor's pinned host buffers exist, its
 * pool does not yet. */
static void sample_before_pool(void *ctx) {
    vd_session *s = ctx;
    uint64_t used;
    if (!mem_now(s, &used, NULL)) return;
    s->mem.used_pinned = used;
    mem_record(s, used);
}

/* The memory trace (mem_trace): wait for the step, sample, and record
 * growth since the previous sample. */
static void trace_step(vd_session *s, int step, bool eval) {
    if (step == 0) {
        if (eval) s->mem.trace_eval++;
        else s->mem.trace_train++;
    }
    vd_err e = {0};
    uint64_t used;
    if (s->be->synchronize(s->be, &e) != VD_OK || !mem_now(s, &used, NULL)) return;
    mem_record(s, used);
    if (used > s->mem.trace_last) {
        if (s->mem.n_growth < VD_SESSION_MAX_GROWTH) {
            struct vd_session_growth *g = &s->mem.growth[s->mem.n_growth];
            g->pass = (eval ? s->mem.trace_eval : s->mem.trace_train) - 1;
            g->eval = eval;
            g->step = step;
            g->bytes = used - s->mem.trace_last;
            g->used = used;
        }
        s->mem.n_growth++;
    }
    s->mem.trace_last = used;
}

/* vd_exec_opts.after_step (CUDA): the memory trace if on, and at the end of
 * every pass one sample (no synchronization: kernel code is loaded when a
 * kernel is launched); growth during the first pass of each kind is kernel
 * code loaded at first use when loading is lazy, growth during a pass that
 * captured its graph the graph's executable. */
static void after_step(void *ctx, int step, bool eval, bool captured) {
    vd_session *s = ctx;
    if (s->mem_trace) trace_step(s, step, eval);
    if (step != (eval ? s->mem.eval_steps : s->mem.train_steps)) return;
    uint64_t used;
    if (!mem_now(s, &used, NULL)) return;
    mem_record(s, used);
    bool *seen = eval ? &s->mem.seen_eval : &s->mem.seen_train;
    if (used > s->mem.pass_mark) {
        if (captured) s->mem.graph_bytes += used - s->mem.pass_mark;
        else if (!*seen && s->mem.lazy_loading) s->mem.first_use += used - s->mem.pass_mark;
    }
    *seen = true;
    s->mem.pass_mark = used;
}

int vd_session_exec(vd_session *s, const vd_plan *plan, bool poison, vd_exec **ex, vd_err *e) {
    vd_exec_opts eo = { .poison = poison, .math = s->math, .deterministic = s->deterministic,
                        .layers_ready = true, .before_pool = sample_before_pool,
                        .before_pool_ctx = s, .step_times = s->step_times,
                        /* the memory trace samples after every step */
                        .graph = s->mem_trace ? VD_GRAPH_OFF : s->graph,
                        .allreduce = s->allreduce, .bucket_bytes = s->bucket_bytes,
                        .rank = s->rank };
    if (s->be->mem_info) {
        eo.after_step = after_step;
        eo.after_step_ctx = s;
        s->mem.n_growth = 0;
        s->mem.trace_train = s->mem.trace_eval = 0;
    }
    s->mem.used_pinned = s->mem.used_created = s->mem.pool_created = 0;
    s->mem.first_use = s->mem.graph_bytes = s->mem.pool_growth = 0;
    s->mem.seen_train = s->mem.seen_eval = false;
    s->mem.train_steps = plan->n_steps;
    s->mem.eval_steps = plan->forward_only ? plan->n_steps   /* an inference executor */
                      : plan->eval ? plan->eval->n_steps : -1;
    int rc = vd_exec_create(ex, s->net, plan, s->be, &eo, e);
    if (rc) s->mem.used_pinned = 0;   /* its pinned buffers are gone again */
    uint64_t used;
    if (mem_now(s, &used, NULL)) {
        mem_record(s, used);
        if (rc == VD_OK) {
            s->mem.used_created = used;
            s->mem.pool_created = plan->budget;
            s->mem.trace_last = s->mem.pass_mark = used;
            uint64_t before = s->mem.used_pinned + VD_ALIGN_UP(plan->budget, VD_SESSION_GRANULE);
            s->mem.pool_growth = s->mem.used_pinned && used > before ? used - before : 0;
        }
    }
    return rc;
}

void vd_session_mem_check(vd_session *s, uint64_t budget, vd_session_mem_report *r) {
    memset(r, 0, sizeof *r);
    r->within = true;
    r->budget = budget;
    vd_session_mem_sample(s);
    if (!s->mem.known) return;
    r->known = true;
    r->overhead = s->mem.used_pinned ? s->mem.used_pinned : s->mem.used_setup;
    r->used_max = s->mem.used_max;
    r->used_end = s->mem.used_last;
    r->n_samples = s->mem.n_samples;
    uint64_t tables = VD_SESSION_POOL_TABLES(budget);
    r->pool_tables = s->mem.pool_growth < tables ? s->mem.pool_growth : tables;
    r->first_use = s->mem.first_use;
    r->graph_bytes = s->mem.graph_bytes;
    r->limit = VD_ALIGN_UP(budget, VD_SESSION_GRANULE) + r->overhead + r->pool_tables +
               r->first_use + r->graph_bytes;
    r->within = r->used_max <= r->limit;
    r->excess = r->within ? 0 : r->used_max - r->limit;
}
