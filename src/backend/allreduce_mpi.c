/* allreduce_mpi.c — ranks that are processes of an MPI job (vdnn-train
 * --mpi; see allreduce.h). Only the thread that called vd_mpi_init calls MPI.
 *
 * The CPU all-reduce gathers and sums locally rather than calling
 * MPI_Allreduce: MPI does not fix the order in which a reduction adds the
 * ranks' values (Open MPI picks among ring, tree and recursive-doubling
 * algorithms by message size and process count), so its float sums could
 * differ in the last bits from the in-process stand-in's, from run to run
 * of the same job size, and between ranks' views. Gathering every rank's
 * buffer and adding in rank order 0, 1, ..., n-1 on each rank gives every
 * rank the stand-in's exact bits, at n times the traffic (the CPU backend's
 * gradients are small; the CUDA path uses NCCL). */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include "vd_config.h"
#include "backend/allreduce.h"

#if VD_HAVE_MPI
#include <mpi.h>

static bool g_init;             /* vd_mpi_init ran */

bool vd_mpi_built(void) { return true; }

static int mpi_fail(vd_err *e, int code, const char *what) {
    char s[MPI_MAX_ERROR_STRING];
    int n = 0;
    if (MPI_Error_string(code, s, &n) != MPI_SUCCESS) snprintf(s, sizeof s, "error %d", code);
    return vd_errf(e, VD_EINTERNAL, "MPI: %s: %s", what, s);
}

int vd_mpi_init(vd_world *w, vd_err *e) {
    memset(w, 0, sizeof *w);
    int done = 0, rc, provided = 0;
    MPI_Initialized(&done);
    /* FUNNELED: the process has other threads (the loader's, the backend's),
     * but only this one calls MPI */
    if (!done && (rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided)) != MPI_SUCCESS)
        return mpi_fail(e, rc, "MPI_Init_thread");
    g_init = true;
    if (!done && provided < MPI_THREAD_FUNNELED)
        return vd_errf(e, VD_EUNSUPPORTED, "MPI: this MPI library does not support "
                       "MPI_THREAD_FUNNELED (threads beside the one that calls MPI)");
    /* errors come back as codes (the default handler aborts the job) */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if ((rc = MPI_Comm_rank(MPI_COMM_WORLD, &w->rank)) != MPI_SUCCESS ||
        (rc = MPI_Comm_size(MPI_COMM_WORLD, &w->size)) != MPI_SUCCESS)
        return mpi_fail(e, rc, "MPI_Comm_rank/size");
    MPI_Comm node;
    if ((rc = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w->rank, MPI_INFO_NULL,
                                  &node)) != MPI_SUCCESS)
        return mpi_fail(e, rc, "MPI_Comm_split_type");
    rc = MPI_Comm_rank(node, &w->local_rank);
    MPI_Comm_free(&node);
    if (rc != MPI_SUCCESS) return mpi_fail(e, rc, "MPI_Comm_rank (node)");
    return VD_OK;
}

int vd_mpi_allgather(const void *mine, void *all, size_t bytes, vd_err *e) {
    if (bytes > INT_MAX) return vd_errf(e, VD_EINTERNAL, "MPI: gather of %zu bytes", bytes);
    int rc = MPI_Allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? VD_OK : mpi_fail(e, rc, "MPI_Allgather");
}

void vd_mpi_finalize(void) {
    if (g_init) MPI_Finalize();
    g_init = false;
}

void vd_mpi_abort(int code) {
    if (g_init) MPI_Abort(MPI_COMM_WORLD, code);
}

/* ---- the CPU all-reduce ---------------------------------------------------- */

/* Floats per rank per MPI_Allgather: bounds the gather buffer (n * CHUNK
 * floats) and keeps MPI's int counts in range. */
enum { MPI_AR_CHUNK = 1 << 20 };

typedef struct mpi_ar { float *all; } mpi_ar;   /* [n * MPI_AR_CHUNK] */

static int mpi_average(vd_allreduce *ar, vd_backend *be, float *buf, int64_t count, vd_err *e) {
    (void)be;
    mpi_ar *m = ar->ctx;
    int n = ar->n_ranks;
    float scale = 1.0f / (float)n;
    for (int64_t off = 0; off < count; off += MPI_AR_CHUNK) {
        int64_t len = count - off < MPI_AR_CHUNK ? count - off : MPI_AR_CHUNK;
        int rc = MPI_Allgather(buf + off, (int)len, MPI_FLOAT, m->all, (int)len, MPI_FLOAT,
                               MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) return mpi_fail(e, rc, "MPI_Allgather (all-reduce)");
        /* as allreduce_cpu.c: ((b0 + b1) + b2) ... then * 1/n */
        for (int64_t i = 0; i < len; i++) {
            float s = m->all[i];
            for (int k = 1; k < n; k++) s += m->all[(int64_t)k * len + i];
            s *= scale;
            buf[off + i] = s;
        }
    }
    return VD_OK;
}

static int mpi_wait(vd_allreduce *ar, vd_backend *be, vd_err *e) {
    (void)ar; (void)be; (void)e;
    return VD_OK;   /* average has finished when it returns */
}

/* A failing rank ends the job (vd_mpi_abort): nothing to release here. */
static void mpi_abort_ar(vd_allreduce *ar) { (void)ar; }

static void mpi_destroy(vd_allreduce *ar) {
    if (!ar) return;
    mpi_ar *m = ar->ctx;
    if (m) vd_free(m->all);
    vd_free(m);
    vd_free(ar);
}

int vd_allreduce_mpi_create(vd_allreduce **out, const vd_world *w, const char *backend,
                            int device, vd_err *e) {
    *out = NULL;
    if (!g_init) return vd_errf(e, VD_EINTERNAL, "vd_allreduce_mpi_create before vd_mpi_init");
    const char *kind = vd_backend_resolve(backend, NULL);
    if (!kind) return vd_errf(e, VD_EUSAGE, "unknown backend '%s'", backend);
    if (!strcmp(kind, "cuda")) {
        /* NCCL's bootstrap: rank 0's unique id, broadcast over MPI */
        unsigned char id[VD_NCCL_ID_BYTES] = { 0 };
        int rc = VD_OK, ok;
        if (w->rank == 0) rc = vd_nccl_unique_id(id, e);
        ok = rc == VD_OK;
        /* every rank learns whether rank 0 has an id (else all fail alike) */
        int mrc = MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (mrc == MPI_SUCCESS && ok) mrc = MPI_Bcast(id, VD_NCCL_ID_BYTES, MPI_BYTE, 0, MPI_COMM_WORLD);
        if (mrc != MPI_SUCCESS) return mpi_fail(e, mrc, "MPI_Bcast (NCCL unique id)");
        if (!ok)
            return w->rank == 0 ? rc : vd_errf(e, VD_EDEVICE, "NCCL: rank 0 could not make "
                                               "the communicator's unique id");
        return vd_allreduce_nccl_create_rank(out, w->rank, w->size, device, id, e);
    }
    vd_allreduce *ar = vd_calloc(1, sizeof *ar, e);
    mpi_ar *m = ar ? vd_calloc(1, sizeof *m, e) : NULL;
    float *all = m ? vd_malloc(sizeof(float) * (size_t)w->size * MPI_AR_CHUNK, e) : NULL;
    if (!all) {
        vd_free(m);
        vd_free(ar);
        return VD_ENOMEM;
    }
    m->all = all;
    *ar = (vd_allreduce){ .name = "mpi", .rank = w->rank, .n_ranks = w->size, .ctx = m,
                          .average = mpi_average, .wait = mpi_wait, .abort = mpi_abort_ar,
                          .destroy = mpi_destroy };
    *out = ar;
    return VD_OK;
}

#else  /* no MPI in this build */

bool vd_mpi_built(void) { return false; }

int vd_mpi_init(vd_world *w, vd_err *e) {
    memset(w, 0, sizeof *w);
    return vd_errf(e, VD_EUNSUPPORTED,
                   "--mpi needs MPI, and this vdnn was built without it (meson found no MPI "
                   "at configure time); install Open MPI (Debian: libopenmpi-dev openmpi-bin) "
                   "and rebuild with -Dmpi=enabled, or use --gpus N on one machine");
}

int vd_mpi_allgather(const void *mine, void *all, size_t bytes, vd_err *e) {
    (void)mine; (void)all; (void)bytes;
    return vd_errf(e, VD_EUNSUPPORTED, "this vdnn was built without MPI");
}

void vd_mpi_finalize(void) {}
void vd_mpi_abort(int code) { (void)code; }

int vd_allreduce_mpi_create(vd_allreduce **out, const vd_world *w, const char *backend,
                            int device, vd_err *e) {
    (void)backend; (void)device;
    *out = NULL;
    vd_world tmp;
    (void)w;
    return vd_mpi_init(&tmp, e);
}

#endif
