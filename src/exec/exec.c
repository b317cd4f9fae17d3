/* exec.c — the executor: walks a plan's per-step actions on a backend.
 *
 * Everything is allocated in vd_exec_create: the pinned host store for
 * offloaded tensors and the pinned input / loss / eval-output buffers, then
 * (after opts.before_pool) the pool (exactly the plan's budget), the events,
 * and one vd_op_io per step and per RECOMPUTE action (pointers into the pool
 * computed from the plan's offsets; a recompute's operands are the layer's
 * forward operands at the step where it runs, its workspace the layer's
 * ws_rc). vd_exec_train_step only issues work: compute, copies on the D2H /
 * H2D streams, event records and waits, and one host wait (the loss
 * readback) at the end.
 *
 * Input staging (the plan's t_stage >= 0): two pairs of pinned input buffers,
 * the current one (in_x / in_labels: the batch of the next step) and the
 * look-ahead one (nx_x / nx_labels). A training step told that the look-ahead
 * buffers are ready issues the plan's staging copy from nx_x, and at its end
 * swaps the pairs; the next training step then starts from the staged region
 * (LOAD_STAGED) instead of copying x from the host. Labels always come from
 * the current buffer (their own small copy). An evaluation pass may reuse
 * the region: it waits for a staging copy still in flight and drops the
 * staged batch, as do set_state and vd_exec_drop_staged.
 *
 * Synthetic input (vd_exec_input_synth / vd_exec_next_synth): where x would
 * be copied from a pair's pinned buffer (its load, a re-load after an
 * offload, the staging copy), be->fill_synthetic generates it from the
 * pair's batch description instead, on the same stream: no host bytes.
 *
 * Measured statistics are tracked while walking, independently of the plan's
 * own arithmetic: bytes live (+ at ALLOC, - at FREE), their maximum at each
 * COMPUTE, and max(offset + size) at each ALLOC. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "exec/exec.h"
#include "exec/group.h"
#include "plan/plan.h"

struct vd_exec {
    const vd_net *net;
    const vd_plan *plan;
    const vd_plan *eval;        /* plan->eval (forward-only placement) */
    vd_backend *be;
    vd_exec_opts opts;
    char *pool;                 /* device: [plan->budget] */
    char *host_store;           /* pinned: [plan->host_bytes] (NULL if 0) */
    void *in_x;                 /* pinned: [batch, in_c, in_h, in_w] (current), float or
                                   16-bit (act_bytes) */
    int32_t *in_labels;         /* pinned: [batch] (current) */
    void *nx_x;                 /* pinned look-ahead x (plan stages), else NULL */
    int32_t *nx_labels;         /* pinned look-ahead labels (plan stages), else NULL */
    /* synthetic input generated on the device (vd_exec_input_synth): per
     * pair, whether its x is made by be->fill_synthetic from its batch
     * description instead of copied from in_x / nx_x; the index arrays
     * ([batch] each) move with the pairs */
    bool in_synth, nx_synth;
    vd_synth_batch in_sb, nx_sb;
    bool next_ready;            /* vd_exec_next_ready since the last training step */
    vd_exec_stage_hook stage_hook;   /* vd_exec_set_stage_hook */
    void *stage_hook_ctx;
    bool staged;                /* the staging region holds the current buffers' batch */
    bool stage_inflight;        /* a staging copy may not have been waited for yet */
    int ev_stage;               /* the staging copy's H2D event (-1: no staging) */
    float *loss_host;           /* pinned: [1] */
    void *eval_y;               /* pinned: [batch, classes], float or 16-bit */
    int64_t x_floats, y_floats; /* elements of x and of the loss layer's output */
    uint64_t act_bytes;         /* bytes per feature-map element (vd_math_act_bytes) */
    vd_op_io *io;               /* [plan->n_steps] */
    vd_op_io *eval_io;          /* [eval->n_steps] */
    vd_op_io *rc_io;            /* [plan->n_recompute_ops], in action order */
    int n_rc;
    int n_ranges;
    int64_t *r_off, *r_cnt;     /* trainable ranges, in floats */
    /* math fp16 (loss scaling, backend.h): the gradient ranges checked for
     * inf/NaN, one per layer with trainable parameters, in backward order
     * (highest layer index first), and the state as last read back */
    bool fp16;
    int n_checks;
    int64_t *c_off, *c_cnt;     /* [n_checks] in floats */
    int *c_layer;               /* [n_checks] the layer owning each */
    vd_loss_scale ls;
    bool state_set;
    bool first_pending;         /* next SGD step is the first (momentum = grad) */
    int64_t sgd_steps;
    vd_exec_stats st;
    int ev_steps;               /* opts.step_times: first of n_steps + 1 events, else -1 */
    int ev_drain;               /* vd_exec_drain's event */
    double *step_end_ms;        /* [n_steps], see vd_exec_step_times */
    int n_step_times;
    int ev_copy;                /* opts.step_times: first of n_tensors + n_intervals events
                                   recorded as each copy starts (D2H per tensor, then H2D
                                   per interval), else -1 */
    bool *copy_issued;          /* [n_tensors + n_intervals]: started this pass */
    vd_exec_copy_time *copy_times;   /* [n_tensors + n_intervals], see vd_exec_copy_times */
    int n_copy_times;
    vd_dp_layout dp;            /* opts.allreduce: the gradient buckets */
    vdx_group *grp;             /* a group (exec/group.h): only this field is set */
};

/* A group's calls go to its members (group.c); accessors read rank 0's. */
#define LEAD(ex) ((ex)->grp ? vdx_group_member((ex)->grp, 0) : (ex))

static char *iv_addr(const vd_exec *ex, const vd_interval *iv) { return ex->pool + iv->offset; }

/* Device address of tensor t at step s in plan p, or NULL if not resident. */
static void *taddr(const vd_exec *ex, const vd_plan *p, int t, int s) {
    const vd_interval *iv = vd_plan_resident(p, t, s);
    return iv ? iv_addr(ex, iv) : NULL;
}

/* Operands of layer i's forward (bwd false) or backward at step s of plan p,
 * with workspace tensor wst (-1 none). */
static void fill_io_at(const vd_exec *ex, const vd_plan *p, int i, int s, bool bwd, int wst,
                       vd_op_io *io) {
    const vd_net *net = ex->net;
    memset(io, 0, sizeof *io);
    io->n = p->batch;
    io->seed = vd_exec_rank_seed(net->train.seed, ex->opts.rank);
    io->act = vd_math_act_dtype(ex->opts.math);
    const vd_layer *l = &net->layers[i];
    const vd_plan_layer *pl = &p->layers[i];
    for (int k = 0; k < l->n_in; k++) {
        io->x[k] = taddr(ex, p, pl->in_t[k], s);
        if (bwd) {
            io->dx[k] = pl->dx[k] >= 0 ? taddr(ex, p, pl->dx[k], s) : NULL;
            io->dx_beta[k] = pl->dx_beta[k];
        }
    }
    io->y = taddr(ex, p, pl->y, s);
    if (bwd && pl->dy >= 0) io->dy = taddr(ex, p, pl->dy, s);
    if (pl->aux >= 0) io->aux = taddr(ex, p, pl->aux, s);
    if (i == p->loss_layer) io->labels = taddr(ex, p, p->t_labels, s);
    /* math fp16: the loss's gradient is multiplied by the loss scale */
    io->loss_scaled = bwd && i == p->loss_layer && io->act == VD_DT_F16;
    /* per pass: the backward call may use another option than forward /
     * recompute, with its own workspace */
    if (wst >= 0) {
        io->ws = taddr(ex, p, wst, s);
        io->ws_bytes = bwd ? pl->ws_bwd_bytes : pl->ws_fwd_bytes;
    }
    io->algo = bwd ? pl->algo_bwd : pl->algo_fwd;
    io->training = !p->forward_only;
    float *params = taddr(ex, p, p->t_params, s);
    float *grads = p->t_grads >= 0 ? taddr(ex, p, p->t_grads, s) : NULL;
    /* the update in the backward pass: the layer's own gradient tensor */
    float *lg = bwd && pl->dw >= 0 ? taddr(ex, p, pl->dw, s) : NULL;
    for (int k = 0; k < l->n_params; k++) {
        const vd_param *pr = &net->params[l->param_first + k];
        float *pp = params + pr->offset;
        float *gg = grads ? grads + pr->offset : lg ? lg + (pr->offset - pl->dw_base) : NULL;
        vd_op_io_bind_param(io, pr->role, pp, bwd ? gg : NULL);
    }
}

/* Fill the vd_op_io of step s of plan p. */
static void fill_io(const vd_exec *ex, const vd_plan *p, int s, vd_op_io *io) {
    const vd_step *st = &p->steps[s];
    if (st->kind == VD_STEP_SGD || st->kind == VD_STEP_END) {
        memset(io, 0, sizeof *io);
        io->n = p->batch;
        io->seed = vd_exec_rank_seed(ex->net->train.seed, ex->opts.rank);
        return;
    }
    const vd_plan_layer *pl = &p->layers[st->layer];
    bool bwd = st->kind == VD_STEP_BWD;
    fill_io_at(ex, p, st->layer, s, bwd, bwd ? pl->ws_bwd : pl->ws_fwd, io);
}

/* Operands of every RECOMPUTE action of plan p, in action order. A missing
 * operand is a plan bug: VD_EINTERNAL naming it. */
static int fill_rc_io(vd_exec *ex, const vd_plan *p, vd_err *e) {
    int k = 0;
    for (int s = 0; s < p->n_steps; s++) {
        const vd_step *st = &p->steps[s];
        for (int a = st->first_action; a < st->first_action + st->n_actions; a++) {
            if (p->actions[a].kind != VD_A_RECOMPUTE) continue;
            int j = p->actions[a].arg;
            const vd_layer *l = &ex->net->layers[j];
            const vd_plan_layer *pl = &p->layers[j];
            if (k >= ex->n_rc || pl->rc_step != s)
                return vd_errf(e, VD_EINTERNAL, "plan: recompute of '%s' at step %d is inconsistent",
                               l->name, s);
            vd_op_io *io = &ex->rc_io[k++];
            fill_io_at(ex, p, j, s, false, pl->ws_rc, io);
            io->training = true;
            bool ok = io->y != NULL && (!pl->ws_fwd_bytes || io->ws != NULL);
            for (int i = 0; i < l->n_in; i++) ok &= io->x[i] != NULL;
            if (!ok)
                return vd_errf(e, VD_EINTERNAL, "plan: an operand of the recompute of '%s' is not "
                               "resident at step %d", l->name, s);
        }
    }
    if (k != ex->n_rc)
        return vd_errf(e, VD_EINTERNAL, "plan: %d recompute actions, %d expected", k, ex->n_rc);
    return VD_OK;
}

static int check_plan(const vd_net *net, const vd_plan *plan, vd_backend *be, vd_err *e) {
    if (!plan->feasible)
        return vd_errf(e, VD_EBUDGET, "the plan does not fit its budget%s%s",
                       plan->note[0] ? ": " : "", plan->note);
    if (plan->forward_only || !plan->eval)
        return vd_errf(e, VD_EINTERNAL, "executor needs a training plan (with its eval plan)");
    if (plan->n_layers != net->n_layers)
        return vd_errf(e, VD_EINTERNAL, "plan has %d layers, net '%s' has %d", plan->n_layers,
                       net->name, net->n_layers);
    if (plan->t_stage >= 0) {
        /* what run_step relies on: "x:next" as big as x, its region read at
         * step 0 and filled from stage_step to the end, at one offset */
        const vd_tensor *S = &plan->tensors[plan->t_stage], *X = &plan->tensors[plan->t_x];
        const vd_interval *a = S->n_iv == 2 ? &plan->intervals[S->iv[0]] : NULL;
        const vd_interval *b = S->n_iv == 2 ? &plan->intervals[S->iv[1]] : NULL;
        if (!a || S->bytes != X->bytes || a->first != 0 || a->last != 0 ||
            b->fill != VD_FILL_STAGE || b->first != plan->stage_step ||
            b->last != plan->n_steps - 1 || a->offset != b->offset || b->ev_h2d < 0 ||
            plan->intervals[X->iv[0]].first != 0)
            return vd_errf(e, VD_EINTERNAL, "plan: the input staging tensor is inconsistent");
    }
    for (int i = 0; i < net->n_layers; i++) {
        const vd_algo_opt *opts = NULL;
        int n = 0;
        int rc = be->layer_algos(be, i, &opts, &n, e);
        if (rc) return rc;
        const vd_plan_layer *pl = &plan->layers[i];
        /* each pass: its option exists and gets at least the backend's
         * workspace for that pass */
        for (int pass = 0; pass < 2; pass++) {
            int a = pass ? pl->algo_bwd : pl->algo_fwd;
            uint64_t ws = pass ? pl->ws_bwd_bytes : pl->ws_fwd_bytes;
            const char *pn = pass ? "backward" : "forward";
            if (a < 0 || a >= n)
                return vd_errf(e, VD_EDATA, "the plan chose %s option %d for layer '%s' but "
                               "the %s backend offers %d: the profile (--profile) comes from "
                               "another setup or was edited; measure it again (drop --profile)",
                               pn, a, net->layers[i].name, be->name, n);
            /* the profile's option a is the backend's option a: a profile
             * saved by another setup (another build, cuDNN, device, or conv
             * API choice) can list other options */
            const char *want = pass ? pl->algo_bwd_label : pl->algo_label;
            if (want[0] && strcmp(want, opts[a].label) != 0)
                return vd_errf(e, VD_EUNSUPPORTED, "plan chose %s option %d ('%s') for layer '%s' "
                               "but the %s backend's option %d is '%s': the profile comes from "
                               "another setup; measure it again (without --profile)", pn, a, want,
                               net->layers[i].name, be->name, a, opts[a].label);
            uint64_t need = vd_algo_ws(&opts[a], pass == 1);
            if (ws < need)
                return vd_errf(e, VD_EDATA, "the profile gives layer '%s' %llu bytes of %s "
                               "workspace, but the %s backend's algorithm '%s' needs %llu: the "
                               "profile (--profile) comes from another setup or was edited; "
                               "measure it again (drop --profile) or raise \"%s\" of its "
                               "layer '%s', option %d, to at least %llu", net->layers[i].name,
                               (unsigned long long)ws, pn, be->name, opts[a].label,
                               (unsigned long long)need,
                               pass ? "bwd_workspace" : "fwd_workspace", net->layers[i].name, a,
                               (unsigned long long)need);
        }
        uint64_t aux = be->layer_aux_bytes(net, i, plan->batch);
        uint64_t have = pl->aux >= 0 ? plan->tensors[pl->aux].bytes : 0;
        if (have < aux)
            return vd_errf(e, VD_EDATA, "the profile gives layer '%s' %llu bytes of saved "
                           "state (\"aux_bytes\"), but the %s backend needs %llu: the profile "
                           "(--profile) comes from another setup or was edited; measure it again "
                           "(drop --profile) or set its \"aux_bytes\" to at least %llu",
                           net->layers[i].name, (unsigned long long)have, be->name,
                           (unsigned long long)aux, (unsigned long long)aux);
    }
    return VD_OK;
}

int vd_exec_create(vd_exec **out, const vd_net *net, const struct vd_plan *plan,
                   vd_backend *be, const vd_exec_opts *opts, vd_err *e) {
    *out = NULL;
    vd_exec *ex = vd_calloc(1, sizeof *ex, e);
    if (!ex) return VD_ENOMEM;
    ex->net = net;
    ex->plan = plan;
    ex->eval = plan->eval;
    ex->be = be;
    if (opts) ex->opts = *opts;
    int rc = VD_OK;
    /* the plan sized every feature map for net->train.math; the backend
     * writes opts.math's elements (bf16, fp16: 2 bytes), so their types must
     * agree (fp32 and tf32 both store floats) */
    if (vd_math_act_dtype(ex->opts.math) != vd_math_act_dtype(net->train.math)) {
        rc = vd_errf(e, VD_EINTERNAL, "executor math %s, but the plan's feature maps are for "
                     "math %s (net '%s', train.math)", vd_math_name(ex->opts.math),
                     vd_math_name(net->train.math), net->name);
        goto fail;
    }
    if (!ex->opts.layers_ready) {
        rc = be->layer_setup(be, net, plan->batch, ex->opts.math, ex->opts.deterministic, e);
        if (rc) goto fail;
    }
    if ((rc = check_plan(net, plan, be, e))) goto fail;

    /* Pinned host buffers first: pinning costs device memory too (the
     * driver's mappings), so the caller's before_pool sample sees all that
     * lives outside the pool. */
    if (plan->host_bytes) {
        rc = be->host_alloc(be, plan->host_bytes, (void **)&ex->host_store, e);
        if (rc) { ex->host_store = NULL; goto fail; }
    }
    ex->x_floats = (int64_t)plan->batch * vd_net_out_numel(net, -1);
    ex->y_floats = (int64_t)plan->batch * vd_net_out_numel(net, plan->loss_layer);
    ex->act_bytes = vd_math_act_bytes(ex->opts.math);
    if ((rc = be->host_alloc(be, (uint64_t)ex->x_floats * ex->act_bytes, &ex->in_x, e))) { ex->in_x = NULL; goto fail; }
    if ((rc = be->host_alloc(be, (uint64_t)plan->batch * 4u, (void **)&ex->in_labels, e))) { ex->in_labels = NULL; goto fail; }
    if ((rc = be->host_alloc(be, 4u, (void **)&ex->loss_host, e))) { ex->loss_host = NULL; goto fail; }
    if ((rc = be->host_alloc(be, (uint64_t)ex->y_floats * ex->act_bytes, &ex->eval_y, e))) { ex->eval_y = NULL; goto fail; }
    memset(ex->in_x, 0, (size_t)ex->x_floats * ex->act_bytes);
    memset(ex->in_labels, 0, (size_t)plan->batch * 4u);
    ex->ev_stage = -1;
    if (plan->t_stage >= 0) {
        /* the look-ahead pair of input buffers */
        if ((rc = be->host_alloc(be, (uint64_t)ex->x_floats * ex->act_bytes, &ex->nx_x, e))) { ex->nx_x = NULL; goto fail; }
        if ((rc = be->host_alloc(be, (uint64_t)plan->batch * 4u, (void **)&ex->nx_labels, e))) { ex->nx_labels = NULL; goto fail; }
        memset(ex->nx_x, 0, (size_t)ex->x_floats * ex->act_bytes);
        memset(ex->nx_labels, 0, (size_t)plan->batch * 4u);
        ex->ev_stage = plan->intervals[plan->tensors[plan->t_stage].iv[1]].ev_h2d;
    }
    if (vd_exec_can_synth(ex)) {
        ex->in_sb.index = vd_calloc((size_t)plan->batch, sizeof(int64_t), e);
        ex->nx_sb.index = vd_calloc((size_t)plan->batch, sizeof(int64_t), e);
        if (!ex->in_sb.index || !ex->nx_sb.index) { rc = VD_ENOMEM; goto fail; }
    }
    if (ex->opts.before_pool) ex->opts.before_pool(ex->opts.before_pool_ctx);
    rc = be->pool_create(be, plan->budget, (void **)&ex->pool, e);
    if (rc) { ex->pool = NULL; goto fail; }
    int n_ev = plan->n_events > ex->eval->n_events ? plan->n_events : ex->eval->n_events;
    ex->ev_steps = -1;
    ex->ev_copy = -1;
    if (ex->opts.step_times) {
        /* one at the start of a training pass, one after each step; one as
         * each copy starts (its end has the plan's event) */
        ex->ev_steps = n_ev;
        n_ev += plan->n_steps + 1;
        ex->step_end_ms = vd_calloc((size_t)plan->n_steps, sizeof *ex->step_end_ms, e);
        if (!ex->step_end_ms) { rc = VD_ENOMEM; goto fail; }
        size_t nc = (size_t)plan->n_tensors + (size_t)plan->n_intervals;
        ex->ev_copy = n_ev;
        n_ev += (int)nc;
        ex->copy_issued = vd_calloc(nc ? nc : 1, sizeof *ex->copy_issued, e);
        ex->copy_times = vd_calloc(nc ? nc : 1, sizeof *ex->copy_times, e);
        if (!ex->copy_issued || !ex->copy_times) { rc = VD_ENOMEM; goto fail; }
    }
    ex->ev_drain = n_ev++;
    if ((rc = be->events_create(be, n_ev, e))) goto fail;

    ex->io = vd_calloc((size_t)plan->n_steps, sizeof *ex->io, e);
    ex->eval_io = vd_calloc((size_t)ex->eval->n_steps, sizeof *ex->eval_io, e);
    ex->r_off = vd_calloc((size_t)(net->n_params ? net->n_params : 1), sizeof *ex->r_off, e);
    ex->r_cnt = vd_calloc((size_t)(net->n_params ? net->n_params : 1), sizeof *ex->r_cnt, e);
    ex->c_off = vd_calloc((size_t)(net->n_params ? net->n_params : 1), sizeof *ex->c_off, e);
    ex->c_cnt = vd_calloc((size_t)(net->n_params ? net->n_params : 1), sizeof *ex->c_cnt, e);
    ex->c_layer = vd_calloc((size_t)(net->n_params ? net->n_params : 1), sizeof *ex->c_layer, e);
    if (!ex->io || !ex->eval_io || !ex->r_off || !ex->r_cnt || !ex->c_off || !ex->c_cnt ||
        !ex->c_layer) { rc = VD_ENOMEM; goto fail; }
    for (int s = 0; s < plan->n_steps; s++) fill_io(ex, plan, s, &ex->io[s]);
    for (int s = 0; s < ex->eval->n_steps; s++) fill_io(ex, ex->eval, s, &ex->eval_io[s]);
    ex->n_rc = plan->n_recompute_ops;
    if (ex->n_rc > 0) {
        ex->rc_io = vd_calloc((size_t)ex->n_rc, sizeof *ex->rc_io, e);
        if (!ex->rc_io) { rc = VD_ENOMEM; goto fail; }
    }
    if ((rc = fill_rc_io(ex, plan, e))) goto fail;
    if (ex->eval->n_recompute_ops) {
        rc = vd_errf(e, VD_EINTERNAL, "the evaluation plan has recompute actions");
        goto fail;
    }
    /* Trainable ranges: maximal runs of adjacent WEIGHT params. */
    for (int k = 0; k < net->n_params; k++) {
        const vd_param *pr = &net->params[k];
        if (pr->kind != VD_PARAM_WEIGHT || pr->numel == 0) continue;
        if (ex->n_ranges && ex->r_off[ex->n_ranges - 1] + ex->r_cnt[ex->n_ranges - 1] == pr->offset)
            ex->r_cnt[ex->n_ranges - 1] += pr->numel;
        else { ex->r_off[ex->n_ranges] = pr->offset; ex->r_cnt[ex->n_ranges] = pr->numel; ex->n_ranges++; }
    }
    /* math fp16's checked ranges: each layer's adjacent trainable
     * parameters, layers in backward order */
    for (int i = net->n_layers - 1; i >= 0; i--) {
        const vd_layer *l = &net->layers[i];
        int first = ex->n_checks;
        for (int k = l->param_first; k < l->param_first + l->n_params; k++) {
            const vd_param *pr = &net->params[k];
            if (pr->kind != VD_PARAM_WEIGHT || pr->numel == 0) continue;
            int c = ex->n_checks;
            if (c > first && ex->c_off[c - 1] + ex->c_cnt[c - 1] == pr->offset) {
                ex->c_cnt[c - 1] += pr->numel;
            } else {
                ex->c_off[c] = pr->offset;
                ex->c_cnt[c] = pr->numel;
                ex->c_layer[c] = i;
                ex->n_checks++;
            }
        }
    }
    ex->st.pool_bytes = plan->budget;
    ex->st.host_store_bytes = plan->host_bytes;
    ex->first_pending = true;
    ex->fp16 = ex->opts.math == VD_MATH_FP16 && !plan->forward_only;
    ex->ls = vd_loss_scale_init();
    if (ex->fp16) {
        if (!be->scale_set || !be->scale_get || !be->grad_check || !be->sgd_scaled ||
            !be->scale_update) {
            rc = vd_errf(e, VD_EUNSUPPORTED, "the %s backend has no loss scaling: it cannot "
                         "train in math fp16", be->name);
            goto fail;
        }
        if (ex->opts.allreduce) {
            rc = vd_errf(e, VD_EUNSUPPORTED, "data parallel training (--gpus, --mpi) in math "
                         "fp16 is not supported yet: its loss scale would have to agree "
                         "between the ranks; use bf16, or one device");
            goto fail;
        }
        if (plan->update_in_bwd) {
            rc = vd_errf(e, VD_EINTERNAL, "math fp16 needs a plan with one gradient array "
                         "(vd_plan_grads_array): every gradient is checked before any update");
            goto fail;
        }
        if ((rc = be->scale_set(be, &ex->ls, e))) goto fail;
    }
    if (ex->opts.allreduce && plan->update_in_bwd) {
        rc = vd_errf(e, VD_EINTERNAL, "data parallel needs a plan with one gradient array "
                     "(vd_plan_opts.grads_persistent): the all-reduce averages it before "
                     "the update");
        goto fail;
    }
    if (ex->opts.allreduce &&
        (rc = vd_dp_layout_build(net, plan, ex->opts.bucket_bytes, &ex->dp, e)))
        goto fail;
    *out = ex;
    return VD_OK;
fail:
    vd_exec_destroy(&ex);
    return rc ? rc : VD_EINTERNAL;
}

void vd_exec_destroy(vd_exec **pex) {
    vd_exec *ex = *pex;
    if (!ex) return;
    if (ex->grp) {              /* the group only: its members are the caller's */
        vdx_group_free(ex->grp);
        vd_free(ex);
        *pex = NULL;
        return;
    }
    vd_backend *be = ex->be;
    if (ex->pool || ex->host_store) {
        vd_err e = {0};
        (void)be->synchronize(be, &e);   /* nothing may still read or write them */
    }
    if (ex->eval_y) be->host_free(be, ex->eval_y);
    if (ex->loss_host) be->host_free(be, ex->loss_host);
    if (ex->in_labels) be->host_free(be, ex->in_labels);
    if (ex->in_x) be->host_free(be, ex->in_x);
    if (ex->nx_labels) be->host_free(be, ex->nx_labels);
    if (ex->nx_x) be->host_free(be, ex->nx_x);
    if (ex->host_store) be->host_free(be, ex->host_store);
    if (ex->pool) be->pool_destroy(be, ex->pool);
    vd_free(ex->io);
    vd_free(ex->eval_io);
    vd_free(ex->rc_io);
    vd_free(ex->r_off);
    vd_free(ex->r_cnt);
    vd_free(ex->c_off);
    vd_free(ex->c_cnt);
    vd_free(ex->c_layer);
    vd_free(ex->step_end_ms);
    vd_free(ex->copy_issued);
    vd_free(ex->copy_times);
    vd_free(ex->in_sb.index);
    vd_free(ex->nx_sb.index);
    vd_dp_layout_free(&ex->dp);
    vd_free(ex);
    *pex = NULL;
}

static vd_exec *member(vd_exec *ex, int r) { return ex->grp ? vdx_group_member(ex->grp, r) : ex; }
void *vd_exec_rank_input_x(vd_exec *ex, int r) {
    vd_exec *m = member(ex, r);
    m->in_synth = false;
    return m->in_x;
}
int32_t *vd_exec_rank_input_labels(vd_exec *ex, int r) { return member(ex, r)->in_labels; }
void *vd_exec_rank_next_x(vd_exec *ex, int r) {
    vd_exec *m = member(ex, r);
    m->nx_synth = false;
    return m->nx_x;
}
int32_t *vd_exec_rank_next_labels(vd_exec *ex, int r) { return member(ex, r)->nx_labels; }
vd_synth_batch *vd_exec_rank_input_synth(vd_exec *ex, int r) {
    vd_exec *m = member(ex, r);
    if (!m->in_sb.index) return NULL;
    m->in_synth = true;
    return &m->in_sb;
}
vd_synth_batch *vd_exec_rank_next_synth(vd_exec *ex, int r) {
    vd_exec *m = member(ex, r);
    if (!m->nx_sb.index || !m->nx_x) return NULL;
    m->nx_synth = true;
    return &m->nx_sb;
}

void *vd_exec_input_x(vd_exec *ex) { return vd_exec_rank_input_x(ex, 0); }
vd_dtype vd_exec_input_dtype(const vd_exec *ex) { return vd_math_act_dtype(LEAD(ex)->opts.math); }
int32_t *vd_exec_input_labels(vd_exec *ex) { return LEAD(ex)->in_labels; }
bool vd_exec_stages(const vd_exec *ex) {
    if (ex->grp) return vdx_group_stages(ex->grp);
    return ex->plan->t_stage >= 0;
}
void *vd_exec_next_x(vd_exec *ex) { return vd_exec_rank_next_x(ex, 0); }
bool vd_exec_can_synth(const vd_exec *ex) {
    const vd_exec *l = LEAD(ex);
    return l->be->fill_synthetic != NULL && !l->opts.synth_host;
}
vd_synth_batch *vd_exec_input_synth(vd_exec *ex) { return vd_exec_rank_input_synth(ex, 0); }
vd_synth_batch *vd_exec_next_synth(vd_exec *ex) { return vd_exec_rank_next_synth(ex, 0); }
int32_t *vd_exec_next_labels(vd_exec *ex) { return LEAD(ex)->nx_labels; }
void vd_exec_next_ready(vd_exec *ex) {
    if (ex->grp) { vdx_group_next_ready(ex->grp); return; }
    ex->next_ready = ex->nx_x != NULL;
}
void vd_exec_set_stage_hook(vd_exec *ex, vd_exec_stage_hook fn, void *ctx) {
    for (int r = 0; r < vd_exec_ranks(ex); r++) {
        vd_exec *m = member(ex, r);
        m->stage_hook = fn;
        m->stage_hook_ctx = ctx;
    }
}
void vd_exec_drop_staged(vd_exec *ex) {
    if (ex->grp) { vdx_group_drop_staged(ex->grp); return; }
    ex->staged = false;
}

int vd_exec_ranks(const vd_exec *ex) { return ex->grp ? vdx_group_size(ex->grp) : 1; }

int vd_exec_drain(vd_exec *ex, vd_err *e) {
    for (int r = 0; r < vd_exec_ranks(ex); r++) {
        vd_exec *m = member(ex, r);
        int rc = m->be->event_record(m->be, m->ev_drain, VD_STREAM_COMPUTE, e);
        if (!rc) rc = m->be->event_sync(m->be, m->ev_drain, e);
        if (rc) return rc;
    }
    return VD_OK;
}

int vd_exec_group_set_procs(vd_exec *ex, int proc, int procs,
                            int (*gather)(const void *mine, void *all, size_t bytes, vd_err *e),
                            vd_err *e) {
    if (!ex->grp || procs < 1 || proc < 0 || proc >= procs || !gather)
        return vd_errf(e, VD_EINTERNAL, "vd_exec_group_set_procs: not a group, or process %d "
                       "of %d", proc, procs);
    return vdx_group_set_procs(ex->grp, proc, procs, gather, e);
}

int vd_exec_procs(const vd_exec *ex, int *proc) {
    if (ex->grp) return vdx_group_procs(ex->grp, proc);
    *proc = 0;
    return 1;
}

uint64_t vd_exec_rank_seed(uint64_t seed, int r) {
    return r == 0 ? seed : seed ^ ((uint64_t)r * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull);
}

int vdx_exec_batch(const vd_exec *ex) { return ex->plan->batch; }

vd_exec *vdx_exec_wrap(vdx_group *g, vd_err *e) {
    vd_exec *ex = vd_calloc(1, sizeof *ex, e);
    if (ex) ex->grp = g;
    return ex;
}

static char *region(const vd_exec *ex, int t) {
    const vd_plan *p = ex->plan;
    return iv_addr(ex, &p->intervals[p->tensors[t].iv[0]]);
}

/* Math fp16: a fresh loss scale, its momentum started as first_pending
 * says (the backend's `stepped` decides sgd_scaled's first step). */
static int reset_loss_scale(vd_exec *ex, vd_err *e) {
    if (!ex->fp16) return VD_OK;
    ex->ls = vd_loss_scale_init();
    ex->ls.stepped = !ex->first_pending;
    return ex->be->scale_set(ex->be, &ex->ls, e);
}

int vd_exec_set_loss_scale(vd_exec *ex, const vd_loss_scale *s, vd_err *e) {
    ex = LEAD(ex);
    if (!ex->fp16) return vd_errf(e, VD_EINTERNAL, "vd_exec_set_loss_scale outside math fp16");
    int rc = ex->be->synchronize(ex->be, e);
    if (!rc) rc = ex->be->scale_set(ex->be, s, e);
    if (rc) return rc;
    ex->ls = *s;
    ex->ls.found_inf = 0;
    ex->first_pending = !s->stepped;
    return VD_OK;
}

bool vd_exec_loss_scale(const vd_exec *ex, vd_loss_scale *s) {
    ex = LEAD(ex);
    if (s) *s = ex->ls;
    return ex->fp16;
}

int vd_exec_set_state(vd_exec *ex, const float *params, const float *momentum,
                      int64_t sgd_steps, vd_err *e) {
    if (ex->grp) return vdx_group_set_state(ex->grp, params, momentum, sgd_steps, e);
    vd_backend *be = ex->be;
    const vd_plan *p = ex->plan;
    uint64_t bytes = (uint64_t)ex->net->param_floats * 4u;
    int rc;
    if ((rc = be->synchronize(be, e))) return rc;
    if (bytes) {
        if ((rc = be->copy_async(be, VD_STREAM_H2D, region(ex, p->t_params), params, bytes, e))) return rc;
        if (momentum) rc = be->copy_async(be, VD_STREAM_H2D, region(ex, p->t_mom), momentum, bytes, e);
        else rc = be->zero_async(be, VD_STREAM_H2D, region(ex, p->t_mom), bytes, e);
        if (rc) return rc;
    }
    if ((rc = be->synchronize(be, e))) return rc;
    ex->sgd_steps = sgd_steps;
    ex->first_pending = !momentum || sgd_steps == 0;
    if ((rc = reset_loss_scale(ex, e))) return rc;
    ex->state_set = true;
    ex->staged = ex->stage_inflight = false;   /* synchronized: no copy in flight */
    return VD_OK;
}

int vd_exec_init_params(vd_exec *ex, uint64_t seed, vd_err *e) {
    if (ex->grp) return vdx_group_init_params(ex->grp, seed, e);
    vd_backend *be = ex->be;
    const vd_plan *p = ex->plan;
    int64_t total = ex->net->param_floats, chunk = total < (1 << 20) ? total : (1 << 20);
    int rc = be->synchronize(be, e);
    if (rc) return rc;
    float *buf = vd_malloc((size_t)(chunk ? chunk : 1) * sizeof *buf, e);
    if (!buf) return VD_ENOMEM;
    for (int64_t at = 0; at < total && !rc; at += chunk) {
        int64_t n = total - at < chunk ? total - at : chunk;
        vd_net_init_params_range(ex->net, seed, at, n, buf);
        rc = be->copy_async(be, VD_STREAM_H2D, region(ex, p->t_params) + at * 4, buf,
                            (uint64_t)n * 4u, e);
        if (!rc) rc = be->synchronize(be, e);   /* buf is filled again next */
    }
    vd_free(buf);
    if (!rc && total) rc = be->zero_async(be, VD_STREAM_H2D, region(ex, p->t_mom), (uint64_t)total * 4u, e);
    if (!rc) rc = be->synchronize(be, e);
    if (rc) return rc;
    ex->sgd_steps = 0;
    ex->first_pending = true;
    if ((rc = reset_loss_scale(ex, e))) return rc;
    ex->state_set = true;
    ex->staged = ex->stage_inflight = false;
    return VD_OK;
}

int vd_exec_get_state(vd_exec *ex, float *params, float *momentum, int64_t *sgd_steps, vd_err *e) {
    ex = LEAD(ex);
    vd_backend *be = ex->be;
    const vd_plan *p = ex->plan;
    uint64_t bytes = (uint64_t)ex->net->param_floats * 4u;
    int rc;
    if (!ex->state_set) return vd_errf(e, VD_EINTERNAL, "vd_exec_get_state before vd_exec_set_state");
    if ((rc = be->synchronize(be, e))) return rc;
    if (bytes && params && (rc = be->copy_async(be, VD_STREAM_D2H, params, region(ex, p->t_params), bytes, e))) return rc;
    if (bytes && momentum && (rc = be->copy_async(be, VD_STREAM_D2H, momentum, region(ex, p->t_mom), bytes, e))) return rc;
    if ((rc = be->synchronize(be, e))) return rc;
    if (sgd_steps) *sgd_steps = ex->sgd_steps;
    return VD_OK;
}

/* Fill the input region dst (bytes) from pair's synthetic batch b. */
static int fill_synth(vd_exec *ex, void *dst, const vd_synth_batch *b, uint64_t bytes, vd_err *e) {
    uint64_t want = (uint64_t)b->n * (uint64_t)b->sample_numel * ex->act_bytes;
    if (b->n != ex->plan->batch || want != bytes)
        return vd_errf(e, VD_EINTERNAL, "synthetic batch of %d x %lld elements for an input of "
                       "%llu bytes at batch %d", b->n, (long long)b->sample_numel,
                       (unsigned long long)bytes, ex->plan->batch);
    return ex->be->fill_synthetic(ex->be, VD_STREAM_H2D, dst, vd_math_act_dtype(ex->opts.math), b, e);
}

/* Source of an interval's H2D fill. */
static const void *fill_src(const vd_exec *ex, const vd_plan *p, const vd_interval *iv) {
    const vd_tensor *T = &p->tensors[iv->tensor];
    switch (iv->fill) {
    case VD_FILL_INPUT_X: return ex->in_x;
    case VD_FILL_LABELS: return ex->in_labels;
    case VD_FILL_STAGE: return ex->nx_x;
    case VD_FILL_HOST_STORE: return ex->host_store + T->host_offset;
    default: return NULL;
    }
}

typedef struct walk_stats {
    uint64_t live, peak, hwm, d2h, h2d;
    int rc_next;
    int64_t rc_ops;
    int x_iv;           /* staged: x's step-0 interval (its load is skipped), else -1 */
    bool stage_next;    /* issue the staging copy (the look-ahead buffers are ready) */
    bool load_staged;   /* start from the staged region */
    bool stage_failed;  /* the stage hook said the look-ahead buffers are not ready */
} walk_stats;

/* Data parallel: average the gradient buckets that backward step s
 * completes (after its op, on the allreduce's own stream under NCCL). */
static int average_buckets(vd_exec *ex, int s, vd_err *e) {
    const vd_plan *p = ex->plan;
    float *grads = (float *)region(ex, p->t_grads);
    vd_allreduce *ar = ex->opts.allreduce;
    for (int b = 0; b < ex->dp.n_buckets; b++) {
        const vd_dp_bucket *B = &ex->dp.buckets[b];
        if (B->step != s) continue;
        for (int k = B->first_range; k < B->first_range + B->n_ranges; k++) {
            int rc = ar->average(ar, ex->be, grads + ex->dp.ranges[k].offset,
                                 ex->dp.ranges[k].count, e);
            if (rc) return rc;
        }
    }
    return VD_OK;
}

/* The update in the backward pass (vd_plan.update_in_bwd): SGD of layer
 * i's trainable parameters from its gradient tensor, at backward step s,
 * after its op; runs of adjacent trainable parameters in one call. */
static int update_layer(vd_exec *ex, const vd_plan *p, int i, int s, float lr, vd_err *e) {
    const vd_net *net = ex->net;
    const vd_layer *l = &net->layers[i];
    const vd_plan_layer *pl = &p->layers[i];
    if (pl->dw < 0) return VD_OK;
    float *params = (float *)region(ex, p->t_params) + pl->dw_base;
    float *mom = (float *)region(ex, p->t_mom) + pl->dw_base;
    float *g = taddr(ex, p, pl->dw, s);
    if (!g) return vd_errf(e, VD_EINTERNAL, "layer '%s': its gradients are not resident", l->name);
    int64_t off = -1, cnt = 0;
    for (int k = l->param_first; k <= l->param_first + l->n_params; k++) {
        const vd_param *pr = k < l->param_first + l->n_params ? &net->params[k] : NULL;
        bool take = pr && pr->kind == VD_PARAM_WEIGHT && pr->numel > 0;
        if (take && cnt && off + cnt == pr->offset - pl->dw_base) { cnt += pr->numel; continue; }
        if (cnt) {
            int rc = ex->be->sgd(ex->be, params, g, mom, off, cnt, lr, net->train.momentum,
                                 net->train.weight_decay, ex->first_pending, e);
            if (rc) return rc;
        }
        off = take ? pr->offset - pl->dw_base : -1;
        cnt = take ? pr->numel : 0;
    }
    return VD_OK;
}

/* Run the actions of step s of plan p. */
static int run_step(vd_exec *ex, const vd_plan *p, vd_op_io *iot, int s, float lr, int64_t iter,
                    walk_stats *w, vd_err *e) {
    vd_backend *be = ex->be;
    const vd_net *net = ex->net;
    const vd_step *st = &p->steps[s];
    bool poison = ex->opts.poison;
    bool timed = ex->ev_copy >= 0 && p == ex->plan;   /* opts.step_times: copies too */
    int rc = VD_OK;
    for (int a = st->first_action; a < st->first_action + st->n_actions; a++) {
        const vd_action *A = &p->actions[a];
        switch (A->kind) {
        case VD_A_WAIT_OFFLOAD: {
            const vd_tensor *T = &p->tensors[A->arg];
            if (ex->opts.fault != VD_FAULT_SKIP_OFFLOAD_WAIT)
                rc = be->stream_wait(be, VD_STREAM_COMPUTE, T->ev_d2h, e);
            break;
        }
        case VD_A_FREE: {
            const vd_interval *iv = &p->intervals[A->arg];
            w->live -= iv->bytes;
            /* the staged region outlives the iteration: the next one reads it */
            bool keep = iv->fill == VD_FILL_STAGE;
            if (poison && !keep && !p->tensors[iv->tensor].persistent)
                rc = be->poison_async(be, VD_STREAM_COMPUTE, iv_addr(ex, iv), iv->bytes, e);
            break;
        }
        case VD_A_RECORD_FREE:
            rc = be->event_record(be, A->arg, VD_STREAM_COMPUTE, e);
            break;
        case VD_A_ALLOC: {
            const vd_interval *iv = &p->intervals[A->arg];
            w->live += iv->bytes;
            if (iv->offset + iv->bytes > w->hwm) w->hwm = iv->offset + iv->bytes;
            break;
        }
        case VD_A_PREFETCH: {
            const vd_interval *iv = &p->intervals[A->arg];
            const vd_tensor *T = &p->tensors[iv->tensor];
            char *dst = iv_addr(ex, iv);
            if (A->arg == w->x_iv) break;                       /* x was staged */
            if (iv->fill == VD_FILL_STAGE && !w->stage_next) break;  /* no next batch */
            if (iv->fill == VD_FILL_STAGE && ex->stage_hook &&
                ex->stage_hook(ex->stage_hook_ctx, ex) != 0) { /* not filled: no staging */
                w->stage_next = false;
                w->stage_failed = true;
                break;
            }
            if ((rc = be->stream_wait(be, VD_STREAM_H2D, st->ev_free, e))) break;
            if (T->ev_d2h >= 0 && (rc = be->stream_wait(be, VD_STREAM_H2D, T->ev_d2h, e))) break;
            if (poison && (rc = be->poison_async(be, VD_STREAM_H2D, dst, iv->bytes, e))) break;
            if (timed) {
                int c = p->n_tensors + A->arg;
                if ((rc = be->event_record(be, ex->ev_copy + c, VD_STREAM_H2D, e))) break;
                ex->copy_issued[c] = true;
            }
            if (iv->fill == VD_FILL_INPUT_X && ex->in_synth)
                rc = fill_synth(ex, dst, &ex->in_sb, T->bytes, e);
            else if (iv->fill == VD_FILL_STAGE && ex->nx_synth)
                rc = fill_synth(ex, dst, &ex->nx_sb, T->bytes, e);
            else
                rc = be->copy_async(be, VD_STREAM_H2D, dst, fill_src(ex, p, iv), T->bytes, e);
            if (rc) break;
            rc = be->event_record(be, iv->ev_h2d, VD_STREAM_H2D, e);
            if (T->offload && T->iv[1] == A->arg) w->h2d += T->bytes;
            break;
        }
        case VD_A_WAIT_PREFETCH: {
            const vd_interval *iv = &p->intervals[A->arg];
            const vd_tensor *T = &p->tensors[iv->tensor];
            bool activation = T->offload && T->iv[1] == A->arg;
            if (A->arg == w->x_iv) break;                       /* x was staged */
            if (!(activation && ex->opts.fault == VD_FAULT_SKIP_PREFETCH_WAIT))
                rc = be->stream_wait(be, VD_STREAM_COMPUTE, iv->ev_h2d, e);
            break;
        }
        case VD_A_COMPUTE: {
            if (w->live > w->peak) w->peak = w->live;
            if (st->kind == VD_STEP_SGD) {
                const vd_plan *tp = ex->plan;
                /* the averaged gradients first (data parallel) */
                if (ex->opts.allreduce && (rc = ex->opts.allreduce->wait(ex->opts.allreduce, be, e)))
                    break;
                float *params = (float *)region(ex, tp->t_params);
                float *grads = tp->update_in_bwd ? NULL : (float *)region(ex, tp->t_grads);
                float *mom = (float *)region(ex, tp->t_mom);
                if (ex->fp16) {
                    /* every gradient checked, then the updates (skipped on the
                     * device when one was not finite), then the scale's step;
                     * sgd_steps and first_pending follow the state read back
                     * with the loss (vd_exec_train_step) */
                    for (int r = 0; r < ex->n_checks && !rc; r++)
                        rc = be->grad_check(be, grads, ex->c_off[r], ex->c_cnt[r], ex->c_layer[r], e);
                    for (int r = 0; r < ex->n_ranges && !rc; r++)
                        rc = be->sgd_scaled(be, params, grads, mom, ex->r_off[r], ex->r_cnt[r], lr,
                                            net->train.momentum, net->train.weight_decay, e);
                    if (!rc) rc = be->scale_update(be, e);
                } else {
                    for (int r = 0; grads && r < ex->n_ranges && !rc; r++)
                        rc = be->sgd(be, params, grads, mom, ex->r_off[r], ex->r_cnt[r], lr,
                                     net->train.momentum, net->train.weight_decay,
                                     ex->first_pending, e);
                    if (!rc) { ex->first_pending = false; ex->sgd_steps++; }
                }
            } else {
                vd_op_io *io = &iot[s];
                io->iter = iter;
                if (st->kind == VD_STEP_FWD) rc = be->forward(be, net, st->layer, io, e);
                else rc = be->backward(be, net, st->layer, io, e);
                if (!rc && st->kind == VD_STEP_BWD && ex->opts.allreduce && p == ex->plan)
                    rc = average_buckets(ex, s, e);
                if (!rc && st->kind == VD_STEP_BWD && p->update_in_bwd && p == ex->plan)
                    rc = update_layer(ex, p, st->layer, s, lr, e);
            }
            if (!rc && ex->opts.sync_debug) rc = be->synchronize(be, e);
            break;
        }
        case VD_A_RECOMPUTE: {
            /* operand sets are in action order; only the training plan has them */
            if (p != ex->plan || w->rc_next >= ex->n_rc) {
                rc = vd_errf(e, VD_EINTERNAL, "unexpected recompute action");
                break;
            }
            vd_op_io *io = &ex->rc_io[w->rc_next++];
            io->iter = iter;
            if (ex->opts.fault == VD_FAULT_SKIP_RECOMPUTE) break;
            rc = be->forward(be, net, A->arg, io, e);
            if (!rc) w->rc_ops++;
            if (!rc && ex->opts.sync_debug) rc = be->synchronize(be, e);
            break;
        }
        case VD_A_LOAD_STAGED: {
            if (!w->load_staged) break;                         /* x is loaded from the host */
            const vd_interval *xi = &p->intervals[A->arg];
            const vd_tensor *S = &p->tensors[p->t_stage];
            if ((rc = be->stream_wait(be, VD_STREAM_COMPUTE, ex->ev_stage, e))) break;
            rc = be->copy_async(be, VD_STREAM_COMPUTE, iv_addr(ex, xi),
                                iv_addr(ex, &p->intervals[S->iv[0]]), S->bytes, e);
            break;
        }
        case VD_A_OFFLOAD: {
            const vd_tensor *T = &p->tensors[A->arg];
            const vd_interval *iv = &p->intervals[T->iv[0]];
            if ((rc = be->event_record(be, T->ev_compute, VD_STREAM_COMPUTE, e))) break;
            if ((rc = be->stream_wait(be, VD_STREAM_D2H, T->ev_compute, e))) break;
            if (timed) {
                if ((rc = be->event_record(be, ex->ev_copy + A->arg, VD_STREAM_D2H, e))) break;
                ex->copy_issued[A->arg] = true;
            }
            if ((rc = be->copy_async(be, VD_STREAM_D2H, ex->host_store + T->host_offset,
                                     iv_addr(ex, iv), T->bytes, e))) break;
            rc = be->event_record(be, T->ev_d2h, VD_STREAM_D2H, e);
            w->d2h += T->bytes;
            break;
        }
        }
        if (rc) {
            char lab[160];
            return vd_err_prefix(e, "step %d (%s)", s, vd_plan_step_label(p, net, s, lab, sizeof lab));
        }
    }
    return VD_OK;
}

/* Issue the loss (and eval output) readback after the last step, wait for it. */
static int readback(vd_exec *ex, const vd_plan *p, bool want_y, vd_err *e) {
    vd_backend *be = ex->be;
    const vd_plan_layer *ll = &p->layers[p->loss_layer];
    int last = p->n_steps - 1;
    int rc;
    if ((rc = be->event_record(be, p->ev_end, VD_STREAM_COMPUTE, e))) return rc;
    if ((rc = be->stream_wait(be, VD_STREAM_D2H, p->ev_end, e))) return rc;
    void *aux = ll->aux >= 0 ? taddr(ex, p, ll->aux, last) : NULL;
    if (!aux) return vd_errf(e, VD_EINTERNAL, "loss layer has no resident aux at the last step");
    if ((rc = be->copy_async(be, VD_STREAM_D2H, ex->loss_host, aux, 4u, e))) return rc;
    if (want_y) {
        void *y = taddr(ex, p, ll->y, last);
        if (!y) return vd_errf(e, VD_EINTERNAL, "loss output not resident at the last step");
        if ((rc = be->copy_async(be, VD_STREAM_D2H, ex->eval_y, y, (uint64_t)ex->y_floats * ex->act_bytes, e)))
            return rc;
    }
    if ((rc = be->event_record(be, p->ev_loss, VD_STREAM_D2H, e))) return rc;
    return be->event_sync(be, p->ev_loss, e);
}

/* opts.step_times, after a training pass: each copy it issued, its start
 * and end in ms from event ev (the pass's start on the compute stream). The
 * staging copy may still run: every end is waited for first. */
static int copy_times(vd_exec *ex, const vd_plan *p, int ev, vd_err *e) {
    vd_backend *be = ex->be;
    int n = 0, rc;
    for (int c = 0; c < p->n_tensors + p->n_intervals; c++) {
        if (!ex->copy_issued[c]) continue;
        bool h2d = c >= p->n_tensors;
        int k = h2d ? c - p->n_tensors : -1;
        int t = h2d ? p->intervals[k].tensor : c;
        int end = h2d ? p->intervals[k].ev_h2d : p->tensors[t].ev_d2h;
        float a = 0.0f, b = 0.0f;
        if ((rc = be->event_sync(be, end, e)) ||
            (rc = be->event_elapsed(be, ev, ex->ev_copy + c, &a, e)) ||
            (rc = be->event_elapsed(be, ev, end, &b, e)))
            return rc;
        ex->copy_times[n++] = (vd_exec_copy_time){.tensor = t, .interval = k, .h2d = h2d,
                                                  .start_ms = a, .end_ms = b};
    }
    ex->n_copy_times = n;
    return VD_OK;
}

int vd_exec_copy_times(const vd_exec *ex, const vd_exec_copy_time **ct) {
    ex = LEAD(ex);
    *ct = ex->copy_times;
    return ex->n_copy_times;
}

/* run_step, then the caller's after_step hook (if any). */
static int step_hooked(vd_exec *ex, const vd_plan *p, vd_op_io *io, int s, float lr,
                       int64_t iter, bool eval, walk_stats *w, vd_err *e) {
    int rc = run_step(ex, p, io, s, lr, iter, w, e);
    if (!rc && ex->opts.after_step) ex->opts.after_step(ex->opts.after_step_ctx, s, eval);
    return rc;
}

/* Math fp16: the loss scale's state after step iter, read where the loss
 * was (the compute stream has finished the step); a step the backend
 * skipped did not count as an SGD update. VD_ENUMERIC when the run cannot
 * go on: VD_LOSS_SCALE_MAX_STREAK skipped steps in a row, or the scale
 * under VD_LOSS_SCALE_MIN. */
static int read_loss_scale(vd_exec *ex, int64_t iter, vd_err *e) {
    int64_t skipped = ex->ls.skipped;
    int rc = ex->be->scale_get(ex->be, &ex->ls, e);
    if (rc) return rc;
    if (ex->ls.skipped == skipped) {
        ex->sgd_steps++;
        ex->first_pending = false;
    }
    if (ex->ls.streak < VD_LOSS_SCALE_MAX_STREAK && ex->ls.scale >= VD_LOSS_SCALE_MIN) return VD_OK;
    int bad = ex->ls.first_bad;
    const char *name = bad >= 0 && bad < ex->net->n_layers ? ex->net->layers[bad].name : "?";
    char why[96];
    if (ex->ls.streak >= VD_LOSS_SCALE_MAX_STREAK)
        snprintf(why, sizeof why, "the gradients overflowed in %d steps in a row",
                 (int)ex->ls.streak);
    else
        snprintf(why, sizeof why, "the loss scale fell below 2^-24");
    return vd_errf(e, VD_ENUMERIC, "math fp16: %s (iteration %lld, loss scale %g, %lld steps "
                   "skipped in all); the first layer whose gradient was not finite: '%s'. Lower "
                   "--lr, or train in bf16 or fp32", why, (long long)iter + 1,
                   (double)ex->ls.scale, (long long)ex->ls.skipped, name);
}

int vd_exec_train_step(vd_exec *ex, float lr, int64_t iter, float *loss, vd_err *e) {
    if (ex->grp) return vdx_group_train_step(ex->grp, lr, iter, loss, e);
    if (!ex->state_set)
        return vd_errf(e, VD_EINTERNAL, "vd_exec_train_step before vd_exec_set_state");
    const vd_plan *p = ex->plan;
    double t0 = vd_now();
    walk_stats w = {0};
    int rc, ev = ex->ev_steps;
    vd_backend *be = ex->be;
    /* input staging: start from the batch the previous step staged (if it
     * did and nothing dropped it since); stage the next one if it is ready */
    w.x_iv = -1;
    w.load_staged = ex->staged && p->t_stage >= 0;
    if (w.load_staged) w.x_iv = p->tensors[p->t_x].iv[0];
    w.stage_next = ex->next_ready && p->t_stage >= 0;
    bool swap = ex->next_ready;
    ex->staged = false;
    ex->next_ready = false;
    if (ev >= 0 && (rc = be->event_record(be, ev, VD_STREAM_COMPUTE, e))) return rc;
    if (ex->ev_copy >= 0)
        memset(ex->copy_issued, 0, ((size_t)p->n_tensors + (size_t)p->n_intervals) * sizeof *ex->copy_issued);
    for (int s = 0; s < p->n_steps; s++) {
        if ((rc = step_hooked(ex, p, ex->io, s, lr, iter, false, &w, e))) return rc;
        if (ev >= 0 && (rc = be->event_record(be, ev + 1 + s, VD_STREAM_COMPUTE, e))) return rc;
    }
    if ((rc = readback(ex, p, false, e))) return rc;
    if ((rc = step_hooked(ex, p, ex->io, p->n_steps, lr, iter, false, &w, e))) return rc;
    if (ev >= 0) {
        /* the loss readback waited for the compute stream: every event done */
        for (int s = 0; s < p->n_steps; s++) {
            float ms = 0.0f;
            if ((rc = be->event_elapsed(be, ev, ev + 1 + s, &ms, e))) return rc;
            ex->step_end_ms[s] = ms;
        }
        ex->n_step_times = p->n_steps;
        if ((rc = copy_times(ex, p, ev, e))) return rc;
    }
    if (w.live != 0)
        return vd_errf(e, VD_EINTERNAL, "executor: %llu bytes still live after the iteration",
                       (unsigned long long)w.live);
    if (swap && !w.stage_failed) {
        /* the look-ahead batch becomes the current one (staged on the device) */
        void *tx = ex->in_x; ex->in_x = ex->nx_x; ex->nx_x = tx;
        int32_t *tl = ex->in_labels; ex->in_labels = ex->nx_labels; ex->nx_labels = tl;
        bool ts = ex->in_synth; ex->in_synth = ex->nx_synth; ex->nx_synth = ts;
        vd_synth_batch tb = ex->in_sb; ex->in_sb = ex->nx_sb; ex->nx_sb = tb;
    }
    if (w.load_staged) { ex->st.staged_loads++; ex->stage_inflight = false; }
    if (w.stage_next) ex->staged = ex->stage_inflight = true;
    if (w.peak > ex->st.live_peak) ex->st.live_peak = w.peak;
    if (w.hwm > ex->st.pool_hwm) ex->st.pool_hwm = w.hwm;
    ex->st.offload_bytes_iter = w.d2h;
    ex->st.prefetch_bytes_iter = w.h2d;
    ex->st.recompute_ops_iter = w.rc_ops;
    ex->st.last_iter_s = vd_now() - t0;
    ex->st.train_steps++;
    *loss = *ex->loss_host;
    if (ex->fp16 && (rc = read_loss_scale(ex, iter, e))) return rc;
    if (!isfinite(*loss))
        return vd_errf(e, VD_ENUMERIC, "loss is %s at iteration %lld", isnan(*loss) ? "NaN" : "infinite",
                       (long long)iter);
    return VD_OK;
}

int vd_exec_eval_step(vd_exec *ex, int *correct, float *loss, vd_err *e) {
    if (ex->grp) return vdx_group_eval_step(ex->grp, correct, loss, e);
    if (!ex->state_set)
        return vd_errf(e, VD_EINTERNAL, "vd_exec_eval_step before vd_exec_set_state");
    const vd_plan *p = ex->eval;
    walk_stats w = {0};
    w.x_iv = -1;
    int rc;
    /* the evaluation placement may reuse the staging region: a staging copy
     * still in flight must land first, and the staged batch is gone */
    if (ex->stage_inflight) {
        if ((rc = ex->be->stream_wait(ex->be, VD_STREAM_COMPUTE, ex->ev_stage, e))) return rc;
        ex->stage_inflight = false;
    }
    ex->staged = false;
    for (int s = 0; s < p->n_steps; s++)
        if ((rc = step_hooked(ex, p, ex->eval_io, s, 0.0f, 0, true, &w, e))) return rc;
    if ((rc = readback(ex, p, true, e))) return rc;
    if ((rc = step_hooked(ex, p, ex->eval_io, p->n_steps, 0.0f, 0, true, &w, e))) return rc;
    if (w.peak > ex->st.eval_live_peak) ex->st.eval_live_peak = w.peak;
    if (w.hwm > ex->st.eval_pool_hwm) ex->st.eval_pool_hwm = w.hwm;
    int64_t per = vd_net_out_numel(ex->net, p->loss_layer);
    int hits = 0;
    for (int n = 0; n < p->batch; n++) {
        int64_t best = 0;
        vd_dtype dt = vd_math_act_dtype(ex->opts.math);
        if (dt != VD_DT_F32) {   /* 16-bit probabilities: compare their float values */
            const uint16_t *row = (const uint16_t *)ex->eval_y + (int64_t)n * per;
            for (int64_t k = 1; k < per; k++)
                if (vd_h16_to_f32(dt, row[k]) > vd_h16_to_f32(dt, row[best])) best = k;
        } else {
            const float *row = (const float *)ex->eval_y + (int64_t)n * per;
            for (int64_t k = 1; k < per; k++)
                if (row[k] > row[best]) best = k;
        }
        if (best == ex->in_labels[n]) hits++;
    }
    *correct = hits;
    *loss = *ex->loss_host;
    ex->st.eval_steps++;
    return VD_OK;
}

int vd_exec_step_times(const vd_exec *ex, const double **end_ms) {
    ex = LEAD(ex);
    *end_ms = ex->step_end_ms;
    return ex->n_step_times;
}

void vd_exec_get_stats(const vd_exec *ex, vd_exec_stats *st) {
    ex = LEAD(ex);
    *st = ex->st;
    st->sgd_steps = ex->sgd_steps;
}
