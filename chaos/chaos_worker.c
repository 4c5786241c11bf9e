/*
 * `syncrep chaos-worker`: the deterministic training program the chaos
 * harness starts, kills and restarts.  It runs pull -> gradient -> push ->
 * step forever (until SIGTERM), with gradients from chaos_model.c, and
 * reconnects when the coordinator has been gone longer than its timeout.
 * With --model-api (issue 23) it declares the chaos tensors as one model
 * (sr_client_declare_model) and makes one sr_client_model_step a round.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chaos/chaos.h"
#include "chaos/chaos_model.h"
#include "core/clock.h"
#include "core/dtype.h"
#include "core/log.h"
#include "syncrep/syncrep.h"

static volatile sig_atomic_t worker_stop;

static void
on_term(int sig)
{
    (void)sig;
    /* A worker holds nothing the job needs (its local step is re-derived on
     * restart), so a stop is immediate even inside a blocking call. */
    _exit(0);
}

static int
declare_all(sr_client *c, uint64_t seed, int task)
{
    const sr_chaos_var *vars = sr_chaos_vars();
    uint8_t             init[4096];

    for (int v = 0; v < SR_CHAOS_NVARS; v++) {
        sr_chaos_init(seed, v, init);
        int rc = sr_client_declare(c, vars[v].name, vars[v].dtype, vars[v].ndim, vars[v].shape,
                                   task == 0 ? init : NULL);
        if (rc != 0) {
            return rc;
        }
    }
    return sr_client_ready(c);
}

/* Even tasks pull and push the dense variables with sr_client_pull_many
 * and sr_client_push_many, then step; odd tasks pull one variable at a
 * time and end the round with sr_client_push_step (the last dense push and
 * the token request in one message): every path under the same kills. */
static int
one_round(sr_client *c, uint64_t seed, int task)
{
    const sr_chaos_var *vars = sr_chaos_vars();
    uint8_t             val[SR_CHAOS_NVARS][4096], grad[SR_CHAOS_NVARS][4096];
    const char         *names[SR_CHAOS_NVARS], *dnames[SR_CHAOS_NVARS];
    void               *dst[SR_CHAOS_NVARS];
    const void         *dsrc[SR_CHAOS_NVARS];
    size_t              bytes[SR_CHAOS_NVARS], dbytes[SR_CHAOS_NVARS], ndense = 0;
    int64_t             idx[SR_CHAOS_SPARSE_ROWS];
    int                 rc = 0, many = task % 2 == 0;

    for (int v = 0; v < SR_CHAOS_NVARS; v++) {
        names[v] = vars[v].name;
        dst[v] = val[v];
        bytes[v] = sr_chaos_bytes(&vars[v]);
    }
    if (many) {
        rc = sr_client_pull_many(c, SR_CHAOS_NVARS, names, dst, bytes);
    }
    for (int v = 0; !many && v < SR_CHAOS_NVARS; v++) {
        if ((rc = sr_client_pull(c, names[v], val[v], bytes[v])) != 0) {
            return rc;
        }
    }
    if (rc != 0) {
        return rc;
    }
    int last = -1;
    for (int v = 0; v < SR_CHAOS_NVARS; v++) {
        last = vars[v].sparse ? last : v;
    }
    int chain = !many && last >= 0;
    for (int v = 0; v < SR_CHAOS_NVARS; v++) {
        if (chain && v == last) {
            continue;
        }
        if (vars[v].sparse) {
            size_t row = bytes[v] / (size_t)vars[v].shape[0];
            sr_chaos_grad_sparse(seed, v, task, val[v], idx, grad[v]);
            rc = sr_client_push_sparse(c, names[v], SR_CHAOS_SPARSE_ROWS, idx, grad[v],
                                       SR_CHAOS_SPARSE_ROWS * row);
        } else {
            sr_chaos_grad_dense(seed, v, task, val[v], grad[v]);
            if (many) { /* pushed together below */
                dnames[ndense] = names[v];
                dsrc[ndense] = grad[v];
                dbytes[ndense++] = bytes[v];
                continue;
            }
            rc = sr_client_push(c, names[v], grad[v], bytes[v]);
        }
        if (rc != 0) {
            return rc;
        }
    }
    if (many && (rc = sr_client_push_many(c, ndense, dnames, dsrc, dbytes)) != 0) {
        return rc;
    }
    if (!chain) {
        return sr_client_step(c);
    }
    sr_chaos_grad_dense(seed, last, task, val[last], grad[last]);
    return sr_client_push_step(c, names[last], grad[last], bytes[last]);
}

/* --model-api: the tensors' values and gradients, per process. */
typedef struct {
    uint8_t val[SR_CHAOS_NTENSORS][4096], grad[SR_CHAOS_NTENSORS][4096];
    void   *vals[SR_CHAOS_NTENSORS];
    void   *grads[SR_CHAOS_NTENSORS];
} model_bufs;

static int
declare_model(sr_client *c, uint64_t seed, int task, model_bufs *b)
{
    const sr_chaos_var *tv = sr_chaos_tensors();
    sr_tensor_spec      spec[SR_CHAOS_NTENSORS];
    int                 rc;

    for (int t = 0; t < SR_CHAOS_NTENSORS; t++) {
        sr_chaos_var_init(seed, &tv[t], b->val[t]); /* the chief's initial values */
        b->vals[t] = b->val[t];
        b->grads[t] = b->grad[t];
        spec[t] = (sr_tensor_spec){.name = tv[t].name,
                                   .dtype = (sr_dtype)tv[t].dtype,
                                   .ndim = tv[t].ndim,
                                   .shape = tv[t].shape,
                                   .initial_value = task == 0 ? b->val[t] : NULL,
                                   .flags = (tv[t].frozen ? SR_DECLARE_NOT_TRAINABLE : 0u) |
                                            (tv[t].sparse ? SR_DECLARE_SPARSE : 0u)};
    }
    if ((rc = sr_client_declare_model(c, SR_CHAOS_NTENSORS, spec)) != 0 ||
        (rc = sr_client_ready(c)) != 0) {
        return rc;
    }
    return sr_client_model_pull(c, b->vals);
}

/* One round of the model API.  Even tasks pass their own buffers; odd ones
 * write the gradients into the client's arena (sr_client_model_grad) and
 * read the values from its copy (sr_client_model_value): both no-copy and
 * copying paths under the same kills.  The sparse tensor's rows go first. */
static int
model_round(sr_client *c, uint64_t seed, int task, model_bufs *b)
{
    const sr_chaos_var *tv = sr_chaos_tensors();
    int                 own = task % 2 == 0;
    uint8_t             rows[4096];
    int64_t             idx[SR_CHAOS_SPARSE_ROWS];

    for (int t = 0; t < SR_CHAOS_NTENSORS; t++) {
        const void *val = own ? b->val[t] : sr_client_model_value(c, t);
        if (tv[t].sparse) {
            size_t row = sr_chaos_bytes(&tv[t]) / (size_t)tv[t].shape[0];
            sr_chaos_var_grad_sparse(seed, &tv[t], task, val, idx, rows);
            int rc = sr_client_push_sparse(c, tv[t].name, SR_CHAOS_SPARSE_ROWS, idx, rows,
                                           SR_CHAOS_SPARSE_ROWS * row);
            if (rc != 0) {
                return rc;
            }
        } else if (!tv[t].frozen) {
            sr_chaos_var_grad_dense(seed, &tv[t], task, val,
                                    own ? b->grad[t] : sr_client_model_grad(c, t));
        }
    }
    return own ? sr_client_model_step(c, (const void *const *)b->grads, b->vals)
               : sr_client_model_step(c, NULL, NULL);
}

int
sr__chaos_worker_main(const char *endpoint, int task, uint64_t seed, int timeout_ms, int model_api)
{
    struct sigaction  sa;
    sr_client_options o;
    int64_t           rounds = 0;
    model_bufs       *mb = model_api ? calloc(1, sizeof(*mb)) : NULL;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    memset(&o, 0, sizeof(o));
    o.endpoint = endpoint;
    o.task_index = task;
    o.timeout_ms = timeout_ms;
    if (model_api && mb == NULL) {
        SR_LOG(SR_LOG_ERR, "CHAOS-WORKER-NOMEM", "task=%d", task);
        return 1;
    }
    while (!worker_stop) {
        sr_client *c = NULL;
        int        rc = sr_client_open(&c, &o);
        if (rc == 0) {
            rc = model_api ? declare_model(c, seed, task, mb) : declare_all(c, seed, task);
        }
        while (rc == 0 && !worker_stop) {
            rc = model_api ? model_round(c, seed, task, mb) : one_round(c, seed, task);
            rounds++;
        }
        if (rc != 0 && !worker_stop) {
            SR_LOG(SR_LOG_WARN, "CHAOS-WORKER-RETRY", "task=%d err=%s detail=\"%s\"", task,
                   sr_errname(rc), c ? sr_client_error(c) : sr_errdetail());
            if (rc != SR_ETIMEDOUT && rc != SR_EMSG && rc != SR_ENOTREADY) {
                sr_client_close(c);
                free(mb);
                return 1; /* a real error: the harness reports it */
            }
        }
        if (c != NULL) {
            sr_client_stats s;
            sr_client_stats_get(c, &s);
            SR_LOG(SR_LOG_NOTICE, "CHAOS-WORKER-STATS",
                   "task=%d rounds=%" PRId64 " accepted=%" PRIu64 " stale=%" PRIu64
                   " duplicate=%" PRIu64 " resyncs=%" PRIu64,
                   task, rounds, s.accepted, s.stale, s.duplicate, s.resyncs);
        }
        sr_client_close(c);
    }
    free(mb);
    return 0;
}
