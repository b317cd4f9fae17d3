/* raw.c — a fixture for tools/check-alloc (never compiled): the checker must
 * report the raw calls below, and only them (free(p) in this comment and the
 * "malloc(1)" string do not count). */
#include <stdlib.h>

char *dup_raw(const char *s) {
    char *p = malloc(8);             /* reported */
    const char *msg = "malloc(1)";   /* not reported: a string */
    (void)msg; (void)s;
    free (p);                        /* reported */
    /* uncounted: allowed with the marker */
    return calloc(1, 8);
}
