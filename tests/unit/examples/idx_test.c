/*
 * examples/fashion_mnist: the IDX reader (header decoding on bytes, loading
 * gzip and plain files, every malformed case refused with a clear error),
 * the data set checks on top of it, and the shard / batch sampler.
 */
#include "sr_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "examples/fashion_mnist/data.h"
#include "examples/fashion_mnist/idx.h"

static char *dir;

static int
setup(void **state)
{
    (void)state;
    dir = sr_test_mkdtemp("idx");
    return dir == NULL;
}

static int
teardown(void **state)
{
    (void)state;
    sr_test_rmdir_rf(dir);
    free(dir);
    dir = NULL;
    return 0;
}

static const char *
path_of(const char *name)
{
    static char buf[1024];
    snprintf(buf, sizeof(buf), "%s/%s", dir, name);
    return buf;
}

/* Write bytes to dir/name, gzip-compressed if gz. */
static const char *
write_file(const char *name, const uint8_t *buf, size_t len, int gz)
{
    const char *p = path_of(name);

    if (gz) {
        gzFile f = gzopen(p, "wb");
        assert_non_null(f);
        assert_int_equal(gzwrite(f, buf, (unsigned)len), (int)len);
        assert_int_equal(gzclose(f), Z_OK);
    } else {
        FILE *f = fopen(p, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(buf, 1, len, f), len);
        assert_int_equal(fclose(f), 0);
    }
    return p;
}

/* An IDX file of type `type` with dims d[0..ndim) and payload bytes i % 251,
 * plus `extra` trailing bytes (negative: that many payload bytes cut). */
static size_t
make_idx(uint8_t *buf, size_t cap, uint8_t type, int ndim, const uint32_t *d, int extra)
{
    size_t n = 4, count = 1;

    buf[0] = 0;
    buf[1] = 0;
    buf[2] = type;
    buf[3] = (uint8_t)ndim;
    for (int i = 0; i < ndim; i++) {
        buf[n++] = (uint8_t)(d[i] >> 24);
        buf[n++] = (uint8_t)(d[i] >> 16);
        buf[n++] = (uint8_t)(d[i] >> 8);
        buf[n++] = (uint8_t)d[i];
        count *= d[i];
    }
    count = (size_t)((long)count + extra);
    assert_true(n + count <= cap);
    for (size_t i = 0; i < count; i++) {
        buf[n + i] = (uint8_t)(i % 251);
    }
    return n + count;
}

static void
test_idx_decode_header_three_dims_ok(void **state)
{
    const uint8_t b[] = {0, 0, 8, 3, 0, 0, 0xea, 0x60, 0, 0, 0, 28, 0, 0, 0, 28};
    ex_idx_header h;
    size_t        hl = 0;
    char          err[128];
    (void)state;

    assert_sr_ok(ex_idx_decode_header(b, sizeof(b), &h, &hl, err, sizeof(err)));
    assert_int_equal(hl, 16);
    assert_int_equal(h.type, 8);
    assert_int_equal(h.ndim, 3);
    assert_int_equal(h.dims[0], 60000); /* big-endian 0x0000ea60 */
    assert_int_equal(h.count, 60000u * 28 * 28);
}

static void
test_idx_decode_header_bad_input_is_ecorrupt(void **state)
{
    static const struct {
        uint8_t     b[12];
        size_t      len;
        const char *why;
    } cases[] = {
        {{0, 0, 8}, 3, "too short"},
        {{0, 1, 8, 1, 0, 0, 0, 1}, 8, "bad magic"},
        {{0x1f, 0x8b, 8, 0}, 4, "bad magic"},
        {{0, 0, 8, 0}, 4, "dimension count 0"},
        {{0, 0, 8, 5}, 4, "dimension count 5"},
        {{0, 0, 8, 2, 0, 0, 0, 1, 0, 0, 0}, 11, "too short"},
        {{0, 0, 8, 2, 0, 0, 0, 1, 0, 0, 0, 0}, 12, "size 1 is 0"},
    };
    (void)state;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ex_idx_header h;
        size_t        hl = 99;
        char          err[128] = "";
        assert_sr_err(ex_idx_decode_header(cases[i].b, cases[i].len, &h, &hl, err, sizeof(err)),
                      SR_ECORRUPT);
        assert_int_equal(hl, 99); /* untouched on failure */
        if (strstr(err, cases[i].why) == NULL) {
            fail_msg("case %zu: '%s' does not say '%s'", i, err, cases[i].why);
        }
    }
}

static void
test_idx_decode_header_overflowing_sizes_is_ecorrupt(void **state)
{
    const uint8_t b[] = {0,    0,    8,    4,    0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                         0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    ex_idx_header h;
    size_t        hl;
    char          err[128];
    (void)state;

    assert_sr_err(ex_idx_decode_header(b, sizeof(b), &h, &hl, err, sizeof(err)), SR_ECORRUPT);
    assert_non_null(strstr(err, "overflow"));
}

static void
load_round_trip(int gz)
{
    uint8_t        buf[256];
    const uint32_t d[2] = {3, 5};
    size_t         n = make_idx(buf, sizeof(buf), EX_IDX_TYPE_UBYTE, 2, d, 0);
    const char    *p = write_file(gz ? "a.gz" : "a", buf, n, gz);
    ex_idx         t;
    char           err[256];

    assert_sr_ok(ex_idx_load(p, &t, err, sizeof(err)));
    assert_int_equal(t.h.ndim, 2);
    assert_int_equal(t.h.dims[0], 3);
    assert_int_equal(t.h.dims[1], 5);
    assert_int_equal(t.h.count, 15);
    assert_memory_equal(t.data, buf + 12, 15);
    ex_idx_free(&t);
}

static void
test_idx_load_gzip_ok(void **state)
{
    (void)state;
    load_round_trip(1);
}

static void
test_idx_load_plain_ok(void **state)
{
    (void)state;
    load_round_trip(0);
}

static void
expect_load_error(const char *p, sr_err want, const char *what)
{
    ex_idx t = {{0}, (uint8_t *)"untouched"};
    char   err[512] = "";

    assert_sr_err(ex_idx_load(p, &t, err, sizeof(err)), want);
    assert_string_equal((const char *)t.data, "untouched");
    if (strstr(err, what) == NULL || strstr(err, p) == NULL) {
        fail_msg("'%s' should name the file and say '%s'", err, what);
    }
}

static void
test_idx_load_missing_file_is_enoent(void **state)
{
    (void)state;
    expect_load_error(path_of("nope.gz"), SR_ENOENT, "cannot open");
}

static void
test_idx_load_malformed_files_are_refused(void **state)
{
    uint8_t        buf[256];
    const uint32_t d[2] = {3, 5};
    size_t         n;
    (void)state;

    for (int gz = 0; gz <= 1; gz++) {
        n = make_idx(buf, sizeof(buf), EX_IDX_TYPE_UBYTE, 2, d, -1);
        expect_load_error(write_file("short", buf, n, gz), SR_ECORRUPT, "truncated");
        n = make_idx(buf, sizeof(buf), EX_IDX_TYPE_UBYTE, 2, d, 0);
        expect_load_error(write_file("hdr", buf, 6, gz), SR_ECORRUPT, "truncated");
        n = make_idx(buf, sizeof(buf), EX_IDX_TYPE_UBYTE, 2, d, 2);
        expect_load_error(write_file("long", buf, n, gz), SR_ECORRUPT, "trailing bytes");
        n = make_idx(buf, sizeof(buf), 0x0d /* float */, 2, d, 45);
        expect_load_error(write_file("float", buf, n, gz), SR_ENOTSUP, "0x0d");
        n = make_idx(buf, sizeof(buf), EX_IDX_TYPE_UBYTE, 2, d, 0);
        buf[1] = 3;
        expect_load_error(write_file("magic", buf, n, gz), SR_ECORRUPT, "bad magic");
        /* A header claiming 60000^3 bytes: refused before allocating. */
        memcpy(buf, (const uint8_t[]){0, 0, 8, 3}, 4);
        for (int i = 0; i < 3; i++) {
            memcpy(buf + 4 + 4 * i, (const uint8_t[]){0, 0, 0xea, 0x60}, 4);
        }
        expect_load_error(write_file("huge", buf, 16, gz), SR_ECORRUPT, "header claims");
        expect_load_error(write_file("empty", buf, 0, gz), SR_ECORRUPT, "truncated");
    }
    (void)n;
}

static void
test_idx_load_damaged_gzip_is_ecorrupt(void **state)
{
    uint8_t        buf[256];
    const uint32_t d[2] = {3, 5};
    size_t         n = make_idx(buf, sizeof(buf), EX_IDX_TYPE_UBYTE, 2, d, 0);
    const char    *p = write_file("crc.gz", buf, n, 1);
    uint8_t        gz[512];
    FILE          *f;
    size_t         len;
    (void)state;

    /* Flip a bit of the stored CRC-32 (the 8-byte trailer's first half). */
    assert_non_null(f = fopen(p, "rb"));
    len = fread(gz, 1, sizeof(gz), f);
    fclose(f);
    gz[len - 8] ^= 1;
    assert_non_null(f = fopen(p, "wb"));
    assert_int_equal(fwrite(gz, 1, len, f), len);
    fclose(f);
    expect_load_error(p, SR_ECORRUPT, "");
}

/* Write <set>-images / -labels with n images of r x c and the given labels. */
static void
write_set(const char *set, uint32_t n, uint32_t r, uint32_t c, const uint8_t *labels, uint32_t nl)
{
    uint8_t  buf[4096];
    uint32_t di[3] = {n, r, c}, dl[1] = {nl};
    size_t   len;
    char     name[128];

    len = make_idx(buf, sizeof(buf), EX_IDX_TYPE_UBYTE, 3, di, 0);
    snprintf(name, sizeof(name), "%s-images-idx3-ubyte.gz", set);
    write_file(name, buf, len, 1);
    len = make_idx(buf, sizeof(buf), EX_IDX_TYPE_UBYTE, 1, dl, 0);
    memcpy(buf + 8, labels, nl);
    snprintf(name, sizeof(name), "%s-labels-idx1-ubyte", set); /* plain works too */
    write_file(name, buf, len, 0);
}

static void
test_dataset_load_checks_the_pair(void **state)
{
    const uint8_t labels[4] = {0, 9, 3, 10};
    ex_dataset    ds;
    char          err[1024];
    (void)state;

    write_set("ok", 3, 2, 2, labels, 3);
    assert_sr_ok(ex_dataset_load(dir, "ok", &ds, err, sizeof(err)));
    assert_int_equal(ds.n, 3);
    assert_int_equal(ds.pixels, 4);
    assert_int_equal(ds.labels[1], 9);
    assert_int_equal(ds.images[5], 5);
    ex_dataset_free(&ds);

    write_set("count", 3, 2, 2, labels, 2);
    assert_sr_err(ex_dataset_load(dir, "count", &ds, err, sizeof(err)), SR_ECORRUPT);
    assert_non_null(strstr(err, "3 images but"));

    write_set("label", 4, 2, 2, labels, 4);
    assert_sr_err(ex_dataset_load(dir, "label", &ds, err, sizeof(err)), SR_ECORRUPT);
    assert_non_null(strstr(err, "label 3 is 10"));

    assert_sr_err(ex_dataset_load(dir, "train", &ds, err, sizeof(err)), SR_ENOENT);
    assert_non_null(strstr(err, "dataset-fashion-mnist"));
    assert_non_null(strstr(err, "--data-dir"));
}

static void
test_dataset_load_installed_fashion_mnist_ok(void **state)
{
    ex_dataset ds;
    char       err[1024];
    (void)state;

    if (access(EX_DATA_DEFAULT_DIR "/t10k-labels-idx1-ubyte.gz", R_OK) != 0) {
        skip(); /* dataset-fashion-mnist is not installed */
    }
    assert_sr_ok(ex_dataset_load(EX_DATA_DEFAULT_DIR, "t10k", &ds, err, sizeof(err)));
    assert_int_equal(ds.n, 10000);
    assert_int_equal(ds.pixels, 784);
    ex_dataset_free(&ds);
}

static void
test_sampler_shards_are_disjoint_and_batches_repeat(void **state)
{
    enum { N = 1000, TASKS = 3, B = 16 };
    int        seen[N] = {0};
    ex_sampler s[TASKS], again;
    (void)state;

    for (int t = 0; t < TASKS; t++) {
        assert_sr_ok(ex_sampler_init(&s[t], N, t, TASKS, 42, B));
        for (size_t i = 0; i < s[t].n; i++) {
            seen[s[t].shard[i]]++;
        }
    }
    for (int i = 0; i < N; i++) {
        assert_int_equal(seen[i], 1);
    }
    /* The batch of a step depends on (seed, task, step) only: the same after
     * visiting other steps, and from a second sampler. */
    size_t first[B];
    memcpy(first, ex_sampler_batch(&s[1], 700), sizeof(first));
    (void)ex_sampler_batch(&s[1], 3);
    assert_memory_equal(ex_sampler_batch(&s[1], 700), first, sizeof(first));
    assert_sr_ok(ex_sampler_init(&again, N, 1, TASKS, 42, B));
    assert_memory_equal(ex_sampler_batch(&again, 700), first, sizeof(first));
    /* One epoch visits each shard example at most once. */
    memset(seen, 0, sizeof(seen));
    for (size_t b = 0; b < s[2].per_epoch; b++) {
        const size_t *idx = ex_sampler_batch(&s[2], (int64_t)(5 * s[2].per_epoch + b));
        for (int i = 0; i < B; i++) {
            assert_int_equal(seen[idx[i]]++, 0);
        }
    }
    assert_sr_err(ex_sampler_init(&again, N, 3, TASKS, 42, B), SR_EINVAL);
    assert_sr_err(ex_sampler_init(&again, 20, 0, TASKS, 42, B), SR_EINVAL);
    ex_sampler_free(&again);
    for (int t = 0; t < TASKS; t++) {
        ex_sampler_free(&s[t]);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_idx_decode_header_three_dims_ok),
        cmocka_unit_test(test_idx_decode_header_bad_input_is_ecorrupt),
        cmocka_unit_test(test_idx_decode_header_overflowing_sizes_is_ecorrupt),
        cmocka_unit_test_setup_teardown(test_idx_load_gzip_ok, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idx_load_plain_ok, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idx_load_missing_file_is_enoent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idx_load_malformed_files_are_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idx_load_damaged_gzip_is_ecorrupt, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dataset_load_checks_the_pair, setup, teardown),
        cmocka_unit_test(test_dataset_load_installed_fashion_mnist_ok),
        cmocka_unit_test(test_sampler_shards_are_disjoint_and_batches_repeat),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
