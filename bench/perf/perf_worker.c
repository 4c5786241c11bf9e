/*
 * The processes perf measures, each a fork()ed child reporting through its
 * slot of the shared mapping: the syncrep worker (sync_worker, with
 * verify_model and maybe_close_window) and the raw ZeroMQ baselines it is
 * compared with: streamed or acknowledged ingest (stream_sender,
 * stream_receiver) and one round trip per step (rtt_worker, rtt_receiver).
 * Each makes its own ZeroMQ context (zsock_open, zsock_close).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "core/clock.h"
#include "core/mem.h"
#include "syncrep/syncrep.h"
#include "tools/coord_argv.h"
#include "tools/proc.h"

#include "perf_int.h"

/* ---- syncrep worker ------------------------------------------------------- */

static void
var_name(int v, char *buf, size_t len)
{
    snprintf(buf, len, "layer%d", v);
}

size_t
run_cfg_tensor_bytes(const run_cfg *c, int v)
{
    return c->tensor_elems != NULL ? (size_t)c->tensor_elems[v] * sizeof(float)
                                   : c->bytes / (size_t)c->nvars;
}

/* Worker 0 after its loop: the model must be exactly -G * lr * g after G
 * applied steps from zeros, every gradient being g. */
static int
verify_model(sr_client *cl, const run_cfg *c, float *buf, slot *s)
{
    int64_t g0 = -1, g1 = -2;
    char    name[32];

    for (int attempt = 0; attempt < 5 && g0 != g1; attempt++) {
        if (sr_client_global_step(cl, &g0) != SR_OK) {
            fail_msg(s, "global_step: %s", sr_client_error(cl));
            return -1;
        }
        s->checked = s->wrong = 0;
        for (int v = 0; v < c->nvars; v++) {
            size_t vb = run_cfg_tensor_bytes(c, v), ne = vb / sizeof(float);
            var_name(v, name, sizeof(name));
            if (sr_client_pull(cl, name, buf, vb) != SR_OK) {
                fail_msg(s, "verify pull: %s", sr_client_error(cl));
                return -1;
            }
            for (size_t i = 0; i < ne; i++) {
                float want = (float)(-(double)g0 * LR * (double)grad_at(i));
                /* adamw + clipping (issue 25): no closed form; it moved. */
                s->wrong += c->adamw_clip ? (g0 > 0 && buf[i] == 0.0f) : buf[i] != want;
            }
            s->checked += (int64_t)ne;
        }
        if (sr_client_global_step(cl, &g1) != SR_OK) {
            fail_msg(s, "global_step: %s", sr_client_error(cl));
            return -1;
        }
    }
    s->final_step = g1;
    if (g0 != g1) {
        fail_msg(s, "verify: the global step kept moving (%" PRId64 " -> %" PRId64 ")", g0, g1);
        return -1;
    }
    if (s->wrong > 0) {
        fail_msg(s,
                 "verify: %" PRId64 " of %" PRId64
                 " elements differ from -step*lr*g at step %" PRId64,
                 s->wrong, s->checked, g0);
        return -1;
    }
    return 0;
}

/* Worker 0, at each token in the window: once the window, with the two
 * steps still to come, reaches target_ms and min_steps, stop two tokens on.
 * No worker is ever more than one token ahead of another (a step needs
 * everyone's push), so every worker pushes for the step before stop_at and
 * gets a token >= stop_at: nobody waits for a push that never comes. */
static void
maybe_close_window(const run_cfg *c, const slot *s, int64_t tok, int64_t t_ns, int64_t last_ns,
                   shm *sh)
{
    int64_t k = tok - s->tok_start;
    double  projected_ns = (double)(t_ns - s->t_start_ns) + 2.0 * (double)last_ns;
    if (k + 2 >= c->min_steps && projected_ns >= (double)c->target_ms * 1e6 &&
        tok + 2 < sh->stop_at) {
        sh->stop_at = tok + 2;
    }
}

/* The largest variable of c, in bytes. */
static size_t
max_tensor_bytes(const run_cfg *c)
{
    size_t m = 0;
    for (int v = 0; v < c->nvars; v++) {
        size_t b = run_cfg_tensor_bytes(c, v);
        m = b > m ? b : m;
    }
    return m;
}

/* MANY_MODEL: the model's specs and the step's arguments (every gradient
 * from g, the values into one arena of the model's bytes). */
typedef struct {
    sr_tensor_spec *specs;
    int64_t        *shapes;
    const void    **gp;
    void          **vp;
    uint8_t        *vals;
} model_io;

static void
model_io_free(model_io *m)
{
    free(m->specs);
    free(m->shapes);
    free(m->gp);
    free(m->vp);
    free(m->vals);
}

static int
model_declare(const run_cfg *c, sr_client *cl, const char *const *names, const float *g,
              const float *zeros, slot *s, model_io *m)
{
    size_t n = (size_t)c->nvars, off = 0;

    m->specs = calloc(n, sizeof(*m->specs));
    m->shapes = calloc(n, sizeof(*m->shapes));
    m->gp = calloc(n, sizeof(*m->gp));
    m->vp = calloc(n, sizeof(*m->vp));
    m->vals = malloc(c->bytes);
    if (m->specs == NULL || m->shapes == NULL || m->gp == NULL || m->vp == NULL ||
        m->vals == NULL) {
        fail_msg(s, "out of memory");
        return -1;
    }
    for (size_t v = 0; v < n; v++) {
        size_t b = run_cfg_tensor_bytes(c, (int)v);
        m->shapes[v] = (int64_t)(b / sizeof(float));
        m->specs[v] = (sr_tensor_spec){names[v], SR_FLOAT32, 1, &m->shapes[v], zeros, 0};
        m->gp[v] = g;
        m->vp[v] = m->vals + off;
        off += b;
    }
    if (sr_client_declare_model(cl, n, m->specs) != SR_OK) {
        fail_msg(s, "declare model: %s", sr_client_error(cl));
        return -1;
    }
    return 0;
}

/* --push-then-step: the workers end a round with sr_client_push and
 * sr_client_step instead of sr_client_push_step (the push and the TOKEN
 * request then travel as two messages; for A/B runs). */
int push_then_step;

/* The training loop with the public API: [pull] -> push -> step per
 * iteration (the last push with sr_client_push_step), until a token >=
 * shm->stop_at.  The window starts at the first token >= warm and ends at
 * the stopping token. */
int
sync_worker(const run_cfg *c, int w, const char *endpoint, pid_t coord, shm *sh)
{
    slot             *s = &sh->s[w];
    sr_client        *cl = NULL;
    sr_client_options o;
    sr_client_stats   st0, st1;
    size_t            vb = max_tensor_bytes(c), ne = vb / sizeof(float);
    float            *g = malloc(vb), *buf = malloc(vb), *zeros = NULL;
    int64_t           shape[1] = {(int64_t)ne};
    model_io          mio = {0};
    int               started = 0, rc = -1;
    double            cpu0 = 0, ccpu0 = 0;
    int64_t           flt0 = 0, cflt0 = 0, cflt1 = 0, t_prev = 0;
    char              name[32];
    /* c->many: every variable's name, pulled into buf, pushed from g */
    char        *names_buf = c->many ? malloc((size_t)c->nvars * 32) : NULL;
    const char **names = c->many ? malloc((size_t)c->nvars * sizeof(*names)) : NULL;
    void       **dsts = c->many ? malloc((size_t)c->nvars * sizeof(*dsts)) : NULL;
    const void **srcs = c->many ? malloc((size_t)c->nvars * sizeof(*srcs)) : NULL;
    size_t      *sizes = c->many ? malloc((size_t)c->nvars * sizeof(*sizes)) : NULL;

    memset(&o, 0, sizeof(o));
    memset(&st0, 0, sizeof(st0));
    o.endpoint = endpoint;
    o.task_index = w;
    o.timeout_ms = 60000;
    s->last_tok = -1;
    if (g == NULL || buf == NULL || (w == 0 && (zeros = calloc(1, vb)) == NULL) ||
        (c->many &&
         (names_buf == NULL || names == NULL || dsts == NULL || srcs == NULL || sizes == NULL))) {
        fail_msg(s, "out of memory");
        goto out;
    }
    for (int v = 0; c->many && v < c->nvars; v++) {
        names[v] = names_buf + 32 * (size_t)v;
        var_name(v, names_buf + 32 * (size_t)v, 32);
        dsts[v] = buf;
        srcs[v] = g;
        sizes[v] = vb;
    }
    for (size_t i = 0; i < ne; i++) {
        g[i] = grad_at(i);
    }
    if (sr_client_open(&cl, &o) != SR_OK) {
        fail_msg(s, "open %s: %s", endpoint, sr_errdetail());
        goto out;
    }
    if (c->many == MANY_MODEL && model_declare(c, cl, names, g, zeros, s, &mio) != 0) {
        goto out;
    }
    for (int v = 0; c->many != MANY_MODEL && v < c->nvars; v++) {
        var_name(v, name, sizeof(name));
        if (sr_client_declare(cl, name, SR_FLOAT32, 1, shape, zeros) != SR_OK) {
            fail_msg(s, "declare %s: %s", name, sr_client_error(cl));
            goto out;
        }
    }
    for (int v = 0; v < c->frozen; v++) {
        static const float   fz[4] = {0};
        static const int64_t fshape[1] = {4};
        snprintf(name, sizeof(name), "frozen%05d", v);
        if (sr_client_declare_ex(cl, name, SR_FLOAT32, 1, fshape, w == 0 ? fz : NULL,
                                 SR_DECLARE_NOT_TRAINABLE) != SR_OK) {
            fail_msg(s, "declare %s: %s", name, sr_client_error(cl));
            goto out;
        }
    }
    free(zeros);
    zeros = NULL;
    if (sr_client_ready(cl) != SR_OK) {
        fail_msg(s, "ready: %s", sr_client_error(cl));
        goto out;
    }
    if (c->many == MANY_MODEL &&
        sr_client_model_pull(cl, c->model_inplace ? NULL : mio.vp) != SR_OK) {
        fail_msg(s, "model pull: %s", sr_client_error(cl));
        goto out;
    }
    for (int v = 0; c->many == MANY_MODEL && c->model_inplace && v < c->nvars; v++) {
        memcpy(sr_client_model_grad(cl, (size_t)v), mio.gp[v], run_cfg_tensor_bytes(c, v));
    }
    for (;;) {
        if (c->compute_us > 0) {
            sleep_us(c->compute_us);
        }
        int64_t t0 = now_ns(), t1 = t0, t2 = t0, t3, tok;
        if (c->many == MANY_MODEL) {
            /* One call: the pushes, the token and the pulls of the round. */
            s->phase = PH_STEP;
            if (sr_client_model_step(cl, c->model_inplace ? NULL : mio.gp,
                                     c->model_inplace ? NULL : mio.vp) != SR_OK) {
                fail_msg(s, "model step: %s", sr_client_error(cl));
                goto out;
            }
        } else {
            if (c->loop == LOOP_FULL) {
                s->phase = PH_PULL;
                if (c->many &&
                    sr_client_pull_many(cl, (size_t)c->nvars, names, dsts, sizes) != SR_OK) {
                    fail_msg(s, "pull_many: %s", sr_client_error(cl));
                    goto out;
                }
                for (int v = 0; !c->many && v < c->nvars; v++) {
                    var_name(v, name, sizeof(name));
                    if (sr_client_pull(cl, name, buf, vb) != SR_OK) {
                        fail_msg(s, "pull %s: %s", name, sr_client_error(cl));
                        goto out;
                    }
                }
                t1 = now_ns();
            }
            s->phase = PH_PUSH;
            if (c->many && sr_client_push_many(cl, (size_t)(c->nvars - !push_then_step), names,
                                               srcs, sizes) != SR_OK) {
                fail_msg(s, "push_many: %s", sr_client_error(cl));
                goto out;
            }
            for (int v = 0; !c->many && v < c->nvars - !push_then_step; v++) {
                var_name(v, name, sizeof(name));
                if (sr_client_push(cl, name, g, vb) != SR_OK) {
                    fail_msg(s, "push %s: %s", name, sr_client_error(cl));
                    goto out;
                }
            }
            t2 = now_ns(); /* the step's time includes the last push unless push_then_step */
            s->phase = PH_STEP;
            var_name(c->nvars - 1, name, sizeof(name));
            if ((push_then_step ? sr_client_step(cl) : sr_client_push_step(cl, name, g, vb)) !=
                SR_OK) {
                fail_msg(s, "step: %s", sr_client_error(cl));
                goto out;
            }
        }
        t3 = now_ns();
        s->phase = PH_IDLE;
        tok = sr_client_local_step(cl);
        if (s->nrec < REC_MAX) {
            s->recs[s->nrec].t_ns = t3;
            s->recs[s->nrec].tok = tok;
            s->recs[s->nrec].inc = sr_client_incarnation(cl);
            __atomic_store_n(&s->nrec, s->nrec + 1, __ATOMIC_RELEASE);
        }
        s->inc = sr_client_incarnation(cl);
        s->last_tok = tok;
        if (started) {
            s->pull_ns += t1 - t0;
            s->push_ns += t2 - t1;
            s->step_ns += t3 - t2;
            s->iters++;
            if (w == 0 && c->target_ms > 0) {
                maybe_close_window(c, s, tok, t3, t3 - t_prev, sh);
            }
        } else if (tok >= c->warm) {
            started = 1;
            s->t_start_ns = t3;
            s->tok_start = tok;
            sr_client_stats_get(cl, &st0);
            cpu0 = cpu_self_s();
            flt0 = self_faults();
            ccpu0 = w == 0 ? proc_stat(coord, &cflt0) : 0;
            if (w == 0 && c->target_ms > 0) {
                maybe_close_window(c, s, tok, t3, t3 - t_prev, sh);
            }
        }
        t_prev = t3;
        int64_t stop = sh->stop_at;
        if (stop > 0 && tok >= stop) {
            break;
        }
    }
    if (started) {
        s->t_end_ns = now_ns();
        s->tok_end = sr_client_local_step(cl);
        s->self_cpu_s = cpu_self_s() - cpu0;
        s->self_faults = self_faults() - flt0;
        s->coord_cpu_s = w == 0 ? proc_stat(coord, &cflt1) - ccpu0 : 0;
        s->coord_faults = cflt1 - cflt0;
        sr_client_stats_get(cl, &st1);
        s->stale = st1.stale - st0.stale;
        s->duplicate = st1.duplicate - st0.duplicate;
        s->resends = st1.resends - st0.resends;
    }
    if (w == 0 && verify_model(cl, c, buf, s) != 0) {
        goto out;
    }
    rc = 0;
out:
    sr_client_close(cl);
    free(g);
    free(buf);
    free(zeros);
    free(names_buf);
    free(names);
    free(dsts);
    free(srcs);
    free(sizes);
    model_io_free(&mio);
    return rc;
}

/* ---- raw ZeroMQ baselines ------------------------------------------------- */

static int
zsock_open(void **ctx, void **sock, int type, int hwm, slot *s)
{
    int linger = -1;      /* close waits until everything queued is delivered */
    int rcvtimeo = 60000; /* a baseline that stops hearing fails, it does not hang */
    if ((*ctx = zmq_ctx_new()) == NULL || (*sock = zmq_socket(*ctx, type)) == NULL) {
        fail_msg(s, "zmq socket: %s", zmq_strerror(errno));
        return -1;
    }
    zmq_setsockopt(*sock, ZMQ_RCVTIMEO, &rcvtimeo, sizeof(rcvtimeo));
    if (type == ZMQ_ROUTER) {
        /* A reply to a peer whose queue looks full blocks instead of being
         * dropped silently (which left a sender waiting for its ack). */
        int one = 1;
        zmq_setsockopt(*sock, ZMQ_ROUTER_MANDATORY, &one, sizeof(one));
    }
    zmq_setsockopt(*sock, ZMQ_SNDHWM, &hwm, sizeof(hwm));
    zmq_setsockopt(*sock, ZMQ_RCVHWM, &hwm, sizeof(hwm));
    zmq_setsockopt(*sock, ZMQ_LINGER, &linger, sizeof(linger));
    return 0;
}

static void
zsock_close(void *ctx, void *sock)
{
    if (sock != NULL) {
        zmq_close(sock);
    }
    if (ctx != NULL) {
        while (zmq_ctx_term(ctx) != 0 && errno == EINTR) { /* a signal: wait on */
        }
    }
}

/* Messages queued per pipe end: about 4 MiB, at least 2 (docs/performance.md). */
static int
stream_hwm(size_t msg_bytes)
{
    size_t h = (4u * MIB) / (msg_bytes ? msg_bytes : 1);
    return h < 2 ? 2 : h > 1000 ? 1000 : (int)h;
}

/* Row 1's baseline sends a variable in pieces of at most the coordinator's
 * default partition size (2 MiB), as libsyncrep sends a partitioned
 * variable, and keeps as many unacknowledged as the client does (two for
 * a variable of several pieces, else one): the same message sizes and the
 * same flow control, without the protocol. */
#define BASE_PIECE (2u * MIB)

static size_t
base_piece(size_t vb)
{
    return vb > BASE_PIECE ? BASE_PIECE : vb;
}

static int64_t
base_npieces(size_t vb)
{
    size_t p = base_piece(vb);
    return p ? (int64_t)((vb + p - 1) / p) : 1;
}

/* Row 1 sender: a DEALER sending [u32 var index, u32 piece][piece] per piece
 * of each variable per step, (warm + steps) steps' worth.  With ack, it waits for the receiver's
 * one-byte acknowledgement of each message before the next, like
 * sr_client_push waits for its reply; without, it streams as fast as the
 * pipe takes them.  The gradient of worker w is (w + 1) * g, so the
 * receiver's sum is checkable; zmq_send copies it, as sr_client_push does. */
int
stream_sender(const run_cfg *c, int w, const char *endpoint, shm *sh)
{
    slot   *s = &sh->s[w];
    void   *ctx = NULL, *sock = NULL;
    size_t  vb = c->bytes / (size_t)c->nvars, ne = vb / sizeof(float);
    float  *g = malloc(vb);
    int     rc = -1;
    double  cpu0 = cpu_self_s();
    int64_t flt0 = self_faults();

    s->t_start_ns = now_ns(); /* CPU share over the whole run, warm-up included */

    if (g == NULL) {
        fail_msg(s, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < ne; i++) {
        g[i] = (float)(w + 1) * grad_at(i);
    }
    if (zsock_open(&ctx, &sock, ZMQ_DEALER, stream_hwm(vb), s) != 0) {
        goto out;
    }
    if (zmq_connect(sock, endpoint) != 0) {
        fail_msg(s, "connect %s: %s", endpoint, zmq_strerror(errno));
        goto out;
    }
    size_t  piece = base_piece(vb);
    int64_t np = base_npieces(vb), unacked = 0, window = np > 1 ? 2 : 1;
    uint8_t ack;
    for (int64_t k = 0; k < c->warm + c->steps; k++) {
        for (int v = 0; v < c->nvars; v++) {
            for (int64_t p = 0; p < np; p++) {
                uint32_t hdr[2] = {(uint32_t)v, (uint32_t)p};
                size_t   off = (size_t)p * piece, len = vb - off < piece ? vb - off : piece;
                if (c->ack && unacked == window) {
                    if (zmq_recv(sock, &ack, sizeof(ack), 0) != (int)sizeof(ack)) {
                        fail_msg(s, "recv ack: %s", zmq_strerror(errno));
                        goto out;
                    }
                    unacked--;
                }
                if (zmq_send(sock, hdr, sizeof(hdr), ZMQ_SNDMORE) < 0 ||
                    zmq_send(sock, (const uint8_t *)g + off, len, 0) < 0) {
                    fail_msg(s, "send: %s", zmq_strerror(errno));
                    goto out;
                }
                unacked++;
            }
        }
    }
    for (; c->ack && unacked > 0; unacked--) {
        if (zmq_recv(sock, &ack, sizeof(ack), 0) != (int)sizeof(ack)) {
            fail_msg(s, "recv ack: %s", zmq_strerror(errno));
            goto out;
        }
    }
    rc = 0;
out:
    zsock_close(ctx, sock); /* linger -1: returns once everything was delivered */
    s->self_cpu_s = cpu_self_s() - cpu0;
    s->t_end_ns = now_ns();
    s->self_faults = self_faults() - flt0; /* over all its steps, warm-up included */
    s->iters = c->warm + c->steps;
    free(g);
    return rc;
}

/* Row 1 receiver: a ROUTER summing every gradient into one buffer of the
 * model's size (variable v at offset v * var bytes).  The window runs from
 * the last message of the warm-up steps to the last message. */
int
stream_receiver(const run_cfg *c, const char *endpoint, shm *sh, int me)
{
    slot   *s = &sh->s[me];
    void   *ctx = NULL, *sock = NULL;
    size_t  vb = c->bytes / (size_t)c->nvars, ne = vb / sizeof(float);
    float  *acc = calloc(1, c->bytes);
    size_t  piece = base_piece(vb);
    int64_t np = base_npieces(vb);
    int64_t total = (int64_t)c->W * (c->warm + c->steps) * c->nvars * np;
    int64_t warm_msgs = (int64_t)c->W * c->warm * c->nvars * np;
    double  cpu0 = 0;
    int     rc = -1;

    if (acc == NULL) {
        fail_msg(s, "out of memory");
        goto out;
    }
    if (zsock_open(&ctx, &sock, ZMQ_ROUTER, stream_hwm(piece), s) != 0) {
        goto out;
    }
    if (zmq_bind(sock, endpoint) != 0) {
        fail_msg(s, "bind %s: %s", endpoint, zmq_strerror(errno));
        goto out;
    }
    for (int64_t m = 0; m < total; m++) {
        zmq_msg_t part[3];
        int       n = 0, more = 1;
        while (more) {
            zmq_msg_init(&part[n < 3 ? n : 2]);
            if (zmq_msg_recv(&part[n < 3 ? n : 2], sock, 0) < 0) {
                fail_msg(s, "recv: %s", zmq_strerror(errno));
                goto out;
            }
            more = zmq_msg_more(&part[n < 3 ? n : 2]);
            if (more && n >= 2) {
                zmq_msg_close(&part[2]);
            } else {
                n++;
            }
        }
        uint32_t hdr[2] = {UINT32_MAX, UINT32_MAX};
        if (n == 3 && zmq_msg_size(&part[1]) == sizeof(hdr)) {
            memcpy(hdr, zmq_msg_data(&part[1]), sizeof(hdr));
        }
        size_t off = (size_t)hdr[1] * piece;
        if (hdr[0] >= (uint32_t)c->nvars || hdr[1] >= (uint64_t)np ||
            zmq_msg_size(&part[2]) != (vb - off < piece ? vb - off : piece)) {
            fail_msg(s, "malformed message %" PRId64, m);
            for (int i = 0; i < n; i++) {
                zmq_msg_close(&part[i]);
            }
            goto out;
        }
        float *restrict dst = acc + (size_t)hdr[0] * ne + off / sizeof(float);
        const float *restrict src = zmq_msg_data(&part[2]);
        size_t pe = zmq_msg_size(&part[2]) / sizeof(float);
        for (size_t i = 0; i < pe; i++) {
            dst[i] += src[i];
        }
        const uint8_t ack = 1;
        if (c->ack &&
            (zmq_send(sock, zmq_msg_data(&part[0]), zmq_msg_size(&part[0]), ZMQ_SNDMORE) < 0 ||
             zmq_send(sock, &ack, sizeof(ack), 0) < 0)) {
            fail_msg(s, "send ack: %s", zmq_strerror(errno));
            for (int i = 0; i < n; i++) {
                zmq_msg_close(&part[i]);
            }
            goto out;
        }
        for (int i = 0; i < n; i++) {
            zmq_msg_close(&part[i]);
        }
        if (m + 1 == warm_msgs) {
            s->t_start_ns = now_ns();
            cpu0 = cpu_self_s();
            s->self_faults = self_faults();
        }
    }
    s->t_end_ns = now_ns();
    s->self_cpu_s = cpu_self_s() - cpu0;
    s->self_faults = self_faults() - s->self_faults;
    /* Every element summed (warm + steps) * (1 + 2 + ... + W) times g. */
    double k = (double)(c->warm + c->steps) * c->W * (c->W + 1) / 2.0;
    for (int v = 0; v < c->nvars; v++) {
        for (size_t i = 0; i < ne; i++) {
            s->wrong += acc[(size_t)v * ne + i] != (float)(k * grad_at(i));
        }
    }
    s->checked = (int64_t)(c->bytes / sizeof(float));
    s->hwm_kib = proc_hwm_kib(getpid());
    if (s->wrong > 0) {
        fail_msg(s, "receiver: %" PRId64 " of %" PRId64 " sums wrong", s->wrong, s->checked);
        goto out;
    }
    rc = 0;
out:
    zsock_close(ctx, sock);
    free(acc);
    return rc;
}

/* Row 2 worker: per step, send the gradient (w + 1) * g and receive the
 * updated model; the window ends at replies, like the syncrep worker's at
 * tokens.  Every reply is checked against the exact SGD result. */
int
rtt_worker(const run_cfg *c, int w, const char *endpoint, shm *sh)
{
    slot  *s = &sh->s[w];
    void  *ctx = NULL, *sock = NULL;
    size_t ne = c->bytes / sizeof(float);
    float *g = malloc(c->bytes), *model = malloc(c->bytes);
    float  mean = (float)(c->W + 1) / 2.0f; /* mean of (w + 1) over the workers */
    double cpu0 = 0;
    int    rc = -1;

    if (g == NULL || model == NULL) {
        fail_msg(s, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < ne; i++) {
        g[i] = (float)(w + 1) * grad_at(i);
    }
    if (zsock_open(&ctx, &sock, ZMQ_DEALER, 1000, s) != 0) {
        goto out;
    }
    if (zmq_connect(sock, endpoint) != 0) {
        fail_msg(s, "connect %s: %s", endpoint, zmq_strerror(errno));
        goto out;
    }
    for (int64_t k = 0; k < sh->stop_at; k++) {
        if (c->compute_us > 0) {
            sleep_us(c->compute_us);
        }
        int64_t a = now_ns();
        if (zmq_send(sock, g, c->bytes, 0) < 0) {
            fail_msg(s, "send: %s", zmq_strerror(errno));
            goto out;
        }
        int n = zmq_recv(sock, model, c->bytes, 0);
        if (n != (int)c->bytes) {
            fail_msg(s, "recv: %d bytes (%s)", n, n < 0 ? zmq_strerror(errno) : "short");
            goto out;
        }
        int64_t t = now_ns();
        for (size_t i = 0; i < ne; i++) {
            float want = (float)(-(double)(k + 1) * LR * (double)(mean * grad_at(i)));
            s->wrong += model[i] != want;
        }
        s->checked += (int64_t)ne;
        if (k + 1 == c->warm) {
            s->t_start_ns = t;
            cpu0 = cpu_self_s();
            s->self_faults = self_faults();
        } else if (k + 1 > c->warm) {
            s->step_ns += t - a;
            s->iters++;
        }
    }
    s->t_end_ns = now_ns();
    s->self_cpu_s = cpu_self_s() - cpu0;
    s->self_faults = self_faults() - s->self_faults;
    if (s->wrong > 0) {
        fail_msg(s, "%" PRId64 " of %" PRId64 " model values wrong", s->wrong, s->checked);
        goto out;
    }
    rc = 0;
out:
    zsock_close(ctx, sock);
    free(g);
    free(model);
    return rc;
}

/* Row 2 receiver: a ROUTER; per step, W gradients summed into one buffer,
 * model -= lr * (sum / W), the model sent back to each of the W workers. */
int
rtt_receiver(const run_cfg *c, const char *endpoint, shm *sh, int me)
{
    slot   *s = &sh->s[me];
    void   *ctx = NULL, *sock = NULL;
    size_t  ne = c->bytes / sizeof(float);
    float  *acc = calloc(1, c->bytes), *model = calloc(1, c->bytes);
    uint8_t rid[MAX_W][256];
    size_t  rid_len[MAX_W];
    int     rc = -1;
    double  cpu0 = 0;
    int64_t t_prev = now_ns();

    if (acc == NULL || model == NULL) {
        fail_msg(s, "out of memory");
        goto out;
    }
    if (zsock_open(&ctx, &sock, ZMQ_ROUTER, 1000, s) != 0) {
        goto out;
    }
    if (zmq_bind(sock, endpoint) != 0) {
        fail_msg(s, "bind %s: %s", endpoint, zmq_strerror(errno));
        goto out;
    }
    for (int64_t k = 0; k < sh->stop_at; k++) {
        if (k == c->warm) {
            s->t_start_ns = now_ns();
            cpu0 = cpu_self_s();
            s->self_faults = self_faults();
        }
        for (int w = 0; w < c->W; w++) {
            zmq_msg_t m;
            int       more = 0;
            size_t    more_len = sizeof(more);
            int       n = zmq_recv(sock, rid[w], sizeof(rid[w]), 0);
            if (n < 0 || n > (int)sizeof(rid[w]) ||
                zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &more_len) != 0 || !more) {
                fail_msg(s, "recv routing id: %s", zmq_strerror(errno));
                goto out;
            }
            rid_len[w] = (size_t)n;
            zmq_msg_init(&m);
            if (zmq_msg_recv(&m, sock, 0) < 0 || zmq_msg_size(&m) != c->bytes) {
                fail_msg(s, "recv gradient: %s", zmq_strerror(errno));
                zmq_msg_close(&m);
                goto out;
            }
            const float *restrict src = zmq_msg_data(&m);
            for (size_t i = 0; i < ne; i++) {
                acc[i] += src[i];
            }
            zmq_msg_close(&m);
        }
        const float d = (float)c->W, lr = (float)LR;
        for (size_t i = 0; i < ne; i++) {
            model[i] -= lr * (acc[i] / d);
            acc[i] = 0;
        }
        /* Close the window (one more step) before the workers see this
         * step's replies, as worker 0 does for syncrep. */
        int64_t t = now_ns();
        if (k >= c->warm && c->target_ms > 0 && k + 2 - c->warm >= c->min_steps &&
            (double)(t - s->t_start_ns) + (double)(t - t_prev) >= (double)c->target_ms * 1e6 &&
            k + 2 < sh->stop_at) {
            sh->stop_at = k + 2;
        }
        t_prev = t;
        for (int w = 0; w < c->W; w++) {
            if (zmq_send(sock, rid[w], rid_len[w], ZMQ_SNDMORE) < 0 ||
                zmq_send(sock, model, c->bytes, 0) < 0) {
                fail_msg(s, "send: %s", zmq_strerror(errno));
                goto out;
            }
        }
    }
    s->t_end_ns = now_ns();
    s->self_cpu_s = cpu_self_s() - cpu0;
    s->self_faults = self_faults() - s->self_faults;
    rc = 0;
out:
    zsock_close(ctx, sock);
    free(acc);
    free(model);
    return rc;
}
