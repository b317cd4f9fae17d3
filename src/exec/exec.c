/* exec.c — the executor (exec.h): n >= 1 members (member.c), one per rank,
 * each called on its rank's thread through a vd_ranks (ranks.c).
 *
 * vd_exec_create makes an executor of one member on the calling thread; it
 * owns that member and a vd_ranks of one rank (no thread). A group
 * (vd_exec_group_create) takes the members of n such executors, which keep
 * owning them, and the caller's vd_ranks. Either way every call is the same:
 * training, evaluation and setting the state run on every member at once
 * through vd_ranks_run, and their results are combined in rank order; a
 * member that fails aborts the all-reduce (so that the others, waiting for it
 * in a barrier, fail too instead of waiting forever), and the error returned
 * is the first failure's. The accessors read rank 0's member. */
#include <math.h>
#include <string.h>
#include "exec/exec.h"
#include "exec/member.h"

/* A member's stage hook context: which executor and rank it calls for. */
typedef struct rank_hook { vd_exec *ex; int rank; } rank_hook;

struct vd_exec {
    int n;                      /* ranks */
    vdx_member **m;             /* [n] */
    /* vd_exec_create: m[0] and rk are this executor's; a group's are its
     * caller's */
    bool owns;
    vd_ranks *rk;
    vd_allreduce **ar;          /* [n] (entries may be NULL) */
    vd_exec_stage_hook stage_hook;   /* vd_exec_set_stage_hook */
    void *stage_hook_ctx;
    rank_hook *hooks;           /* [n] */
    /* the current call's arguments and per-rank results */
    const float *params, *state;
    int64_t sgd_steps, iter;
    uint64_t seed;
    float lr;
    float *loss;                /* [n] */
    int *correct;               /* [n] training: top-1 hits */
    vd_eval_counts *ev;         /* [n] evaluation */
    int train_correct;          /* the last training step's hits, all ranks */
    /* one process's part of a run over procs processes (vd_exec_group_set_procs) */
    int proc, procs;
    int (*gather)(const void *mine, void *all, size_t bytes, vd_err *e);
    /* a step's results per rank: the loss, the training hits or the
     * evaluation's counts (scored, top-1 in correct, top-5); [n], [n * procs] */
    struct rank_out { float loss; int32_t correct, scored, top5; } *mine, *all;
};

/* An executor of n ranks, one process, without members. */
static vd_exec *exec_alloc(int n, vd_err *e) {
    vd_exec *ex = vd_calloc(1, sizeof *ex, e);
    if (!ex) return NULL;
    ex->n = n;
    ex->procs = 1;
    size_t un = (size_t)n;
    ex->m = vd_calloc(un, sizeof *ex->m, e);
    ex->ar = vd_calloc(un, sizeof *ex->ar, e);
    ex->hooks = vd_calloc(un, sizeof *ex->hooks, e);
    ex->loss = vd_calloc(un, sizeof *ex->loss, e);
    ex->correct = vd_calloc(un, sizeof *ex->correct, e);
    ex->ev = vd_calloc(un, sizeof *ex->ev, e);
    ex->mine = vd_calloc(un, sizeof *ex->mine, e);
    ex->all = vd_calloc(un, sizeof *ex->all, e);
    if (!ex->m || !ex->ar || !ex->hooks || !ex->loss || !ex->correct || !ex->ev || !ex->mine ||
        !ex->all) {
        vd_exec_destroy(&ex);
        return NULL;
    }
    for (int r = 0; r < n; r++) ex->hooks[r] = (rank_hook){ ex, r };
    return ex;
}

int vd_exec_create(vd_exec **out, const vd_net *net, const struct vd_plan *plan,
                   vd_backend *be, const vd_exec_opts *opts, vd_err *e) {
    *out = NULL;
    vd_exec *ex = exec_alloc(1, e);
    if (!ex) return VD_ENOMEM;
    ex->owns = true;
    int rc = vd_ranks_create(&ex->rk, 1, e);
    if (!rc) rc = vdx_member_create(&ex->m[0], net, plan, be, opts, e);
    if (rc) {
        vd_exec_destroy(&ex);
        return rc;
    }
    *out = ex;
    return VD_OK;
}

int vd_exec_group_create(vd_exec **out, vd_ranks *rk, vd_exec *const *members,
                         vd_allreduce *const *ar, vd_err *e) {
    *out = NULL;
    int n = vd_ranks_count(rk);
    if (members[0] && vd_exec_loss_scale(members[0], NULL))
        return vd_errf(e, VD_EUNSUPPORTED, "data parallel training (--gpus, --mpi) in math fp16 "
                       "is not supported yet: its loss scale would have to agree between the "
                       "ranks; use bf16, or one device");
    for (int r = 0; r < n; r++)
        if (!members[r] || members[r]->n != 1 ||
            vdx_member_batch(members[r]->m[0]) != vdx_member_batch(members[0]->m[0]))
            return vd_errf(e, VD_EINTERNAL, "executor group: member %d is missing, has several "
                           "ranks, or is planned for another batch than rank 0's", r);
    vd_exec *ex = exec_alloc(n, e);
    if (!ex) return VD_ENOMEM;
    ex->rk = rk;
    for (int r = 0; r < n; r++) {
        ex->m[r] = members[r]->m[0];
        ex->ar[r] = ar ? ar[r] : NULL;
    }
    *out = ex;
    return VD_OK;
}

void vd_exec_destroy(vd_exec **pex) {
    vd_exec *ex = *pex;
    if (!ex) return;
    if (ex->owns) {             /* on the thread that created it, rank 0's */
        if (ex->m) vdx_member_destroy(&ex->m[0]);
        vd_ranks_destroy(&ex->rk);
    }
    vd_free(ex->m);
    vd_free(ex->ar);
    vd_free(ex->hooks);
    vd_free(ex->loss);
    vd_free(ex->correct);
    vd_free(ex->ev);
    vd_free(ex->mine);
    vd_free(ex->all);
    vd_free(ex);
    *pex = NULL;
}

int vd_exec_ranks(const vd_exec *ex) { return ex->n; }

int vd_exec_group_set_procs(vd_exec *ex, int proc, int procs,
                            int (*gather)(const void *mine, void *all, size_t bytes, vd_err *e),
                            vd_err *e) {
    if (procs < 1 || proc < 0 || proc >= procs || !gather)
        return vd_errf(e, VD_EINTERNAL, "vd_exec_group_set_procs: process %d of %d", proc, procs);
    struct rank_out *all = vd_calloc((size_t)ex->n * (size_t)procs, sizeof *all, e);
    if (!all) return VD_ENOMEM;
    vd_free(ex->all);
    ex->all = all;
    ex->proc = proc;
    ex->procs = procs;
    ex->gather = gather;
    return VD_OK;
}

int vd_exec_procs(const vd_exec *ex, int *proc) {
    *proc = ex->proc;
    return ex->procs;
}

/* The ranks' results of the call just run (eval: an evaluation step; rc:
 * how it ended) into ex->all, in global rank order (process p's rank r at p
 * * n + r); *ranks = how many. One process, or after a failure: this
 * process's ranks only (the others gather only after a call that
 * succeeded). */
static int gather_out(vd_exec *ex, bool eval, int rc, int *ranks, vd_err *e) {
    for (int r = 0; r < ex->n; r++)
        ex->mine[r] = eval ? (struct rank_out){ ex->ev[r].loss, ex->ev[r].top1, ex->ev[r].scored,
                                                ex->ev[r].top5 }
                           : (struct rank_out){ ex->loss[r], ex->correct[r], 0, 0 };
    if (rc || ex->procs == 1) {
        memcpy(ex->all, ex->mine, sizeof *ex->mine * (size_t)ex->n);
        *ranks = ex->n;
        return rc;
    }
    *ranks = ex->n * ex->procs;
    return ex->gather(ex->mine, ex->all, sizeof *ex->mine * (size_t)ex->n, e);
}

/* The failing rank releases the others from the all-reduce's barriers. */
static void abort_ar(void *ctx, int rank) {
    vd_exec *ex = ctx;
    if (ex->ar[rank]) ex->ar[rank]->abort(ex->ar[rank]);
}

static int set_state_part(void *ctx, int r, vd_err *e) {
    vd_exec *ex = ctx;
    return vdx_member_set_state(ex->m[r], ex->params, ex->state, ex->sgd_steps, e);
}

int vd_exec_set_state(vd_exec *ex, const float *params, const float *state,
                      int64_t sgd_steps, vd_err *e) {
    ex->params = params;
    ex->state = state;
    ex->sgd_steps = sgd_steps;
    return vd_ranks_run(ex->rk, set_state_part, abort_ar, ex, e);
}

static int init_part(void *ctx, int r, vd_err *e) {
    vd_exec *ex = ctx;
    return vdx_member_init_params(ex->m[r], ex->seed, e);
}

int vd_exec_init_params(vd_exec *ex, uint64_t seed, vd_err *e) {
    ex->seed = seed;
    return vd_ranks_run(ex->rk, init_part, abort_ar, ex, e);
}

static int train_part(void *ctx, int r, vd_err *e) {
    vd_exec *ex = ctx;
    return vdx_member_train_step(ex->m[r], ex->lr, ex->iter, &ex->loss[r], &ex->correct[r], e);
}

int vd_exec_train_step(vd_exec *ex, float lr, int64_t iter, float *loss, vd_err *e) {
    ex->lr = lr;
    ex->iter = iter;
    for (int r = 0; r < ex->n; r++) {   /* a member that fails before its results */
        ex->loss[r] = NAN;
        ex->correct[r] = 0;
    }
    int n = 0;
    int rc = gather_out(ex, false, vd_ranks_run(ex->rk, train_part, abort_ar, ex, e), &n, e);
    double sum = 0;             /* the mean of the shards' mean losses: the global mean */
    ex->train_correct = 0;
    for (int r = 0; r < n; r++) {
        sum += ex->all[r].loss;
        ex->train_correct += ex->all[r].correct;
    }
    /* after a failure too: VD_ENUMERIC comes after the loss was read (a loss
     * not finite, math fp16's loss scale giving up) */
    *loss = (float)(sum / n);
    return rc;
}

int vd_exec_train_correct(const vd_exec *ex) { return ex->train_correct; }

static int eval_part(void *ctx, int r, vd_err *e) {
    vd_exec *ex = ctx;
    return vdx_member_eval_step(ex->m[r], &ex->ev[r], e);
}

int vd_exec_eval_step(vd_exec *ex, vd_eval_counts *out, vd_err *e) {
    int n = 0;
    memset(ex->ev, 0, sizeof *ex->ev * (size_t)ex->n);
    int rc = gather_out(ex, true, vd_ranks_run(ex->rk, eval_part, abort_ar, ex, e), &n, e);
    if (rc) return rc;
    double sum = 0;             /* the ranks' mean losses weighted by their samples */
    *out = (vd_eval_counts){ 0 };
    for (int r = 0; r < n; r++) {
        sum += (double)ex->all[r].loss * ex->all[r].scored;
        out->scored += ex->all[r].scored;
        out->top1 += ex->all[r].correct;
        out->top5 += ex->all[r].top5;
    }
    out->loss = out->scored ? (float)(sum / out->scored) : 0.0f;
    return VD_OK;
}

void vd_exec_eval_probs(const vd_exec *ex, float *probs) {
    for (int r = 0; r < ex->n; r++)   /* rank r's shard follows rank r - 1's */
        probs += vdx_member_eval_probs(ex->m[r], probs);
}

int vd_exec_get_state(vd_exec *ex, float *params, float *state, int64_t *sgd_steps,
                      vd_err *e) {
    return vdx_member_get_state(ex->m[0], params, state, sgd_steps, e);
}

bool vd_exec_loss_scale(const vd_exec *ex, vd_loss_scale *s) {
    return vdx_member_loss_scale(ex->m[0], s);
}

int vd_exec_set_loss_scale(vd_exec *ex, const vd_loss_scale *s, vd_err *e) {
    return vdx_member_set_loss_scale(ex->m[0], s, e);
}

void *vd_exec_rank_input_x(vd_exec *ex, int r) { return vdx_member_input_x(ex->m[r]); }
int32_t *vd_exec_rank_input_labels(vd_exec *ex, int r) {
    return vdx_member_input_labels(ex->m[r]);
}
void *vd_exec_rank_next_x(vd_exec *ex, int r) { return vdx_member_next_x(ex->m[r]); }
int32_t *vd_exec_rank_next_labels(vd_exec *ex, int r) { return vdx_member_next_labels(ex->m[r]); }
vd_synth_batch *vd_exec_rank_input_synth(vd_exec *ex, int r) {
    return vdx_member_input_synth(ex->m[r]);
}
vd_synth_batch *vd_exec_rank_next_synth(vd_exec *ex, int r) {
    return vdx_member_next_synth(ex->m[r]);
}

void *vd_exec_input_x(vd_exec *ex) { return vd_exec_rank_input_x(ex, 0); }
int32_t *vd_exec_input_labels(vd_exec *ex) { return vd_exec_rank_input_labels(ex, 0); }
void *vd_exec_next_x(vd_exec *ex) { return vd_exec_rank_next_x(ex, 0); }
int32_t *vd_exec_next_labels(vd_exec *ex) { return vd_exec_rank_next_labels(ex, 0); }
vd_synth_batch *vd_exec_input_synth(vd_exec *ex) { return vd_exec_rank_input_synth(ex, 0); }
vd_synth_batch *vd_exec_next_synth(vd_exec *ex) { return vd_exec_rank_next_synth(ex, 0); }
vd_dtype vd_exec_input_dtype(const vd_exec *ex) { return vdx_member_input_dtype(ex->m[0]); }
bool vd_exec_input_nhwc(const vd_exec *ex) { return vdx_member_input_nhwc(ex->m[0]); }
bool vd_exec_can_synth(const vd_exec *ex) { return vdx_member_can_synth(ex->m[0]); }

bool vd_exec_captures(const vd_exec *ex) {
    for (int r = 0; r < ex->n; r++)
        if (!vdx_member_captures(ex->m[r])) return false;
    return true;
}

bool vd_exec_stages(const vd_exec *ex) {
    for (int r = 0; r < ex->n; r++)
        if (!vdx_member_stages(ex->m[r])) return false;
    return true;
}

void vd_exec_next_ready(vd_exec *ex) {
    for (int r = 0; r < ex->n; r++) vdx_member_next_ready(ex->m[r]);
}

void vd_exec_drop_staged(vd_exec *ex) {
    for (int r = 0; r < ex->n; r++) vdx_member_drop_staged(ex->m[r]);
}

/* A member's stage hook: the caller's, told the executor and the rank. */
static int stage_hook(void *ctx) {
    rank_hook *h = ctx;
    return h->ex->stage_hook(h->ex->stage_hook_ctx, h->ex, h->rank);
}

void vd_exec_set_stage_hook(vd_exec *ex, vd_exec_stage_hook fn, void *ctx) {
    ex->stage_hook = fn;
    ex->stage_hook_ctx = ctx;
    for (int r = 0; r < ex->n; r++)
        vdx_member_set_stage_hook(ex->m[r], fn ? stage_hook : NULL, &ex->hooks[r]);
}

int vd_exec_rank_drain(vd_exec *ex, int r, vd_err *e) { return vdx_member_drain(ex->m[r], e); }

void vd_exec_get_stats(const vd_exec *ex, vd_exec_stats *st) { vdx_member_get_stats(ex->m[0], st); }

int vd_exec_step_times(const vd_exec *ex, const double **end_ms) {
    return vdx_member_step_times(ex->m[0], end_ms);
}

int vd_exec_copy_times(const vd_exec *ex, const vd_exec_copy_time **ct) {
    return vdx_member_copy_times(ex->m[0], ct);
}
