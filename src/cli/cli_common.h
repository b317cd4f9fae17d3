/* cli_common.h — helpers shared by the three command-line tools. Only the
 * CLI prints and exits. */
#ifndef VD_CLI_COMMON_H
#define VD_CLI_COMMON_H

#include "util/util.h"

/* Print "PROG: message" for e to stderr and return e->code (the exit status). */
int vd_cli_fail(const char *prog, const vd_err *e);
/* Print the version line ("vdnn-train 0.1.0 (cuda: yes, blas: yes)"). */
void vd_cli_version(const char *prog);

#endif
