/*
 * The MLP of mlp.h.  Shapes (row-major, n examples):
 *
 *   H = relu(X W1 + b1)      X [n x in],  W1 [in x hidden],  H [n x hidden]
 *   Z = H W2 + b2            W2 [hidden x out],              Z [n x out]
 *   loss = mean_i -log softmax(Z_i)[y_i]
 *
 * Backward: dZ = (softmax(Z) - onehot(y)) / n, dW2 = H^T dZ, db2 = sum dZ,
 * dH = (dZ W2^T) * [H > 0], dW1 = X^T dH, db1 = sum dH.  The five matrix
 * products go through cblas_sgemm; only the element-wise work (biases, ReLU,
 * softmax, column sums) is written out here.
 */
#include "examples/fashion_mnist/mlp.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "examples/fashion_mnist/rng.h"

struct ex_mlp_work {
    int    max_batch;
    float *h;  /* max_batch x hidden: activations, then reused for dH */
    float *dh; /* max_batch x hidden */
    float *z;  /* max_batch x out: logits, then dZ */
};

static const char *const param_names[EX_MLP_NPARAMS] = {"w1", "b1", "w2", "b2"};

size_t
ex_mlp_param_count(const ex_mlp_dims *d, int k)
{
    switch (k) {
    case EX_MLP_W1:
        return (size_t)d->in * (size_t)d->hidden;
    case EX_MLP_B1:
        return (size_t)d->hidden;
    case EX_MLP_W2:
        return (size_t)d->hidden * (size_t)d->out;
    case EX_MLP_B2:
        return (size_t)d->out;
    default:
        return 0;
    }
}

int
ex_mlp_param_shape(const ex_mlp_dims *d, int k, int64_t shape[2])
{
    switch (k) {
    case EX_MLP_W1:
        shape[0] = d->in;
        shape[1] = d->hidden;
        return 2;
    case EX_MLP_W2:
        shape[0] = d->hidden;
        shape[1] = d->out;
        return 2;
    default:
        shape[0] = (int64_t)ex_mlp_param_count(d, k);
        return 1;
    }
}

float *
ex_mlp_param(const ex_mlp_params *p, int k)
{
    switch (k) {
    case EX_MLP_W1:
        return p->w1;
    case EX_MLP_B1:
        return p->b1;
    case EX_MLP_W2:
        return p->w2;
    case EX_MLP_B2:
        return p->b2;
    default:
        return NULL;
    }
}

const char *
ex_mlp_param_name(int k)
{
    return k >= 0 && k < EX_MLP_NPARAMS ? param_names[k] : "?";
}

static int
dims_ok(const ex_mlp_dims *d)
{
    return d != NULL && d->in >= 1 && d->hidden >= 1 && d->out >= 1 && d->out <= 256;
}

sr_err
ex_mlp_params_new(const ex_mlp_dims *d, ex_mlp_params *out)
{
    ex_mlp_params p = {NULL, NULL, NULL, NULL};

    if (!dims_ok(d) || out == NULL) {
        return SR_EINVAL;
    }
    p.w1 = calloc(ex_mlp_param_count(d, EX_MLP_W1), sizeof(float));
    p.b1 = calloc(ex_mlp_param_count(d, EX_MLP_B1), sizeof(float));
    p.w2 = calloc(ex_mlp_param_count(d, EX_MLP_W2), sizeof(float));
    p.b2 = calloc(ex_mlp_param_count(d, EX_MLP_B2), sizeof(float));
    if (p.w1 == NULL || p.b1 == NULL || p.w2 == NULL || p.b2 == NULL) {
        ex_mlp_params_free(&p);
        return SR_ENOMEM;
    }
    *out = p;
    return SR_OK;
}

void
ex_mlp_params_free(ex_mlp_params *p)
{
    if (p == NULL) {
        return;
    }
    free(p->w1);
    free(p->b1);
    free(p->w2);
    free(p->b2);
    memset(p, 0, sizeof(*p));
}

static void
init_uniform(ex_rng *r, float *w, size_t n, float a)
{
    for (size_t i = 0; i < n; i++) {
        w[i] = (2.0f * ex_rng_uniform(r) - 1.0f) * a;
    }
}

void
ex_mlp_init(const ex_mlp_dims *d, uint64_t seed, ex_mlp_params *p)
{
    ex_rng r = ex_rng_seed(seed, 1 /* weights */, 0, 0);

    init_uniform(&r, p->w1, ex_mlp_param_count(d, EX_MLP_W1), sqrtf(6.0f / (float)d->in));
    init_uniform(&r, p->w2, ex_mlp_param_count(d, EX_MLP_W2), sqrtf(6.0f / (float)d->hidden));
    memset(p->b1, 0, ex_mlp_param_count(d, EX_MLP_B1) * sizeof(float));
    memset(p->b2, 0, ex_mlp_param_count(d, EX_MLP_B2) * sizeof(float));
}

sr_err
ex_mlp_work_new(const ex_mlp_dims *d, int max_batch, ex_mlp_work **out)
{
    ex_mlp_work *w;

    if (!dims_ok(d) || max_batch < 1 || out == NULL) {
        return SR_EINVAL;
    }
    if ((w = calloc(1, sizeof(*w))) == NULL) {
        return SR_ENOMEM;
    }
    w->max_batch = max_batch;
    w->h = malloc((size_t)max_batch * (size_t)d->hidden * sizeof(float));
    w->dh = malloc((size_t)max_batch * (size_t)d->hidden * sizeof(float));
    w->z = malloc((size_t)max_batch * (size_t)d->out * sizeof(float));
    if (w->h == NULL || w->dh == NULL || w->z == NULL) {
        ex_mlp_work_destroy(w);
        return SR_ENOMEM;
    }
    *out = w;
    return SR_OK;
}

void
ex_mlp_work_destroy(ex_mlp_work *w)
{
    if (w == NULL) {
        return;
    }
    free(w->h);
    free(w->dh);
    free(w->z);
    free(w);
}

/* H = relu(X W1 + b1), Z = H W2 + b2 for n examples. */
static void
forward(const ex_mlp_dims *d, const ex_mlp_params *p, const float *x, int n, ex_mlp_work *w)
{
    const int hid = d->hidden, out = d->out;

    /* Start from the broadcast biases and let sgemm add the product (beta 1). */
    for (int i = 0; i < n; i++) {
        memcpy(w->h + (size_t)i * hid, p->b1, (size_t)hid * sizeof(float));
        memcpy(w->z + (size_t)i * out, p->b2, (size_t)out * sizeof(float));
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, hid, d->in, 1.0f, x, d->in, p->w1,
                hid, 1.0f, w->h, hid);
    for (size_t k = 0; k < (size_t)n * hid; k++) {
        w->h[k] = w->h[k] > 0.0f ? w->h[k] : 0.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, out, hid, 1.0f, w->h, hid, p->w2, out,
                1.0f, w->z, out);
}

/* Replace each row of logits z[n x out] by its softmax; return the summed
 * cross-entropy -log p[y] (in double: it is a sum over many examples). */
static double
softmax_xent(float *z, const uint8_t *y, int n, int out)
{
    double total = 0.0;

    for (int i = 0; i < n; i++) {
        float *r = z + (size_t)i * out;
        float  m = r[0];
        double s = 0.0;
        for (int j = 1; j < out; j++) {
            m = r[j] > m ? r[j] : m;
        }
        for (int j = 0; j < out; j++) {
            s += exp((double)(r[j] - m));
        }
        /* -log softmax = log(sum exp(z - m)) - (z_y - m), stable for any logits */
        total += log(s) - (double)(r[y[i]] - m);
        for (int j = 0; j < out; j++) {
            r[j] = (float)(exp((double)(r[j] - m)) / s);
        }
    }
    return total;
}

static sr_err
check_batch(const ex_mlp_dims *d, const ex_mlp_params *p, const float *x, const uint8_t *y, int n,
            const ex_mlp_work *w)
{
    if (!dims_ok(d) || p == NULL || x == NULL || w == NULL || n < 1 || n > w->max_batch) {
        return SR_EINVAL;
    }
    for (int i = 0; y != NULL && i < n; i++) {
        if (y[i] >= d->out) {
            return SR_EINVAL;
        }
    }
    return SR_OK;
}

sr_err
ex_mlp_loss(const ex_mlp_dims *d, const ex_mlp_params *p, const float *x, const uint8_t *y, int n,
            ex_mlp_work *w, float *loss)
{
    sr_err rc;

    if (y == NULL || loss == NULL) {
        return SR_EINVAL;
    }
    if ((rc = check_batch(d, p, x, y, n, w)) != SR_OK) {
        return rc;
    }
    forward(d, p, x, n, w);
    *loss = (float)(softmax_xent(w->z, y, n, d->out) / n);
    return SR_OK;
}

sr_err
ex_mlp_loss_grad(const ex_mlp_dims *d, const ex_mlp_params *p, const float *x, const uint8_t *y,
                 int n, ex_mlp_work *w, ex_mlp_params *g, float *loss)
{
    const int   hid = d->hidden, out = d->out;
    const float inv_n = 1.0f / (float)n;
    sr_err      rc;

    if (y == NULL || g == NULL || loss == NULL) {
        return SR_EINVAL;
    }
    if ((rc = check_batch(d, p, x, y, n, w)) != SR_OK) {
        return rc;
    }
    forward(d, p, x, n, w);
    *loss = (float)(softmax_xent(w->z, y, n, out) / n);

    /* dZ = (P - onehot) / n, in place of P. */
    for (int i = 0; i < n; i++) {
        float *r = w->z + (size_t)i * out;
        r[y[i]] -= 1.0f;
        for (int j = 0; j < out; j++) {
            r[j] *= inv_n;
        }
    }
    /* dW2 = H^T dZ; db2 = column sums of dZ. */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, hid, out, n, 1.0f, w->h, hid, w->z, out,
                0.0f, g->w2, out);
    memset(g->b2, 0, (size_t)out * sizeof(float));
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < out; j++) {
            g->b2[j] += w->z[(size_t)i * out + j];
        }
    }
    /* dH = dZ W2^T, masked by the ReLU (H > 0 exactly where the unit was active). */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, hid, out, 1.0f, w->z, out, p->w2, out,
                0.0f, w->dh, hid);
    for (size_t k = 0; k < (size_t)n * hid; k++) {
        w->dh[k] = w->h[k] > 0.0f ? w->dh[k] : 0.0f;
    }
    /* dW1 = X^T dH; db1 = column sums of dH. */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, d->in, hid, n, 1.0f, x, d->in, w->dh, hid,
                0.0f, g->w1, hid);
    memset(g->b1, 0, (size_t)hid * sizeof(float));
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < hid; j++) {
            g->b1[j] += w->dh[(size_t)i * hid + j];
        }
    }
    return SR_OK;
}

sr_err
ex_mlp_predict(const ex_mlp_dims *d, const ex_mlp_params *p, const float *x, int n, ex_mlp_work *w,
               uint8_t *pred)
{
    sr_err rc;

    if (pred == NULL) {
        return SR_EINVAL;
    }
    if ((rc = check_batch(d, p, x, NULL, n, w)) != SR_OK) {
        return rc;
    }
    forward(d, p, x, n, w);
    for (int i = 0; i < n; i++) {
        const float *r = w->z + (size_t)i * d->out;
        int          best = 0;
        for (int j = 1; j < d->out; j++) {
            best = r[j] > r[best] ? j : best;
        }
        pred[i] = (uint8_t)best;
    }
    return SR_OK;
}
