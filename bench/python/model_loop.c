/*
 * bench_model_loop: the C side of the PyTorch bench row (bench/python/
 * bench_torch.py, docs/performance.md "Python"): one worker of a job whose
 * model is NTENSORS float32 tensors of TENSOR_BYTES each, trained with the
 * model API as a C program would (sr_client_declare_model, then one
 * sr_client_model_step per round, the gradients from one buffer, the fresh
 * values into one arena).  The Python side does the same rounds through
 * syncrep.torch.SyncReplicas; nothing else is computed on either side.
 *
 *   bench_model_loop ENDPOINT TASK NTENSORS TENSOR_BYTES WARM STEPS
 *
 * Prints "steps S seconds T steps_per_s R" for the STEPS rounds after WARM
 * untimed ones; exit 0, or 1 with the library's message on stderr.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "syncrep/syncrep.h"

static int
fail(sr_client *c, const char *what)
{
    fprintf(stderr, "bench_model_loop: %s: %s\n", what, c ? sr_client_error(c) : sr_errdetail());
    return 1;
}

/* A whole-number argument in [lo, hi], else -1. */
static long long
arg(const char *s, long long lo, long long hi)
{
    char     *end = NULL;
    long long v = strtoll(s, &end, 10);
    return *s != '\0' && *end == '\0' && v >= lo && v <= hi ? v : -1;
}

int
main(int argc, char **argv)
{
    long long task, n, bytes, warm, steps;

    if (argc != 7 || (task = arg(argv[2], 0, 1 << 20)) < 0 || (n = arg(argv[3], 1, 100000)) < 0 ||
        (bytes = arg(argv[4], 4, 1LL << 32)) < 0 || bytes % 4 != 0 ||
        (warm = arg(argv[5], 0, 1 << 20)) < 0 || (steps = arg(argv[6], 1, 1 << 20)) < 0) {
        fprintf(stderr, "usage: bench_model_loop ENDPOINT TASK NTENSORS TENSOR_BYTES WARM STEPS\n"
                        "  (TENSOR_BYTES a multiple of 4: float32 tensors)\n");
        return 2;
    }
    size_t          total = (size_t)n * (size_t)bytes, elems = (size_t)bytes / 4;
    float          *grad = malloc(total), *vals = malloc(total);
    sr_tensor_spec *specs = calloc((size_t)n, sizeof(*specs));
    char           *names = calloc((size_t)n, 32);
    const void    **gp = calloc((size_t)n, sizeof(*gp));
    void          **vp = calloc((size_t)n, sizeof(*vp));
    int64_t         shape = (int64_t)elems;
    sr_client      *c = NULL;
    int             rc = 1;

    if (grad == NULL || vals == NULL || specs == NULL || names == NULL || gp == NULL ||
        vp == NULL) {
        fprintf(stderr, "bench_model_loop: out of memory\n");
        goto out;
    }
    for (size_t i = 0; i < elems * (size_t)n; i++) {
        grad[i] = 0.001f;
        vals[i] = 0.0f;
    }
    for (long long i = 0; i < n; i++) {
        snprintf(names + 32 * i, 32, "t%04lld.weight", i);
        specs[i] = (sr_tensor_spec){names + 32 * i, SR_FLOAT32, 1, &shape, vals + elems * i, 0};
        gp[i] = grad + elems * i;
        vp[i] = vals + elems * i;
    }
    sr_client_options o = {.endpoint = argv[1], .task_index = (int)task, .timeout_ms = 60000};
    if (sr_client_open(&c, &o) != SR_OK) {
        rc = fail(NULL, "open");
        goto out;
    }
    if (sr_client_declare_model(c, (size_t)n, specs) != SR_OK) {
        rc = fail(c, "declare_model");
        goto out;
    }
    if (sr_client_ready(c) != SR_OK || sr_client_model_pull(c, vp) != SR_OK) {
        rc = fail(c, "ready / model_pull");
        goto out;
    }
    int64_t t0 = 0;
    for (long long s = 0; s < warm + steps; s++) {
        if (s == warm) {
            t0 = sr_clock_now_ns();
        }
        if (sr_client_model_step(c, gp, vp) != SR_OK) {
            rc = fail(c, "model_step");
            goto out;
        }
    }
    double sec = (double)(sr_clock_now_ns() - t0) / 1e9;
    printf("steps %lld seconds %.6f steps_per_s %.3f\n", steps, sec, (double)steps / sec);
    rc = 0;
out:
    sr_client_close(c);
    free(grad);
    free(vals);
    free(specs);
    free(names);
    free(gp);
    free(vp);
    return rc;
}
