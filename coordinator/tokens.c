/* The token queue: a FIFO ring of global-step values.  See coord_int.h. */
#include <stdlib.h>
#include <string.h>

#include "coordinator/coord_int.h"

void
sr__tokens_init(sr_tokens *q)
{
    memset(q, 0, sizeof(*q));
}

void
sr__tokens_destroy(sr_tokens *q)
{
    free(q->v);
    memset(q, 0, sizeof(*q));
}

static sr_err
grow(sr_tokens *q, size_t need)
{
    size_t   cap = q->cap ? q->cap : 16;
    int64_t *v;

    if (need <= q->cap) {
        return SR_OK;
    }
    while (cap < need) {
        cap *= 2;
    }
    if ((v = malloc(cap * sizeof(*v))) == NULL) {
        return sr_fail(SR_ENOMEM, "token queue: %zu tokens", cap);
    }
    for (size_t i = 0; i < q->len; i++) {
        v[i] = q->v[(q->head + i) % q->cap];
    }
    free(q->v);
    q->v = v;
    q->cap = cap;
    q->head = 0;
    return SR_OK;
}

sr_err
sr__tokens_put(sr_tokens *q, int64_t v, size_t n)
{
    sr_err rc = grow(q, q->len + n);
    if (rc != SR_OK) {
        return rc;
    }
    for (size_t i = 0; i < n; i++) {
        q->v[(q->head + q->len) % q->cap] = v;
        q->len++;
    }
    return SR_OK;
}

int
sr__tokens_take(sr_tokens *q, int64_t *out)
{
    if (q->len == 0) {
        return -1;
    }
    *out = q->v[q->head];
    q->head = (q->head + 1) % q->cap;
    q->len--;
    return 0;
}

sr_err
sr__tokens_unget(sr_tokens *q, int64_t v)
{
    sr_err rc = grow(q, q->len + 1);
    if (rc != SR_OK) {
        return rc;
    }
    q->head = (q->head + q->cap - 1) % q->cap;
    q->v[q->head] = v;
    q->len++;
    return SR_OK;
}

int
sr__tokens_take_min(sr_tokens *q, int64_t min, int64_t *out)
{
    size_t i = 0;

    while (i < q->len && q->v[(q->head + i) % q->cap] < min) {
        i++;
    }
    if (i == q->len) {
        return -1;
    }
    *out = q->v[(q->head + i) % q->cap];
    /* Close the gap: the older tokens before it move up by one. */
    for (; i > 0; i--) {
        q->v[(q->head + i) % q->cap] = q->v[(q->head + i - 1) % q->cap];
    }
    q->head = (q->head + 1) % q->cap;
    q->len--;
    return 0;
}

size_t
sr__tokens_drop_below(sr_tokens *q, int64_t v)
{
    size_t n = 0;

    while (q->len > 0 && q->v[q->head] < v) {
        q->head = (q->head + 1) % q->cap;
        q->len--;
        n++;
    }
    return n;
}
