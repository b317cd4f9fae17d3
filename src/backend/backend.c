/* backend.c — a backend and its all-reduce chosen by name (backend.h,
 * allreduce.h): the one place outside src/backend/{cpu,cuda} that tells
 * the backends apart; the check of a chunked op call that both make; an
 * option found by its label. */
#include <string.h>
#include "backend/backend.h"
#include "backend/allreduce.h"

const char *vd_backend_resolve(const char *name, const char **why) {
    if (why) *why = NULL;
    if (!name || !strcmp(name, "auto")) {
        bool cuda = vd_backend_cuda_available();
        if (why) *why = cuda ? "a CUDA device is available" : "no CUDA device";
        return cuda ? "cuda" : "cpu";
    }
    if (!strcmp(name, "cpu") || !strcmp(name, "cuda")) return name;
    return NULL;
}

static int unknown(const char *name, vd_err *e) {
    return vd_errf(e, VD_EUSAGE, "unknown backend '%s' (expected cpu | cuda | auto)", name);
}

int vd_backend_create(vd_backend **out, const char *name, int device, const vd_backend_opts *o,
                      vd_err *e) {
    *out = NULL;
    const char *kind = vd_backend_resolve(name, NULL);
    if (!kind) return unknown(name, e);
    if (!strcmp(kind, "cuda")) return vd_backend_cuda_create_opts(out, device, o, e);
    int rc = vd_backend_cpu_create(out, e);
    if (!rc && o) (*out)->opts = *o;   /* (it honours no_fuse alone) */
    return rc;
}

int vd_allreduce_create(vd_allreduce **out, int n, const char *backend, const int *devices,
                        vd_err *e) {
    const char *kind = vd_backend_resolve(backend, NULL);
    if (!kind) return unknown(backend, e);
    return !strcmp(kind, "cuda") ? vd_allreduce_nccl_create(out, n, devices, e)
                                 : vd_allreduce_cpu_create(out, n, e);
}

int vd_algo_find(const vd_algo_opt *opts, int n, const char *label, int a) {
    if (!label[0]) return a >= 0 && a < n ? a : -1;
    for (int b = 0; b < n; b++)
        if (strcmp(opts[b].label, label) == 0) return b;
    return -1;
}

int vd_op_io_check_chunk(const vd_net *net, int layer, const vd_op_io *io, bool bwd, vd_err *e) {
    const vd_layer *l = &net->layers[layer];
    int nb = vd_op_io_batch(io);
    if (io->n0 < 0 || io->n_batch < 0 || io->n0 + io->n > nb)
        return vd_errf(e, VD_EINTERNAL, "layer '%s': chunk of samples [%lld, %lld) is not inside "
                       "the batch of %d", l->name, (long long)io->n0,
                       (long long)(io->n0 + io->n), nb);
    if (vd_op_io_chunked(io) && !vd_op_chunkable(&vd_op_table[l->op], !bwd && !io->training))
        return vd_errf(e, VD_EINTERNAL, "layer '%s': %s runs only on the whole batch, not on a "
                       "chunk (samples [%lld, %lld) of %d, dw_beta %g)", l->name,
                       vd_op_table[l->op].name, (long long)io->n0, (long long)(io->n0 + io->n),
                       nb, (double)io->dw_beta);
    return VD_OK;
}
