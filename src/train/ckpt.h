/* ckpt.h — checkpoints in the safetensors format.
 *
 * A checkpoint is two files, both safetensors (8-byte little-endian header
 * length N, N bytes of JSON header padded with spaces to a multiple of 8,
 * then the tensor bytes, row-major little-endian, contiguous, no holes):
 *
 *   FILE        the model: exactly a torchvision state_dict. Every parameter
 *               and buffer of the net under its own name ("features.0.weight",
 *               "bn1.running_var", ...) as F32 (or, saved with
 *               vd_ckpt_save_opts.dtype VD_CKPT_BF16, BF16: the fp32 values
 *               rounded to nearest even) in PyTorch's shape, plus for
 *               every batch-norm layer "<bn>.num_batches_tracked" (I64, shape
 *               [], = iterations trained). So in Python
 *                 model.load_state_dict(safetensors.torch.load_file(FILE))
 *               works with strict=True. __metadata__ (strings): "format": "pt",
 *               "producer": "vdnn VERSION", "net", "iteration", and
 *               "classes" when the run's data set names its classes
 *               (vd_data_info.class_names: folder:DIR's class directories):
 *               a JSON array of the names in label order, as a string
 *               ("[\"cat\",\"dog\"]"; vd_ckpt_load_model_ex reads it).
 *   FILE.state  what only a resume needs: the optimizer's state, F32 tensors of
 *               the shape of <name> for every trainable parameter <name>:
 *               SGD's "momentum.<name>", AdamW's "exp_avg.<name>" and
 *               "exp_avg_sq.<name>" (torch.optim's state names); and
 *               __metadata__: "format": "vdnn-state-1", "net", "optimizer"
 *               ("sgd" | "adamw"; absent in files of older versions: sgd),
 *               "iteration", "sgd_steps" (the optimizer's updates: AdamW's
 *               step count),
 *               "samples" (data sample counter of the next batch), "seed",
 *               "batch", "model_fnv1a64" (FNV-1a 64 of FILE's bytes, so a
 *               state never pairs with a model file it was not saved with),
 *               and "data" (the --data spec the run trained on; absent in
 *               files of older versions), "val_split" (the fraction of a
 *               folder's train images --val-split held out, %.17g; absent:
 *               none), and "model_dtype": "BF16" when FILE
 *               holds BF16 weights (absent: F32). The optimizer state stays F32
 *               whatever FILE's dtype. A math fp16 run adds its dynamic loss
 *               scale (vd_loss_scale): "loss_scale" (the float, %.9g, which
 *               reads back exactly), "loss_scale_growth", "loss_scale_streak",
 *               "loss_scale_skipped", "loss_scale_stepped" (counts) and
 *               "loss_scale_first_bad" (a layer index; absent: -1); all
 *               absent in other runs and older files. A run that tracks its
 *               best evaluation (vdnn-train --save-best, --early-stop) adds it
 *               (vd_train_best): "best_accuracy" (%.17g, reads back exactly),
 *               "best_iteration", "evals_since_best"; absent otherwise.
 *   FILE.state.prev  the previous FILE.state (a hard link), kept so that a
 *               crash inside a save never loses the last resumable pair.
 *
 * Keeping the optimizer state out of FILE is what keeps FILE loadable by a
 * strict load_state_dict. Saving is crash-safe as a pair: both files are
 * first written to temporaries and fsync'd; then the current FILE.state,
 * when it belongs to the current FILE, is hard-linked to FILE.state.prev
 * (temp link + rename); then the new state is renamed over FILE.state, then
 * the new model over FILE, with the directory fsync'd after each step. A
 * crash leaves either the old pair (FILE + FILE.state, or FILE +
 * FILE.state.prev) or the new one; loading falls back to FILE.state.prev when
 * FILE.state does not belong to FILE but the .prev does. Loading validates
 * the header length, JSON, dtypes, shapes, offsets (in range, contiguous,
 * covering the data) and the metadata; anything wrong is VD_EDATA naming the
 * file. Loading accepts float tensors of dtype F32, BF16 and F16 (whoever
 * wrote them: a model PyTorch saved in bf16 or fp16 loads) and converts them
 * exactly to the fp32 parameters; any other dtype of a parameter is VD_EDATA
 * naming the tensor and the dtype. */
#ifndef VD_CKPT_H
#define VD_CKPT_H

#include <limits.h>
#include <stdint.h>
#include "util/util.h"
#include "net/net.h"
#include "backend/backend.h"

/* The largest data position ("samples") a state file may record. */
#define VD_CKPT_MAX_SAMPLES (1ull << 62)
/* The most iterations a run reaches (vdnn-train's --iters and --stop-at are
 * at most this), so the largest 'iteration' a state file may record; its
 * 'sgd_steps' and skipped steps are at most its iteration. Far from
 * int64's end: a resumed run's counters cannot overflow. */
#define VD_CKPT_MAX_ITERATION (1ll << 53)

/* The best evaluation of a run so far, for --save-best and --early-stop
 * (train.h): recorded in FILE.state so that a resumed run goes on comparing
 * with it. */
typedef struct vd_train_best {
    bool known;                 /* an evaluation that counts has run */
    double acc;                 /* its top-1 accuracy, in [0, 1] */
    int64_t iter;               /* the iteration it evaluated */
    int64_t since;              /* evaluations after it, none with a higher accuracy */
} vd_train_best;

typedef struct vd_train_state {
    int64_t iteration;          /* iterations completed */
    int64_t sgd_steps;          /* optimizer updates applied (== iteration, less the
                                   steps math fp16 skipped; AdamW's step count) */
    vd_optimizer optimizer;     /* load/peek output: the optimizer whose state the
                                   file holds; saves write net->train.optimizer's */
    uint64_t samples;           /* data sample counter of the next batch */
    uint64_t seed;              /* the run's seed (init, data order, dropout) */
    int batch;
    char data[PATH_MAX + 16];   /* data spec trained on ("" = not recorded): "kind:"
                                   and any path the system takes */
    double val_split;           /* --val-split of that data (0: none) */
    bool from_prev;             /* load/peek output: the state came from
                                   FILE.state.prev (FILE.state did not belong
                                   to FILE: a save was interrupted) */
    char model_dtype[8];        /* load/peek output: the dtype FILE's weights
                                   were saved in, "F32" or "BF16" (from the
                                   state's "model_dtype"); ignored by saves
                                   (vd_ckpt_save_opts.dtype decides) */
    bool has_loss_scale;        /* loss_scale is recorded (math fp16) */
    vd_loss_scale loss_scale;   /* its state (found_inf 0) */
    vd_train_best best;         /* recorded when best.known */
} vd_train_state;

/* The dtype of the model file's float tensors. */
typedef enum vd_ckpt_dtype {
    VD_CKPT_F32 = 0,            /* the fp32 values as they are (the default) */
    VD_CKPT_BF16,               /* rounded to bf16, nearest even (vd_f32_to_bf16) */
} vd_ckpt_dtype;

/* Write FILE (model) and, when state is non-NULL, FILE.state (crash-safe
 * as a pair, see above; st->data is recorded when non-empty).
 * params: net->param_floats floats; state: the optimizer's state of
 * net->train.optimizer, vd_net_state_floats(net) floats (exec.h's layout;
 * buffer ranges are ignored). */
int vd_ckpt_save(const char *path, const vd_net *net, const float *params,
                 const float *state, const vd_train_state *st, vd_err *e);
/* vd_ckpt_save with options (o may be NULL: none). */
typedef struct vd_ckpt_save_opts {
    /* Called after the new FILE.state is renamed into place and before the
     * new model is: tests inject a crash in that window here. A nonzero
     * return stops the save there (VD_EIO), leaving the old model beside the
     * new state. NULL: none. */
    int (*after_state)(void *ctx, const char *path);
    void *ctx;
    /* FILE's parameters and buffers: F32 (0, the default) or BF16. The
     * optimizer state in FILE.state stays F32 (a resume continues from it exactly;
     * only the weights were rounded). */
    vd_ckpt_dtype dtype;
    /* The names of the net's first n_classes classes, recorded in FILE's
     * metadata "classes" (NULL: none). Not recorded (the save goes on)
     * when there are more than the net's classes, or a name is not UTF-8
     * or longer than NAME_MAX bytes (a directory name's limit, which
     * keeps the header within what loading accepts). */
    const char *const *classes;
    int n_classes;
} vd_ckpt_save_opts;
int vd_ckpt_save_ex(const char *path, const vd_net *net, const float *params,
                    const float *state, const vd_train_state *st,
                    const vd_ckpt_save_opts *o, vd_err *e);

/* Load FILE's tensors into params (net->param_floats floats). Names and
 * shapes must match the net exactly, dtypes be F32, BF16 or F16 (converted
 * exactly to fp32; num_batches_tracked, an I64 scalar, is accepted and
 * ignored); the first mismatch is reported (VD_EDATA). *iteration (may be
 * NULL) gets the "iteration" metadata, or 0 if absent (e.g. a file saved
 * from PyTorch). */
int vd_ckpt_load_model(const char *path, const vd_net *net, float *params,
                       int64_t *iteration, vd_err *e);
/* The class names a model file records (metadata "classes", see above). */
typedef struct vd_ckpt_classes {
    char **names;               /* [n] vd_malloc'ed, label order; NULL when none */
    int n;                      /* 0: FILE records none (another data kind, an older
                                   version, a file saved by PyTorch) */
} vd_ckpt_classes;
/* vd_ckpt_load_model, and the class names into *classes (may be NULL: not
 * read; release with vd_ckpt_classes_free, also after an error). VD_EDATA
 * naming FILE when "classes" is not a JSON array of strings or names more
 * classes than net has. */
int vd_ckpt_load_model_ex(const char *path, const vd_net *net, float *params,
                          int64_t *iteration, vd_ckpt_classes *classes, vd_err *e);
void vd_ckpt_classes_free(vd_ckpt_classes *c);

/* vdnn-train --init FILE [--init-skip PATTERN]: vd_ckpt_load_model's load
 * (iteration left alone), except that the net's tensors whose names
 * PATTERN (skip; NULL: none) matches get their initialisation instead, the
 * values vd_net_init_params(seed) gives them (a new head), and FILE's
 * tensors that it matches are not read: a shape that differs from the
 * net's, a tensor the net lacks or lacks in FILE is no mismatch there. The
 * pattern is a POSIX extended regular expression searched for in the names
 * (vd_regex_search). With a pattern FILE may also hold more than a
 * checkpoint of net would (its size is not bounded by net's).
 * VD_EUSAGE naming the pattern when it is none, or matches no tensor of the
 * net nor of FILE. summary (n bytes) says what happened: "loaded N of the M
 * tensors of net 'NET' from FILE", and with a pattern the tensors skipped in
 * FILE (with their shapes) and those left at their initialisation. */
int vd_ckpt_init_model(const char *path, const vd_net *net, float *params, const char *skip,
                       uint64_t seed, char *summary, size_t n, vd_err *e);

/* Read FILE.state's metadata only (to learn the seed and data spec before
 * the run is set up). Also checks that it belongs to FILE, falling back to
 * FILE.state.prev as vd_ckpt_load does (st->from_prev says so). */
int vd_ckpt_peek_state(const char *path, const vd_net *net, vd_train_state *st,
                       vd_err *e);

/* VD_EUSAGE, naming FILE (path) and both optimizers, when the state st
 * (peeked or loaded) is of another optimizer than net->train.optimizer: a
 * resume continues the optimizer it saved (the run's is the spec's or
 * --optimizer: the caller's choice, hence a usage error). */
int vd_ckpt_check_optimizer(const vd_train_state *st, const vd_net *net, const char *path,
                            vd_err *e);

/* Load FILE and FILE.state: params (net->param_floats floats), the
 * optimizer's state (vd_net_state_floats(net) floats, as vd_ckpt_save
 * takes it; buffer ranges zeroed) and st. The state must be of
 * net->train.optimizer (vd_ckpt_check_optimizer). When FILE.state does not
 * belong to FILE (an interrupted save) but FILE.state.prev does, the .prev is
 * used and st->from_prev is set; otherwise FILE.state's error is returned. */
int vd_ckpt_load(const char *path, const vd_net *net, float *params, float *state,
                 vd_train_state *st, vd_err *e);

/* The name of a checkpoint derived from FILE (path): "-TAG" inserted
 * before the extension of its last component (from its last '.', unless
 * that is the component's first character), else appended:
 * "out/lenet.safetensors" + "500" -> "out/lenet-500.safetensors", "ck" +
 * "best" -> "ck-best". vdnn-train's numbered checkpoints (--keep: TAG the
 * iteration in decimal) and its best one (--save-best: TAG "best"). A block
 * of the allocation wrappers (vd_free), NULL with e set when out of memory. */
char *vd_ckpt_tagged(const char *path, const char *tag, vd_err *e);
/* Is name (a file name, without a directory) the last component of a
 * numbered name vd_ckpt_tagged(path, ITER) writes, ITER a decimal number
 * without leading zeros (as "%lld" prints it)? *iter gets ITER. */
bool vd_ckpt_tagged_iter(const char *path, const char *name, int64_t *iter);

#endif
