/* Placeholder until its owner lands the real tool. */
#include <stdio.h>
#include "cli/cli_common.h"
int main(void) { fprintf(stderr, "vdnn-train: not implemented yet\n"); return VD_EUNSUPPORTED; }
