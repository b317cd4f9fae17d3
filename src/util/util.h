/* util.h — errors, checked size arithmetic, allocation, small helpers.
 *
 * Error convention (whole project): library functions return int, 0 on
 * success or a positive VD_E* code on failure, and fill a caller-supplied
 * vd_err with a message a user can act on. Only src/cli/ prints and exits;
 * the process exit status is the VD_E* code. */
#ifndef VD_UTIL_H
#define VD_UTIL_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <stdbool.h>
#include <regex.h>

/* Exit codes / error codes. Documented in the man pages; keep in sync. */
enum {
    VD_OK = 0,
    VD_EINTERNAL = 1,   /* bug: an invariant did not hold */
    VD_EUSAGE = 2,      /* bad command line */
    VD_ESPEC = 3,       /* bad network spec (FILE:LINE:COL: message) */
    VD_EIO = 4,         /* file could not be read/written */
    VD_EDATA = 5,       /* corrupt or truncated data/checkpoint/profile file */
    VD_EBUDGET = 6,     /* plan does not fit the memory budget */
    VD_EDEVICE = 7,     /* CUDA / cuDNN / cuBLAS error, or no device */
    VD_EUNSUPPORTED = 8,/* capability missing in this build/backend */
    VD_ENOMEM = 9,      /* host allocation failed */
    VD_ENUMERIC = 10,   /* loss became NaN/Inf */
    VD_ESTOP = 11,      /* stopped on request (SIGINT, SIGTERM, SIGHUP): never an
                           exit status itself, the CLI exits 128 + the signal */
};

typedef struct vd_err {
    int code;           /* VD_E* or VD_OK */
    char msg[1024];     /* human-readable, no trailing newline */
} vd_err;

/* Set *e (may be NULL) to code and a printf-style message; returns code. */
int vd_errf(vd_err *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prefix an existing message: "prefix: old message". Returns e->code. */
int vd_err_prefix(vd_err *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Checked arithmetic: return false on overflow, *out unchanged then. */
bool vd_mul_u64(uint64_t a, uint64_t b, uint64_t *out);
bool vd_add_u64(uint64_t a, uint64_t b, uint64_t *out);

/* Allocation wrappers: abort-free; return NULL and set e on failure.
 *
 * They count host memory: every block they return adds its usable size
 * (malloc_usable_size) to the live count, vd_free and vd_realloc take it
 * off again, and the largest live count is the high-water mark
 * (vd_mem_stats). A block of the wrappers released with plain free() stays
 * counted as live, so release them with vd_free. Memory that does not come
 * from malloc (the backends' pinned host buffers) is counted with
 * vd_mem_track / vd_mem_untrack. Thread-safe (the data loader's threads
 * allocate). */
void *vd_malloc(size_t n, vd_err *e);
void *vd_calloc(size_t count, size_t size, vd_err *e);
void *vd_realloc(void *p, size_t n, vd_err *e);
char *vd_strdup(const char *s, vd_err *e);
/* A printf-formatted string in a block of the wrappers (release with
 * vd_free), never truncated: paths are built with it ("%s/%s"). NULL with
 * e set (VD_ENOMEM) when out of memory. */
char *vd_strfmt(vd_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* free(p) for a block of the wrappers (NULL is fine), uncounting it. */
void vd_free(void *p);
/* free(p) for a block the wrappers never counted: memory another library
 * allocated with malloc and handed over (open_memstream's buffer), and the
 * CPU backend's posix_memalign'd blocks. The only plain free() outside
 * util.c; tools/check-alloc fails the build's tests on any other. */
void vd_free_uncounted(void *p);
/* vd_free and clear the pointer. */
#define VD_FREE(p) do { vd_free(p); (p) = NULL; } while (0)
/* Count bytes at p (not from the wrappers, e.g. cudaMallocHost) as live
 * until vd_mem_untrack(p). Returns false (nothing counted) when out of
 * memory for the bookkeeping; untracking an unknown p does nothing. */
bool vd_mem_track(const void *p, uint64_t bytes);
void vd_mem_untrack(const void *p);
typedef struct vd_mem_stats {
    uint64_t live;              /* bytes counted now */
    uint64_t peak;              /* the most counted at once (high-water mark) */
    uint64_t tracked;           /* of live: vd_mem_track'ed (pinned host buffers) */
    uint64_t largest;           /* the largest single block ever counted */
} vd_mem_stats;
void vd_mem_stats_get(vd_mem_stats *s);
/* Restart the high-water mark (peak) at the bytes counted now, so that the
 * next reading measures one phase alone (a test of the spec parser's). */
void vd_mem_peak_reset(void);

/* Parse "12G", "512M", "4096", "1.5G" (K/M/G/T = 2^10.., optional "iB"/"B").
 * Returns 0 or VD_EUSAGE. */
int vd_parse_size(const char *s, uint64_t *out, vd_err *e);
/* Format bytes as "12.00 GiB" into buf. Returns buf. */
char *vd_fmt_bytes(uint64_t bytes, char *buf, size_t n);
/* Strict integer/float parsing of a whole string. Return 0 or VD_EUSAGE. */
int vd_parse_i64(const char *s, int64_t *out, vd_err *e);
int vd_parse_f64(const char *s, double *out, vd_err *e);

/* Levenshtein distance, for "did you mean" suggestions. */
int vd_edit_distance(const char *a, const char *b);
/* Nearest of n candidates to s, or NULL if none is plausibly close. */
const char *vd_suggest(const char *s, const char *const *cands, int n);

/* Name patterns (vdnn-train --freeze, --init-skip): a POSIX extended
 * regular expression (regcomp with REG_EXTENDED | REG_NOSUB) that a name
 * matches when it matches anywhere in it, as Python's re.search (anchor
 * with ^ and $). vd_regex_compile: VD_EUSAGE naming `flag` and the pattern
 * with regerror's reason when it does not compile; on success release *re
 * with regfree. */
int vd_regex_compile(regex_t *re, const char *pattern, const char *flag, vd_err *e);
bool vd_regex_search(const regex_t *re, const char *s);

/* Monotonic wall time in seconds. */
double vd_now(void);

/* Deterministic RNG (PCG32). Same sequence on every platform. */
typedef struct vd_rng { uint64_t state, inc; } vd_rng;
void vd_rng_seed(vd_rng *r, uint64_t seed, uint64_t stream);
uint32_t vd_rng_u32(vd_rng *r);
float vd_rng_uniform(vd_rng *r);            /* [0, 1) */
/* Jump ahead: r as after delta calls of vd_rng_u32 (each vd_rng_uniform is
 * one), in O(log delta) steps (PCG's advance). */
void vd_rng_advance(vd_rng *r, uint64_t delta);
float vd_rng_normal(vd_rng *r);             /* N(0, 1), Box-Muller */
/* Host and device (nvcc) from one definition. */
#ifdef __CUDACC__
#define VD_HOST_DEVICE __host__ __device__
#else
#define VD_HOST_DEVICE
#endif

/* Stateless counter hash -> uniform [0,1): used for dropout masks so that
 * every backend draws the same mask; the CUDA kernels call this very
 * function. */
VD_HOST_DEVICE static inline float vd_hash_uniform(uint64_t seed, uint64_t layer,
                                    uint64_t iter, uint64_t idx) {
    uint64_t x = seed ^ (layer * 0x9E3779B97F4A7C15ull) ^
                 (iter * 0xC2B2AE3D27D4EB4Full) ^ (idx * 0x165667B19E3779F9ull);
    x ^= x >> 33; x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return (float)(x >> 40) * (1.0f / 16777216.0f);
}

/* A fresh name for a temporary sibling of path: "<path>.tmp.<pid>.<12
 * random hex digits>" (getrandom: unpredictable, so nothing can be planted
 * there in advance). Nothing is created (malloc'd; NULL with e set when out
 * of memory). */
char *vd_tmp_name(const char *path, vd_err *e);
/* Create a temporary sibling of path (vd_tmp_name) with
 * O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC, mode 0644 less the umask: never an
 * existing file, link, FIFO or device. Returns the descriptor (open for
 * writing) and *tmp (release with vd_free), or minus VD_EIO / VD_ENOMEM
 * with e naming path and the errno text. */
int vd_tmp_create(const char *path, char **tmp, vd_err *e);
/* Write data to a new temporary sibling of path (vd_tmp_create), fsync and
 * close it: *tmp is then a complete durable file for the caller to rename
 * (release the name with vd_free). On failure nothing is left behind. */
int vd_tmp_write(const char *path, const void *data, size_t n, char **tmp, vd_err *e);
/* Where a write to path should go, so that an output never destroys
 * anything: a symbolic link is followed to its target (link by link, at
 * most 40; the link stays, the target is replaced or created), and an
 * existing target that is not a
 * regular file is refused: VD_EIO "is a directory" / "not a regular file
 * (a character device ...)" (a device node, a FIFO or a socket is never
 * replaced or written to). *out: the path to
 * write (a block of the allocation wrappers; release with vd_free). */
int vd_output_path(const char *path, char **out, vd_err *e);
/* Check before long work that a file can later be written at path (as
 * vd_write_file_atomic writes it): vd_output_path's refusals, then a
 * temporary sibling is created and removed again. VD_EIO naming path. */
int vd_output_check(const char *path, vd_err *e);
/* Remove the temporaries that killed atomic writes to path left behind:
 * the regular files "<path>.tmp.<PID>" and "<path>.tmp.<PID>.<hex>" whose
 * process no longer exists (kill(PID, 0) fails with ESRCH). Files of live
 * processes (a concurrent save) and of this process are kept; a link,
 * FIFO or device at such a name is left alone. Best effort: returns the
 * number removed, never fails. */
int vd_tmp_clean_stale(const char *path);
/* Write a whole file atomically: a temporary in the same directory
 * (vd_tmp_write), renamed over path, the directory fsynced. path goes
 * through vd_output_path first (a symlink is written through, a device,
 * FIFO or directory refused). Stale temporaries of path are removed first
 * (vd_tmp_clean_stale). A failure (a full disk) leaves path as it was;
 * the message names path and the errno text. */
int vd_write_file_atomic(const char *path, const void *data, size_t n, vd_err *e);
/* vd_write_file_atomic of what fn writes to a memory stream (fn returns
 * VD_OK or an error with e set; a write error of the stream itself is
 * VD_ENOMEM). For JSON and CSV outputs. */
typedef int (*vd_stream_writer)(FILE *f, const void *ctx, vd_err *e);
int vd_write_stream_atomic(const char *path, vd_stream_writer fn, const void *ctx, vd_err *e);
/* Open path for reading if it is a regular file of at most max bytes:
 * returns the descriptor (O_CLOEXEC, blocking) and *size (from fstat; size
 * may be NULL), or minus a VD_E* code with e set: VD_EIO "is a directory",
 * "not a regular file (a FIFO / character device / ...)" (nothing is read,
 * a FIFO does not block), a missing or unreadable file; VD_EDATA "too
 * large". */
int vd_open_regular(const char *path, uint64_t max, uint64_t *size, vd_err *e);
/* Read a whole regular file of at most max bytes (vd_open_regular) into a
 * buffer of the allocation wrappers (+1 NUL byte; release with vd_free). */
int vd_read_file_max(const char *path, uint64_t max, char **data, size_t *n, vd_err *e);
/* vd_read_file_max without a size limit (the file's size must fit memory). */
int vd_read_file(const char *path, char **data, size_t *n, vd_err *e);
/* Write all of data[0..n) to fd (EINTR and short writes retried): VD_EIO
 * "PATH: write failed: <errno text>" (a full disk: ENOSPC). */
int vd_write_all(int fd, const void *data, size_t n, const char *path, vd_err *e);
/* Read exactly n bytes from fd at its offset (EINTR retried): VD_EIO on a
 * read error, VD_EDATA "truncated" when the file ends first (path names it
 * in messages). */
int vd_read_full(int fd, void *buf, size_t n, const char *path, vd_err *e);

/* fsync the directory that holds path (makes renames/links in it durable).
 * VD_EIO when the directory cannot be opened or synced. */
int vd_fsync_parent_dir(const char *path, vd_err *e);

/* One file a run reads or writes, for vd_run_paths_check. */
typedef struct vd_run_path {
    const char *flag;           /* how the user named it: "--save", or what it
                                   is when no flag names it: "the spec" */
    const char *path;           /* as given; NULL: not in this run (skipped) */
    const char *suffix;         /* NULL, or a file the flag implies: ".state" (an
                                   output's is beside the resolved target, as
                                   the writers put it) */
    bool output;                /* written (replaced) by the run */
    bool tree;                  /* an input directory: every file that exists
                                   under it is an input (data sets) */
    const char *may_replace;    /* an output's: the flag of the one input it is
                                   meant to replace ("--resume" for --save:
                                   the checkpoint is read whole first) */
    const char *rename;         /* an output's: the flag a clash asks to rename
                                   (the one its name derives from); NULL: flag */
} vd_run_path;
/* Refuse a run that would write over what it reads, before anything is
 * written: every output is compared with every input and every other
 * output, by identity (device and inode) where the file exists, by its
 * resolved path (symbolic links followed, the directory made absolute)
 * where it does not; an output that is an existing file under an input
 * tree clashes too. An output never clashes with the input its
 * may_replace names. VD_EUSAGE naming both flags and paths, VD_ENOMEM. A path that
 * cannot be resolved (a missing input) is left to its reader. */
int vd_run_paths_check(const vd_run_path *p, int n, vd_err *e);
/* Outputs named by a rule rather than listed, too many to list (numbered
 * checkpoints): the files of one directory whose names is_member accepts. */
typedef struct vd_run_family {
    const char *flag;           /* what they are, for messages: "the numbered
                                   checkpoint (--keep)" */
    const char *rename;         /* the flag their names derive from: "--save" */
    const char *dir;            /* their directory, as given */
    bool (*is_member)(const char *name, const void *ctx);   /* name: no directory */
    const void *ctx;
} vd_run_family;
/* vd_run_paths_check(p, n) with family f's outputs as well: every member
 * that exists is checked as one more output (identity and resolved path),
 * and a path of p clashes when it resolves to a member's name in f->dir
 * (so one that does not exist yet too). A missing f->dir has no members
 * (its writer reports it). VD_EUSAGE naming both, VD_ENOMEM. */
int vd_run_paths_check_family(const vd_run_path *p, int n, const vd_run_family *f, vd_err *e);

/* ---- bfloat16 / float16 -------------------------------------------------
 * The element type of a feature map (vd_math_act_dtype, net.h): float, or
 * one of the two 16-bit formats (uint16_t storage; C has neither type). */
typedef enum { VD_DT_F32 = 0, VD_DT_BF16, VD_DT_F16 } vd_dtype;
static inline uint64_t vd_dtype_bytes(vd_dtype t) { return t == VD_DT_F32 ? 4u : 2u; }
/* bf16 is the upper half of an IEEE float32 (1 sign, 8 exponent, 7 mantissa
 * bits); these are the conversions every bf16 store in vdnn goes through. */
/* The bfloat16 nearest to f, ties to even (what __float2bfloat16_rn does on
 * the GPU). A finite f at or beyond the midpoint between the largest bf16
 * (0x7F7F, 3.3895e38) and 2^128 rounds to an infinity of its sign;
 * infinities stay; a NaN stays a NaN: quiet, its sign and the top of its
 * payload kept (the truncation with the quiet bit set, so a NaN whose
 * payload is all in the low half does not read as inf). vd_bf16_rne_bits
 * does it on f's bits, without a branch, so that loops over arrays vectorize:
 * the sum is also formed for a NaN (unsigned, it may wrap) and then
 * discarded; for any other value it cannot overflow 32 bits (0x7F7FFFFF
 * carries into 0x7F80, an infinity). */
static inline uint16_t vd_bf16_rne_bits(uint32_t u) {
    uint16_t nan = (uint16_t)((u >> 16) | 0x0040u);
    uint16_t r = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    return (u & 0x7fffffffu) > 0x7f800000u ? nan : r;
}
static inline uint16_t vd_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return vd_bf16_rne_bits(u);
}
/* Exact (bits << 16). */
static inline float vd_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
/* IEEE 754 binary16 (1 sign, 5 exponent, 10 mantissa bits; largest finite
 * 65504, smallest subnormal 2^-24). The binary16 nearest to f, ties to even,
 * what __float2half_rn (PTX cvt.rn.f16.f32) gives on the GPU: normal and
 * subnormal results rounded to nearest even (a value that rounds up out of
 * the subnormals becomes the smallest normal, 0x0400); |f| >= 65520 (the
 * midpoint between 65504 and 2^16) becomes an infinity of f's sign,
 * infinities stay; any NaN becomes the canonical NaN 0x7FFF, as on the GPU.
 * vd_f16_rne_bits does it on f's bits without a branch (both candidates
 * are formed and one selected) so that array loops vectorize; the subnormal
 * candidate is |f| + 0.5f in float (the FPU's round to nearest even at
 * 0.5's ulp, 2^-24, which is the binary16 subnormal step), the normal one
 * the rebiased bits rounded as vd_bf16_rne_bits rounds (clamped to the
 * infinity). Requires the default rounding mode (no fast-math here). */
static inline uint16_t vd_f16_rne_bits(uint32_t u) {
    uint32_t a = u & 0x7fffffffu, sign = (u >> 16) & 0x8000u;
    uint32_t norm = (a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13;  /* 127 - 15 = 112 << 23 */
    norm = norm < 0x7c00u ? norm : 0x7c00u;
    float af;
    memcpy(&af, &a, 4);
    af += 0.5f;
    uint32_t sb;
    memcpy(&sb, &af, 4);
    /* selected with masks, not ?: (GCC branches on those, and zeros mixed
     * with other values, as after a relu, mispredict) */
    uint32_t sub = 0u - (uint32_t)(a < 0x38800000u);          /* below 2^-14: subnormal */
    uint32_t nan = 0u - (uint32_t)(a > 0x7f800000u);
    uint32_t r = ((sb - 0x3f000000u) & sub) | (norm & ~sub);
    return (uint16_t)((0x7fffu & nan) | ((sign | r) & ~nan));
}
static inline uint16_t vd_f32_to_f16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return vd_f16_rne_bits(u);
}
/* The float of an IEEE 754 binary16 bit pattern: exact for every value
 * (subnormals become normal floats, infinities stay infinities, a NaN stays
 * a NaN with its sign and payload). */
float vd_f16_to_f32(uint16_t h);
/* One element of dt (VD_DT_BF16 or VD_DT_F16) to float and back (rounded
 * as vd_f32_to_bf16 / vd_f32_to_f16). */
static inline uint16_t vd_f32_to_h16(vd_dtype dt, float f) {
    return dt == VD_DT_F16 ? vd_f32_to_f16(f) : vd_f32_to_bf16(f);
}
static inline float vd_h16_to_f32(vd_dtype dt, uint16_t h) {
    return dt == VD_DT_F16 ? vd_f16_to_f32(h) : vd_bf16_to_f32(h);
}
/* Array forms, for dt VD_DT_BF16 or VD_DT_F16 (the 16-bit feature-map
 * types; the bf16 names are the same with dt VD_DT_BF16). */
void vd_f32_to_h16_n(vd_dtype dt, const float *src, uint16_t *dst, size_t n);
void vd_h16_to_f32_n(vd_dtype dt, const uint16_t *src, float *dst, size_t n);
void vd_f32_to_bf16_n(const float *src, uint16_t *dst, size_t n);
void vd_bf16_to_f32_n(const uint16_t *src, float *dst, size_t n);
/* Round every element to the nearest value of dt in place (the value a
 * 16-bit store and reload gives). */
void vd_round_h16_n(vd_dtype dt, float *x, size_t n);
void vd_round_bf16_n(float *x, size_t n);
/* n samples of c x hw values: float NCHW to dt channels-last (NHWC,
 * element (i, ch, p) at (i*hw + p)*c + ch), and back. */
void vd_nchw_f32_to_nhwc_h16(vd_dtype dt, const float *src, uint16_t *dst, int64_t n, int64_t c,
                             int64_t hw);
void vd_nhwc_h16_to_nchw_f32(vd_dtype dt, const uint16_t *src, float *dst, int64_t n, int64_t c,
                             int64_t hw);
/* The same for a channels-last tensor of any feature-map type dt: VD_DT_F32
 * (math tf32's maps) moves the floats unchanged (a round trip is
 * bit-identical; src and dst must not overlap unless c or hw is 1), 16-bit
 * dt is the two above. */
void vd_nchw_f32_to_nhwc(vd_dtype dt, const float *src, void *dst, int64_t n, int64_t c,
                         int64_t hw);
void vd_nhwc_to_nchw_f32(vd_dtype dt, const void *src, float *dst, int64_t n, int64_t c,
                         int64_t hw);
void vd_nchw_f32_to_nhwc_bf16(const float *src, uint16_t *dst, int64_t n, int64_t c, int64_t hw);
void vd_nhwc_bf16_to_nchw_f32(const uint16_t *src, float *dst, int64_t n, int64_t c, int64_t hw);

#define VD_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define VD_ALIGN_UP(x, a) (((x) + ((a) - 1)) / (a) * (a))

#endif
