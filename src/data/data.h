/* data.h — datasets (MNIST IDX, CIFAR-10 binary, image folders, synthetic)
 * and the background batch loader.
 *
 * A dataset has two splits (train, test); each split is a fixed number of
 * samples addressed by index. A sample is one image already normalised to
 * fp32 CHW of exactly the net's input shape, plus an int32 label in
 * [0, classes). Normalisation per kind (also in man/vdnn-train.1), unless
 * the net's spec gives its own (data.normalize, net->norm: the mean and std
 * of each channel replace the kind's):
 *   mnist     (x/255 - 0.1307) / 0.3081
 *   cifar10   (x/255 - mean[c]) / std[c], mean (0.4914, 0.4822, 0.4465),
 *             std (0.2470, 0.2435, 0.2616)
 *   folder    (x/255 - mean[c]) / std[c], ImageNet mean (0.485, 0.456, 0.406),
 *             std (0.229, 0.224, 0.225) (1-channel nets: 0.449 / 0.226)
 *   synthetic every pixel ~N(0,1): (noise + 0.5 * template[label]) / sqrt(1.25),
 *             a pure function of (seed, split, index, pixel): data/synth.h
 *
 * Order: a "sample counter" s = 0, 1, 2, ... runs over the train split
 * forever; epoch = s / n, position = s % n, and the sample read is
 * perm_epoch[position], where perm_epoch is a Fisher-Yates permutation drawn
 * from vd_rng seeded with (seed, epoch). So the data order is a pure function
 * of (seed, s): resuming needs only s. The test split is read in order.
 *
 * Thread safety: after vd_data_open, vd_data_sample may be called from
 * several threads at once (datasets are read-only once opened). */
#ifndef VD_DATA_H
#define VD_DATA_H

#include <stdint.h>
#include <stdbool.h>
#include "util/util.h"
#include "net/net.h"
#include "data/synth.h"

typedef enum { VD_SPLIT_TRAIN = 0, VD_SPLIT_TEST = 1 } vd_split;

typedef struct vd_data_info {
    char kind[16];          /* "mnist" | "cifar10" | "folder" | "synthetic" */
    char desc[600];         /* for messages: "mnist:DIR (8000 train, 2000 test)" */
    int c, h, w;            /* per-sample shape delivered (== the net's input) */
    int classes;            /* labels are in [0, classes) */
    int64_t n[2];           /* samples in [VD_SPLIT_TRAIN], [VD_SPLIT_TEST] */
    const char *const *class_names; /* [classes] the name of each label (folder: its
                                       class directory), owned by the data set; NULL
                                       when the kind names none */
} vd_data_info;

typedef struct vd_dataset vd_dataset;

/* Open the dataset named by spec for net at the given batch size:
 *   NULL or "synthetic"          synthetic, 1024*batch train, 16*batch test
 *   "synthetic:TRAIN[,TEST]"     synthetic with those sizes (TEST default TRAIN/8)
 *   "mnist:DIR"                  DIR/{train,t10k}-{images-idx3,labels-idx1}-ubyte
 *                                (uncompressed IDX files only, not .gz)
 *   "cifar10:DIR"                DIR/data_batch_{1..5}.bin, DIR/test_batch.bin
 *   "folder:DIR"                 DIR/train/<class>/IMAGE (.jpg .jpeg .png .bmp .ppm .pgm),
 *                                DIR/val/<class>/IMAGE (val optional)
 * augment (folder only): train samples take torchvision's RandomResizedCrop
 * box and a random horizontal flip, keyed by (seed, sample counter); without
 * it (and the test split always) the evaluation's centre box (data_impl.h,
 * vd_box_center).
 * Shape mismatches with the net (channels, height, width, more classes than
 * the net outputs) are VD_EUSAGE; missing files VD_EIO; corrupt or truncated
 * files VD_EDATA naming the file. On success *out owns everything. */
/* The directory a data spec reads ("mnist:DIR" -> DIR), or NULL (none:
 * synthetic data, NULL, an unknown kind). A pointer into spec. */
const char *vd_data_dir(const char *spec);
int vd_data_open(const char *spec, const vd_net *net, int batch, uint64_t seed,
                 bool augment, vd_dataset **out, vd_err *e);
void vd_data_close(vd_dataset **ds);
const vd_data_info *vd_data_get_info(const vd_dataset *ds);
/* Synthetic data: its samples follow data/synth.h, so a backend can
 * generate them (vd_loader_cfg.synth_device). */
bool vd_data_is_synthetic(const vd_dataset *ds);

/* Hold out a fraction of the train split as the test split (vdnn-train
 * --val-split F), for a data set without a test split of its own (a
 * folder:DIR without val/): round(F * n) of its n train images become the
 * test split, the first of a permutation drawn from ds's seed (and a stream
 * of its own: not an epoch's order); the rest stay the train split. Both
 * keep the images' order. The same seed and F give the same splits in every
 * run. Call once, before any loader. VD_EUSAGE with the reason: F outside
 * (0, 1), a data set with a test split of its own (mnist, cifar10,
 * synthetic, a folder with val/), or a split left empty. */
int vd_data_hold_out(vd_dataset *ds, double fraction, vd_err *e);

/* Fill x [c*h*w] and *label with sample `index` of split. aug_key selects the
 * random crop/flip when the dataset was opened with augment (train split
 * only; ignored otherwise). Errors: VD_EDATA naming the file (image decode),
 * VD_EIO naming it (an image file that cannot be opened or read). */
int vd_data_sample(vd_dataset *ds, vd_split split, int64_t index, uint64_t aug_key,
                   float *x, int32_t *label, vd_err *e);

/* The image file at path as folder:DIR data gives one of its held-out
 * (val) images to net: decoded to its input's c channels (1 or 3),
 * resized to cover its h x w, centre-cropped and normalised (the header
 * comment; the spec's data.normalize), into x [c*h*w] as
 * floats, CHW. For classifying image files of no data set (vdnn-predict).
 * Errors: VD_EDATA naming the file (not a JPEG, PNG, BMP, PPM or PGM image,
 * cannot be decoded, cut short, too many pixels), VD_EIO naming it (cannot
 * be opened or read), VD_ENOMEM. */
int vd_data_image_eval(const vd_net *net, const char *path, float *x, vd_err *e);

/* How folder data decodes JPEG files: TurboJPEG at a reduced DCT scale
 * where the resize allows it (the default), TurboJPEG always in full, or
 * stb_image (the decoder before libjpeg-turbo; for tests and
 * benchmarks). */
typedef enum { VD_JPEG_TURBO = 0, VD_JPEG_TURBO_FULL = 1, VD_JPEG_STB = 2 } vd_jpeg_decoder;
/* Choose the JPEG decoder of a folder dataset (before loaders start).
 * VD_EUSAGE for other kinds. */
int vd_data_set_jpeg_decoder(vd_dataset *ds, vd_jpeg_decoder dec, vd_err *e);

/* The permutation of [0, n) used for epoch `epoch` (see the header comment).
 * perm has n entries. */
void vd_data_epoch_perm(int64_t n, uint64_t seed, int64_t epoch, int64_t *perm);

/* ---- loader: prepares the next batches on background threads ------------ */
typedef struct vd_loader vd_loader;

typedef struct vd_loader_cfg {
    vd_split split;
    int batch;
    bool shuffle;           /* train: per-epoch permutation; false: in order */
    uint64_t seed;          /* the run's seed (order and augmentation) */
    uint64_t start;         /* sample counter of the first batch */
    int threads;            /* worker threads (0 = vd_loader_default_threads()) */
    bool synth_device;      /* synthetic data only (else VD_EUSAGE): the batches are
                               generated where they are used (a backend's
                               fill_synthetic); no worker threads, no buffers:
                               vd_loader_next_synth describes each batch */
    int rank, ranks;        /* one process's shard (vdnn-train --mpi): with ranks > 1
                               the loader's batch k is batch k*ranks + rank of the
                               sequence below (0, 0: every batch) */
    bool pad;               /* the split is read once (evaluation): a sample counter
                               at or past its end is padding (the batches are whole,
                               wrapping as always) and gets the label VD_LABEL_PAD */
} vd_loader_cfg;

/* The label of a padding sample (vd_loader_cfg.pad; vd_exec_eval_step does
 * not score it). */
#define VD_LABEL_PAD (-1)

/* The default number of loader threads: the online cores, at most
 * VD_LOADER_MAX_DEFAULT_THREADS (more rarely helps: the training thread and
 * the backend need cores too). */
enum { VD_LOADER_MAX_DEFAULT_THREADS = 16 };
int vd_loader_default_threads(void);

/* Start workers that fill a ring of batch buffers (two with one worker, four
 * with more; the workers share each batch in chunks, oldest batch first).
 * Batch k holds samples start + k*batch .. start + (k+1)*batch - 1 of the
 * sample counter, wrapping across epochs (no batch is dropped or short); with
 * cfg.ranks > 1, batch k holds those of batch k*ranks + rank. The result is
 * independent of the number of threads. */
int vd_loader_create(vd_loader **out, vd_dataset *ds, const vd_loader_cfg *cfg,
                     vd_err *e);
/* Copy the next batch into x [batch*c*h*w] and labels [batch]; blocks until
 * it is ready (a large batch is copied by several threads). Errors from the
 * workers (VD_EDATA ...) are returned here: of a batch's failing samples, the
 * first in batch order, whatever the thread count. */
int vd_loader_next(vd_loader *ld, float *x, int32_t *labels, vd_err *e);
/* The same in element type dt and layout nhwc (vd_math_act_dtype and
 * vd_math_nhwc of the math); VD_DT_F32 with nhwc false is vd_loader_next.
 * nhwc: x receives the samples in channels-last order (vd_nchw_f32_to_nhwc;
 * VD_EINTERNAL for 16 bits without it): floats moved unchanged (math tf32's
 * layout), VD_DT_BF16 / VD_DT_F16 16-bit elements (uint16_t, rounded to
 * nearest even; math bf16's and fp16's), exactly vd_f32_to_bf16 /
 * vd_f32_to_f16 of the floats vd_loader_next would give. The loader makes the batches in the type of
 * the last call: after the first 16-bit call its threads write 16-bit
 * samples (a folder data set writes bf16 straight from the decoded image,
 * other data sets and fp16 convert each sample's floats), so that the call
 * only copies them; the batches made before (floats) are converted in
 * parallel as they are copied. A call in another type than the batch was
 * made in (no caller switches) makes it again in floats on the calling
 * thread: the same values, slowly. */
int vd_loader_next_as(vd_loader *ld, void *x, vd_dtype dt, bool nhwc, int32_t *labels,
                      vd_err *e);
/* A synth_device loader's next batch: b->seed, split, classes, sample_numel
 * and n (the batch) are set and b->index[0..batch) receives each sample's
 * index in the split (the same samples, in the same order, as vd_loader_next
 * returns), labels[0..batch) their labels. No pixel is made here. Only for
 * a synth_device loader (VD_EINTERNAL otherwise; vd_loader_next and
 * vd_loader_next_as are VD_EINTERNAL on one). */
int vd_loader_next_synth(vd_loader *ld, vd_synth_batch *b, int32_t *labels, vd_err *e);
/* The number of worker threads running (0 for a synth_device loader). */
int vd_loader_threads(const vd_loader *ld);
/* Sample counter of the next batch that vd_loader_next will return (with
 * cfg.ranks > 1: of the next batch of rank 0, all ranks' batches before it
 * counted). */
uint64_t vd_loader_position(const vd_loader *ld);
/* Stop and join the workers, free everything, clear the pointer. */
void vd_loader_destroy(vd_loader **ld);

#endif
