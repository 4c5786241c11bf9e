/*
 * The command line of a coordinator started by a program (the chaos
 * harness, bench/perf, the tests): `SYNCREP coordinator --store S --bind E`
 * and the options each adds, in order, every text copied into the builder
 * so nothing it points to has to outlive the call that added it.
 */
#ifndef SR_TOOLS_COORD_ARGV_H
#define SR_TOOLS_COORD_ARGV_H

#include <stddef.h>

#include "coordinator/coord_int.h" /* sr_optim (issue 25) */

#define SR_COORD_ARGV_MAX  96   /* arguments, argv[0] included */
#define SR_COORD_ARGV_TEXT 8192 /* bytes of their text together */

typedef struct {
    char  *argv[SR_COORD_ARGV_MAX + 1]; /* NULL-terminated */
    char   text[SR_COORD_ARGV_TEXT];
    size_t used;     /* bytes of text taken */
    int    n;        /* arguments so far */
    int    overflow; /* something did not fit: sr_coord_argv_get returns NULL */
} sr_coord_argv;

/* Start `syncrep coordinator --store store --bind endpoint`, syncrep being
 * the path of the command to exec. */
void sr_coord_argv_init(sr_coord_argv *a, const char *syncrep, const char *store,
                        const char *endpoint);
/* Append one argument as it is. */
void sr_coord_argv_add(sr_coord_argv *a, const char *arg);
/* Append the option `opt` and its value, formatted. */
void sr_coord_argv_opt(sr_coord_argv *a, const char *opt, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* issue 25: append o's learning-rate schedule, weight decay, Nesterov and
 * clipping options (those of lr_schedule.h and sr_optim's issue-25 fields;
 * --weight-decay always, so adamw's default does not apply), so that a
 * coordinator runs exactly the recipe a verifier replays. */
void sr_coord_argv_recipe(sr_coord_argv *a, const sr_optim *o);
/* The same options from a command line into *o: 1 when
 * `opt` is one of them and `val` (NULL for --nesterov) was taken, -1 for a
 * bad value, 0 when `opt` is not one of them. */
int sr_coord_argv_parse_recipe(sr_optim *o, const char *opt, const char *val);
/* The NULL-terminated argv (borrowed from a), or NULL if it overflowed. */
char *const *sr_coord_argv_get(sr_coord_argv *a);

#endif
