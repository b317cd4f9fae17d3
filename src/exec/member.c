/* member.c — one device's executor (an executor's member, exec.c): walks a
 * plan's per-step actions on one backend. It knows nothing of ranks: exec.c
 * runs each member on its rank's thread and combines their results.
 *
 * Everything is allocated in vdx_member_create: the pinned host store for
 * offloaded tensors and the pinned input / loss / eval-output buffers, then
 * (after opts.before_pool) the pool (exactly the plan's budget), the events,
 * and one vd_op_io per step and per RECOMPUTE action (pointers into the pool
 * computed from the plan's offsets; a recompute's operands are the layer's
 * forward operands at the step where it runs, its workspace the layer's
 * ws_rc). vdx_member_train_step only issues work: compute, copies on the D2H /
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
 * staged batch, as do set_state and vdx_member_drop_staged.
 *
 * Synthetic input (vdx_member_input_synth / vdx_member_next_synth): where x
 * would be copied from a pair's pinned buffer (its load, a re-load after an
 * offload, the staging copy), be->fill_synthetic generates it from the
 * pair's batch description instead, on the same stream: no host bytes. The
 * current pair's batch goes through the backend's synthetic slot
 * SLOT_INPUT, the look-ahead pair's through SLOT_STAGE (backend.h), so that
 * a captured fill reads its indices at each launch (synth_set).
 *
 * Measured statistics are tracked while walking, independently of the plan's
 * own arithmetic: bytes live (+ at ALLOC, - at FREE), their maximum at each
 * COMPUTE, and max(offset + size) at each ALLOC.
 *
 * Step scalars: what changes from one training step to the next (the
 * learning rate, the update's number t, dropout's iteration) reaches the
 * backend once per step through be->step_set, the step's first work; the
 * update reads each range's lr_mult from a table made at setup
 * (be->ranges_create). So a step's calls are the same every step but for
 * the host-side choices below, and the step can be captured.
 *
 * Captured iterations (opts.graph, be->capture_begin): a training step's
 * issued work, from step_set to the SGD step, is captured once into a graph
 * and replayed (be->graph_launch) at later steps that make the same
 * host-side choices (graph_key: whether x was staged, whether the next
 * batch is staged, which pinned pair is current, a synthetic pair's batch
 * description but not its samples, which each launch writes into the slots
 * first: be->synth_set); the first step with a given key runs eagerly, the
 * next one with it is captured and launched, later ones replay. The loss readback
 * stays outside (its host wait cannot be captured). A captured step calls
 * the stage hook before anything is issued (the staging copy in the graph
 * reads the look-ahead buffers) and opts.after_step only at the pass's end
 * (the end step's actions, after the readback, run eagerly in every step).
 * Steps that cannot be captured run eagerly: see graph_eligible. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "exec/exec.h"
#include "exec/member.h"
#include "plan/plan.h"

struct vdx_member {
    const vd_net *net;
    const vd_plan *plan;
    const vd_plan *eval;        /* plan->eval (forward-only placement); a forward-only
                                   plan (inference) is its own */
    vd_backend *be;
    vd_exec_opts opts;
    char *pool;                 /* device: [plan->budget] */
    char *host_store;           /* pinned: [plan->host_bytes] (NULL if 0) */
    void *in_x;                 /* pinned: [batch, in_c, in_h, in_w] (current), float or
                                   16-bit (act_bytes) */
    int32_t *in_labels;         /* pinned: [batch] (current) */
    void *nx_x;                 /* pinned look-ahead x (plan stages), else NULL */
    int32_t *nx_labels;         /* pinned look-ahead labels (plan stages), else NULL */
    /* synthetic input generated on the device (vdx_member_input_synth): per
     * pair, whether its x is made by be->fill_synthetic from its batch
     * description instead of copied from in_x / nx_x; the index arrays
     * ([batch] each) move with the pairs */
    bool in_synth, nx_synth;
    vd_synth_batch in_sb, nx_sb;
    bool next_ready;            /* vdx_member_next_ready since the last training step */
    int (*stage_hook)(void *ctx);    /* vdx_member_set_stage_hook */
    void *stage_hook_ctx;
    bool staged;                /* the staging region holds the current buffers' batch */
    bool stage_inflight;        /* a staging copy may not have been waited for yet */
    int ev_stage;               /* the staging copy's H2D event (-1: no staging) */
    float *loss_host;           /* pinned: [2] the loss layer's aux: mean loss, top-1 hits */
    void *eval_y;               /* pinned: [batch, classes], float or 16-bit */
    int64_t x_floats, y_floats; /* elements of x and of the loss layer's output */
    uint64_t act_bytes;         /* bytes per feature-map element (vd_math_act_bytes) */
    vd_op_io *io;               /* [plan->n_steps] */
    vd_op_io *eval_io;          /* [eval->n_steps] */
    vd_op_io *rc_io;            /* [plan->n_recompute_ops], in action order */
    int n_rc;
    int n_ranges;
    int64_t *r_off, *r_cnt;     /* trained ranges, in floats */
    float *r_mult;              /* [n_ranges] their layers' lr_mult (vd_layer_lr_mult) */
    void *r_table;              /* be->ranges_create of the trained ranges (sgd_step) */
    void **u_table;             /* [plan->n_units] update_in_bwd: unit u's update ranges,
                                   relative to its dw_base (NULL: the unit updates none) */
    /* captured iterations (opts.graph): the graphs and the keys of recent
     * eager steps that may be captured (graph_key) */
    struct graph_slot *graphs;  /* [VDX_GRAPHS] */
    struct graph_key *seen;     /* [VDX_SEEN] */
    int n_graphs, n_seen;
    int64_t graph_launches;     /* steps run by replaying a graph */
    int64_t graph_captures;     /* steps that captured one */
    /* math fp16 (loss scaling, backend.h): the gradient ranges checked for
     * inf/NaN, one per layer with trainable parameters, in backward order
     * (highest layer index first), and the state as last read back */
    bool fp16;
    int n_checks;
    int64_t *c_off, *c_cnt;     /* [n_checks] in floats */
    int *c_layer;               /* [n_checks] the layer owning each */
    vd_loss_scale ls;
    bool state_set;
    bool first_pending;         /* the next update is the optimizer's first (t = 1) */
    int64_t sgd_steps;          /* updates applied (t of the next one: sgd_steps + 1) */
    vd_exec_stats st;
    int ev_steps;               /* opts.step_times: first of n_steps + 1 events, else -1 */
    int ev_drain;               /* vdx_member_drain's event */
    double *step_end_ms;        /* [n_steps], see vd_exec_step_times */
    int n_step_times;
    int ev_copy;                /* opts.step_times: first of 2 x (n_tensors + n_intervals) events
                                   recorded as each copy starts (D2H per tensor, then H2D
                                   per interval), then as each ends, else -1 */
    bool *copy_issued;          /* [n_tensors + n_intervals]: started this pass */
    vd_exec_copy_time *copy_times;   /* [n_tensors + n_intervals], see vd_exec_copy_times */
    int n_copy_times;
    vd_dp_layout dp;            /* opts.allreduce: the gradient buckets */
    int *run_algo;              /* [2 x net layers]: the backend's option each layer's
                                   forward (and recompute, evaluation) and backward
                                   run, the plan's found by label (check_plan) */
};

/* Captured iterations' slots, made at creation and freed at destroy (below). */
static int graphs_create(vdx_member *m, vd_err *e);
static void graphs_free(vdx_member *m);

static char *iv_addr(const vdx_member *m, const vd_interval *iv) { return m->pool + iv->offset; }

/* Device address of tensor t at step s in plan p, or NULL if not resident. */
static void *taddr(const vdx_member *m, const vd_plan *p, int t, int s) {
    const vd_interval *iv = vd_plan_resident(p, t, s);
    return iv ? iv_addr(m, iv) : NULL;
}

/* The address of unit u's operand t at step s: taddr at u's slice of a
 * whole-batch tensor (vd_plan_operand). */
static void *uaddr(const vdx_member *m, const vd_plan *p, int u, int t, int s) {
    char *a = taddr(m, p, t, s);
    return a ? a + vd_plan_operand(p, u, t) : NULL;
}

/* The batch norm + add fusion (vd_plan_layer.bn_unit, vd_op_io.bn_stats):
 * a folded batch norm's forward computes its statistics alone; the add that
 * applies it gets its statistics (aux, live at the add's step) and
 * parameters. */
static void fill_bn_fold(const vdx_member *m, const vd_plan *p, int u, int s, vd_op_io *io) {
    const vd_net *net = m->net;
    const vd_plan_layer *pl = &p->layers[u];
    if (pl->inplace && net->layers[pl->layer].op == VD_OP_BATCHNORM) io->bn_stats = true;
    if (pl->bn_unit < 0) return;
    const vd_plan_layer *bl = &p->layers[pl->bn_unit];
    /* (the plan's pair, vd_op_bn_folded; anything else binds nothing, and the
     * add then sums the batch norm's unwritten output: test_bn_add_fused) */
    if (vd_op_bn_folded(net, pl->layer) != bl->layer || !bl->inplace) return;
    const vd_layer *la = &net->layers[pl->layer], *lb = &net->layers[bl->layer];
    for (int k = 0; k < la->n_in; k++)
        if (la->in[k] == bl->layer) io->bn_k = k;
    io->bn_aux = bl->aux >= 0 ? taddr(m, p, bl->aux, s) : NULL;
    const float *params = taddr(m, p, p->t_params, s);
    for (int k = 0; k < lb->n_params; k++) {
        const vd_param *pr = &net->params[lb->param_first + k];
        if (pr->role == VD_ROLE_BN_SCALE) io->bn_w = params + pr->offset;
        if (pr->role == VD_ROLE_BN_SHIFT) io->bn_b = params + pr->offset;
    }
}

/* Operands of unit u's forward (bwd false) or backward at step s of plan p,
 * with workspace tensor wst (-1 none). */
static void fill_io_at(const vdx_member *m, const vd_plan *p, int u, int s, bool bwd, int wst,
                       vd_op_io *io) {
    const vd_net *net = m->net;
    const vd_plan_layer *pl = &p->layers[u];
    int i = pl->layer;
    memset(io, 0, sizeof *io);
    io->n = pl->n;
    if (pl->n_chunks > 1) {
        io->n0 = pl->n0;
        io->n_batch = p->batch;
        io->dw_beta = pl->dw_beta;
    }
    io->seed = vd_exec_rank_seed(net->train.seed, m->opts.rank);
    io->act = vd_math_act_dtype(m->opts.math);
    const vd_layer *l = &net->layers[i];
    for (int k = 0; k < l->n_in; k++) {
        io->x[k] = uaddr(m, p, u, pl->in_t[k], s);
        if (bwd) {
            io->dx[k] = pl->dx[k] >= 0 ? uaddr(m, p, u, pl->dx[k], s) : NULL;
            io->dx_beta[k] = pl->dx_beta[k];
        }
    }
    io->y = uaddr(m, p, u, pl->y, s);
    if (bwd && pl->dy >= 0) io->dy = uaddr(m, p, u, pl->dy, s);
    if (pl->aux >= 0) io->aux = taddr(m, p, pl->aux, s);
    if (i == p->loss_layer) io->labels = taddr(m, p, p->t_labels, s);
    /* math fp16: the loss's gradient is multiplied by the loss scale */
    io->loss_scaled = bwd && i == p->loss_layer && io->act == VD_DT_F16;
    /* per pass: the backward call may use another option than forward /
     * recompute, with its own workspace */
    if (wst >= 0) {
        io->ws = taddr(m, p, wst, s);
        io->ws_bytes = bwd ? pl->ws_bwd_bytes : pl->ws_fwd_bytes;
    }
    io->algo = m->run_algo[2 * i + bwd];
    io->training = !p->forward_only;
    float *params = taddr(m, p, p->t_params, s);
    float *grads = p->t_grads >= 0 ? taddr(m, p, p->t_grads, s) : NULL;
    /* the update in the backward pass: the layer's own gradient tensor */
    float *lg = bwd && pl->dw >= 0 ? taddr(m, p, pl->dw, s) : NULL;
    for (int k = 0; k < l->n_params; k++) {
        const vd_param *pr = &net->params[l->param_first + k];
        float *pp = params + pr->offset;
        float *gg = grads ? grads + pr->offset : lg ? lg + (pr->offset - pl->dw_base) : NULL;
        /* a frozen parameter: no gradient (the backends then compute none) */
        vd_op_io_bind_param(io, pr->role, pp, bwd && !pr->frozen ? gg : NULL);
    }
    if (!bwd) {
        fill_bn_fold(m, p, u, s, io);
        return;
    }
    /* the ReLU backward + conv bias gradient pair (vd_plan_layer.db_unit):
     * the ReLU gets its conv's db, in the conv's gradient tensor, live from
     * the ReLU's step; the conv is told */
    /* the max pool + ReLU backward pair (vd_plan_layer.takes_relu): the pool
     * takes the ReLU's backward, with its conv's db where the ReLU has it;
     * the ReLU is told */
    int dbu = pl->db_unit;
    if (pl->takes_relu) {
        io->relu_dx = true;
        dbu = p->layers[u - 1].db_unit;
    }
    /* the batch norm + add + ReLU backward pair (vd_plan_layer.takes_add_relu):
     * the batch norm takes the ReLU's backward, reading its y; the ReLU is
     * told */
    if (pl->takes_add_relu) io->relu_y = uaddr(m, p, u, p->layers[u + 2].y, s);
    io->bwd_done = vd_plan_unit_taken(p, u);
    if (dbu >= 0) {
        const vd_plan_layer *cl = &p->layers[dbu];
        const vd_layer *lc = &net->layers[cl->layer];
        float *cg = p->t_grads >= 0 ? NULL : taddr(m, p, cl->dw, s);
        for (int k = 0; k < lc->n_params; k++) {
            const vd_param *pr = &net->params[lc->param_first + k];
            if (pr->role != VD_ROLE_BIAS) continue;
            io->bias_db = grads ? grads + pr->offset : cg ? cg + (pr->offset - cl->dw_base) : NULL;
        }
    }
    io->db_taken = u + 1 < p->n_units && p->layers[u + 1].db_unit == u;
}

/* Fill the vd_op_io of step s of plan p. */
static void fill_io(const vdx_member *m, const vd_plan *p, int s, vd_op_io *io) {
    const vd_step *st = &p->steps[s];
    if (st->kind == VD_STEP_SGD || st->kind == VD_STEP_END) {
        memset(io, 0, sizeof *io);
        io->n = p->batch;
        io->seed = vd_exec_rank_seed(m->net->train.seed, m->opts.rank);
        return;
    }
    const vd_plan_layer *pl = &p->layers[st->unit];
    bool bwd = st->kind == VD_STEP_BWD;
    fill_io_at(m, p, st->unit, s, bwd, bwd ? pl->ws_bwd : pl->ws_fwd, io);
}

/* Operands of every RECOMPUTE action of plan p, in action order. A missing
 * operand is a plan bug: VD_EINTERNAL naming it. */
static int fill_rc_io(vdx_member *m, const vd_plan *p, vd_err *e) {
    int k = 0;
    for (int s = 0; s < p->n_steps; s++) {
        const vd_step *st = &p->steps[s];
        for (int a = st->first_action; a < st->first_action + st->n_actions; a++) {
            if (p->actions[a].kind != VD_A_RECOMPUTE) continue;
            int j = p->actions[a].arg;
            const vd_plan_layer *pl = &p->layers[j];
            const vd_layer *l = &m->net->layers[pl->layer];
            if (k >= m->n_rc || pl->rc_step != s)
                return vd_errf(e, VD_EINTERNAL, "plan: recompute of '%s' at step %d is inconsistent",
                               l->name, s);
            vd_op_io *io = &m->rc_io[k++];
            fill_io_at(m, p, j, s, false, pl->ws_rc, io);
            io->training = true;
            io->recompute = true;
            bool ok = io->y != NULL && (!pl->ws_fwd_bytes || io->ws != NULL);
            for (int i = 0; i < l->n_in; i++) ok &= io->x[i] != NULL;
            if (!ok)
                return vd_errf(e, VD_EINTERNAL, "plan: an operand of the recompute of '%s' is not "
                               "resident at step %d", l->name, s);
        }
    }
    if (k != m->n_rc)
        return vd_errf(e, VD_EINTERNAL, "plan: %d recompute actions, %d expected", k, m->n_rc);
    return VD_OK;
}

/* Whether plan suits be, and the backend's option of each layer and pass
 * (run_algo, [2 x layers]: the option of the label the plan chose). */
static int check_plan(const vd_net *net, const vd_plan *plan, vd_backend *be, int *run_algo,
                      vd_err *e) {
    if (!plan->feasible)
        return vd_errf(e, VD_EBUDGET, "the plan does not fit its budget%s%s",
                       plan->note[0] ? ": " : "", plan->note);
    if (!plan->forward_only && !plan->eval)
        return vd_errf(e, VD_EINTERNAL, "executor needs a training plan with its evaluation "
                       "plan, or a forward-only plan");
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
        const vd_plan_layer *pl = &plan->layers[plan->first_unit[i]];
        /* each pass that runs (a forward-only plan, or a layer without
         * backward: forward alone; the other pass gets forward's option):
         * its option exists and gets at least the backend's workspace for
         * that pass (its chunks', when it is split, share its options and
         * workspaces), but a split convolution's: its chunks get what their
         * timing used (vd_profile_chunk_ws), where a plan built for the
         * chunk's batch runs (the setup engine where it fits, else the
         * heuristics' first that does) */
        const bool chunk_ws = pl->n_chunks > 1 && net->layers[i].op == VD_OP_CONV;
        for (int pass = 0; pass < 2; pass++) {
            bool runs = pass == 0 || !(plan->forward_only || net->layers[i].no_grad);
            int a = pass ? pl->algo_bwd : pl->algo_fwd;
            uint64_t ws = pass ? pl->ws_bwd_bytes : pl->ws_fwd_bytes;
            const char *pn = pass ? "backward" : "forward";
            const char *want = pass ? pl->algo_bwd_label : pl->algo_label;
            if (!runs) {
                run_algo[2 * i + pass] = run_algo[2 * i];
                continue;
            }
            /* the plan's option runs as the backend's of its label: a
             * profile saved by another process lists what its tuning kept,
             * in its order; another build, cuDNN, device or conv API choice
             * can offer none of that label */
            int b = vd_algo_find(opts, n, want, a);
            if (b < 0 && want[0])
                return vd_errf(e, VD_EUNSUPPORTED, "plan chose %s option %d ('%s') for layer '%s' "
                               "but the %s backend offers no option '%s': the profile comes from "
                               "another setup; measure it again (without --profile)", pn, a, want,
                               net->layers[i].name, be->name, want);
            if (b < 0)
                return vd_errf(e, VD_EDATA, "the plan chose %s option %d for layer '%s' but "
                               "the %s backend offers options 0..%d: the profile (--profile) "
                               "comes from another setup or was edited; measure it again (drop "
                               "--profile)", pn, a, net->layers[i].name, be->name, n - 1);
            run_algo[2 * i + pass] = b;
            uint64_t need = vd_algo_ws(&opts[b], pass == 1);
            if (ws < need && !chunk_ws)
                return vd_errf(e, VD_EDATA, "the profile gives layer '%s' %llu bytes of %s "
                               "workspace, but the %s backend's algorithm '%s' needs %llu: the "
                               "profile (--profile) comes from another setup or was edited; "
                               "measure it again (drop --profile) or raise \"%s\" of its "
                               "layer '%s', option %d, to at least %llu", net->layers[i].name,
                               (unsigned long long)ws, pn, be->name, opts[b].label,
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

/* One pinned host buffer (*p NULL when it fails). */
static int pinned(vd_backend *be, uint64_t bytes, void **p, vd_err *e) {
    int rc = be->host_alloc(be, bytes, p, e);
    if (rc) *p = NULL;
    return rc;
}

/* The pinned host buffers, in this order: the host store, the current input
 * pair, the loss and the evaluation output, the look-ahead pair (the plan
 * stages); then the synthetic batches' index arrays. */
static int host_buffers(vdx_member *m, vd_err *e) {
    vd_backend *be = m->be;
    const vd_plan *plan = m->plan;
    m->x_floats = (int64_t)plan->batch * vd_net_out_numel(m->net, -1);
    m->y_floats = (int64_t)plan->batch * vd_net_out_numel(m->net, plan->loss_layer);
    m->act_bytes = vd_math_act_bytes(m->opts.math);
    uint64_t xb = (uint64_t)m->x_floats * m->act_bytes, lb = (uint64_t)plan->batch * 4u;
    int rc;
    if (plan->host_bytes && (rc = pinned(be, plan->host_bytes, (void **)&m->host_store, e)))
        return rc;
    if ((rc = pinned(be, xb, &m->in_x, e)) || (rc = pinned(be, lb, (void **)&m->in_labels, e)) ||
        (rc = pinned(be, 8u, (void **)&m->loss_host, e)) ||
        (rc = pinned(be, (uint64_t)m->y_floats * m->act_bytes, &m->eval_y, e)))
        return rc;
    memset(m->in_x, 0, (size_t)xb);
    memset(m->in_labels, 0, (size_t)lb);
    m->ev_stage = -1;
    if (plan->t_stage >= 0) {
        if ((rc = pinned(be, xb, &m->nx_x, e)) || (rc = pinned(be, lb, (void **)&m->nx_labels, e)))
            return rc;
        memset(m->nx_x, 0, (size_t)xb);
        memset(m->nx_labels, 0, (size_t)lb);
        m->ev_stage = plan->intervals[plan->tensors[plan->t_stage].iv[1]].ev_h2d;
    }
    if (vdx_member_can_synth(m)) {
        m->in_sb.index = vd_calloc((size_t)plan->batch, sizeof(int64_t), e);
        m->nx_sb.index = vd_calloc((size_t)plan->batch, sizeof(int64_t), e);
        if (!m->in_sb.index || !m->nx_sb.index) return VD_ENOMEM;
    }
    return VD_OK;
}

/* The backend's events: the plans' (the larger set of the two); with
 * opts.step_times one at the start of a training pass, one after each step
 * and one as each copy starts and ends (timing marks: see mark); then
 * vdx_member_drain's. */
static int create_events(vdx_member *m, vd_err *e) {
    const vd_plan *plan = m->plan;
    int n_ev = plan->n_events > m->eval->n_events ? plan->n_events : m->eval->n_events;
    m->ev_steps = -1;
    m->ev_copy = -1;
    if (m->opts.step_times) {
        m->ev_steps = n_ev;
        n_ev += plan->n_steps + 1;
        m->step_end_ms = vd_calloc((size_t)plan->n_steps, sizeof *m->step_end_ms, e);
        if (!m->step_end_ms) return VD_ENOMEM;
        size_t nc = (size_t)plan->n_tensors + (size_t)plan->n_intervals;
        m->ev_copy = n_ev;
        n_ev += 2 * (int)nc;
        m->copy_issued = vd_calloc(nc ? nc : 1, sizeof *m->copy_issued, e);
        m->copy_times = vd_calloc(nc ? nc : 1, sizeof *m->copy_times, e);
        if (!m->copy_issued || !m->copy_times) return VD_ENOMEM;
    }
    m->ev_drain = n_ev++;
    return m->be->events_create(m->be, n_ev, e);
}

/* opts.step_times: the timing event of copy c (tensor c's offload, or
 * interval c - n_tensors' fill) as it starts (end false) or ends. */
static int copy_ev(const vdx_member *m, const vd_plan *p, int c, bool end) {
    return m->ev_copy + c + (end ? p->n_tensors + p->n_intervals : 0);
}

/* opts.step_times: records timing event ev on stream, a node of the graph
 * when the step is being captured (backend.h's event_mark), so that a
 * replayed iteration is timed as it runs. */
static int mark(vdx_member *m, int ev, int stream, vd_err *e) {
    vd_backend *be = m->be;
    return be->event_mark ? be->event_mark(be, ev, stream, e) : be->event_record(be, ev, stream, e);
}

/* The operands of every step of both plans and of the training plan's
 * RECOMPUTE actions. */
static int create_io(vdx_member *m, vd_err *e) {
    const vd_plan *plan = m->plan;
    m->io = vd_calloc((size_t)plan->n_steps, sizeof *m->io, e);
    m->eval_io = vd_calloc((size_t)m->eval->n_steps, sizeof *m->eval_io, e);
    if (!m->io || !m->eval_io) return VD_ENOMEM;
    for (int s = 0; s < plan->n_steps; s++) fill_io(m, plan, s, &m->io[s]);
    for (int s = 0; s < m->eval->n_steps; s++) fill_io(m, m->eval, s, &m->eval_io[s]);
    m->n_rc = plan->n_recompute_ops;
    if (m->n_rc > 0) {
        m->rc_io = vd_calloc((size_t)m->n_rc, sizeof *m->rc_io, e);
        if (!m->rc_io) return VD_ENOMEM;
    }
    int rc = fill_rc_io(m, plan, e);
    if (!rc && m->eval->n_recompute_ops)
        rc = vd_errf(e, VD_EINTERNAL, "the evaluation plan has recompute actions");
    return rc;
}

/* update_in_bwd: each updating unit's table (ranges_create) of its layer's
 * runs of adjacent trained parameters, at offsets from its dw_base and at
 * the layer's lr_mult. */
static int unit_tables(vdx_member *m, vd_err *e) {
    const vd_net *net = m->net;
    const vd_plan *p = m->plan;
    m->u_table = vd_calloc((size_t)(p->n_units ? p->n_units : 1), sizeof *m->u_table, e);
    if (!m->u_table) return VD_ENOMEM;
    for (int u = 0; u < p->n_units; u++) {
        const vd_plan_layer *pl = &p->layers[u];
        const vd_layer *l = &net->layers[pl->layer];
        if (pl->dw < 0 || !pl->update) continue;
        vd_update_range *r = vd_calloc((size_t)l->n_params, sizeof *r, e);
        if (!r) return VD_ENOMEM;
        int n = 0;
        float mult = vd_layer_lr_mult(l);
        for (int k = l->param_first; k < l->param_first + l->n_params; k++) {
            const vd_param *pr = &net->params[k];
            if (!vd_param_trained(pr)) continue;
            int64_t off = pr->offset - pl->dw_base;
            if (n && r[n - 1].offset + r[n - 1].count == off) r[n - 1].count += pr->numel;
            else r[n++] = (vd_update_range){off, pr->numel, mult};
        }
        int rc = n ? m->be->ranges_create(m->be, r, n, &m->u_table[u], e) : VD_OK;
        vd_free(r);
        if (rc) return rc;
    }
    return VD_OK;
}

/* The trained ranges (maximal runs of adjacent trained params,
 * vd_param_trained, of one lr_mult) and math fp16's checked ranges (each
 * layer's adjacent trained parameters, layers in backward order). */
static int param_ranges(vdx_member *m, vd_err *e) {
    const vd_net *net = m->net;
    size_t np = (size_t)(net->n_params ? net->n_params : 1);
    m->r_off = vd_calloc(np, sizeof *m->r_off, e);
    m->r_cnt = vd_calloc(np, sizeof *m->r_cnt, e);
    m->r_mult = vd_calloc(np, sizeof *m->r_mult, e);
    m->c_off = vd_calloc(np, sizeof *m->c_off, e);
    m->c_cnt = vd_calloc(np, sizeof *m->c_cnt, e);
    m->c_layer = vd_calloc(np, sizeof *m->c_layer, e);
    if (!m->r_off || !m->r_cnt || !m->r_mult || !m->c_off || !m->c_cnt || !m->c_layer)
        return VD_ENOMEM;
    for (int k = 0; k < net->n_params; k++) {
        const vd_param *pr = &net->params[k];
        if (!vd_param_trained(pr)) continue;
        float mult = vd_layer_lr_mult(&net->layers[pr->layer]);
        int r = m->n_ranges - 1;
        if (r >= 0 && m->r_off[r] + m->r_cnt[r] == pr->offset && m->r_mult[r] == mult) {
            m->r_cnt[r] += pr->numel;
        } else {
            m->r_off[++r] = pr->offset;
            m->r_cnt[r] = pr->numel;
            m->r_mult[r] = mult;
            m->n_ranges++;
        }
    }
    if (!m->plan->forward_only) {
        vd_update_range *ur = vd_calloc(np, sizeof *ur, e);
        if (!ur) return VD_ENOMEM;
        for (int r = 0; r < m->n_ranges; r++)
            ur[r] = (vd_update_range){m->r_off[r], m->r_cnt[r], m->r_mult[r]};
        int rc = m->be->ranges_create(m->be, ur, m->n_ranges, &m->r_table, e);
        vd_free(ur);
        if (!rc && m->plan->update_in_bwd) rc = unit_tables(m, e);
        if (rc) return rc;
    }
    for (int i = net->n_layers - 1; i >= 0; i--) {
        const vd_layer *l = &net->layers[i];
        int first = m->n_checks;
        for (int k = l->param_first; k < l->param_first + l->n_params; k++) {
            const vd_param *pr = &net->params[k];
            if (!vd_param_trained(pr)) continue;
            int c = m->n_checks;
            if (c > first && m->c_off[c - 1] + m->c_cnt[c - 1] == pr->offset) {
                m->c_cnt[c - 1] += pr->numel;
            } else {
                m->c_off[c] = pr->offset;
                m->c_cnt[c] = pr->numel;
                m->c_layer[c] = i;
                m->n_checks++;
            }
        }
    }
    return VD_OK;
}

/* Math fp16 (loss scaling) and data parallel (the gradient buckets): what
 * each needs of the backend and the plan, and its starting state. */
static int setup_modes(vdx_member *m, vd_err *e) {
    vd_backend *be = m->be;
    const vd_plan *plan = m->plan;
    m->fp16 = m->opts.math == VD_MATH_FP16 && !plan->forward_only;
    m->ls = vd_loss_scale_init();
    if (m->fp16) {
        if (!be->scale_set || !be->scale_get || !be->grad_check || !be->update_scaled ||
            !be->scale_update)
            return vd_errf(e, VD_EUNSUPPORTED, "the %s backend has no loss scaling: it cannot "
                           "train in math fp16", be->name);
        if (m->opts.allreduce)
            return vd_errf(e, VD_EUNSUPPORTED, "data parallel training (--gpus, --mpi) in math "
                           "fp16 is not supported yet: its loss scale would have to agree "
                           "between the ranks; use bf16, or one device");
        if (plan->update_in_bwd)
            return vd_errf(e, VD_EINTERNAL, "math fp16 needs a plan with one gradient array "
                           "(vd_plan_grads_array): every gradient is checked before any update");
        int rc = be->scale_set(be, &m->ls, e);
        if (rc) return rc;
    }
    if (!m->opts.allreduce) return VD_OK;
    if (plan->update_in_bwd)
        return vd_errf(e, VD_EINTERNAL, "data parallel needs a plan with one gradient array "
                       "(vd_plan_opts.grads_persistent): the all-reduce averages it before "
                       "the update");
    return vd_dp_layout_build(m->net, plan, m->opts.bucket_bytes, &m->dp, e);
}

int vdx_member_create(vdx_member **out, const vd_net *net, const struct vd_plan *plan,
                      vd_backend *be, const vd_exec_opts *opts, vd_err *e) {
    *out = NULL;
    vdx_member *m = vd_calloc(1, sizeof *m, e);
    if (!m) return VD_ENOMEM;
    m->net = net;
    m->plan = plan;
    m->eval = plan->forward_only ? plan : plan->eval;
    m->be = be;
    if (opts) m->opts = *opts;
    m->st.pool_bytes = plan->budget;
    m->st.host_store_bytes = plan->host_bytes;
    m->first_pending = true;
    int rc = VD_OK;
    /* the plan sized every feature map for net->train.math; the backend
     * writes opts.math's elements (bf16, fp16: 2 bytes), so their types must
     * agree (fp32 and tf32 both store floats) */
    if (vd_math_act_dtype(m->opts.math) != vd_math_act_dtype(net->train.math)) {
        rc = vd_errf(e, VD_EINTERNAL, "executor math %s, but the plan's feature maps are for "
                     "math %s (net '%s', train.math)", vd_math_name(m->opts.math),
                     vd_math_name(net->train.math), net->name);
        goto fail;
    }
    if (!m->opts.layers_ready &&
        (rc = be->layer_setup(be, net, plan->batch, m->opts.math, m->opts.deterministic, e)))
        goto fail;
    m->run_algo = vd_malloc(2 * (size_t)net->n_layers * sizeof *m->run_algo, e);
    if (!m->run_algo) {
        rc = VD_ENOMEM;
        goto fail;
    }
    if ((rc = check_plan(net, plan, be, m->run_algo, e))) goto fail;
    /* Pinned host buffers first: pinning costs device memory too (the
     * driver's mappings), so the caller's before_pool sample sees all that
     * lives outside the pool. */
    if ((rc = host_buffers(m, e))) goto fail;
    if (m->opts.before_pool) m->opts.before_pool(m->opts.before_pool_ctx);
    if ((rc = be->pool_create(be, plan->budget, (void **)&m->pool, e))) {
        m->pool = NULL;
        goto fail;
    }
    if ((rc = create_events(m, e)) || (rc = create_io(m, e)) || (rc = param_ranges(m, e)) ||
        (rc = setup_modes(m, e)) || (rc = graphs_create(m, e)))
        goto fail;
    *out = m;
    return VD_OK;
fail:
    vdx_member_destroy(&m);
    return rc ? rc : VD_EINTERNAL;
}

void vdx_member_destroy(vdx_member **pm) {
    vdx_member *m = *pm;
    if (!m) return;
    vd_backend *be = m->be;
    if (m->pool || m->host_store) {
        vd_err e = {0};
        (void)be->synchronize(be, &e);   /* nothing may still read or write them */
    }
    if (m->eval_y) be->host_free(be, m->eval_y);
    if (m->loss_host) be->host_free(be, m->loss_host);
    if (m->in_labels) be->host_free(be, m->in_labels);
    if (m->in_x) be->host_free(be, m->in_x);
    if (m->nx_labels) be->host_free(be, m->nx_labels);
    if (m->nx_x) be->host_free(be, m->nx_x);
    if (m->host_store) be->host_free(be, m->host_store);
    if (m->pool) be->pool_destroy(be, m->pool);
    graphs_free(m);
    if (m->r_table) be->ranges_free(be, m->r_table);
    for (int u = 0; m->u_table && u < m->plan->n_units; u++)
        if (m->u_table[u]) be->ranges_free(be, m->u_table[u]);
    vd_free(m->u_table);
    vd_free(m->run_algo);
    vd_free(m->io);
    vd_free(m->eval_io);
    vd_free(m->rc_io);
    vd_free(m->r_off);
    vd_free(m->r_cnt);
    vd_free(m->r_mult);
    vd_free(m->c_off);
    vd_free(m->c_cnt);
    vd_free(m->c_layer);
    vd_free(m->step_end_ms);
    vd_free(m->copy_issued);
    vd_free(m->copy_times);
    vd_free(m->in_sb.index);
    vd_free(m->nx_sb.index);
    vd_dp_layout_free(&m->dp);
    vd_free(m);
    *pm = NULL;
}

int vdx_member_batch(const vdx_member *m) { return m->plan->batch; }

void *vdx_member_input_x(vdx_member *m) {
    m->in_synth = false;
    return m->in_x;
}
int32_t *vdx_member_input_labels(vdx_member *m) { return m->in_labels; }
void *vdx_member_next_x(vdx_member *m) {
    m->nx_synth = false;
    return m->nx_x;
}
int32_t *vdx_member_next_labels(vdx_member *m) { return m->nx_labels; }
vd_synth_batch *vdx_member_input_synth(vdx_member *m) {
    if (!m->in_sb.index) return NULL;
    m->in_synth = true;
    return &m->in_sb;
}
vd_synth_batch *vdx_member_next_synth(vdx_member *m) {
    if (!m->nx_sb.index || !m->nx_x) return NULL;
    m->nx_synth = true;
    return &m->nx_sb;
}
vd_dtype vdx_member_input_dtype(const vdx_member *m) { return vd_math_act_dtype(m->opts.math); }
bool vdx_member_input_nhwc(const vdx_member *m) { return vd_math_nhwc(m->opts.math); }
bool vdx_member_stages(const vdx_member *m) { return m->plan->t_stage >= 0; }
bool vdx_member_can_synth(const vdx_member *m) {
    return m->be->fill_synthetic != NULL && !m->opts.synth_host;
}
void vdx_member_next_ready(vdx_member *m) { m->next_ready = m->nx_x != NULL; }
void vdx_member_set_stage_hook(vdx_member *m, int (*fn)(void *ctx), void *ctx) {
    m->stage_hook = fn;
    m->stage_hook_ctx = ctx;
}
void vdx_member_drop_staged(vdx_member *m) { m->staged = false; }

int vdx_member_drain(vdx_member *m, vd_err *e) {
    int rc = m->be->event_record(m->be, m->ev_drain, VD_STREAM_COMPUTE, e);
    return rc ? rc : m->be->event_sync(m->be, m->ev_drain, e);
}

uint64_t vd_exec_rank_seed(uint64_t seed, int r) {
    return r == 0 ? seed : seed ^ ((uint64_t)r * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull);
}

static char *region(const vdx_member *m, int t) {
    const vd_plan *p = m->plan;
    return iv_addr(m, &p->intervals[p->tensors[t].iv[0]]);
}

/* Math fp16: a fresh loss scale, its `stepped` as first_pending says (the
 * optimizer's state started or not; a state file records it). */
static int reset_loss_scale(vdx_member *m, vd_err *e) {
    if (!m->fp16) return VD_OK;
    m->ls = vd_loss_scale_init();
    m->ls.stepped = !m->first_pending;
    return m->be->scale_set(m->be, &m->ls, e);
}

int vdx_member_set_loss_scale(vdx_member *m, const vd_loss_scale *s, vd_err *e) {
    if (!m->fp16) return vd_errf(e, VD_EINTERNAL, "vd_exec_set_loss_scale outside math fp16");
    int rc = m->be->synchronize(m->be, e);
    if (!rc) rc = m->be->scale_set(m->be, s, e);
    if (rc) return rc;
    m->ls = *s;
    m->ls.found_inf = 0;
    m->first_pending = !s->stepped;
    return VD_OK;
}

bool vdx_member_loss_scale(const vdx_member *m, vd_loss_scale *s) {
    if (s) *s = m->ls;
    return m->fp16;
}

int vdx_member_set_state(vdx_member *m, const float *params, const float *state,
                      int64_t sgd_steps, vd_err *e) {
    vd_backend *be = m->be;
    const vd_plan *p = m->plan;
    uint64_t bytes = (uint64_t)m->net->param_floats * 4u;
    uint64_t sbytes = (uint64_t)vd_net_state_floats(m->net) * 4u;
    int rc;
    if (state && p->t_mom < 0)
        return vd_errf(e, VD_EINTERNAL, "vd_exec_set_state: a forward-only plan has no optimizer state");
    if ((rc = be->synchronize(be, e))) return rc;
    if (bytes) {
        if ((rc = be->copy_async(be, VD_STREAM_H2D, region(m, p->t_params), params, bytes, e))) return rc;
        if (state) rc = be->copy_async(be, VD_STREAM_H2D, region(m, p->t_mom), state, sbytes, e);
        else if (p->t_mom >= 0) rc = be->zero_async(be, VD_STREAM_H2D, region(m, p->t_mom), sbytes, e);
        if (rc) return rc;
    }
    if ((rc = be->synchronize(be, e))) return rc;
    m->sgd_steps = sgd_steps;
    m->first_pending = !state || sgd_steps == 0;
    if ((rc = reset_loss_scale(m, e))) return rc;
    m->state_set = true;
    m->staged = m->stage_inflight = false;   /* synchronized: no copy in flight */
    return VD_OK;
}

int vdx_member_init_params(vdx_member *m, uint64_t seed, vd_err *e) {
    vd_backend *be = m->be;
    const vd_plan *p = m->plan;
    int64_t total = m->net->param_floats, chunk = total < (1 << 20) ? total : (1 << 20);
    int rc = be->synchronize(be, e);
    if (rc) return rc;
    float *buf = vd_malloc((size_t)(chunk ? chunk : 1) * sizeof *buf, e);
    if (!buf) return VD_ENOMEM;
    for (int64_t at = 0; at < total && !rc; at += chunk) {
        int64_t n = total - at < chunk ? total - at : chunk;
        vd_net_init_params_range(m->net, seed, at, n, buf);
        rc = be->copy_async(be, VD_STREAM_H2D, region(m, p->t_params) + at * 4, buf,
                            (uint64_t)n * 4u, e);
        if (!rc) rc = be->synchronize(be, e);   /* buf is filled again next */
    }
    vd_free(buf);
    if (!rc && total && p->t_mom >= 0)
        rc = be->zero_async(be, VD_STREAM_H2D, region(m, p->t_mom),
                            (uint64_t)vd_net_state_floats(m->net) * 4u, e);
    if (!rc) rc = be->synchronize(be, e);
    if (rc) return rc;
    m->sgd_steps = 0;
    m->first_pending = true;
    if ((rc = reset_loss_scale(m, e))) return rc;
    m->state_set = true;
    m->staged = m->stage_inflight = false;
    return VD_OK;
}

int vdx_member_get_state(vdx_member *m, float *params, float *state, int64_t *sgd_steps, vd_err *e) {
    vd_backend *be = m->be;
    const vd_plan *p = m->plan;
    uint64_t bytes = (uint64_t)m->net->param_floats * 4u;
    uint64_t sbytes = (uint64_t)vd_net_state_floats(m->net) * 4u;
    int rc;
    if (!m->state_set) return vd_errf(e, VD_EINTERNAL, "vd_exec_get_state before vd_exec_set_state");
    if (state && p->t_mom < 0)
        return vd_errf(e, VD_EINTERNAL, "vd_exec_get_state: a forward-only plan has no optimizer state");
    if ((rc = be->synchronize(be, e))) return rc;
    if (bytes && params && (rc = be->copy_async(be, VD_STREAM_D2H, params, region(m, p->t_params), bytes, e))) return rc;
    if (bytes && state && (rc = be->copy_async(be, VD_STREAM_D2H, state, region(m, p->t_mom), sbytes, e))) return rc;
    if ((rc = be->synchronize(be, e))) return rc;
    if (sgd_steps) *sgd_steps = m->sgd_steps;
    return VD_OK;
}

/* The backend's synthetic slots (backend.h) of the current pair's batch and
 * of the look-ahead pair's. */
enum { SLOT_INPUT = 0, SLOT_STAGE = 1 };

/* Fill the input region dst (bytes) from a pair's synthetic batch b through
 * the backend's synthetic slot `slot`. */
static int fill_synth(vdx_member *m, int slot, void *dst, const vd_synth_batch *b, uint64_t bytes,
                      vd_err *e) {
    uint64_t want = (uint64_t)b->n * (uint64_t)b->sample_numel * m->act_bytes;
    if (b->n != m->plan->batch || want != bytes)
        return vd_errf(e, VD_EINTERNAL, "synthetic batch of %d x %lld elements for an input of "
                       "%llu bytes at batch %d", b->n, (long long)b->sample_numel,
                       (unsigned long long)bytes, m->plan->batch);
    vd_synth_batch l = *b;   /* in the math's layout (float: tf32 channels-last) */
    l.nhwc = vd_math_nhwc(m->opts.math);
    return m->be->fill_synthetic(m->be, VD_STREAM_H2D, slot, dst, vd_math_act_dtype(m->opts.math),
                                 &l, e);
}

/* Source of an interval's H2D fill. */
static const void *fill_src(const vdx_member *m, const vd_plan *p, const vd_interval *iv) {
    const vd_tensor *T = &p->tensors[iv->tensor];
    switch (iv->fill) {
    case VD_FILL_INPUT_X: return m->in_x;
    case VD_FILL_LABELS: return m->in_labels;
    case VD_FILL_STAGE: return m->nx_x;
    case VD_FILL_HOST_STORE: return m->host_store + T->host_offset;
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
    bool hook_done;     /* the stage hook ran before the walk (a captured step) */
    bool capturing;     /* the walk issues into a capture: no after_step calls */
    bool captured;      /* the step captured its graph (after_step's captured) */
} walk_stats;

/* Data parallel: average the gradient buckets that backward step s
 * completes (after its op, on the allreduce's own stream under NCCL). */
static int average_buckets(vdx_member *m, int s, vd_err *e) {
    const vd_plan *p = m->plan;
    float *grads = (float *)region(m, p->t_grads);
    vd_allreduce *ar = m->opts.allreduce;
    for (int b = 0; b < m->dp.n_buckets; b++) {
        const vd_dp_bucket *B = &m->dp.buckets[b];
        if (B->step != s) continue;
        for (int k = B->first_range; k < B->first_range + B->n_ranges; k++) {
            int rc = ar->average(ar, m->be, grads + m->dp.ranges[k].offset,
                                 m->dp.ranges[k].count, e);
            if (rc) return rc;
        }
    }
    return VD_OK;
}

/* The update at learning rate lr that runs next (backend.h's
 * vd_optim_step): the run's optimizer and settings (net->train), its number
 * t counted over the state's life; a skipped step (math fp16) is no update
 * and does not count (read_loss_scale). */
static vd_optim_step optim_step(const vdx_member *m, float lr) {
    const vd_train_cfg *tc = &m->net->train;
    vd_optim_step o;
    memset(&o, 0, sizeof o);
    o.kind = tc->optimizer;
    o.lr = lr;
    o.weight_decay = tc->weight_decay;
    o.momentum = tc->momentum;
    o.nesterov = tc->nesterov;
    o.beta1 = tc->beta1;
    o.beta2 = tc->beta2;
    o.eps = tc->eps;
    o.t = m->first_pending ? 1 : m->sgd_steps + 1;
    return o;
}

/* The optimizer's state arrays in the pool, at float offset `base` of the
 * parameters' layout: *mm SGD's momentum / AdamW's exp_avg, *vv AdamW's
 * exp_avg_sq (NULL for SGD): the state tensor holds them one after the
 * other (vd_optimizer_state_arrays). */
static void state_arrays(const vdx_member *m, int64_t base, float **mm, float **vv) {
    float *s = (float *)region(m, m->plan->t_mom);
    *mm = s + base;
    *vv = m->net->train.optimizer == VD_OPT_ADAMW ? s + m->net->param_floats + base : NULL;
}

/* The update in the backward pass (vd_plan.update_in_bwd): the optimizer's
 * update of unit u's layer's trained parameters from its gradient tensor at
 * lr x the layer's lr_mult, at backward step s, after its op (the layer's
 * last chunk there: vd_plan_layer.update); its table (unit_tables) holds
 * the runs of adjacent trained parameters. */
static int update_layer(vdx_member *m, const vd_plan *p, int u, int s, float lr, vd_err *e) {
    const vd_plan_layer *pl = &p->layers[u];
    if (!m->u_table[u]) return VD_OK;
    float *params = (float *)region(m, p->t_params) + pl->dw_base;
    float *sm, *sv;
    state_arrays(m, pl->dw_base, &sm, &sv);
    float *g = taddr(m, p, pl->dw, s);
    if (!g)
        return vd_errf(e, VD_EINTERNAL, "layer '%s': its gradients are not resident",
                       m->net->layers[pl->layer].name);
    vd_optim_step o = optim_step(m, lr);
    return m->be->update(m->be, &o, params, g, sm, sv, m->u_table[u], e);
}

/* A PREFETCH action: fill interval k on the H2D stream (copied from its host
 * source, or generated for synthetic input) after the step's frees and the
 * tensor's offload; the staging copy only when the look-ahead batch is
 * ready. */
static int prefetch(vdx_member *m, const vd_plan *p, const vd_step *st, int k, bool timed,
                    walk_stats *w, vd_err *e) {
    vd_backend *be = m->be;
    const vd_interval *iv = &p->intervals[k];
    const vd_tensor *T = &p->tensors[iv->tensor];
    char *dst = iv_addr(m, iv);
    int rc;
    if (k == w->x_iv) return VD_OK;                                  /* x was staged */
    if (iv->fill == VD_FILL_STAGE && !w->stage_next) return VD_OK;   /* no next batch */
    if (iv->fill == VD_FILL_STAGE && m->stage_hook && !w->hook_done &&
        m->stage_hook(m->stage_hook_ctx) != 0) {   /* not filled: no staging */
        w->stage_next = false;
        w->stage_failed = true;
        return VD_OK;
    }
    if ((rc = be->stream_wait(be, VD_STREAM_H2D, st->ev_free, e))) return rc;
    if (T->ev_d2h >= 0 && (rc = be->stream_wait(be, VD_STREAM_H2D, T->ev_d2h, e))) return rc;
    if (m->opts.poison && (rc = be->poison_async(be, VD_STREAM_H2D, dst, iv->bytes, e)))
        return rc;
    int c = p->n_tensors + k;
    if (timed) {
        if ((rc = mark(m, copy_ev(m, p, c, false), VD_STREAM_H2D, e))) return rc;
        m->copy_issued[c] = true;
    }
    if (iv->fill == VD_FILL_INPUT_X && m->in_synth)
        rc = fill_synth(m, SLOT_INPUT, dst, &m->in_sb, T->bytes, e);
    else if (iv->fill == VD_FILL_STAGE && m->nx_synth)
        rc = fill_synth(m, SLOT_STAGE, dst, &m->nx_sb, T->bytes, e);
    else
        rc = be->copy_async(be, VD_STREAM_H2D, dst, fill_src(m, p, iv), T->bytes, e);
    if (rc) return rc;
    if (timed && (rc = mark(m, copy_ev(m, p, c, true), VD_STREAM_H2D, e))) return rc;
    rc = be->event_record(be, iv->ev_h2d, VD_STREAM_H2D, e);
    if (T->offload && T->iv[1] == k) w->h2d += T->bytes;
    return rc;
}

/* An OFFLOAD action: tensor t's D2H copy into the host store, once the
 * compute stream has reached it. */
static int offload(vdx_member *m, const vd_plan *p, int t, bool timed, walk_stats *w,
                   vd_err *e) {
    vd_backend *be = m->be;
    const vd_tensor *T = &p->tensors[t];
    const vd_interval *iv = &p->intervals[T->iv[0]];
    int rc;
    if ((rc = be->event_record(be, T->ev_compute, VD_STREAM_COMPUTE, e))) return rc;
    if ((rc = be->stream_wait(be, VD_STREAM_D2H, T->ev_compute, e))) return rc;
    if (timed) {
        if ((rc = mark(m, copy_ev(m, p, t, false), VD_STREAM_D2H, e))) return rc;
        m->copy_issued[t] = true;
    }
    if ((rc = be->copy_async(be, VD_STREAM_D2H, m->host_store + T->host_offset, iv_addr(m, iv),
                             T->bytes, e)))
        return rc;
    if (timed && (rc = mark(m, copy_ev(m, p, t, true), VD_STREAM_D2H, e))) return rc;
    rc = be->event_record(be, T->ev_d2h, VD_STREAM_D2H, e);
    w->d2h += T->bytes;
    return rc;
}

/* The SGD step of the training plan (the optimizer's update, whichever it
 * is): the averaged gradients first (data parallel), then every trained
 * range updated from the gradient array at lr x its lr_mult, in one call
 * over the ranges' table. Math fp16: every gradient checked, then the
 * update (skipped on the device when one was not finite), then the scale's
 * step. sgd_steps and first_pending are counted by vdx_member_train_step
 * (math fp16: from the state read back with the loss). */
static int sgd_step(vdx_member *m, float lr, vd_err *e) {
    vd_backend *be = m->be;
    const vd_plan *tp = m->plan;
    int rc = VD_OK;
    if (m->opts.allreduce && (rc = m->opts.allreduce->wait(m->opts.allreduce, be, e))) return rc;
    float *params = (float *)region(m, tp->t_params);
    float *grads = tp->update_in_bwd ? NULL : (float *)region(m, tp->t_grads);
    float *sm, *sv;
    state_arrays(m, 0, &sm, &sv);
    vd_optim_step o = optim_step(m, lr);
    if (m->fp16) {
        for (int r = 0; r < m->n_checks && !rc; r++)
            rc = be->grad_check(be, grads, m->c_off[r], m->c_cnt[r], m->c_layer[r], e);
        if (!rc) rc = be->update_scaled(be, &o, params, grads, sm, sv, m->r_table, e);
        return rc ? rc : be->scale_update(be, e);
    }
    return grads ? be->update(be, &o, params, grads, sm, sv, m->r_table, e) : VD_OK;
}

/* Run the actions of step s of plan p. */
static int run_step(vdx_member *m, const vd_plan *p, vd_op_io *iot, int s, float lr,
                    walk_stats *w, vd_err *e) {
    vd_backend *be = m->be;
    const vd_net *net = m->net;
    const vd_step *st = &p->steps[s];
    bool poison = m->opts.poison;
    bool timed = m->ev_copy >= 0 && p == m->plan;   /* opts.step_times: copies too */
    int rc = VD_OK;
    for (int a = st->first_action; a < st->first_action + st->n_actions; a++) {
        const vd_action *A = &p->actions[a];
        switch (A->kind) {
        case VD_A_WAIT_OFFLOAD: {
            const vd_tensor *T = &p->tensors[A->arg];
            if (m->opts.fault != VD_FAULT_SKIP_OFFLOAD_WAIT)
                rc = be->stream_wait(be, VD_STREAM_COMPUTE, T->ev_d2h, e);
            break;
        }
        case VD_A_FREE: {
            const vd_interval *iv = &p->intervals[A->arg];
            w->live -= iv->bytes;
            /* the staged region outlives the iteration: the next one reads it */
            bool keep = iv->fill == VD_FILL_STAGE;
            if (poison && !keep && !p->tensors[iv->tensor].persistent)
                rc = be->poison_async(be, VD_STREAM_COMPUTE, iv_addr(m, iv), iv->bytes, e);
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
        case VD_A_PREFETCH:
            rc = prefetch(m, p, st, A->arg, timed, w, e);
            break;
        case VD_A_WAIT_PREFETCH: {
            const vd_interval *iv = &p->intervals[A->arg];
            const vd_tensor *T = &p->tensors[iv->tensor];
            bool activation = T->offload && T->iv[1] == A->arg;
            if (A->arg == w->x_iv) break;                       /* x was staged */
            if (!(activation && m->opts.fault == VD_FAULT_SKIP_PREFETCH_WAIT))
                rc = be->stream_wait(be, VD_STREAM_COMPUTE, iv->ev_h2d, e);
            break;
        }
        case VD_A_COMPUTE: {
            if (w->live > w->peak) w->peak = w->live;
            if (st->kind == VD_STEP_SGD) {
                rc = sgd_step(m, lr, e);
            } else {
                vd_op_io *io = &iot[s];
                if (st->kind == VD_STEP_FWD) rc = be->forward(be, net, st->layer, io, e);
                else if (!net->layers[st->layer].no_grad)   /* (else nothing to do: net.h) */
                    rc = be->backward(be, net, st->layer, io, e);
                if (!rc && st->kind == VD_STEP_BWD && m->opts.allreduce && p == m->plan)
                    rc = average_buckets(m, s, e);
                if (!rc && st->kind == VD_STEP_BWD && p->update_in_bwd && p == m->plan)
                    rc = update_layer(m, p, st->unit, s, lr, e);
            }
            if (!rc && m->opts.sync_debug) rc = be->synchronize(be, e);
            break;
        }
        case VD_A_RECOMPUTE: {
            /* operand sets are in action order; only the training plan has them */
            if (p != m->plan || w->rc_next >= m->n_rc) {
                rc = vd_errf(e, VD_EINTERNAL, "unexpected recompute action");
                break;
            }
            vd_op_io *io = &m->rc_io[w->rc_next++];
            if (m->opts.fault == VD_FAULT_SKIP_RECOMPUTE) break;
            rc = be->forward(be, net, p->layers[A->arg].layer, io, e);
            if (!rc) w->rc_ops++;
            if (!rc && m->opts.sync_debug) rc = be->synchronize(be, e);
            break;
        }
        case VD_A_LOAD_STAGED: {
            if (!w->load_staged) break;                         /* x is loaded from the host */
            const vd_interval *xi = &p->intervals[A->arg];
            const vd_tensor *S = &p->tensors[p->t_stage];
            if ((rc = be->stream_wait(be, VD_STREAM_COMPUTE, m->ev_stage, e))) break;
            rc = be->copy_async(be, VD_STREAM_COMPUTE, iv_addr(m, xi),
                                iv_addr(m, &p->intervals[S->iv[0]]), S->bytes, e);
            break;
        }
        case VD_A_OFFLOAD:
            rc = offload(m, p, A->arg, timed, w, e);
            break;
        }
        if (rc) {
            char lab[160];
            return vd_err_prefix(e, "step %d (%s)", s, vd_plan_step_label(p, net, s, lab, sizeof lab));
        }
    }
    return VD_OK;
}

/* Issue the loss (and eval output) readback after the last step, wait for it. */
static int readback(vdx_member *m, const vd_plan *p, bool want_y, vd_err *e) {
    vd_backend *be = m->be;
    const vd_plan_layer *ll = &p->layers[p->first_unit[p->loss_layer]];
    int last = p->n_steps - 1;
    int rc;
    if ((rc = be->event_record(be, p->ev_end, VD_STREAM_COMPUTE, e))) return rc;
    if ((rc = be->stream_wait(be, VD_STREAM_D2H, p->ev_end, e))) return rc;
    void *aux = ll->aux >= 0 ? taddr(m, p, ll->aux, last) : NULL;
    if (!aux) return vd_errf(e, VD_EINTERNAL, "loss layer has no resident aux at the last step");
    if ((rc = be->copy_async(be, VD_STREAM_D2H, m->loss_host, aux, 8u, e))) return rc;
    if (want_y) {
        void *y = taddr(m, p, ll->y, last);
        if (!y) return vd_errf(e, VD_EINTERNAL, "loss output not resident at the last step");
        if ((rc = be->copy_async(be, VD_STREAM_D2H, m->eval_y, y, (uint64_t)m->y_floats * m->act_bytes, e)))
            return rc;
    }
    if ((rc = be->event_record(be, p->ev_loss, VD_STREAM_D2H, e))) return rc;
    return be->event_sync(be, p->ev_loss, e);
}

/* opts.step_times, after a training pass: each copy it issued, its start
 * and end in ms from event ev (the pass's start on the compute stream). The
 * staging copy may still run: every end is waited for first. */
static int copy_times(vdx_member *m, const vd_plan *p, int ev, vd_err *e) {
    vd_backend *be = m->be;
    int n = 0, rc, nc = p->n_tensors + p->n_intervals;
    for (int c = 0; c < nc; c++) {
        if (!m->copy_issued[c]) continue;
        bool h2d = c >= p->n_tensors;
        int k = h2d ? c - p->n_tensors : -1;
        int t = h2d ? p->intervals[k].tensor : c;
        int end = copy_ev(m, p, c, true);
        float a = 0.0f, b = 0.0f;
        if ((rc = be->event_sync(be, end, e)) ||
            (rc = be->event_elapsed(be, ev, copy_ev(m, p, c, false), &a, e)) ||
            (rc = be->event_elapsed(be, ev, end, &b, e)))
            return rc;
        m->copy_times[n++] = (vd_exec_copy_time){.tensor = t, .interval = k, .h2d = h2d,
                                                  .start_ms = a, .end_ms = b};
    }
    m->n_copy_times = n;
    return VD_OK;
}

int vdx_member_copy_times(const vdx_member *m, const vd_exec_copy_time **ct) {
    *ct = m->copy_times;
    return m->n_copy_times;
}

/* run_step, then the caller's after_step hook (if any; not while capturing). */
static int step_hooked(vdx_member *m, const vd_plan *p, vd_op_io *io, int s, float lr,
                       bool eval, walk_stats *w, vd_err *e) {
    int rc = run_step(m, p, io, s, lr, w, e);
    if (!rc && m->opts.after_step && !w->capturing)
        m->opts.after_step(m->opts.after_step_ctx, s, eval, w->captured);
    return rc;
}

/* Math fp16: the loss scale's state after step iter, read where the loss
 * was (the compute stream has finished the step); a step the backend
 * skipped did not count as an SGD update. VD_ENUMERIC when the run cannot
 * go on: VD_LOSS_SCALE_MAX_STREAK skipped steps in a row, or the scale
 * under VD_LOSS_SCALE_MIN. */
static int read_loss_scale(vdx_member *m, int64_t iter, vd_err *e) {
    int64_t skipped = m->ls.skipped;
    int rc = m->be->scale_get(m->be, &m->ls, e);
    if (rc) return rc;
    if (m->ls.skipped == skipped) {
        m->sgd_steps++;
        m->first_pending = false;
    }
    if (m->ls.streak < VD_LOSS_SCALE_MAX_STREAK && m->ls.scale >= VD_LOSS_SCALE_MIN) return VD_OK;
    int bad = m->ls.first_bad;
    const char *name = bad >= 0 && bad < m->net->n_layers ? m->net->layers[bad].name : "?";
    char why[96];
    if (m->ls.streak >= VD_LOSS_SCALE_MAX_STREAK)
        snprintf(why, sizeof why, "the gradients overflowed in %d steps in a row",
                 (int)m->ls.streak);
    else
        snprintf(why, sizeof why, "the loss scale fell below 2^-24");
    return vd_errf(e, VD_ENUMERIC, "math fp16: %s (iteration %lld, loss scale %g, %lld steps "
                   "skipped in all); the first layer whose gradient was not finite: '%s'. Lower "
                   "--lr, or train in bf16 or fp32", why, (long long)iter + 1,
                   (double)m->ls.scale, (long long)m->ls.skipped, name);
}

/* ---- captured iterations (opts.graph) --------------------------------------
 * A graph replays what its capture issued, arguments and all: it is reused
 * only at a step whose host-side choices are those of the capture. */
enum { VDX_GRAPHS = 4, VDX_SEEN = 2 };   /* graphs kept (2 pairs x 2 staging states); keys remembered */

typedef struct graph_key {
    bool load_staged, stage_next;
    const void *in_x;           /* the current pair (the pairs swap at staging) */
    bool in_synth, nx_synth;    /* the current pair's x made on the device (also where x was
                                   staged: a re-load after its offload fills it from the
                                   pair), the next batch staged so */
    vd_synth_batch in_sb, nx_sb;     /* those batches' descriptions (index NULL: the samples
                                        go through the slots, launch) */
} graph_key;

typedef struct graph_slot {
    void *g;                    /* be's graph */
    graph_key key;
    walk_stats w;               /* the capture's walk: what a replay would have counted */
} graph_slot;

bool vd_exec_graph_asked(vd_graph_mode mode, const vd_plan *plan) {
    return vd_graph_captures(mode, plan->offload_bytes);
}

/* Whether a training step of m may be captured: the backend captures, the
 * run asked for it (vd_exec_graph_asked), and nothing in the step needs the
 * host between its operations (poison fills and fault injection are
 * debugging tools the eager walk keeps exact; --sync-debug waits per op;
 * step_times needs timing marks inside a graph, backend.h's event_mark;
 * data parallel's all-reduce has its own stream and communicator). */
static bool graph_eligible(const vdx_member *m) {
    const vd_exec_opts *o = &m->opts;
    return vd_exec_graph_asked(o->graph, m->plan) && m->be->capture_begin && !o->poison &&
           o->fault == VD_FAULT_NONE && !o->sync_debug && (m->ev_steps < 0 || m->be->event_mark) &&
           !o->allreduce;
}

bool vdx_member_captures(const vdx_member *m) { return graph_eligible(m); }

/* The key of a step about to run with walk w. */
static void key_fill(const vdx_member *m, const walk_stats *w, graph_key *k) {
    memset(k, 0, sizeof *k);
    k->load_staged = w->load_staged;
    k->stage_next = w->stage_next;
    k->in_x = m->in_x;
    k->in_synth = m->in_synth;
    k->nx_synth = m->nx_synth && w->stage_next;
    if (k->in_synth) k->in_sb = m->in_sb;
    if (k->nx_synth) k->nx_sb = m->nx_sb;
    k->in_sb.index = k->nx_sb.index = NULL;
}

static bool synth_eq(const vd_synth_batch *a, const vd_synth_batch *b) {
    return a->seed == b->seed && a->split == b->split && a->classes == b->classes &&
           a->sample_numel == b->sample_numel && a->channels == b->channels &&
           a->nhwc == b->nhwc && a->n == b->n;
}

static bool key_eq(const graph_key *a, const graph_key *b) {
    return a->load_staged == b->load_staged && a->stage_next == b->stage_next &&
           a->in_x == b->in_x && a->in_synth == b->in_synth && a->nx_synth == b->nx_synth &&
           (!a->in_synth || synth_eq(&a->in_sb, &b->in_sb)) &&
           (!a->nx_synth || synth_eq(&a->nx_sb, &b->nx_sb));
}

/* The graph slots and remembered keys (opts.graph). */
static int graphs_create(vdx_member *m, vd_err *e) {
    if (!graph_eligible(m)) return VD_OK;
    m->graphs = vd_calloc(VDX_GRAPHS, sizeof *m->graphs, e);
    m->seen = vd_calloc(VDX_SEEN + 1, sizeof *m->seen, e);   /* + the current step's */
    return m->graphs && m->seen ? VD_OK : VD_ENOMEM;
}

static void graphs_free(vdx_member *m) {
    for (int k = 0; m->graphs && k < VDX_GRAPHS; k++)
        if (m->graphs[k].g) m->be->graph_destroy(m->be, m->graphs[k].g);
    vd_free(m->graphs);
    vd_free(m->seen);
    m->graphs = NULL;
    m->seen = NULL;
}

/* Launch graph g of key k: the step's synthetic samples into the slots its
 * fills read (the pairs' batches now, not the capture's), then the graph. */
static int launch(vdx_member *m, void *g, const graph_key *k, const vd_step_scalars *ss,
                  vd_err *e) {
    vd_backend *be = m->be;
    int rc;
    if (k->in_synth && (rc = be->synth_set(be, SLOT_INPUT, &m->in_sb, e))) return rc;
    if (k->nx_synth && (rc = be->synth_set(be, SLOT_STAGE, &m->nx_sb, e))) return rc;
    return be->graph_launch(be, g, ss, e);
}

/* The training plan's steps from step_set to the SGD step (the loss
 * readback not included), issued on the backend. */
static int walk_train(vdx_member *m, float lr, const vd_step_scalars *ss, walk_stats *w,
                      vd_err *e) {
    const vd_plan *p = m->plan;
    vd_backend *be = m->be;
    int rc, ev = m->ev_steps;
    if (ev >= 0 && (rc = mark(m, ev, VD_STREAM_COMPUTE, e))) return rc;
    if ((rc = be->step_set(be, ss, e))) return rc;
    if (m->ev_copy >= 0)
        memset(m->copy_issued, 0, ((size_t)p->n_tensors + (size_t)p->n_intervals) * sizeof *m->copy_issued);
    for (int s = 0; s < p->n_steps; s++) {
        if ((rc = step_hooked(m, p, m->io, s, lr, false, w, e))) return rc;
        if (ev >= 0 && (rc = mark(m, ev + 1 + s, VD_STREAM_COMPUTE, e))) return rc;
    }
    return VD_OK;
}

/* A captured step with key k (m->seen[VDX_SEEN]): the graph of the same key
 * replayed, or (a key an earlier eager step had) captured into a free slot
 * and launched, or else the eager walk (the key remembered). *w: the walk's
 * counts. */
static int walk_graph(vdx_member *m, float lr, const vd_step_scalars *ss, walk_stats *w,
                      vd_err *e) {
    vd_backend *be = m->be;
    const graph_key *k = &m->seen[VDX_SEEN];
    for (int g = 0; g < m->n_graphs; g++) {
        graph_slot *G = &m->graphs[g];
        if (!key_eq(&G->key, k)) continue;
        int rc = launch(m, G->g, k, ss, e);
        if (rc) return rc;
        walk_stats keep = *w;
        *w = G->w;
        w->stage_failed = keep.stage_failed;
        m->graph_launches++;
        return VD_OK;
    }
    bool seen = false;
    for (int i = 0; i < m->n_seen && !seen; i++) seen = key_eq(&m->seen[i], k);
    if (!seen || m->n_graphs == VDX_GRAPHS) {
        if (!seen) {   /* remember it, the oldest forgotten */
            for (int i = VDX_SEEN - 1; i > 0; i--) m->seen[i] = m->seen[i - 1];
            m->seen[0] = *k;
            if (m->n_seen < VDX_SEEN) m->n_seen++;
        }
        return walk_train(m, lr, ss, w, e);
    }
    graph_slot *G = &m->graphs[m->n_graphs];
    int rc = be->capture_begin(be, e);
    if (rc) return rc;
    w->capturing = true;
    rc = walk_train(m, lr, ss, w, e);
    w->capturing = false;
    void *g = NULL;
    int rc2 = be->capture_end(be, &g, e);   /* ends the capture whatever the walk did */
    if (rc || rc2) {
        if (g) be->graph_destroy(be, g);
        return rc ? rc : rc2;
    }
    G->g = g;
    G->key = *k;
    G->w = *w;
    w->captured = true;   /* (not in G->w: a replay captures nothing) */
    m->n_graphs++;
    m->graph_captures++;
    if ((rc = launch(m, g, k, ss, e))) return rc;
    m->graph_launches++;
    return VD_OK;
}

int vdx_member_train_step(vdx_member *m, float lr, int64_t iter, float *loss, int *correct,
                          vd_err *e) {
    if (!m->state_set)
        return vd_errf(e, VD_EINTERNAL, "vd_exec_train_step before vd_exec_set_state");
    if (m->plan->forward_only)
        return vd_errf(e, VD_EINTERNAL, "vd_exec_train_step on the executor of a forward-only plan");
    const vd_plan *p = m->plan;
    double t0 = vd_now();
    walk_stats w = {0};
    int rc, ev = m->ev_steps;
    vd_backend *be = m->be;
    /* input staging: start from the batch the previous step staged (if it
     * did and nothing dropped it since); stage the next one if it is ready */
    w.x_iv = -1;
    w.load_staged = m->staged && p->t_stage >= 0;
    if (w.load_staged) w.x_iv = p->tensors[p->t_x].iv[0];
    w.stage_next = m->next_ready && p->t_stage >= 0;
    bool swap = m->next_ready;
    m->staged = false;
    m->next_ready = false;
    vd_optim_step o = optim_step(m, lr);
    vd_step_scalars ss = vd_step_scalars_of(&o, iter);
    bool graph = m->graphs != NULL;
    if (graph) {
        /* the staging copy in a graph reads the look-ahead buffers: they are
         * filled (or not) before anything is issued */
        w.hook_done = true;
        if (w.stage_next && m->stage_hook && m->stage_hook(m->stage_hook_ctx) != 0) {
            w.stage_next = false;
            w.stage_failed = true;
        }
        key_fill(m, &w, &m->seen[VDX_SEEN]);
        rc = walk_graph(m, lr, &ss, &w, e);
    } else {
        rc = walk_train(m, lr, &ss, &w, e);
    }
    if (rc) return rc;
    if ((rc = readback(m, p, false, e))) return rc;
    if ((rc = step_hooked(m, p, m->io, p->n_steps, lr, false, &w, e))) return rc;
    if (ev >= 0) {
        /* the loss readback waited for the compute stream: every event done */
        for (int s = 0; s < p->n_steps; s++) {
            float ms = 0.0f;
            if ((rc = be->event_elapsed(be, ev, ev + 1 + s, &ms, e))) return rc;
            m->step_end_ms[s] = ms;
        }
        m->n_step_times = p->n_steps;
        if ((rc = copy_times(m, p, ev, e))) return rc;
    }
    if (w.live != 0)
        return vd_errf(e, VD_EINTERNAL, "executor: %llu bytes still live after the iteration",
                       (unsigned long long)w.live);
    if (swap && !w.stage_failed) {
        /* the look-ahead batch becomes the current one (staged on the device) */
        void *tx = m->in_x; m->in_x = m->nx_x; m->nx_x = tx;
        int32_t *tl = m->in_labels; m->in_labels = m->nx_labels; m->nx_labels = tl;
        bool ts = m->in_synth; m->in_synth = m->nx_synth; m->nx_synth = ts;
        vd_synth_batch tb = m->in_sb; m->in_sb = m->nx_sb; m->nx_sb = tb;
    }
    if (w.load_staged) { m->st.staged_loads++; m->stage_inflight = false; }
    if (w.stage_next) m->staged = m->stage_inflight = true;
    if (w.peak > m->st.live_peak) m->st.live_peak = w.peak;
    if (w.hwm > m->st.pool_hwm) m->st.pool_hwm = w.hwm;
    m->st.offload_bytes_iter = w.d2h;
    m->st.prefetch_bytes_iter = w.h2d;
    m->st.recompute_ops_iter = w.rc_ops;
    m->st.last_iter_s = vd_now() - t0;
    m->st.train_steps++;
    *loss = m->loss_host[0];
    *correct = (int)m->loss_host[1];
    if (!m->fp16) {   /* (math fp16: the update may have been skipped, read_loss_scale) */
        m->first_pending = false;
        m->sgd_steps++;
    }
    if (m->fp16 && (rc = read_loss_scale(m, iter, e))) return rc;
    if (!isfinite(*loss))
        return vd_errf(e, VD_ENUMERIC, "loss is %s at iteration %lld", isnan(*loss) ? "NaN" : "infinite",
                       (long long)iter);
    return VD_OK;
}

/* The rank of label among the class scores row [per] (floats, or 16-bit
 * dt): the classes scored higher, and those scored the same before it (the
 * order of a stable sort by descending score; rank 0 is argmax's first
 * maximum). A NaN score of the label ranks last. */
static int64_t label_rank(const void *row, vd_dtype dt, int64_t per, int32_t label) {
    const float *f = dt == VD_DT_F32 ? row : NULL;
    const uint16_t *h = dt == VD_DT_F32 ? NULL : row;
#define SCORE(k) (f ? f[k] : vd_h16_to_f32(dt, h[k]))
    float v = SCORE(label);
    if (isnan(v)) return per;
    int64_t rank = 0;
    for (int64_t k = 0; k < per; k++) {
        float u = SCORE(k);
        rank += u > v || (u == v && k < label);
    }
#undef SCORE
    return rank;
}

int vdx_member_eval_step(vdx_member *m, vd_eval_counts *out, vd_err *e) {
    if (!m->state_set)
        return vd_errf(e, VD_EINTERNAL, "vd_exec_eval_step before vd_exec_set_state");
    const vd_plan *p = m->eval;
    walk_stats w = {0};
    w.x_iv = -1;
    int rc;
    /* the scored samples: those before the first padding label (padding is
     * the batch's end); the padding gets class 0 for the loss layer, which
     * counts only the scored ones (loss_n) */
    int scored = 0;
    while (scored < p->batch && m->in_labels[scored] != VD_LABEL_PAD) scored++;
    for (int n = scored; n < p->batch; n++) {
        if (m->in_labels[n] != VD_LABEL_PAD)
            return vd_errf(e, VD_EINTERNAL, "evaluation batch: sample %d follows the padding", n);
        m->in_labels[n] = 0;
    }
    for (int s = 0; s < p->n_steps; s++)
        if (p->steps[s].kind == VD_STEP_FWD && p->layers[p->steps[s].unit].layer == p->loss_layer)
            m->eval_io[s].loss_n = scored;   /* 0 (none scored): all, and out->loss unused */
    /* the evaluation placement may reuse the staging region: a staging copy
     * still in flight must land first, and the staged batch is gone */
    if (m->stage_inflight) {
        if ((rc = m->be->stream_wait(m->be, VD_STREAM_COMPUTE, m->ev_stage, e))) return rc;
        m->stage_inflight = false;
    }
    m->staged = false;
    for (int s = 0; s < p->n_steps; s++)
        if ((rc = step_hooked(m, p, m->eval_io, s, 0.0f, true, &w, e))) return rc;
    if ((rc = readback(m, p, true, e))) return rc;
    if ((rc = step_hooked(m, p, m->eval_io, p->n_steps, 0.0f, true, &w, e))) return rc;
    if (w.peak > m->st.eval_live_peak) m->st.eval_live_peak = w.peak;
    if (w.hwm > m->st.eval_pool_hwm) m->st.eval_pool_hwm = w.hwm;
    /* top-1 and top-5 from the class probabilities read back */
    int64_t per = vd_net_out_numel(m->net, p->loss_layer);
    vd_dtype dt = vd_math_act_dtype(m->opts.math);
    size_t row = (size_t)per * (size_t)m->act_bytes;
    *out = (vd_eval_counts){ .scored = scored, .loss = scored ? m->loss_host[0] : 0.0f };
    for (int n = 0; n < scored; n++) {
        int64_t rank = label_rank((const char *)m->eval_y + (size_t)n * row, dt, per,
                                  m->in_labels[n]);
        out->top1 += rank < 1;
        out->top5 += rank < 5;
    }
    m->st.eval_steps++;
    return VD_OK;
}

size_t vdx_member_eval_probs(const vdx_member *m, float *probs) {
    size_t n = (size_t)m->y_floats;
    vd_dtype dt = vd_math_act_dtype(m->opts.math);
    if (dt == VD_DT_F32) memcpy(probs, m->eval_y, n * sizeof *probs);
    else vd_h16_to_f32_n(dt, m->eval_y, probs, n);
    return n;
}

int vdx_member_step_times(const vdx_member *m, const double **end_ms) {
    *end_ms = m->step_end_ms;
    return m->n_step_times;
}

void vdx_member_get_stats(const vdx_member *m, vd_exec_stats *st) {
    *st = m->st;
    st->sgd_steps = m->sgd_steps;
    st->graph_launches = m->graph_launches;
    st->graph_captures = m->graph_captures;
}
