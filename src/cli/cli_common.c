#include <stdio.h>
#include "vd_config.h"
#include "cli/cli_common.h"

int vd_cli_fail(const char *prog, const vd_err *e) {
    fprintf(stderr, "%s: error: %s\n", prog, e->msg[0] ? e->msg : "unknown error");
    return e->code ? e->code : VD_EINTERNAL;
}

void vd_cli_version(const char *prog) {
    printf("%s %s (cuda backend: %s, blas: %s)\n", prog, VD_VERSION,
           VD_HAVE_CUDA ? "yes" : "no", VD_HAVE_BLAS ? "openblas" : "none");
}
