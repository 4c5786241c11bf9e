/*
 * Corpus replay for a fuzz target, in every build and with any compiler
 * (SQLite fuzzcheck): each argument is a file or a directory of files, fed
 * in name order to LLVMFuzzerTestOneInput, which aborts on a bug.  Files
 * named "valid-*" must also pass the target's fuzz_seed_ok, so the seeds
 * cannot rot when the format changes.  Exit status: 0 all passed, 1 a
 * valid-* seed was refused or nothing was replayed, 2 usage or I/O error.
 *
 *     fuzz_<target>_replay tests/fuzz/<target>/corpus [more files or dirs]
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "replay.h"

typedef struct {
    size_t inputs;  /* files fed to the target */
    size_t valid;   /* valid-* files checked to open and verify clean */
    size_t refused; /* valid-* files that did not */
} tally;

/* The input being replayed, named by the SIGABRT handler when the target
 * finds a bug (its own message does not know the file). */
static char current[4096];

static void
on_abort(int sig)
{
    static const char pre[] = "fuzz_replay: aborted while replaying ";
    ssize_t           w = write(2, pre, sizeof(pre) - 1);
    w = write(2, current, strlen(current));
    w = write(2, "\n", 1);
    (void)w;
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Read the whole file into a malloc'd block (at least 1 byte, so an empty
 * file still has a non-NULL buffer).  0 on success. */
static int
read_file(const char *path, uint8_t **out, size_t *out_len)
{
    FILE    *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    long     n;

    if (f == NULL) {
        fprintf(stderr, "fuzz_replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fprintf(stderr, "fuzz_replay: %s: cannot size: %s\n", path, strerror(errno));
        fclose(f);
        return -1;
    }
    if ((buf = malloc(n > 0 ? (size_t)n : 1)) == NULL || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "fuzz_replay: %s: cannot read %ld bytes\n", path, n);
        free(buf);
        fclose(f);
        return -1;
    }
    fclose(f);
    *out = buf;
    *out_len = (size_t)n;
    return 0;
}

static int
replay_file(const char *path, const char *base, tally *t)
{
    uint8_t *buf;
    size_t   len;

    if (read_file(path, &buf, &len) != 0) {
        return -1;
    }
    snprintf(current, sizeof(current), "%s", path);
    LLVMFuzzerTestOneInput(buf, len);
    t->inputs++;
    if (strncmp(base, "valid-", 6) == 0) {
        t->valid++;
        if (!fuzz_seed_ok(buf, len)) {
            fprintf(stderr, "fuzz_replay: %s: named valid-* but %s\n", path, fuzz_seed_rule);
            t->refused++;
        }
    }
    free(buf);
    return 0;
}

static int
skip_dot(const struct dirent *e)
{
    return e->d_name[0] != '.';
}

static int
replay_dir(const char *dir, tally *t)
{
    struct dirent **names;
    int             n, rc = 0;

    if ((n = scandir(dir, &names, skip_dot, alphasort)) < 0) {
        fprintf(stderr, "fuzz_replay: %s: %s\n", dir, strerror(errno));
        return -1;
    }
    for (int i = 0; i < n; i++) {
        char        path[4096];
        struct stat st;
        int         len = snprintf(path, sizeof(path), "%s/%s", dir, names[i]->d_name);

        if (len < 0 || (size_t)len >= sizeof(path)) {
            fprintf(stderr, "fuzz_replay: %s/%s: path too long\n", dir, names[i]->d_name);
            rc = -1;
        } else if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            if (replay_file(path, names[i]->d_name, t) != 0) {
                rc = -1;
            }
        }
        free(names[i]);
    }
    free(names);
    return rc;
}

int
main(int argc, char **argv)
{
    tally t = {0, 0, 0};
    int   io_failed = 0;

    signal(SIGABRT, on_abort);
    if (argc < 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR_OR_FILE...\n", argv[0]);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        struct stat st;
        const char *base = strrchr(argv[i], '/');

        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "fuzz_replay: %s: %s\n", argv[i], strerror(errno));
            io_failed = 1;
        } else if (S_ISDIR(st.st_mode)) {
            io_failed |= replay_dir(argv[i], &t) != 0;
        } else {
            io_failed |= replay_file(argv[i], base ? base + 1 : argv[i], &t) != 0;
        }
    }
    printf("fuzz_replay: %zu inputs replayed, %zu valid-* seeds checked, %zu refused\n", t.inputs,
           t.valid, t.refused);
    if (io_failed) {
        return 2;
    }
    if (t.inputs == 0) {
        fprintf(stderr, "fuzz_replay: no inputs found\n");
        return 1;
    }
    return t.refused == 0 ? 0 : 1;
}
