/* report.c — a plan as a table, as JSON, and as a Chrome trace. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "plan/plan_internal.h"
#include "util/json.h"

static const char *kind_name(vd_step_kind k) {
    switch (k) {
    case VD_STEP_FWD: return "fwd";
    case VD_STEP_BWD: return "bwd";
    case VD_STEP_SGD: return "sgd";
    default: return "end";
    }
}

static int n_offloaded(const vd_plan *p) {
    int n = 0;
    for (int t = 0; t < p->n_tensors; t++) n += p->tensors[t].offload;
    return n;
}

static int write_err(FILE *f, vd_err *e) {
    if (ferror(f)) return vd_errf(e, VD_EIO, "write error");
    return VD_OK;
}

/* --freeze: the bytes of the feature maps (x and layer outputs, as p's
 * tensors) that the backward pass would read were nothing frozen and does
 * not read now: a frozen weight's input, and every map of the layers whose
 * backward does not run (vd_layer.no_grad). 0 for a forward-only plan. */
static uint64_t maps_unread(const vd_plan *p, const vd_net *net) {
    uint64_t b = 0;
    for (int t = 0; t < p->n_tensors && !p->forward_only; t++) {
        vd_tensor_kind kind = p->tensors[t].kind;
        if (kind != VD_T_ACT && kind != VD_T_INPUT) continue;
        bool was = false, now = false;   /* read by some backward unfrozen / frozen */
        for (int u = 0; u < p->n_units; u++) {
            const vd_plan_layer *pl = &p->layers[u];
            bool in = false, x0, y0, x1, y1;
            for (int k = 0; k < net->layers[pl->layer].n_in; k++) in |= pl->in_t[k] == t;
            if (!in && pl->y != t) continue;
            vd_op_bwd_reads_unfrozen(net, pl->layer, &x0, &y0);
            vd_op_bwd_reads(net, pl->layer, &x1, &y1);
            was |= (in && x0) || (pl->y == t && y0);
            now |= (in && x1) || (pl->y == t && y1);
        }
        if (was && !now) b += p->tensors[t].bytes;
    }
    return b;
}

/* ---- table -------------------------------------------------------------- */

/* The copies and recomputes step st issues. */
static void table_actions(FILE *f, const vd_plan *p, const vd_net *net, const vd_step *st) {
    char b3[32];
    bool rc_open = false;
    for (int a = st->first_action; a < st->first_action + st->n_actions; a++) {
        const vd_action *A = &p->actions[a];
        if (A->kind == VD_A_RECOMPUTE) {
            char un[VD_NAME_MAX + 32];
            fprintf(f, "%s%s", rc_open ? "+" : " recompute ",
                    vd_plan_unit_name(p, net, A->arg, un, sizeof un));
            rc_open = true;
            continue;
        }
        if (rc_open) { fprintf(f, " (%.3f)", st->recompute_s * 1e3); rc_open = false; }
        if (A->kind == VD_A_OFFLOAD) {
            const vd_tensor *T = &p->tensors[A->arg];
            fprintf(f, " offload %s (%s, %.3f)", T->name, vd_fmt_bytes(T->bytes, b3, sizeof b3),
                    (T->t_d2h_end - T->t_d2h_start) * 1e3);
        } else if (A->kind == VD_A_LOAD_STAGED) {
            fprintf(f, " copy staged %s -> %s (%s, %.3f)", p->tensors[p->t_stage].name,
                    p->tensors[p->t_x].name,
                    vd_fmt_bytes(p->tensors[p->t_x].bytes, b3, sizeof b3), p->sim.stage_load_s * 1e3);
        } else if (A->kind == VD_A_PREFETCH) {
            const vd_interval *iv = &p->intervals[A->arg];
            const vd_tensor *T = &p->tensors[iv->tensor];
            if (iv->fill == VD_FILL_STAGE)
                fprintf(f, " stage %s (%s, %.3f, for the next iteration)", T->name,
                        vd_fmt_bytes(T->bytes, b3, sizeof b3),
                        (iv->t_h2d_end - iv->t_h2d_start) * 1e3);
            else if (p->t_stage >= 0 && iv->tensor == p->t_x && iv->first == 0)
                fprintf(f, " load %s (%s, only when not staged)", T->name,
                        vd_fmt_bytes(T->bytes, b3, sizeof b3));
            else if (T->offload && T->iv[1] == A->arg)
                fprintf(f, " prefetch %s (%s, %.3f, for step %d)", T->name,
                        vd_fmt_bytes(T->bytes, b3, sizeof b3),
                        (iv->t_h2d_end - iv->t_h2d_start) * 1e3, iv->need_step);
            else
                fprintf(f, " load %s (%s, %.3f)", T->name, vd_fmt_bytes(T->bytes, b3, sizeof b3),
                        (iv->t_h2d_end - iv->t_h2d_start) * 1e3);
        }
    }
}

/* The summary below the table. */
static void table_summary(FILE *f, const vd_plan *p, const vd_net *net) {
    char b1[32], b2[32], b3[32], lab[200];
    vd_plan_step_label(p, net, p->peak_step, lab, sizeof lab);
    fprintf(f, "\nsummary\n");
    fprintf(f, "  budget               %s%s\n", vd_fmt_bytes(p->budget, b1, sizeof b1),
            p->feasible ? "" : "  (does NOT fit)");
    fprintf(f, "  feasible             %s\n", p->feasible ? "yes" : "no");
    fprintf(f, "  peak memory (live)   %s at step %d (%s)\n",
            vd_fmt_bytes(p->live_peak, b1, sizeof b1), p->peak_step, lab);
    fprintf(f, "  pool high-water mark %s (fragmentation %.1f%%)\n",
            vd_fmt_bytes(p->hwm, b1, sizeof b1), p->frag * 100.0);
    if (p->n_units != p->n_layers)
        fprintf(f, "  split layers         %s\n", vd_plan_split_summary(p, net, lab, sizeof lab));
    /* the optimizer's state by name: what it costs beside the parameters */
    fprintf(f, "  persistent           %s (parameters, %s%s)\n",
            vd_fmt_bytes(p->persistent_bytes, b1, sizeof b1),
            net->train.optimizer == VD_OPT_ADAMW ? "AdamW's exp_avg and exp_avg_sq" : "momentum",
            p->forward_only ? ""
            : p->update_in_bwd ? "; each layer's gradients live in its backward step, "
                                 "which updates its parameters"
            : ", gradients");
    vd_freeze_count fc;
    vd_net_frozen_count(net, &fc);
    if (fc.frozen && !p->forward_only)
        fprintf(f, "  frozen (--freeze)    %d of %d parameter tensors; backward skipped in %d "
                "layers; feature maps the backward pass no longer reads: %s\n", fc.frozen,
                fc.params, fc.no_grad_layers, vd_fmt_bytes(maps_unread(p, net), b1, sizeof b1));
    fprintf(f, "  offloaded/iteration  %s in %d tensors (prefetched back %s; host store %s)\n",
            vd_fmt_bytes(p->offload_bytes, b1, sizeof b1), n_offloaded(p),
            vd_fmt_bytes(p->prefetch_bytes, b2, sizeof b2), vd_fmt_bytes(p->host_bytes, b3, sizeof b3));
    fprintf(f, "  recomputed/iteration %s in %d tensors (%d forward ops re-run, %.3f ms)\n",
            vd_fmt_bytes(p->recompute_bytes, b1, sizeof b1), p->n_recomputed, p->n_recompute_ops,
            p->recompute_s * 1e3);
    if (!p->forward_only) {
        if (p->t_stage >= 0) {
            const vd_interval *iv = &p->intervals[p->tensors[p->t_stage].iv[1]];
            vd_plan_step_label(p, net, p->stage_step, lab, sizeof lab);
            fprintf(f, "  input staging        on: next batch (%s) copied at step %d (%s), "
                       "%.3f-%.3f ms; step 0 copies it on the device (%.3f ms)\n",
                    vd_fmt_bytes(p->tensors[p->t_stage].bytes, b1, sizeof b1), p->stage_step, lab,
                    iv->t_h2d_start * 1e3, iv->t_h2d_end * 1e3, p->sim.stage_load_s * 1e3);
        } else {
            const char *why = p->stage == VD_STAGE_OFF ? "turned off"
                            : p->stage == VD_STAGE_NO_ROOM ? "the staging region does not fit the budget"
                            : p->stage == VD_STAGE_NO_GAIN ? "it would not make the iteration faster"
                            : "the plan does not fit";
            fprintf(f, "  input staging        none (%s): x is loaded at step 0\n", why);
        }
    }
    fprintf(f, "  predicted iteration  %.3f ms (compute %.3f ms, stalls %.3f ms; busy: d2h %.3f ms, "
               "h2d %.3f ms)%s\n",
            p->sim.iter_s * 1e3, p->sim.busy_s[0] * 1e3, p->sim.stall_s * 1e3,
            p->sim.busy_s[1] * 1e3, p->sim.busy_s[2] * 1e3,
            p->captured ? ", captured and replayed" : "");
    if (p->bound.bound_s > 0 && !isfinite(p->bound.bound_s)) {
        fprintf(f, "  lower bound          none: no training plan fits the budget\n");
    } else if (p->bound.bound_s > 0) {
        fprintf(f, "  lower bound          %.3f ms (compute %.3f ms; copies: %s must leave the device",
                p->bound.bound_s * 1e3, p->bound.compute_s * 1e3,
                vd_fmt_bytes(p->bound.leave_bytes, b1, sizeof b1));
        if (p->bound.leave_step >= 0)
            fprintf(f, " at step %d, %s", p->bound.leave_step,
                    vd_plan_step_label(p, net, p->bound.leave_step, lab, sizeof lab));
        fprintf(f, ")\n");
    }
    if (p->eval)
        fprintf(f, "  evaluation pass      peak %s, pool top %s\n",
                vd_fmt_bytes(p->eval->live_peak, b1, sizeof b1), vd_fmt_bytes(p->eval->hwm, b2, sizeof b2));
    if (p->note[0]) fprintf(f, "  note                 %s\n", p->note);
}

int vd_plan_write_table(FILE *f, const vd_plan *p, const vd_net *net, vd_err *e) {
    char b1[32], b2[32], lab[200];
    fprintf(f, "plan for %s, batch %d: policy %s", p->net, p->batch, vd_policy_name(p->policy));
    if (p->policy == VD_POLICY_DYN)
        fprintf(f, " (chose offload %s)", vd_policy_name(p->offload_policy));
    if (p->policy == VD_POLICY_AUTO) {
        if (p->offload_policy != VD_POLICY_AUTO)
            fprintf(f, " (its search lost to the paper's policies: offload %s)",
                    vd_policy_name(p->offload_policy));
        else if (n_offloaded(p) || p->n_recomputed)
            fprintf(f, " (per tensor: %d offloaded, %d recomputed)", n_offloaded(p), p->n_recomputed);
        else
            fprintf(f, " (nothing moved)");
    }
    fprintf(f, ", prefetch %s%s\n\n", vd_prefetch_name(p->prefetch),
            p->forward_only ? ", forward only" : "");
    fprintf(f, "%4s  %-28s %-10s %11s %11s %9s %9s %9s  %s\n", "step", "op", "algo", "in use",
            "pool top", "start ms", "comp ms", "stall ms",
            "copies issued (size, ms), recomputes (ms)");
    for (int s = 0; s < p->n_steps; s++) {
        const vd_step *st = &p->steps[s];
        vd_plan_step_label(p, net, s, lab, sizeof lab);
        /* the option of this step's pass (forward / backward may differ) */
        const char *algo = st->layer < 0 ? ""
                         : st->kind == VD_STEP_BWD ? p->layers[st->unit].algo_bwd_label
                                                   : p->layers[st->unit].algo_label;
        /* (a chunk's label has one two-byte character: printf pads bytes) */
        int w = 28 + (strstr(lab, "\u00d7") ? 1 : 0);
        fprintf(f, "%4d  %-*s %-10s %11s %11s %9.3f %9.3f %9.3f ", s, w, lab, algo,
                vd_fmt_bytes(st->mem_in_use, b1, sizeof b1), vd_fmt_bytes(st->mem_top, b2, sizeof b2),
                st->t_start * 1e3, st->compute_s * 1e3, st->stall_s * 1e3);
        table_actions(f, p, net, st);
        fputc('\n', f);
    }
    table_summary(f, p, net);
    return write_err(f, e);
}

/* ---- JSON --------------------------------------------------------------- */

/* Shorthands for the JSON builders below: each adds one member to object o
 * (a false sticks in ok; see vd_json_set). */
#define SET(o, k, v) vd_json_set((o), (k), (v), &ok)
#define SET_INT(o, k, x) SET(o, k, json_integer(x))
#define SET_U64(o, k, x) SET(o, k, vd_json_uint(x))
#define SET_REAL(o, k, x) SET(o, k, vd_json_real(x))
#define SET_STR(o, k, s) SET(o, k, vd_json_text(s))
#define SET_BOOL(o, k, b) SET(o, k, json_boolean(b))

/* The names of the tensors of step st's actions of one list ("offloads":
 * OFFLOAD, "prefetches": PREFETCH, "waits": WAIT_PREFETCH / WAIT_OFFLOAD). */
static json_t *step_tensors(const vd_plan *p, const vd_step *st, int li, bool *okp) {
    bool ok = true;
    json_t *arr = json_array();
    for (int a = st->first_action; a < st->first_action + st->n_actions; a++) {
        const vd_action *A = &p->actions[a];
        int t = -1;
        if (li == 0 && A->kind == VD_A_OFFLOAD) t = A->arg;
        if (li == 1 && A->kind == VD_A_PREFETCH) t = p->intervals[A->arg].tensor;
        if (li == 2 && A->kind == VD_A_WAIT_PREFETCH) t = p->intervals[A->arg].tensor;
        if (li == 2 && A->kind == VD_A_WAIT_OFFLOAD) t = A->arg;
        if (t >= 0) vd_json_push(arr, vd_json_text(p->tensors[t].name), &ok);
    }
    if (!ok) *okp = false;
    return arr;
}

/* The plan as a JSON object; NULL when out of memory. */
static json_t *plan_json(const vd_plan *p, const vd_net *net, const uint64_t *min_budgets) {
    bool ok = true;
    json_t *r = json_object();
    SET_STR(r, "net", p->net);
    SET_INT(r, "batch", p->batch);
    SET_STR(r, "policy", vd_policy_name(p->policy));
    SET_STR(r, "offload_policy", vd_policy_name(p->offload_policy));
    SET_STR(r, "prefetch", vd_prefetch_name(p->prefetch));
    SET_BOOL(r, "forward_only", p->forward_only);
    SET_U64(r, "budget", p->budget);
    SET_BOOL(r, "feasible", p->feasible);
    SET_U64(r, "peak_bytes", p->live_peak);
    SET_INT(r, "peak_step", p->peak_step);
    SET_U64(r, "hwm_bytes", p->hwm);
    SET_REAL(r, "fragmentation", p->frag);
    SET_U64(r, "persistent_bytes", p->persistent_bytes);
    SET_STR(r, "optimizer", vd_optimizer_name(net->train.optimizer));
    SET_U64(r, "optimizer_state_bytes", p->t_mom >= 0 ? p->tensors[p->t_mom].bytes : 0);
    SET_BOOL(r, "update_in_backward", p->update_in_bwd);
    SET_U64(r, "offload_bytes", p->offload_bytes);
    SET_U64(r, "prefetch_bytes", p->prefetch_bytes);
    SET_U64(r, "input_bytes", p->input_bytes);
    SET_U64(r, "host_bytes", p->host_bytes);
    SET_INT(r, "offloaded_tensors", n_offloaded(p));
    SET_U64(r, "recompute_bytes", p->recompute_bytes);
    SET_INT(r, "recomputed_tensors", p->n_recomputed);
    SET_INT(r, "recompute_ops", p->n_recompute_ops);
    SET_REAL(r, "recompute_s", p->recompute_s);
    SET_REAL(r, "predicted_iter_s", p->sim.iter_s);
    SET_BOOL(r, "captured", p->captured);
    if (p->bound.bound_s != 0) SET_REAL(r, "bound_s", p->bound.bound_s);
    json_t *pr = json_object();
    SET(r, "predicted", pr);
    SET_REAL(pr, "iter_s", p->sim.iter_s);
    SET_REAL(pr, "compute_s", p->sim.compute_s);
    SET_REAL(pr, "stall_s", p->sim.stall_s);
    SET_REAL(pr, "busy_compute_s", p->sim.busy_s[0]);
    SET_REAL(pr, "busy_d2h_s", p->sim.busy_s[1]);
    SET_REAL(pr, "busy_h2d_s", p->sim.busy_s[2]);
    json_t *is = json_object();
    SET(r, "input_staging", is);
    SET_STR(is, "state", vd_stage_name(p->stage));
    if (p->t_stage >= 0) {
        const vd_interval *iv = &p->intervals[p->tensors[p->t_stage].iv[1]];
        SET_STR(is, "tensor", p->tensors[p->t_stage].name);
        SET_U64(is, "bytes", p->tensors[p->t_stage].bytes);
        SET_INT(is, "issue_step", p->stage_step);
        SET_U64(is, "offset", iv->offset);
        SET_REAL(is, "h2d_start_s", iv->t_h2d_start);
        SET_REAL(is, "h2d_end_s", iv->t_h2d_end);
        SET_REAL(is, "load_s", p->sim.stage_load_s);
    }
    if (p->dp.ranks > 1) {      /* data parallel (vd_plan_dp): this plan is one rank's */
        json_t *dp = json_object();
        SET(r, "data_parallel", dp);
        SET_INT(dp, "ranks", p->dp.ranks);
        SET_INT(dp, "global_batch", p->batch * p->dp.ranks);
        SET_U64(dp, "grad_bytes", p->dp.grad_bytes);
        SET_INT(dp, "buckets", p->dp.n_buckets);
        SET_INT(dp, "allreduce_calls", p->dp.n_calls);
        SET_REAL(dp, "allreduce_bw", p->dp.bw);
        SET_REAL(dp, "allreduce_lat_s", p->dp.lat_s);
        SET_REAL(dp, "allreduce_s", p->dp.allreduce_s);
        SET_REAL(dp, "exposed_s", p->dp.exposed_s);
        SET_REAL(dp, "iter_s", p->dp.iter_s);
    }
    vd_freeze_count fc;
    vd_net_frozen_count(net, &fc);
    if (fc.frozen && !p->forward_only) {   /* --freeze */
        json_t *fz = json_object();
        SET(r, "frozen", fz);
        SET_INT(fz, "parameter_tensors", fc.frozen);
        SET_INT(fz, "of_parameter_tensors", fc.params);
        SET_INT(fz, "parameters", fc.frozen_numel);
        SET_INT(fz, "no_grad_layers", fc.no_grad_layers);
        SET_U64(fz, "maps_unread_bytes", maps_unread(p, net));
    }
    if (p->note[0]) SET_STR(r, "note", p->note);
    if (min_budgets) {
        json_t *mb = json_object();
        SET(r, "min_budgets", mb);
        for (int k = 0; k < VD_POLICY_COUNT; k++)
            SET_U64(mb, vd_policy_name((vd_policy)k), min_budgets[k]);
    }
    json_t *layers = json_array();
    SET(r, "layers", layers);
    for (int i = 0; ok && i < p->n_layers; i++) {
        const vd_plan_layer *pl = &p->layers[p->first_unit[i]];
        json_t *l = json_object();
        vd_json_push(layers, l, &ok);
        SET_STR(l, "name", net->layers[i].name);
        SET_STR(l, "op", vd_op_table[net->layers[i].op].name);
        SET_INT(l, "chunks", pl->n_chunks);
        SET_INT(l, "algo", pl->algo_fwd);
        SET_STR(l, "algo_label", pl->algo_label);
        SET_INT(l, "algo_fwd", pl->algo_fwd);
        SET_INT(l, "algo_bwd", pl->algo_bwd);
        SET_STR(l, "algo_bwd_label", pl->algo_bwd_label);
        SET_U64(l, "workspace", pl->ws_fwd_bytes);
        SET_U64(l, "fwd_workspace", pl->ws_fwd_bytes);
        SET_U64(l, "bwd_workspace", pl->ws_bwd_bytes);
        SET_U64(l, "dw_bytes", pl->dw >= 0 ? p->tensors[pl->dw].bytes : 0);
        SET_BOOL(l, "inplace", pl->inplace);
        SET_INT(l, "recompute_step", pl->rc_step);
        SET_BOOL(l, "no_grad", net->layers[i].no_grad);
    }
    json_t *tensors = json_array();
    SET(r, "tensors", tensors);
    for (int t = 0; ok && t < p->n_tensors; t++) {
        const vd_tensor *T = &p->tensors[t];
        json_t *o = json_object();
        vd_json_push(tensors, o, &ok);
        SET_STR(o, "name", T->name);
        SET_STR(o, "kind", vd_tensor_kind_name(T->kind));
        SET_U64(o, "bytes", T->bytes);
        SET_BOOL(o, "offload", T->offload);
        SET_BOOL(o, "recompute", T->recompute);
        if (T->offload) {
            SET_INT(o, "offload_step", T->host_src ? -1 : T->offload_step);
            SET_INT(o, "release_step", T->release_step);
            SET_INT(o, "prefetch_step", T->prefetch_step);
            SET_INT(o, "consumer_step", T->rd_after);
        }
        if (T->recompute) {
            SET_INT(o, "release_step", T->fwd_last + 1);
            SET_INT(o, "recompute_step", T->recompute_step);
            SET_REAL(o, "recompute_s", T->recompute_s);
        }
        json_t *ivs = json_array();
        SET(o, "intervals", ivs);
        for (int k = 0; ok && k < T->n_iv; k++) {
            const vd_interval *iv = &p->intervals[T->iv[k]];
            vd_json_push(ivs, json_pack("{s:i, s:i, s:o, s:o}", "first", iv->first,
                                        "last", iv->last, "offset", vd_json_uint(iv->offset),
                                        "bytes", vd_json_uint(iv->bytes)), &ok);
        }
    }
    json_t *steps = json_array();
    char un[VD_NAME_MAX + 32];
    SET(r, "steps", steps);
    for (int s = 0; ok && s < p->n_steps; s++) {
        const vd_step *st = &p->steps[s];
        json_t *o = json_object();
        vd_json_push(steps, o, &ok);
        SET_INT(o, "step", s);
        SET_STR(o, "kind", kind_name(st->kind));
        SET(o, "layer", st->layer >= 0 ? vd_json_text(net->layers[st->layer].name) : json_null());
        if (st->unit >= 0 && p->layers[st->unit].n_chunks > 1) {
            SET_INT(o, "chunk", p->layers[st->unit].chunk);
            SET_INT(o, "chunks", p->layers[st->unit].n_chunks);
        }
        SET_U64(o, "mem_bytes", st->mem_in_use);
        SET_U64(o, "top_bytes", st->mem_top);
        SET_REAL(o, "compute_s", st->compute_s);
        SET_REAL(o, "start_s", st->t_start);
        SET_REAL(o, "stall_s", st->stall_s);
        SET_REAL(o, "recompute_s", st->recompute_s);
        SET_REAL(o, "recompute_start_s", st->t_rc_start);
        json_t *rcs = json_array();
        SET(o, "recomputes", rcs);
        for (int a = st->first_action; ok && a < st->first_action + st->n_actions; a++)
            if (p->actions[a].kind == VD_A_RECOMPUTE)
                vd_json_push(rcs, vd_json_text(vd_plan_unit_name(p, net, p->actions[a].arg, un,
                                                                 sizeof un)), &ok);
        SET(o, "offloads", step_tensors(p, st, 0, &ok));
        SET(o, "prefetches", step_tensors(p, st, 1, &ok));
        SET(o, "waits", step_tensors(p, st, 2, &ok));
    }
    if (!ok) { json_decref(r); return NULL; }
    return r;
}

struct json_t *vd_plan_json(const vd_plan *p, const vd_net *net, const uint64_t *min_budgets) {
    return plan_json(p, net, min_budgets);
}

int vd_plan_write_json(FILE *f, const vd_plan *p, const vd_net *net,
                       const uint64_t *min_budgets, vd_err *e) {
    json_t *r = plan_json(p, net, min_budgets);
    if (!r) return vd_errf(e, VD_ENOMEM, "out of memory writing the plan as JSON");
    int rc = vd_json_write(f, r, e);
    json_decref(r);
    return rc;
}

/* ---- Chrome trace ------------------------------------------------------- */

/* A complete event ("ph": "X") on track tid of the process: name, category,
 * start and duration in seconds (written in microseconds), and args. */
static json_t *trace_x(const char *name, const char *cat, int tid, double t_s, double dur_s,
                       json_t *args) {
    json_t *ev = json_pack("{s:o, s:s, s:s, s:i, s:i, s:o, s:o}", "name", vd_json_text(name),
                           "cat", cat, "ph", "X", "pid", 1, "tid", tid,
                           "ts", vd_json_real(t_s * 1e6), "dur", vd_json_real(dur_s * 1e6));
    if (args && json_object_set_new(ev, "args", args) != 0) {
        json_decref(ev);
        return NULL;
    }
    return ev;
}

/* The trace as a JSON object; NULL when out of memory. */
static json_t *trace_json(const vd_plan *p, const vd_net *net, const vd_profile *prof) {
    bool ok = true;
    char lab[200];
    json_t *evs = json_array();
    json_t *r = json_pack("{s:s, s:o}", "displayTimeUnit", "ms", "traceEvents", evs);
    if (!r) return NULL;
    char title[256];
    snprintf(title, sizeof title, "vdnn plan %s batch %d policy %s", p->net, p->batch,
             vd_policy_name(p->policy));
    vd_json_push(evs, json_pack("{s:s, s:s, s:i, s:{s:o}}", "name", "process_name", "ph", "M",
                                "pid", 1, "args", "name", vd_json_text(title)), &ok);
    static const char *tracks[3] = {"compute", "d2h (offload)", "h2d (prefetch)"};
    for (int k = 0; k < 3; k++)
        vd_json_push(evs, json_pack("{s:s, s:s, s:i, s:i, s:{s:s}}", "name", "thread_name", "ph", "M",
                                    "pid", 1, "tid", k, "args", "name", tracks[k]), &ok);
    for (int s = 0; ok && s < p->n_steps; s++) {
        const vd_step *st = &p->steps[s];
        vd_plan_step_label(p, net, s, lab, sizeof lab);
        if (st->stall_s > 0)
            vd_json_push(evs, trace_x("stall", "stall", 0, st->t_rc_start - st->stall_s, st->stall_s,
                                      NULL), &ok);
        /* recomputes run back to back on the compute stream before the op */
        double rt = st->t_rc_start;
        for (int a = st->first_action; a < st->first_action + st->n_actions; a++) {
            const vd_action *A = &p->actions[a];
            if (A->kind != VD_A_RECOMPUTE) continue;
            double d = prof ? p->layers[A->arg].fwd_s : 0.0;
            char nm[VD_NAME_MAX + 48], un[VD_NAME_MAX + 32];
            snprintf(nm, sizeof nm, "recompute %s", vd_plan_unit_name(p, net, A->arg, un, sizeof un));
            vd_json_push(evs, trace_x(nm, "recompute", 0, rt, d,
                                      json_pack("{s:i, s:o}", "step", s, "layer",
                                                vd_json_text(net->layers[p->layers[A->arg].layer].name))), &ok);
            rt += d;
        }
        if (s == 0 && p->t_stage >= 0)
            vd_json_push(evs, trace_x("copy staged x", "stage", 0, st->t_rc_start - p->sim.stage_load_s,
                                      p->sim.stage_load_s, NULL), &ok);
        vd_json_push(evs, trace_x(lab, kind_name(st->kind), 0, st->t_start, st->compute_s,
                                  json_pack("{s:i, s:o}", "step", s, "mem_bytes",
                                            vd_json_uint(st->mem_in_use))), &ok);
        vd_json_push(evs, json_pack("{s:s, s:s, s:i, s:o, s:{s:o}}", "name", "device memory",
                                    "ph", "C", "pid", 1,
                                    "ts", vd_json_real((st->t_rc_start - st->stall_s) * 1e6),
                                    "args", "bytes", vd_json_uint(st->mem_in_use)), &ok);
    }
    for (int t = 0; ok && t < p->n_tensors; t++) {
        const vd_tensor *T = &p->tensors[t];
        if (T->offload && !T->host_src)
            vd_json_push(evs, trace_x(T->name, "offload", 1, T->t_d2h_start,
                                      T->t_d2h_end - T->t_d2h_start,
                                      json_pack("{s:o}", "bytes", vd_json_uint(T->bytes))), &ok);
    }
    for (int k = 0; ok && k < p->n_intervals; k++) {
        const vd_interval *iv = &p->intervals[k];
        if (iv->fill == VD_FILL_NONE) continue;
        if (p->t_stage >= 0 && iv->tensor == p->t_x && iv->first == 0) continue;  /* staged */
        const vd_tensor *T = &p->tensors[iv->tensor];
        const char *cat = iv->fill == VD_FILL_STAGE ? "stage"
                        : T->offload && T->iv[1] == k ? "prefetch" : "input";
        vd_json_push(evs, trace_x(T->name, cat, 2, iv->t_h2d_start, iv->t_h2d_end - iv->t_h2d_start,
                                  json_pack("{s:o, s:i, s:i}", "bytes", vd_json_uint(T->bytes),
                                            "issue_step", iv->first, "need_step", iv->need_step)),
                     &ok);
    }
    if (!ok) { json_decref(r); return NULL; }
    return r;
}

int vd_plan_write_trace(const char *path, const vd_plan *p, const vd_net *net,
                        const vd_profile *prof, vd_err *e) {
    json_t *r = trace_json(p, net, prof);
    if (!r) return vd_errf(e, VD_ENOMEM, "out of memory writing the trace");
    int rc = vd_json_save(path, r, e);
    json_decref(r);
    return rc;
}
