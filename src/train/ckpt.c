/* ckpt.c — safetensors checkpoints; the format is described in ckpt.h. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include "vd_config.h"
#include "train/ckpt.h"
#include "util/json.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "checkpoints are written with memcpy: a little-endian host is required"
#endif

#define ST_MAX_HEADER ((uint64_t)100 << 20)   /* safetensors' own limit */
/* The largest header a checkpoint of a given net can need: its metadata
 * (vdnn writes a few hundred bytes; 64 KiB leaves room for a PyTorch
 * writer's) and one entry per tensor, at most 1 KiB each (a name of at most
 * VD_NAME_MAX + 16 bytes, even with every byte escaped as \u00XX, plus the
 * dtype, a shape of 4 dimensions and two offsets): at most two per
 * parameter (AdamW's state file: exp_avg and exp_avg_sq of each). A larger
 * header cannot be a checkpoint of that net, and is refused before it is
 * parsed. */
#define ST_HEADER_META ((uint64_t)64 << 10)
#define ST_HEADER_ENTRY ((uint64_t)1 << 10)
/* and the "classes" metadata, per class: a name of at most NAME_MAX bytes
 * (vd_ckpt_save_opts.classes), each byte at most 7 when escaped twice (a
 * control byte: \u00XX in the array, its backslash escaped again in the
 * header), its quotes and comma */
#define ST_HEADER_CLASS ((uint64_t)2 << 10)
static uint64_t st_max_header(const vd_net *net) {
    if (!net) return ST_MAX_HEADER;
    uint64_t m = ST_HEADER_META + (2 * (uint64_t)net->n_params + 2) * ST_HEADER_ENTRY +
                 (uint64_t)net->classes * ST_HEADER_CLASS;
    return m < ST_MAX_HEADER ? m : ST_MAX_HEADER;
}

/* ======================================================================== */
/* Small helpers                                                             */
/* ======================================================================== */

static uint64_t fnv1a64(const void *data, size_t n) {
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) { h ^= p[i]; h *= 0x100000001b3ull; }
    return h;
}


/* ======================================================================== */
/* Writing                                                                   */
/* ======================================================================== */

typedef struct out_tensor {
    char name[VD_NAME_MAX + 48];
    const char *dtype;          /* "F32" | "BF16" | "I64" */
    int ndim;
    int64_t shape[4];
    const void *data;
    uint64_t bytes;
} out_tensor;

typedef struct meta_kv { const char *k; char v[128]; const char *vs; /* overrides v when set */ } meta_kv;

/* The header object: __metadata__ first, then the tensors in file order,
 * each {"dtype", "shape", "data_offsets"}; *data_n gets the data bytes. */
static int st_header(const out_tensor *t, int nt, const meta_kv *m, int nm, json_t **out,
                     uint64_t *data_n, vd_err *e) {
    for (int i = 0; i < nt; i++)       /* safetensors headers are UTF-8 (readers insist) */
        if (!vd_json_utf8(t[i].name))
            return vd_errf(e, VD_EDATA, "checkpoint: tensor name '%s' is not valid UTF-8",
                           t[i].name);
    bool ok = true;
    json_t *h = json_object(), *md = json_object();
    vd_json_set(h, "__metadata__", md, &ok);
    for (int i = 0; ok && i < nm; i++) {
        const char *v = m[i].vs ? m[i].vs : m[i].v;
        /* only the data set path can be other than UTF-8 (file names are bytes):
         * then it is not recorded, as by older versions, and --data decides */
        if (m[i].vs && !vd_json_utf8(v)) continue;
        vd_json_set(md, m[i].k, vd_json_text(v), &ok);
    }
    uint64_t off = 0;
    for (int i = 0; ok && i < nt; i++) {
        json_t *shape = json_array();
        for (int d = 0; d < t[i].ndim; d++) vd_json_push(shape, json_integer(t[i].shape[d]), &ok);
        vd_json_set(h, t[i].name,
                    json_pack("{s:s, s:o, s:[I,I]}", "dtype", t[i].dtype, "shape", shape,
                              "data_offsets", (json_int_t)off, (json_int_t)(off + t[i].bytes)),
                    &ok);
        off += t[i].bytes;
    }
    if (!ok) {
        json_decref(h);
        return vd_errf(e, VD_ENOMEM, "out of memory building a checkpoint header");
    }
    if (json_object_size(h) != (size_t)nt + 1) {   /* a set replaced an earlier name */
        json_decref(h);
        return vd_errf(e, VD_EINTERNAL, "checkpoint: two tensors have the same name");
    }
    *out = h;
    *data_n = off;
    return VD_OK;
}

/* Serialise tensors (already in file order) and metadata into one buffer:
 * the 8-byte header length, the header compact ({"a":1,"b":[2,3]}; jansson
 * keeps the insertion order) and padded with spaces so that the data starts
 * 8-aligned, then the data. */
static int st_build(const out_tensor *t, int nt, const meta_kv *m, int nm, char **out,
                    size_t *out_n, vd_err *e) {
    json_t *hdr = NULL;
    uint64_t off = 0;
    int rc = st_header(t, nt, m, nm, &hdr, &off, e);
    if (rc) return rc;
    const size_t flags = JSON_COMPACT | JSON_PRESERVE_ORDER;
    size_t hn = json_dumpb(hdr, NULL, 0, flags);
    uint64_t hl = hn + (8 - hn % 8) % 8, total;
    if (!hn) {
        json_decref(hdr);
        return vd_errf(e, VD_ENOMEM, "out of memory building a checkpoint header");
    }
    if (!vd_add_u64(8 + hl, off, &total) || total > SIZE_MAX) {
        json_decref(hdr);
        return vd_errf(e, VD_ENOMEM, "checkpoint too large");
    }
    char *buf = vd_malloc((size_t)total, e);
    if (!buf) { json_decref(hdr); return VD_ENOMEM; }
    for (int k = 0; k < 8; k++) buf[k] = (char)((hl >> (8 * k)) & 0xFF);
    size_t got = json_dumpb(hdr, buf + 8, hn, flags);
    json_decref(hdr);
    if (got != hn) {
        vd_free(buf);
        return vd_errf(e, VD_ENOMEM, "out of memory building a checkpoint header");
    }
    memset(buf + 8 + hn, ' ', (size_t)(hl - hn));
    char *d = buf + 8 + hl;
    for (int i = 0; i < nt; i++) {
        if (t[i].bytes) memcpy(d, t[i].data, (size_t)t[i].bytes);
        d += t[i].bytes;
    }
    *out = buf;
    *out_n = (size_t)total;
    return VD_OK;
}

/* The class names as the "classes" metadata value (a JSON array, compact;
 * jansson's block: release with classes_free), or NULL: none to record (see
 * vd_ckpt_save_opts.classes), or out of memory (the save goes on without). */
static char *classes_json(const vd_net *net, const char *const *names, int n) {
    if (!names || n < 1 || n > net->classes) return NULL;
    json_t *a = json_array();
    bool ok = a != NULL;
    for (int i = 0; ok && i < n; i++) {
        ok = strlen(names[i]) <= NAME_MAX && vd_json_utf8(names[i]);
        if (ok) vd_json_push(a, json_string(names[i]), &ok);
    }
    char *s = ok ? json_dumps(a, JSON_COMPACT) : NULL;
    json_decref(a);
    return s;
}

static void classes_free(char *s) {
    json_free_t jfree;          /* jansson's own free (util/json.c counts it) */
    json_get_alloc_funcs(NULL, &jfree);
    if (s) jfree(s);
}

/* Parameter p of the net as tensor "<prefix><name>": F32 from base (floats
 * at p->offset), or BF16 from bf (when non-NULL: uint16 at p->offset). */
static void param_tensor(out_tensor *t, const vd_param *p, const char *prefix, const float *base,
                         const uint16_t *bf) {
    snprintf(t->name, sizeof t->name, "%s%s", prefix, p->name);
    t->dtype = bf ? "BF16" : "F32";
    t->ndim = p->ndim;
    for (int d = 0; d < p->ndim; d++) t->shape[d] = p->shape[d];
    if (bf) t->data = bf + p->offset;
    else t->data = base + p->offset;
    t->bytes = (uint64_t)p->numel * (bf ? sizeof *bf : sizeof *base);
}


/* ======================================================================== */
/* Crash-safe commit of a model + state pair (order described in ckpt.h)    */
/* ======================================================================== */

/* Does the state file sp record the hash of the model file path? false when
 * either is missing or unreadable. */
static bool state_matches(const char *path, const char *sp);

/* path + suffix (any length: a fixed buffer would silently write or read
 * the state of a truncated name); NULL + VD_ENOMEM in e on failure. */
static char *path_cat(const char *path, const char *suffix, vd_err *e) {
    return vd_strfmt(e, "%s%s", path, suffix);
}

static int commit_pair(const char *path_given, const char *model, size_t model_n,
                       const char *state, size_t state_n, const vd_ckpt_save_opts *o, vd_err *e) {
    /* a symlink FILE is written through (the pair goes beside its target);
     * a FILE or FILE.state that is a device, FIFO or directory is refused */
    char *path, *sp_checked = NULL;
    int orc = vd_output_path(path_given, &path, e);
    if (orc) return orc;
    char *sp = path_cat(path, ".state", e);
    if (sp && (orc = vd_output_path(sp, &sp_checked, e))) { vd_free(sp); vd_free(path); return orc; }
    vd_free(sp_checked);
    char *prev = sp ? path_cat(sp, ".prev", e) : NULL;
    char *mt = NULL, *stt = NULL, *pt = NULL;
    int rc = VD_OK;
    if (!sp || !prev) { rc = VD_ENOMEM; goto out; }
    /* 0. what killed saves left behind (FILE.tmp.PID.* is as large as FILE) */
    (void)vd_tmp_clean_stale(path);
    (void)vd_tmp_clean_stale(sp);
    (void)vd_tmp_clean_stale(prev);
    /* 1. both temporaries, durable before anything visible changes */
    if ((rc = vd_tmp_write(path, model, model_n, &mt, e))) goto out;
    if ((rc = vd_tmp_write(sp, state, state_n, &stt, e))) goto out;
    /* 2. keep the current pair's state reachable as FILE.state.prev. Only a
     * state that belongs to the current FILE is worth keeping: after an
     * interrupted save FILE.state is the orphan and .prev the good one. */
    if (state_matches(path, sp)) {
        /* a fresh name (link never follows or replaces what is there) */
        if (!(pt = vd_tmp_name(prev, e))) { rc = VD_ENOMEM; goto out; }
        if (link(sp, pt) != 0) {
            rc = vd_errf(e, VD_EIO, "%s: cannot link %s to it: %s", pt, sp, strerror(errno));
            VD_FREE(pt);
            goto out;
        }
        if (rename(pt, prev) != 0) {
            rc = vd_errf(e, VD_EIO, "%s: rename failed: %s", prev, strerror(errno));
            unlink(pt);
            goto out;
        }
        if ((rc = vd_fsync_parent_dir(path, e))) goto out;
    }
    /* 3. the new state, then the new model: in between, FILE + .prev pair */
    if (rename(stt, sp) != 0) {
        rc = vd_errf(e, VD_EIO, "%s: rename failed: %s", sp, strerror(errno));
        goto out;
    }
    VD_FREE(stt);   /* renamed: nothing to remove */
    if ((rc = vd_fsync_parent_dir(path, e))) goto out;
    if (o && o->after_state && o->after_state(o->ctx, path)) {   /* the crash window */
        rc = vd_errf(e, VD_EIO, "%s: stopped after the state rename (after_state hook)", path);
        goto out;
    }
    if (rename(mt, path) != 0) {
        rc = vd_errf(e, VD_EIO, "%s: rename failed: %s", path, strerror(errno));
        goto out;
    }
    VD_FREE(mt);
    rc = vd_fsync_parent_dir(path, e);
out:
    if (mt) unlink(mt);
    if (stt) unlink(stt);
    vd_free(sp); vd_free(prev); vd_free(mt); vd_free(stt); vd_free(pt);
    vd_free(path);
    return rc;
}

int vd_ckpt_save(const char *path, const vd_net *net, const float *params,
                 const float *state, const vd_train_state *st, vd_err *e) {
    return vd_ckpt_save_ex(path, net, params, state, st, NULL, e);
}

/* The state file's tensor name prefixes of optimizer o, one per state
 * array (vd_optimizer_state_arrays): torch's state_dict names. */
static const char *const *state_prefixes(vd_optimizer o) {
    static const char *const sgd[] = {"momentum."}, *const adamw[] = {"exp_avg.", "exp_avg_sq."};
    return o == VD_OPT_ADAMW ? adamw : sgd;
}

int vd_ckpt_save_ex(const char *path, const vd_net *net, const float *params,
                    const float *state, const vd_train_state *st,
                    const vd_ckpt_save_opts *so, vd_err *e) {
    vd_ckpt_dtype dtype = so ? so->dtype : VD_CKPT_F32;
    if (dtype != VD_CKPT_F32 && dtype != VD_CKPT_BF16)
        return vd_errf(e, VD_EINTERNAL, "checkpoint: unknown save dtype %d", (int)dtype);
    int n_bn = 0;
    for (int i = 0; i < net->n_layers; i++) n_bn += vd_op_table[net->layers[i].op].step_counter;
    int arrays = vd_optimizer_state_arrays(net->train.optimizer);
    int cap = net->n_params + n_bn > arrays * net->n_params ? net->n_params + n_bn
                                                            : arrays * net->n_params;
    out_tensor *t = vd_calloc((size_t)(cap > 0 ? cap : 1), sizeof *t, e);
    int64_t *nbt = vd_calloc((size_t)(n_bn > 0 ? n_bn : 1), sizeof *nbt, e);
    /* BF16: a rounded copy of every parameter and buffer (params stay the
     * fp32 master weights the run continues from) */
    uint16_t *bf = NULL;
    if (t && nbt && dtype == VD_CKPT_BF16) {
        bf = vd_malloc(sizeof *bf * (size_t)(net->param_floats ? net->param_floats : 1), e);
        if (bf)
            for (int i = 0; i < net->n_params; i++) {
                const vd_param *p = &net->params[i];
                for (int64_t k = 0; k < p->numel; k++)
                    bf[p->offset + k] = vd_f32_to_bf16(params[p->offset + k]);
            }
    }
    if (!t || !nbt || (dtype == VD_CKPT_BF16 && !bf)) {
        vd_free(t); vd_free(nbt); vd_free(bf);
        return VD_ENOMEM;
    }
    int nt = 0, k = 0;
    /* I64 first (8-byte alignment), then F32 / BF16 in the net's parameter order */
    for (int i = 0; i < net->n_layers; i++) {
        if (!vd_op_table[net->layers[i].op].step_counter) continue;
        nbt[k] = st->iteration;
        out_tensor *o = &t[nt++];
        snprintf(o->name, sizeof o->name, "%s.num_batches_tracked", net->layers[i].name);
        o->dtype = "I64";
        o->ndim = 0;
        o->data = &nbt[k++];
        o->bytes = 8;
    }
    for (int i = 0; i < net->n_params; i++) param_tensor(&t[nt++], &net->params[i], "", params, bf);

    meta_kv m[24];   /* the state file: 12 keys, 6 more for a loss scale, 3 for the best */
    memset(m, 0, sizeof m);
    int nm = 0;
    char *classes = so ? classes_json(net, so->classes, so->n_classes) : NULL;
    if (classes) { m[nm].k = "classes"; m[nm++].vs = classes; }
    m[nm].k = "format"; snprintf(m[nm++].v, sizeof m[0].v, "pt");
    m[nm].k = "iteration"; snprintf(m[nm++].v, sizeof m[0].v, "%" PRId64, st->iteration);
    m[nm].k = "net"; snprintf(m[nm++].v, sizeof m[0].v, "%s", net->name);
    m[nm].k = "producer"; snprintf(m[nm++].v, sizeof m[0].v, "vdnn %s", VD_VERSION);
    char *buf = NULL;
    size_t n = 0;
    int rc = st_build(t, nt, m, nm, &buf, &n, e);
    if (rc) goto out;
    if (!state) {
        rc = vd_write_file_atomic(path, buf, n, e);
        vd_free(buf);
        goto out;
    }
    char *model_buf = buf;
    size_t model_n = n;
    uint64_t model_hash = fnv1a64(buf, n);
    buf = NULL;

    nt = 0;   /* F32: SGD's momentum.*, AdamW's exp_avg.* then exp_avg_sq.* */
    for (int a = 0; a < arrays; a++)
        for (int i = 0; i < net->n_params; i++)
            if (net->params[i].kind == VD_PARAM_WEIGHT)
                param_tensor(&t[nt++], &net->params[i], state_prefixes(net->train.optimizer)[a],
                             state + (int64_t)a * net->param_floats, NULL);
    memset(m, 0, sizeof m);   /* the model's keys gone (a "classes" vs among them) */
    nm = 0;
    m[nm].k = "batch"; snprintf(m[nm++].v, sizeof m[0].v, "%d", st->batch);
    const vd_train_best *b = &st->best;
    if (b->known) {   /* --save-best, --early-stop (sorted keys: the rest below) */
        m[nm].k = "best_accuracy"; snprintf(m[nm++].v, sizeof m[0].v, "%.17g", b->acc);
        m[nm].k = "best_iteration"; snprintf(m[nm++].v, sizeof m[0].v, "%" PRId64, b->iter);
    }
    if (st->data[0] && memchr(st->data, 0, sizeof st->data)) { m[nm].k = "data"; m[nm++].vs = st->data; }
    if (b->known) {
        m[nm].k = "evals_since_best"; snprintf(m[nm++].v, sizeof m[0].v, "%" PRId64, b->since);
    }
    m[nm].k = "format"; snprintf(m[nm++].v, sizeof m[0].v, "vdnn-state-1");
    m[nm].k = "iteration"; snprintf(m[nm++].v, sizeof m[0].v, "%" PRId64, st->iteration);
    if (st->has_loss_scale) {   /* math fp16 (sorted keys, as the others) */
        const vd_loss_scale *ls = &st->loss_scale;
        m[nm].k = "loss_scale"; snprintf(m[nm++].v, sizeof m[0].v, "%.9g", (double)ls->scale);
        if (ls->first_bad >= 0) {
            m[nm].k = "loss_scale_first_bad";
            snprintf(m[nm++].v, sizeof m[0].v, "%d", (int)ls->first_bad);
        }
        m[nm].k = "loss_scale_growth"; snprintf(m[nm++].v, sizeof m[0].v, "%d", (int)ls->growth);
        m[nm].k = "loss_scale_skipped";
        snprintf(m[nm++].v, sizeof m[0].v, "%" PRId64, ls->skipped);
        m[nm].k = "loss_scale_stepped"; snprintf(m[nm++].v, sizeof m[0].v, "%d", ls->stepped ? 1 : 0);
        m[nm].k = "loss_scale_streak"; snprintf(m[nm++].v, sizeof m[0].v, "%d", (int)ls->streak);
    }
    /* only when not F32: an F32 pair has the bytes of older versions */
    if (dtype == VD_CKPT_BF16) { m[nm].k = "model_dtype"; snprintf(m[nm++].v, sizeof m[0].v, "BF16"); }
    m[nm].k = "model_fnv1a64"; snprintf(m[nm++].v, sizeof m[0].v, "%016" PRIx64, model_hash);
    m[nm].k = "net"; snprintf(m[nm++].v, sizeof m[0].v, "%s", net->name);
    m[nm].k = "optimizer";
    snprintf(m[nm++].v, sizeof m[0].v, "%s", vd_optimizer_name(net->train.optimizer));
    m[nm].k = "samples"; snprintf(m[nm++].v, sizeof m[0].v, "%" PRIu64, st->samples);
    m[nm].k = "seed"; snprintf(m[nm++].v, sizeof m[0].v, "%" PRIu64, st->seed);
    m[nm].k = "sgd_steps"; snprintf(m[nm++].v, sizeof m[0].v, "%" PRId64, st->sgd_steps);
    if (st->val_split > 0) {   /* %.17g: reads back exactly */
        m[nm].k = "val_split"; snprintf(m[nm++].v, sizeof m[0].v, "%.17g", st->val_split);
    }
    rc = st_build(t, nt, m, nm, &buf, &n, e);
    if (!rc) rc = commit_pair(path, model_buf, model_n, buf, n, so, e);
    vd_free(model_buf);
    vd_free(buf);
out:
    classes_free(classes);
    vd_free(t);
    vd_free(nbt);
    vd_free(bf);
    return rc;
}

/* ======================================================================== */
/* Reading                                                                   */
/* ======================================================================== */

typedef struct st_entry {
    const char *name;           /* a key of the JSON header (owned by hdr) */
    const char *dtype;
    int dsize;                  /* bytes per element */
    int ndim;
    int64_t shape[8];
    uint64_t numel;
    uint64_t begin, end;        /* into the data area */
    bool used;
} st_entry;

struct st_file {
    const char *path;
    char *raw;                  /* whole file */
    size_t n;
    const unsigned char *data;  /* raw + 8 + header length */
    uint64_t data_n;
    json_t *hdr;
    const json_t *meta;         /* __metadata__ object or NULL */
    int n_ent;
    st_entry *ent;
};
typedef struct st_file st_file;

static void st_close(struct st_file *f) {
    vd_free(f->raw);
    json_decref(f->hdr);
    vd_free(f->ent);
    memset(f, 0, sizeof *f);
}

static int dtype_size(const char *d) {
    static const struct { const char *n; int s; } t[] = {
        { "F64", 8 }, { "F32", 4 }, { "F16", 2 }, { "BF16", 2 }, { "I64", 8 }, { "I32", 4 },
        { "I16", 2 }, { "I8", 1 }, { "U64", 8 }, { "U32", 4 }, { "U16", 2 }, { "U8", 1 },
        { "BOOL", 1 }, { "F8_E4M3", 1 }, { "F8_E5M2", 1 } };
    for (size_t i = 0; i < VD_ARRAY_LEN(t); i++)
        if (strcmp(d, t[i].n) == 0) return t[i].s;
    return 0;
}

static int cmp_begin(const void *a, const void *b) {
    const st_entry *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : (x->end > y->end) - (x->end < y->end);
}

#define BAD(...) do { rc = vd_errf(e, VD_EDATA, __VA_ARGS__); goto fail; } while (0)

/* The most data bytes a checkpoint of net can hold: every parameter and
 * one counter per layer, 8 bytes each (the widest dtype), for the model
 * file or the state file (the optimizer's state: at most two F32 arrays). */
static uint64_t st_max_data(const vd_net *net) {
    return 8 * ((uint64_t)net->param_floats + (uint64_t)net->n_layers + 1);
}

/* net: the net the file must belong to (bounds the header and the data),
 * or NULL. The header is read and checked first (its length, its JSON,
 * every tensor's extent against the file's size): a file that is not a
 * checkpoint is refused after reading its first bytes, whatever its size. */
static int st_open(const char *path, const vd_net *net, struct st_file *f, vd_err *e) {
    memset(f, 0, sizeof *f);
    f->path = path;
    uint64_t size;
    int fd = vd_open_regular(path, UINT64_MAX, &size, e), rc = VD_OK;
    if (fd < 0) return -fd;
    if (size < 8) BAD("%s: not a safetensors file (truncated: %" PRIu64 " bytes, no header "
                      "length)", path, size);
    unsigned char u[8];
    if ((rc = vd_read_full(fd, u, 8, path, e))) goto fail;
    uint64_t hl = 0;
    for (int k = 7; k >= 0; k--) hl = (hl << 8) | u[k];
    if (hl > ST_MAX_HEADER)
        BAD("%s: not a safetensors file (header length %" PRIu64 " is implausible)", path, hl);
    if (hl > st_max_header(net))
        BAD("%s: not a checkpoint of %s (a safetensors header of %" PRIu64 " bytes; one of "
            "its %d tensors needs at most %" PRIu64 ")", path, net->name, hl, net->n_params,
            st_max_header(net));
    if (hl > size - 8)
        BAD("%s: truncated safetensors file (header needs %" PRIu64 " bytes, %" PRIu64
            " present)", path, hl, size - 8);
    if (size - 8 - hl > SIZE_MAX - 9) BAD("%s: too large to load", path);
    f->n = (size_t)size;
    if (!(f->raw = vd_malloc(8 + (size_t)hl + 1, e))) { rc = VD_ENOMEM; goto fail; }
    memcpy(f->raw, u, 8);
    if ((rc = vd_read_full(fd, f->raw + 8, (size_t)hl, path, e))) goto fail;
    char jerr[160];
    f->hdr = vd_json_parse(f->raw + 8, (size_t)hl, 0, jerr, sizeof jerr);
    if (!f->hdr) BAD("%s: corrupt safetensors header: bad JSON at %s", path, jerr);
    if (!json_is_object(f->hdr)) BAD("%s: corrupt safetensors header: not a JSON object", path);
    f->data_n = size - 8 - hl;
    if (net && f->data_n > st_max_data(net))
        BAD("%s: not a checkpoint of %s (%" PRIu64 " bytes of tensor data; its parameters "
            "need at most %" PRIu64 ")", path, net->name, f->data_n, st_max_data(net));
    size_t nk = json_object_size(f->hdr);
    if (nk > INT_MAX) BAD("%s: corrupt safetensors header: %zu entries", path, nk);
    f->ent = vd_calloc(nk ? nk : 1, sizeof(st_entry), e);
    if (!f->ent) { rc = VD_ENOMEM; goto fail; }
    const char *key;
    json_t *v;
    json_object_foreach(f->hdr, key, v) {           /* in file order */
        if (strcmp(key, "__metadata__") == 0) {
            if (!json_is_object(v)) BAD("%s: corrupt safetensors header: __metadata__ is not an object", path);
            const char *mk;
            json_t *mv;
            json_object_foreach(v, mk, mv)
                if (!json_is_string(mv))
                    BAD("%s: corrupt safetensors header: __metadata__ value '%s' is not a string",
                        path, mk);
            f->meta = v;
            continue;
        }
        st_entry *t = &f->ent[f->n_ent++];
        t->name = key;
        const json_t *dt = json_object_get(v, "dtype"), *sh = json_object_get(v, "shape"),
                     *of = json_object_get(v, "data_offsets");
        if (!json_is_object(v) || !json_is_string(dt) || !json_is_array(sh) ||
            !json_is_array(of) || json_array_size(of) != 2)
            BAD("%s: corrupt safetensors header: tensor '%s' needs dtype, shape and "
                "data_offsets [begin, end]", path, key);
        t->dtype = json_string_value(dt);
        t->dsize = dtype_size(t->dtype);
        if (!t->dsize) BAD("%s: tensor '%s' has unknown dtype '%s'", path, key, t->dtype);
        if (json_array_size(sh) > 8)
            BAD("%s: tensor '%s' has %zu dimensions (at most 8 supported)", path, key,
                json_array_size(sh));
        t->ndim = (int)json_array_size(sh);
        t->numel = 1;
        for (int d = 0; d < t->ndim; d++) {
            uint64_t n;
            if (!vd_json_u64(json_array_get(sh, (size_t)d), &n) ||
                !vd_mul_u64(t->numel, n, &t->numel))
                BAD("%s: tensor '%s' has a bad shape entry %d", path, key, d);
            t->shape[d] = (int64_t)n;       /* a JSON integer: at most INT64_MAX */
        }
        uint64_t bytes;
        if (!vd_json_u64(json_array_get(of, 0), &t->begin) ||
            !vd_json_u64(json_array_get(of, 1), &t->end) ||
            t->begin > t->end || !vd_mul_u64(t->numel, (uint64_t)t->dsize, &bytes))
            BAD("%s: tensor '%s' has bad data_offsets", path, key);
        if (t->end > f->data_n)
            BAD("%s: truncated safetensors file: tensor '%s' ends at byte %" PRIu64 " of the "
                "data but only %" PRIu64 " bytes are present", path, key, t->end, f->data_n);
        if (t->end - t->begin != bytes)
            BAD("%s: tensor '%s': data_offsets span %" PRIu64 " bytes but %s%s needs %" PRIu64,
                path, key, t->end - t->begin, t->dtype, " of its shape", bytes);
    }
    /* contiguous, no overlap, no holes, covers the data area exactly */
    st_entry *sorted = vd_malloc(sizeof(st_entry) * (size_t)(f->n_ent ? f->n_ent : 1), e);
    if (!sorted) { rc = VD_ENOMEM; goto fail; }
    memcpy(sorted, f->ent, sizeof(st_entry) * (size_t)f->n_ent);
    qsort(sorted, (size_t)f->n_ent, sizeof(st_entry), cmp_begin);
    uint64_t pos = 0;
    for (int i = 0; i < f->n_ent; i++) {
        if (sorted[i].begin != pos) {
            rc = vd_errf(e, VD_EDATA, "%s: corrupt safetensors file: tensor '%s' %s at byte "
                         "%" PRIu64 " (expected %" PRIu64 ")", path, sorted[i].name,
                         sorted[i].begin < pos ? "overlaps the previous one" : "leaves a hole",
                         sorted[i].begin, pos);
            vd_free(sorted);
            goto fail;
        }
        pos = sorted[i].end;
    }
    vd_free(sorted);
    if (pos != f->data_n)
        BAD("%s: corrupt safetensors file: tensors cover %" PRIu64 " data bytes but the file "
            "has %" PRIu64, path, pos, f->data_n);
    /* the header holds: now the data, after it in the same buffer */
    char *all = vd_realloc(f->raw, f->n + 1, e);
    if (!all) { rc = VD_ENOMEM; goto fail; }
    f->raw = all;
    if ((rc = vd_read_full(fd, f->raw + 8 + hl, (size_t)f->data_n, path, e))) goto fail;
    f->raw[f->n] = 0;
    f->data = (const unsigned char *)f->raw + 8 + hl;
    close(fd);
    return VD_OK;
fail:
    if (fd >= 0) close(fd);
    st_close(f);
    return rc;
}

static st_entry *st_find(st_file *f, const char *name) {
    for (int i = 0; i < f->n_ent; i++)
        if (strcmp(f->ent[i].name, name) == 0) return &f->ent[i];
    return NULL;
}

static const char *meta_str(const struct st_file *f, const char *key) {
    return json_string_value(json_object_get(f->meta, key));   /* NULL if absent */
}

static bool state_matches(const char *path, const char *sp) {
    char *raw;
    size_t n;
    if (vd_read_file(path, &raw, &n, NULL)) return false;
    char want[32];
    snprintf(want, sizeof want, "%016" PRIx64, fnv1a64(raw, n));
    vd_free(raw);
    st_file f;
    if (st_open(sp, NULL, &f, NULL)) return false;
    const char *h = meta_str(&f, "model_fnv1a64");
    bool ok = h && strcmp(h, want) == 0;
    st_close(&f);
    return ok;
}

static int meta_u64(const st_file *f, const char *key, uint64_t *out, vd_err *e) {
    const char *s = meta_str(f, key);
    if (!s) return vd_errf(e, VD_EDATA, "%s: metadata '%s' is missing", f->path, key);
    /* Decimal digits only, within uint64 (seeds use the full range). strtoull
     * alone would take " +5" and saturate an overflow to UINT64_MAX silently. */
    bool digits = *s != 0;
    for (const char *c = s; *c; c++) digits = digits && *c >= '0' && *c <= '9';
    errno = 0;
    char *end;
    unsigned long long u = digits ? strtoull(s, &end, 10) : 0;
    if (!digits || errno || *end)
        return vd_errf(e, VD_EDATA, "%s: metadata '%s' = '%s' is not a count (decimal, at most "
                       "%" PRIu64 ")", f->path, key, s, UINT64_MAX);
    *out = (uint64_t)u;
    return VD_OK;
}

static void fmt_shape(char *buf, size_t n, int ndim, const int64_t *shape) {
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < ndim && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, "%s%" PRId64, d ? ", " : "", shape[d]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

/* The float dtypes a parameter may be stored in (converted to fp32 exactly). */
static bool float_dtype(const char *d) {
    return !strcmp(d, "F32") || !strcmp(d, "BF16") || !strcmp(d, "F16");
}

/* n elements of a float_dtype at src (little-endian, any alignment) as fp32. */
static void load_floats(float *dst, const unsigned char *src, const char *dtype, int64_t n) {
    if (!strcmp(dtype, "F32")) {
        memcpy(dst, src, sizeof(float) * (size_t)n);
        return;
    }
    bool bf = !strcmp(dtype, "BF16");
    for (int64_t k = 0; k < n; k++) {
        uint16_t h = (uint16_t)(src[2 * k] | src[2 * k + 1] << 8);
        dst[k] = bf ? vd_bf16_to_f32(h) : vd_f16_to_f32(h);
    }
}

/* --init-skip: the pattern and what it made the load do (vd_ckpt_init_model). */
typedef struct init_skip {
    const regex_t *re;
    uint64_t seed;              /* the net's tensors it matches: vd_net_init_params(seed) */
    int loaded, left, skipped;  /* net tensors read; net tensors and f's entries skipped */
    char left_names[320], skipped_names[320];   /* the first few of each, "a, b" */
} init_skip;

enum { NAMES_SHOWN = 6 };   /* names an --init summary lists of each kind */

/* name (and shape, ndim > 0) appended to list ("a, b [2, 3]") as the nth
 * (from 0); from the NAMES_SHOWN-th on only counted (names_text). */
static void name_list(char *list, size_t cap, int n, const char *name, int ndim,
                      const int64_t *shape) {
    if (n >= NAMES_SHOWN) return;
    char sh[160] = "";
    if (ndim > 0) fmt_shape(sh, sizeof sh, ndim, shape);
    size_t k = strlen(list);
    snprintf(list + k, cap - k, "%s%s%s%s", k ? ", " : "", name, sh[0] ? " " : "", sh);
}

/* A name_list of n names as text: "none", the list, or the list and
 * "and K more". Returns buf. */
static const char *names_text(const char *list, int n, char *buf, size_t cap) {
    if (n == 0) snprintf(buf, cap, "none");
    else if (n <= NAMES_SHOWN) snprintf(buf, cap, "%s", list);
    else snprintf(buf, cap, "%s and %d more", list, n - NAMES_SHOWN);
    return buf;
}

/* Copy the tensors "<prefix><param name>" for the params with kind `only`
 * (or all if only < 0) from f into dst; with all_used, every entry of f
 * must have been used by now (num_batches_tracked of the net's BN layers
 * allowed when allow_nbt): the last call on f checks it.
 * skip (NULL: none): the params and entries whose names skip->re matches
 * are neither read nor required, and counted in skip; such params get
 * their initialisation (vd_net_init_params of skip->seed). */
static int load_tensors(st_file *f, const vd_net *net, const char *prefix, int only,
                        bool allow_nbt, bool all_used, init_skip *skip, float *dst, vd_err *e) {
    int bad = 0;
    char first[900] = "";
    char name[VD_NAME_MAX + 48];
    for (int i = 0; i < net->n_params; i++) {
        const vd_param *p = &net->params[i];
        if (only >= 0 && (int)p->kind != only) continue;
        snprintf(name, sizeof name, "%s%s", prefix, p->name);
        if (skip && vd_regex_search(skip->re, name)) {
            name_list(skip->left_names, sizeof skip->left_names, skip->left++, name, 0, NULL);
            vd_net_init_params_range(net, skip->seed, p->offset, p->numel, dst + p->offset);
            continue;
        }
        st_entry *t = st_find(f, name);
        char why[600] = "";
        if (!t) {
            snprintf(why, sizeof why, "tensor '%s' is missing", name);
        } else {
            t->used = true;
            char s1[160], s2[160];
            bool same = t->ndim == p->ndim;
            for (int d = 0; same && d < p->ndim; d++) same = t->shape[d] == p->shape[d];
            if (!float_dtype(t->dtype)) {
                snprintf(why, sizeof why, "tensor '%s' has dtype %s, which cannot be loaded "
                         "(F32, BF16 and F16 can)", name, t->dtype);
            } else if (!same) {
                fmt_shape(s1, sizeof s1, t->ndim, t->shape);
                fmt_shape(s2, sizeof s2, p->ndim, p->shape);
                snprintf(why, sizeof why, "tensor '%s' has shape %s but net '%s' expects %s",
                         name, s1, net->name, s2);
            } else {
                /* the byte count was checked against the dtype's size in st_open */
                load_floats(dst + p->offset, f->data + t->begin, t->dtype, p->numel);
                if (skip) skip->loaded++;
                /* NaN or Inf weights would train (or evaluate) to a NaN loss */
                const float *v = dst + p->offset;
                for (int64_t k = 0; k < p->numel; k++)
                    if (!isfinite(v[k]))
                        return vd_errf(e, VD_EDATA, "%s: tensor '%s' holds %s at element %lld: "
                                       "the checkpoint is damaged or comes from a run that "
                                       "diverged", f->path, name, isnan(v[k]) ? "NaN" : "an "
                                       "infinite value", (long long)k);
            }
        }
        if (why[0] && !bad++) snprintf(first, sizeof first, "%s", why);
    }
    for (int i = 0; all_used && i < f->n_ent; i++) {
        st_entry *t = &f->ent[i];
        if (t->used) continue;
        if (skip && vd_regex_search(skip->re, t->name)) {
            name_list(skip->skipped_names, sizeof skip->skipped_names, skip->skipped++, t->name,
                      t->ndim, t->shape);
            continue;
        }
        char why[600] = "";
        const char *suf = ".num_batches_tracked";
        size_t ln = strlen(t->name), ls = strlen(suf);
        bool nbt = false;
        if (allow_nbt && ln > ls && strcmp(t->name + ln - ls, suf) == 0) {
            char lname[VD_NAME_MAX + 48];
            snprintf(lname, sizeof lname, "%.*s", (int)(ln - ls), t->name);
            int li = vd_net_find(net, lname);
            nbt = li >= 0 && vd_op_table[net->layers[li].op].step_counter;
            if (nbt && !(strcmp(t->dtype, "I64") == 0 && t->numel == 1 && t->ndim <= 1))
                snprintf(why, sizeof why, "tensor '%s' must be an I64 scalar", t->name);
        }
        if (!nbt)
            snprintf(why, sizeof why, "unexpected tensor '%s' (net '%s' has no such parameter)",
                     t->name, net->name);
        if (why[0] && !bad++) snprintf(first, sizeof first, "%s", why);
    }
    if (bad)
        return vd_errf(e, VD_EDATA, "%s: does not match net '%s': %s%s", f->path, net->name,
                       first, bad > 1 ? " (and more mismatches after it)" : "");
    return VD_OK;
}

/* The "classes" metadata of f into *c (none: left empty). */
static int load_classes(const st_file *f, const vd_net *net, vd_ckpt_classes *c, vd_err *e) {
    const char *s = meta_str(f, "classes");
    if (!s) return VD_OK;
    char jerr[160];
    json_t *a = vd_json_parse(s, strlen(s), 0, jerr, sizeof jerr);
    int rc = VD_OK;
    size_t n = json_array_size(a);
    if (!a) rc = vd_errf(e, VD_EDATA, "%s: metadata 'classes' is not JSON (%s)", f->path, jerr);
    else if (!json_is_array(a) || n == 0 || n > (size_t)net->classes)
        rc = vd_errf(e, VD_EDATA, "%s: metadata 'classes' is not an array of 1 to %d names "
                     "(net '%s' has %d classes)", f->path, net->classes, net->name, net->classes);
    else if (!(c->names = vd_calloc(n, sizeof *c->names, e)))
        rc = VD_ENOMEM;
    for (size_t i = 0; !rc && i < n; i++) {
        const char *name = json_string_value(json_array_get(a, i));
        if (!name)
            rc = vd_errf(e, VD_EDATA, "%s: metadata 'classes': entry %zu is not a string",
                         f->path, i);
        else if (!(c->names[i] = vd_strdup(name, e)))
            rc = VD_ENOMEM;
        else
            c->n = (int)i + 1;
    }
    json_decref(a);
    return rc;
}

void vd_ckpt_classes_free(vd_ckpt_classes *c) {
    for (int i = 0; i < c->n; i++) vd_free(c->names[i]);
    vd_free(c->names);
    c->names = NULL;
    c->n = 0;
}

static int load_params(st_file *f, const vd_net *net, const char *prefix, int only,
                       bool allow_nbt, bool all_used, float *dst, vd_err *e) {
    return load_tensors(f, net, prefix, only, allow_nbt, all_used, NULL, dst, e);
}

int vd_ckpt_init_model(const char *path, const vd_net *net, float *params, const char *skip,
                       uint64_t seed, char *summary, size_t n, vd_err *e) {
    regex_t re;
    int rc = skip ? vd_regex_compile(&re, skip, "--init-skip", e) : VD_OK;
    if (rc) return rc;
    init_skip sk = {.re = skip ? &re : NULL, .seed = seed};
    st_file f;
    /* a file with tensors to skip may hold more than a checkpoint of net
     * would (an old head, a larger model's layers): the general bounds only */
    rc = st_open(path, skip ? NULL : net, &f, e);
    /* a pattern that matches nothing is the first thing to fix: before mismatches */
    bool hit = !skip;
    for (int i = 0; !rc && !hit && i < net->n_params; i++)
        hit = vd_regex_search(&re, net->params[i].name);
    for (int i = 0; !rc && !hit && i < f.n_ent; i++) hit = vd_regex_search(&re, f.ent[i].name);
    if (!rc && !hit)
        rc = vd_errf(e, VD_EUSAGE, "--init-skip '%s' matches no tensor of net '%s' nor of %s "
                     "(it is searched for in tensor names such as '%s')", skip, net->name, path,
                     net->n_params ? net->params[0].name : "fc.weight");
    if (!rc) rc = load_tensors(&f, net, "", -1, true, true, skip ? &sk : NULL, params, e);
    st_close(&f);   /* (a failed st_open leaves it closed: this does nothing) */
    if (skip) regfree(&re);
    if (rc) return rc;
    char sl[400], ll[400];
    if (!skip)
        snprintf(summary, n, "loaded %d of the %d tensors of net '%s' from %s", net->n_params,
                 net->n_params, net->name, path);
    else
        snprintf(summary, n, "loaded %d of the %d tensors of net '%s' from %s; skipped in the "
                 "file (--init-skip '%s'): %s; left at initialisation: %s", sk.loaded,
                 net->n_params, net->name, path, skip,
                 names_text(sk.skipped_names, sk.skipped, sl, sizeof sl),
                 names_text(sk.left_names, sk.left, ll, sizeof ll));
    return VD_OK;
}

int vd_ckpt_load_model(const char *path, const vd_net *net, float *params,
                       int64_t *iteration, vd_err *e) {
    return vd_ckpt_load_model_ex(path, net, params, iteration, NULL, e);
}

int vd_ckpt_load_model_ex(const char *path, const vd_net *net, float *params,
                          int64_t *iteration, vd_ckpt_classes *classes, vd_err *e) {
    if (classes) *classes = (vd_ckpt_classes){ 0 };
    st_file f;
    int rc = st_open(path, net, &f, e);
    if (rc) return rc;
    rc = load_params(&f, net, "", -1, true, true, params, e);
    if (!rc && classes) rc = load_classes(&f, net, classes, e);
    if (!rc && iteration) {
        *iteration = 0;
        uint64_t it;
        if (meta_str(&f, "iteration")) {
            rc = meta_u64(&f, "iteration", &it, e);
            if (!rc && it > VD_CKPT_MAX_ITERATION)
                rc = vd_errf(e, VD_EDATA, "%s: metadata 'iteration' is %" PRIu64 ", beyond "
                             "%lld: the file is damaged", path, it, VD_CKPT_MAX_ITERATION);
            if (!rc) *iteration = (int64_t)it;
        }
    }
    st_close(&f);
    return rc;
}

/* Math fp16's loss scale from the state's metadata into st (absent: none,
 * as older files and other maths save). */
static int read_loss_scale(const st_file *f, const char *sp, vd_train_state *st, vd_err *e) {
    const char *s = meta_str(f, "loss_scale");
    if (!s) return VD_OK;
    char *end;
    errno = 0;
    float scale = strtof(s, &end);
    if (errno || end == s || *end || !(scale > 0.0f) || !isfinite(scale))
        return vd_errf(e, VD_EDATA, "%s: metadata 'loss_scale' = '%.32s' is not a positive "
                       "finite number", sp, s);
    uint64_t growth, streak, skipped, stepped, first_bad = 0;
    int rc;
    if ((rc = meta_u64(f, "loss_scale_growth", &growth, e)) ||
        (rc = meta_u64(f, "loss_scale_streak", &streak, e)) ||
        (rc = meta_u64(f, "loss_scale_skipped", &skipped, e)) ||
        (rc = meta_u64(f, "loss_scale_stepped", &stepped, e)) ||
        (meta_str(f, "loss_scale_first_bad") &&
         (rc = meta_u64(f, "loss_scale_first_bad", &first_bad, e))))
        return rc;
    if (growth >= VD_LOSS_SCALE_INTERVAL || streak > INT32_MAX || skipped > VD_CKPT_MAX_ITERATION ||
        stepped > 1 || first_bad > INT32_MAX)
        return vd_errf(e, VD_EDATA, "%s: the loss scale's metadata is out of range", sp);
    st->has_loss_scale = true;
    st->loss_scale = vd_loss_scale_init();
    st->loss_scale.scale = scale;
    st->loss_scale.growth = (int32_t)growth;
    st->loss_scale.streak = (int32_t)streak;
    st->loss_scale.skipped = (int64_t)skipped;
    st->loss_scale.stepped = (int32_t)stepped;
    st->loss_scale.first_bad = meta_str(f, "loss_scale_first_bad") ? (int32_t)first_bad : -1;
    return VD_OK;
}

/* The best evaluation from the state's metadata into st->best (absent:
 * not tracked, as in runs without --save-best / --early-stop and older
 * files). Its iteration and the evaluations since are at most the state's
 * iteration (one evaluation per iteration at most). */
static int read_best(const st_file *f, const char *sp, vd_train_state *st, vd_err *e) {
    const char *s = meta_str(f, "best_accuracy");
    if (!s) return VD_OK;
    char *end;
    errno = 0;
    double acc = strtod(s, &end);
    if (errno || end == s || *end || !(acc >= 0.0 && acc <= 1.0))
        return vd_errf(e, VD_EDATA, "%s: metadata 'best_accuracy' = '%.32s' is not an accuracy "
                       "in [0, 1]", sp, s);
    uint64_t it, since;
    int rc;
    if ((rc = meta_u64(f, "best_iteration", &it, e)) ||
        (rc = meta_u64(f, "evals_since_best", &since, e)))
        return rc;
    if (it > (uint64_t)st->iteration || since > (uint64_t)st->iteration)
        return vd_errf(e, VD_EDATA, "%s: metadata 'best_iteration' (%" PRIu64 ") or "
                       "'evals_since_best' (%" PRIu64 ") is beyond the iteration %" PRId64, sp,
                       it, since, st->iteration);
    st->best = (vd_train_best){ .known = true, .acc = acc, .iter = (int64_t)it,
                                .since = (int64_t)since };
    return VD_OK;
}

/* Open FILE.state, check it belongs to FILE (hash of model_raw) and net, and
 * read its metadata into st. */
static int open_state(const char *path, const char *sp, const vd_net *net,
                      const char *model_raw, size_t model_n, st_file *f, vd_train_state *st,
                      vd_err *e) {
    int rc = st_open(sp, net, f, e);
    if (rc == VD_EIO && e) {
        char msg[sizeof e->msg];
        snprintf(msg, sizeof msg, "%s", e->msg);
        return vd_errf(e, VD_EIO, "%s (--resume needs the .state file saved next to the "
                       "checkpoint; --init %s starts from the weights alone)", msg, path);
    }
    if (rc) return rc;
    const char *fmt = meta_str(f, "format"), *nn = meta_str(f, "net"), *h = meta_str(f, "model_fnv1a64");
    if (!fmt || strcmp(fmt, "vdnn-state-1") != 0) {
        rc = vd_errf(e, VD_EDATA, "%s: not a vdnn state file (metadata format is '%s', expected "
                     "'vdnn-state-1')", sp, fmt ? fmt : "(missing)");
        goto fail;
    }
    if (!nn || strcmp(nn, net->name) != 0) {
        rc = vd_errf(e, VD_EDATA, "%s: saved for net '%s', not '%s'", sp, nn ? nn : "?", net->name);
        goto fail;
    }
    char want[32];
    snprintf(want, sizeof want, "%016" PRIx64, fnv1a64(model_raw, model_n));
    if (!h || strcmp(h, want) != 0) {
        rc = vd_errf(e, VD_EDATA, "%s: does not belong to %s (model hash %s, state expects %s); "
                     "the pair was not saved together", sp, path, want, h ? h : "(missing)");
        goto fail;
    }
    uint64_t it, steps, samples, seed, batch;
    /* f->path is sp here, so meta_u64's messages name the state file */
    if ((rc = meta_u64(f, "iteration", &it, e)) || (rc = meta_u64(f, "sgd_steps", &steps, e)) ||
        (rc = meta_u64(f, "samples", &samples, e)) || (rc = meta_u64(f, "seed", &seed, e)) ||
        (rc = meta_u64(f, "batch", &batch, e)))
        goto fail;
    if (it > VD_CKPT_MAX_ITERATION || steps > it || batch < 1 || batch > INT32_MAX) {
        rc = vd_errf(e, VD_EDATA, "%s: metadata out of range (iteration %" PRIu64 ", at most "
                     "%lld; sgd_steps %" PRIu64 ", at most the iteration; batch %" PRIu64 "): "
                     "the state file is damaged", sp, it, VD_CKPT_MAX_ITERATION, steps, batch);
        goto fail;
    }
    /* the data position: counted in 64 bits by the loader, which adds batches
     * of up to 2^31 to it; 2^62 samples is far beyond any run */
    if (samples > VD_CKPT_MAX_SAMPLES) {
        rc = vd_errf(e, VD_EDATA, "%s: metadata 'samples' is %" PRIu64 ", beyond %llu: the "
                     "state file is damaged", sp, samples, (unsigned long long)VD_CKPT_MAX_SAMPLES);
        goto fail;
    }
    memset(st, 0, sizeof *st);     /* padding too: callers may compare states bytewise */
    st->iteration = (int64_t)it;
    st->sgd_steps = (int64_t)steps;
    st->samples = samples;
    st->seed = seed;
    st->batch = (int)batch;
    const char *data = meta_str(f, "data");
    if (data && strlen(data) >= sizeof st->data) {
        rc = vd_errf(e, VD_EDATA, "%s: metadata 'data' is longer than %zu bytes", sp,
                     sizeof st->data - 1);
        goto fail;
    }
    if (data) snprintf(st->data, sizeof st->data, "%s", data);
    const char *md = meta_str(f, "model_dtype");     /* absent: F32 (older versions too) */
    if (md && strcmp(md, "F32") != 0 && strcmp(md, "BF16") != 0) {
        rc = vd_errf(e, VD_EDATA, "%s: metadata 'model_dtype' is '%.32s', not F32 or BF16", sp, md);
        goto fail;
    }
    snprintf(st->model_dtype, sizeof st->model_dtype, "%s", md ? md : "F32");
    const char *opt = meta_str(f, "optimizer");   /* absent: sgd (older versions) */
    static const char *const onames[] = VD_OPTIMIZER_NAMES;
    int ok = opt ? -1 : VD_OPT_SGD;
    for (int k = 0; opt && k < (int)VD_ARRAY_LEN(onames); k++)
        if (!strcmp(opt, onames[k])) ok = k;
    if (ok < 0) {
        rc = vd_errf(e, VD_EDATA, "%s: metadata 'optimizer' is '%.32s', not sgd or adamw", sp, opt);
        goto fail;
    }
    st->optimizer = (vd_optimizer)ok;
    const char *vs = meta_str(f, "val_split");     /* absent: none (older versions too) */
    if (vs) {
        char *end;
        errno = 0;
        st->val_split = strtod(vs, &end);
        if (errno || *end || !(st->val_split > 0 && st->val_split < 1)) {
            rc = vd_errf(e, VD_EDATA, "%s: metadata 'val_split' is '%.32s', not a fraction "
                         "between 0 and 1", sp, vs);
            goto fail;
        }
    }
    if ((rc = read_loss_scale(f, sp, st, e)) || (rc = read_best(f, sp, st, e))) goto fail;
    return VD_OK;
fail:
    st_close(f);
    return rc;
}

/* open_state on FILE.state, else on FILE.state.prev when that one belongs
 * to FILE (st->from_prev); FILE.state's error when neither does. *used gets
 * the path opened (malloc'd). */
static int open_state_or_prev(const char *path, const vd_net *net, const char *model_raw,
                              size_t model_n, st_file *f, vd_train_state *st, char **used,
                              vd_err *e) {
    /* a FILE that is a symlink has its state beside the target, where a
     * save through the link put it (commit_pair) */
    char *target = NULL;
    vd_err ignored = {0};
    struct stat lst;
    if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode)) (void)vd_output_path(path, &target, &ignored);
    *used = path_cat(target ? target : path, ".state", e);
    vd_free(target);
    if (!*used) return VD_ENOMEM;
    int rc = open_state(path, *used, net, model_raw, model_n, f, st, e);
    if (rc == VD_OK || rc == VD_ENOMEM) {
        if (!rc) st->from_prev = false;
        return rc;
    }
    char *prev = path_cat(*used, ".prev", NULL);
    vd_err e2 = { 0 };
    if (prev && open_state(path, prev, net, model_raw, model_n, f, st, &e2) == VD_OK) {
        vd_free(*used);
        *used = prev;
        st->from_prev = true;
        return VD_OK;
    }
    vd_free(prev);
    return rc;
}

int vd_ckpt_peek_state(const char *path, const vd_net *net, vd_train_state *st, vd_err *e) {
    st_file m;   /* the model file, its header checked before the rest is read */
    int rc = st_open(path, net, &m, e);
    if (rc) return rc;
    char *sp = NULL;
    st_file f;
    rc = open_state_or_prev(path, net, m.raw, m.n, &f, st, &sp, e);
    st_close(&m);
    if (!rc) st_close(&f);
    vd_free(sp);
    return rc;
}

int vd_ckpt_check_optimizer(const vd_train_state *st, const vd_net *net, const char *path,
                            vd_err *e) {
    if (st->optimizer == net->train.optimizer) return VD_OK;
    return vd_errf(e, VD_EUSAGE, "%s was trained with optimizer %s, and this run's is %s (the "
                   "spec's train.optimizer or --optimizer): --resume continues the same "
                   "optimizer; give --optimizer %s, or start from its weights alone with --init",
                   path, vd_optimizer_name(st->optimizer), vd_optimizer_name(net->train.optimizer),
                   vd_optimizer_name(st->optimizer));
}

int vd_ckpt_load(const char *path, const vd_net *net, float *params, float *state,
                 vd_train_state *st, vd_err *e) {
    st_file m;
    int rc = st_open(path, net, &m, e);
    if (rc) return rc;
    rc = load_params(&m, net, "", -1, true, true, params, e);
    uint64_t mit = 0;
    if (!rc) rc = meta_u64(&m, "iteration", &mit, e);
    if (rc) { st_close(&m); return rc; }
    char *sp = NULL;
    st_file s;
    rc = open_state_or_prev(path, net, m.raw, m.n, &s, st, &sp, e);
    st_close(&m);
    if (rc) { vd_free(sp); return rc; }
    if ((int64_t)mit != st->iteration)
        rc = vd_errf(e, VD_EDATA, "%s: iteration %" PRId64 " but %s says %" PRIu64, sp,
                     st->iteration, path, mit);
    if (!rc) rc = vd_ckpt_check_optimizer(st, net, path, e);
    if (!rc) {   /* each state array of the optimizer, from its own tensors */
        int arrays = vd_optimizer_state_arrays(net->train.optimizer);
        memset(state, 0, sizeof(float) * (size_t)vd_net_state_floats(net));
        for (int a = 0; a < arrays && !rc; a++)
            rc = load_params(&s, net, state_prefixes(net->train.optimizer)[a], VD_PARAM_WEIGHT,
                             false, a == arrays - 1, state + (int64_t)a * net->param_floats, e);
    }
    st_close(&s);
    vd_free(sp);
    return rc;
}

/* ======================================================================== */
/* Derived names                                                             */
/* ======================================================================== */

/* The length of path's part before the extension of its last component
 * (the whole path when it has none). */
static size_t stem_len(const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *dot = strrchr(base, '.');
    return dot && dot != base ? (size_t)(dot - path) : strlen(path);
}

char *vd_ckpt_tagged(const char *path, const char *tag, vd_err *e) {
    size_t n = stem_len(path);
    return vd_strfmt(e, "%.*s-%s%s", (int)n, path, tag, path + n);
}

bool vd_ckpt_tagged_iter(const char *path, const char *name, int64_t *iter) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t stem = stem_len(base), ext = strlen(base) - stem, n = strlen(name);
    if (n < stem + 2 + ext || strncmp(name, base, stem) != 0 || name[stem] != '-' ||
        strcmp(name + n - ext, base + stem) != 0)
        return false;
    const char *d = name + stem + 1, *d_end = name + n - ext;
    if (*d == '0' || d_end - d > 16) return false;   /* "0", leading zeros; beyond 2^53 */
    int64_t v = 0;
    for (const char *c = d; c < d_end; c++) {
        if (*c < '0' || *c > '9') return false;
        v = v * 10 + (*c - '0');
    }
    *iter = v;
    return true;
}
