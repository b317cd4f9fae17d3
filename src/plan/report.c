/* report.c — a plan as a table, as JSON, and as a Chrome trace. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "plan/plan_internal.h"

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

/* ---- table -------------------------------------------------------------- */

/* The copies and recomputes step st issues. */
static void table_actions(FILE *f, const vd_plan *p, const vd_net *net, const vd_step *st) {
    char b3[32];
    bool rc_open = false;
    for (int a = st->first_action; a < st->first_action + st->n_actions; a++) {
        const vd_action *A = &p->actions[a];
        if (A->kind == VD_A_RECOMPUTE) {
            fprintf(f, "%s%s", rc_open ? "+" : " recompute ", net->layers[A->arg].name);
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
    fprintf(f, "  persistent           %s (parameters, momentum%s)\n",
            vd_fmt_bytes(p->persistent_bytes, b1, sizeof b1), p->forward_only ? "" : ", gradients");
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
               "h2d %.3f ms)\n",
            p->sim.iter_s * 1e3, p->sim.busy_s[0] * 1e3, p->sim.stall_s * 1e3,
            p->sim.busy_s[1] * 1e3, p->sim.busy_s[2] * 1e3);
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
                         : st->kind == VD_STEP_BWD ? p->layers[st->layer].algo_bwd_label
                                                   : p->layers[st->layer].algo_label;
        fprintf(f, "%4d  %-28s %-10s %11s %11s %9.3f %9.3f %9.3f ", s, lab, algo,
                vd_fmt_bytes(st->mem_in_use, b1, sizeof b1), vd_fmt_bytes(st->mem_top, b2, sizeof b2),
                st->t_start * 1e3, st->compute_s * 1e3, st->stall_s * 1e3);
        table_actions(f, p, net, st);
        fputc('\n', f);
    }
    table_summary(f, p, net);
    return write_err(f, e);
}

/* ---- JSON --------------------------------------------------------------- */

int vd_plan_write_json(FILE *f, const vd_plan *p, const vd_net *net,
                       const uint64_t *min_budgets, vd_err *e) {
    char lab[200];
    fprintf(f, "{\n  \"net\": ");
    vd_json_str(f, p->net);
    fprintf(f, ",\n  \"batch\": %d,\n  \"policy\": \"%s\",\n  \"offload_policy\": \"%s\",\n"
               "  \"prefetch\": \"%s\",\n  \"forward_only\": %s,\n",
            p->batch, vd_policy_name(p->policy), vd_policy_name(p->offload_policy),
            vd_prefetch_name(p->prefetch), p->forward_only ? "true" : "false");
    fprintf(f, "  \"budget\": %llu,\n  \"feasible\": %s,\n  \"peak_bytes\": %llu,\n"
               "  \"peak_step\": %d,\n  \"hwm_bytes\": %llu,\n  \"fragmentation\": %.6f,\n"
               "  \"persistent_bytes\": %llu,\n  \"offload_bytes\": %llu,\n  \"prefetch_bytes\": %llu,\n"
               "  \"input_bytes\": %llu,\n  \"host_bytes\": %llu,\n  \"offloaded_tensors\": %d,\n"
               "  \"recompute_bytes\": %llu,\n  \"recomputed_tensors\": %d,\n  \"recompute_ops\": %d,\n"
               "  \"recompute_s\": %.9g,\n",
            (unsigned long long)p->budget, p->feasible ? "true" : "false",
            (unsigned long long)p->live_peak, p->peak_step, (unsigned long long)p->hwm, p->frag,
            (unsigned long long)p->persistent_bytes, (unsigned long long)p->offload_bytes,
            (unsigned long long)p->prefetch_bytes, (unsigned long long)p->input_bytes,
            (unsigned long long)p->host_bytes, n_offloaded(p), (unsigned long long)p->recompute_bytes,
            p->n_recomputed, p->n_recompute_ops, p->recompute_s);
    fprintf(f, "  \"predicted_iter_s\": %.9g,\n  \"predicted\": {\"iter_s\": %.9g, \"compute_s\": %.9g, "
               "\"stall_s\": %.9g, \"busy_compute_s\": %.9g, \"busy_d2h_s\": %.9g, \"busy_h2d_s\": %.9g},\n",
            p->sim.iter_s, p->sim.iter_s, p->sim.compute_s, p->sim.stall_s, p->sim.busy_s[0],
            p->sim.busy_s[1], p->sim.busy_s[2]);
    fprintf(f, "  \"input_staging\": {\"state\": \"%s\"", vd_stage_name(p->stage));
    if (p->t_stage >= 0) {
        const vd_interval *iv = &p->intervals[p->tensors[p->t_stage].iv[1]];
        fprintf(f, ", \"tensor\": ");
        vd_json_str(f, p->tensors[p->t_stage].name);
        fprintf(f, ", \"bytes\": %llu, \"issue_step\": %d, \"offset\": %llu, \"h2d_start_s\": %.9g, "
                   "\"h2d_end_s\": %.9g, \"load_s\": %.9g",
                (unsigned long long)p->tensors[p->t_stage].bytes, p->stage_step,
                (unsigned long long)iv->offset, iv->t_h2d_start, iv->t_h2d_end, p->sim.stage_load_s);
    }
    fprintf(f, "},\n");
    if (p->note[0]) { fprintf(f, "  \"note\": "); vd_json_str(f, p->note); fprintf(f, ",\n"); }
    if (min_budgets) {
        fprintf(f, "  \"min_budgets\": {");
        for (int k = 0; k < VD_POLICY_COUNT; k++)
            fprintf(f, "%s\"%s\": %llu", k ? ", " : "", vd_policy_name((vd_policy)k),
                    (unsigned long long)min_budgets[k]);
        fprintf(f, "},\n");
    }
    fprintf(f, "  \"layers\": [");
    for (int i = 0; i < p->n_layers; i++) {
        const vd_plan_layer *pl = &p->layers[i];
        fprintf(f, "%s\n    {\"name\": ", i ? "," : "");
        vd_json_str(f, net->layers[i].name);
        fprintf(f, ", \"algo\": %d, \"algo_label\": ", pl->algo_fwd);
        vd_json_str(f, pl->algo_label);
        fprintf(f, ", \"algo_fwd\": %d, \"algo_bwd\": %d, \"algo_bwd_label\": ", pl->algo_fwd,
                pl->algo_bwd);
        vd_json_str(f, pl->algo_bwd_label);
        fprintf(f, ", \"workspace\": %llu, \"fwd_workspace\": %llu, \"bwd_workspace\": %llu, "
                   "\"inplace\": %s, \"recompute_step\": %d}",
                (unsigned long long)pl->ws_fwd_bytes, (unsigned long long)pl->ws_fwd_bytes,
                (unsigned long long)pl->ws_bwd_bytes, pl->inplace ? "true" : "false", pl->rc_step);
    }
    fprintf(f, "\n  ],\n  \"tensors\": [");
    for (int t = 0; t < p->n_tensors; t++) {
        const vd_tensor *T = &p->tensors[t];
        fprintf(f, "%s\n    {\"name\": ", t ? "," : "");
        vd_json_str(f, T->name);
        fprintf(f, ", \"kind\": \"%s\", \"bytes\": %llu, \"offload\": %s, \"recompute\": %s",
                vd_tensor_kind_name(T->kind), (unsigned long long)T->bytes,
                T->offload ? "true" : "false", T->recompute ? "true" : "false");
        if (T->offload)
            fprintf(f, ", \"offload_step\": %d, \"release_step\": %d, \"prefetch_step\": %d, "
                       "\"consumer_step\": %d",
                    T->host_src ? -1 : T->offload_step, T->release_step, T->prefetch_step, T->bwd_first);
        if (T->recompute)
            fprintf(f, ", \"release_step\": %d, \"recompute_step\": %d, \"recompute_s\": %.9g",
                    T->fwd_last + 1, T->recompute_step, T->recompute_s);
        fprintf(f, ", \"intervals\": [");
        for (int k = 0; k < T->n_iv; k++) {
            const vd_interval *iv = &p->intervals[T->iv[k]];
            fprintf(f, "%s{\"first\": %d, \"last\": %d, \"offset\": %llu, \"bytes\": %llu}", k ? ", " : "",
                    iv->first, iv->last, (unsigned long long)iv->offset, (unsigned long long)iv->bytes);
        }
        fprintf(f, "]}");
    }
    fprintf(f, "\n  ],\n  \"steps\": [");
    for (int s = 0; s < p->n_steps; s++) {
        const vd_step *st = &p->steps[s];
        fprintf(f, "%s\n    {\"step\": %d, \"kind\": \"%s\", \"layer\": ", s ? "," : "", s, kind_name(st->kind));
        if (st->layer >= 0) vd_json_str(f, net->layers[st->layer].name);
        else fprintf(f, "null");
        (void)lab;
        fprintf(f, ", \"mem_bytes\": %llu, \"top_bytes\": %llu, \"compute_s\": %.9g, \"start_s\": %.9g, "
                   "\"stall_s\": %.9g, \"recompute_s\": %.9g, \"recompute_start_s\": %.9g",
                (unsigned long long)st->mem_in_use, (unsigned long long)st->mem_top, st->compute_s,
                st->t_start, st->stall_s, st->recompute_s, st->t_rc_start);
        fprintf(f, ", \"recomputes\": [");
        int nr = 0;
        for (int a = st->first_action; a < st->first_action + st->n_actions; a++)
            if (p->actions[a].kind == VD_A_RECOMPUTE) {
                if (nr++) fprintf(f, ", ");
                vd_json_str(f, net->layers[p->actions[a].arg].name);
            }
        fprintf(f, "]");
        const char *lists[3] = {"offloads", "prefetches", "waits"};
        for (int li = 0; li < 3; li++) {
            fprintf(f, ", \"%s\": [", lists[li]);
            int n = 0;
            for (int a = st->first_action; a < st->first_action + st->n_actions; a++) {
                const vd_action *A = &p->actions[a];
                int t = -1;
                if (li == 0 && A->kind == VD_A_OFFLOAD) t = A->arg;
                if (li == 1 && A->kind == VD_A_PREFETCH) t = p->intervals[A->arg].tensor;
                if (li == 2 && A->kind == VD_A_WAIT_PREFETCH) t = p->intervals[A->arg].tensor;
                if (li == 2 && A->kind == VD_A_WAIT_OFFLOAD) t = A->arg;
                if (t < 0) continue;
                if (n++) fprintf(f, ", ");
                vd_json_str(f, p->tensors[t].name);
            }
            fprintf(f, "]");
        }
        fprintf(f, "}");
    }
    fprintf(f, "\n  ]\n}\n");
    return write_err(f, e);
}

/* ---- Chrome trace ------------------------------------------------------- */

int vd_plan_write_trace(const char *path, const vd_plan *p, const vd_net *net,
                        const vd_profile *prof, vd_err *e) {
    char *buf = NULL;
    size_t n = 0;
    char lab[200];
    FILE *f = open_memstream(&buf, &n);
    if (!f) return vd_errf(e, VD_ENOMEM, "out of memory writing the trace");
    fprintf(f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
    fprintf(f, "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, \"args\": {\"name\": ");
    char title[256];
    snprintf(title, sizeof title, "vdnn plan %s batch %d policy %s", p->net, p->batch,
             vd_policy_name(p->policy));
    vd_json_str(f, title);
    fprintf(f, "}}");
    static const char *tracks[3] = {"compute", "d2h (offload)", "h2d (prefetch)"};
    for (int k = 0; k < 3; k++)
        fprintf(f, ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": %d, "
                   "\"args\": {\"name\": \"%s\"}}", k, tracks[k]);
    for (int s = 0; s < p->n_steps; s++) {
        const vd_step *st = &p->steps[s];
        vd_plan_step_label(p, net, s, lab, sizeof lab);
        if (st->stall_s > 0)
            fprintf(f, ",\n{\"name\": \"stall\", \"cat\": \"stall\", \"ph\": \"X\", \"pid\": 1, \"tid\": 0, "
                       "\"ts\": %.3f, \"dur\": %.3f}",
                    (st->t_rc_start - st->stall_s) * 1e6, st->stall_s * 1e6);
        /* recomputes run back to back on the compute stream before the op */
        double rt = st->t_rc_start;
        for (int a = st->first_action; a < st->first_action + st->n_actions; a++) {
            const vd_action *A = &p->actions[a];
            if (A->kind != VD_A_RECOMPUTE) continue;
            double d = prof ? prof->layers[A->arg].algos[p->layers[A->arg].algo_fwd].fwd_s : 0.0;
            char nm[VD_NAME_MAX + 16];
            snprintf(nm, sizeof nm, "recompute %s", net->layers[A->arg].name);
            fprintf(f, ",\n{\"name\": ");
            vd_json_str(f, nm);
            fprintf(f, ", \"cat\": \"recompute\", \"ph\": \"X\", \"pid\": 1, \"tid\": 0, \"ts\": %.3f, "
                       "\"dur\": %.3f, \"args\": {\"step\": %d, \"layer\": ",
                    rt * 1e6, d * 1e6, s);
            vd_json_str(f, net->layers[A->arg].name);
            fprintf(f, "}}");
            rt += d;
        }
        if (s == 0 && p->t_stage >= 0)
            fprintf(f, ",\n{\"name\": \"copy staged x\", \"cat\": \"stage\", \"ph\": \"X\", \"pid\": 1, "
                       "\"tid\": 0, \"ts\": %.3f, \"dur\": %.3f}",
                    (st->t_rc_start - p->sim.stage_load_s) * 1e6, p->sim.stage_load_s * 1e6);
        fprintf(f, ",\n{\"name\": ");
        vd_json_str(f, lab);
        fprintf(f, ", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": 1, \"tid\": 0, \"ts\": %.3f, \"dur\": %.3f, "
                   "\"args\": {\"step\": %d, \"mem_bytes\": %llu}}",
                kind_name(st->kind), st->t_start * 1e6, st->compute_s * 1e6, s,
                (unsigned long long)st->mem_in_use);
        fprintf(f, ",\n{\"name\": \"device memory\", \"ph\": \"C\", \"pid\": 1, \"ts\": %.3f, "
                   "\"args\": {\"bytes\": %llu}}",
                (st->t_rc_start - st->stall_s) * 1e6, (unsigned long long)st->mem_in_use);
    }
    for (int t = 0; t < p->n_tensors; t++) {
        const vd_tensor *T = &p->tensors[t];
        if (T->offload && !T->host_src) {
            fprintf(f, ",\n{\"name\": ");
            vd_json_str(f, T->name);
            fprintf(f, ", \"cat\": \"offload\", \"ph\": \"X\", \"pid\": 1, \"tid\": 1, \"ts\": %.3f, "
                       "\"dur\": %.3f, \"args\": {\"bytes\": %llu}}",
                    T->t_d2h_start * 1e6, (T->t_d2h_end - T->t_d2h_start) * 1e6,
                    (unsigned long long)T->bytes);
        }
    }
    for (int k = 0; k < p->n_intervals; k++) {
        const vd_interval *iv = &p->intervals[k];
        if (iv->fill == VD_FILL_NONE) continue;
        if (p->t_stage >= 0 && iv->tensor == p->t_x && iv->first == 0) continue;  /* staged */
        const vd_tensor *T = &p->tensors[iv->tensor];
        fprintf(f, ",\n{\"name\": ");
        vd_json_str(f, T->name);
        fprintf(f, ", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": 1, \"tid\": 2, \"ts\": %.3f, "
                   "\"dur\": %.3f, \"args\": {\"bytes\": %llu, \"issue_step\": %d, \"need_step\": %d}}",
                iv->fill == VD_FILL_STAGE ? "stage" : T->offload && T->iv[1] == k ? "prefetch" : "input",
                iv->t_h2d_start * 1e6,
                (iv->t_h2d_end - iv->t_h2d_start) * 1e6, (unsigned long long)T->bytes, iv->first,
                iv->need_step);
    }
    fprintf(f, "\n]}\n");
    if (fclose(f) != 0) { free(buf); return vd_errf(e, VD_ENOMEM, "out of memory writing the trace"); }
    int rc = vd_write_file_atomic(path, buf, n, e);
    free(buf);
    return rc;
}
