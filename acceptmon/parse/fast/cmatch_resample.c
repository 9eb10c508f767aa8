/* cmatch_resample.c: one replicate's block sums for the circular block bootstrap, acceptmon/measure/bootstrap.py.
 *
 * The bootstrap draws, per replicate, k uniform block starts (64 random bits each, reduced mod n) and adds up the
 * precomputed sum (and count) of the block at each of the first k - 1; Python does the last, cut-short block. This
 * is that loop, the same additions in the same order as bootstrap.py's own (a double accumulator from 0.0, the
 * blocks in the order drawn), so both give the same replicates to the last bit. */
#include "cmatch.h"

/* Block sums are read at random places of tables far larger than the cache: each one is asked for this many blocks
 * before it is added, so the reads overlap instead of waiting one by one. */
#define AHEAD 16
#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH(p) __builtin_prefetch((p), 0, 0)
#else
#define PREFETCH(p) ((void)(p))
#endif

/* A buffer of 8-byte items of the format wanted ('d' or 'q'), at least n long; else an exception set. */
static int items_of(Py_buffer *view, const char *format, Py_ssize_t n, const char *what) {
    const char *got = view->format == NULL ? "B" : view->format;
    if (got[0] == '@' || got[0] == '=') got++;
    if (view->itemsize != 8 || strcmp(got, format) != 0 || view->len / 8 < n) {
        PyErr_Format(PyExc_ValueError, "%s must be an array('%s') of at least %zd items", what, format, n);
        return -1;
    }
    return 0;
}

/* block_totals(draws, n, sums, counts) -> (total, count): draws holds 8 * k bytes, k little-endian 64-bit draws, of
 * which the first k - 1 are block starts (draw mod n); total adds sums[start] over them, count counts[start] (None
 * without counts). */
PyObject *cm_block_totals(PyObject *mod, PyObject *args) {
    Py_buffer draws, sums = {0}, counts = {0};
    Py_ssize_t n;
    PyObject *sums_obj, *counts_obj, *out = NULL;
    (void)mod;
    if (!PyArg_ParseTuple(args, "y*nOO", &draws, &n, &sums_obj, &counts_obj)) return NULL;
    int have_counts = counts_obj != Py_None;
    if (PyObject_GetBuffer(sums_obj, &sums, PyBUF_FORMAT) < 0) goto done;
    if (have_counts && PyObject_GetBuffer(counts_obj, &counts, PyBUF_FORMAT) < 0) goto done;
    if (n <= 0 || draws.len % 8 != 0) {
        PyErr_SetString(PyExc_ValueError, "n must be positive and draws a whole number of 8-byte draws");
        goto done;
    }
    if (items_of(&sums, "d", n, "sums") < 0 || (have_counts && items_of(&counts, "q", n, "counts") < 0)) goto done;
    const uint8_t *raw = (const uint8_t *)draws.buf;
    const double *s = (const double *)sums.buf;
    const int64_t *c = have_counts ? (const int64_t *)counts.buf : NULL;
    double total = 0.0;
    int64_t count = 0;
    Py_ssize_t full = draws.len / 8 - 1; /* the last draw is the cut-short block's, which Python adds */
    size_t ring[AHEAD] = {0};            /* the starts of the next AHEAD blocks, their sums asked for ahead */
    for (Py_ssize_t k = 0; k < full + AHEAD; k++) {
        if (k >= AHEAD) { /* the block drawn AHEAD before, added in the order drawn, before its slot is reused */
            size_t start = ring[k % AHEAD];
            total += s[start];
            if (c != NULL) count += c[start];
        }
        if (k < full) {
            uint64_t draw = 0;
            for (int b = 7; b >= 0; b--) draw = draw << 8 | raw[8 * k + b];
            size_t start = (size_t)(draw % (uint64_t)n);
            PREFETCH(s + start);
            if (c != NULL) PREFETCH(c + start);
            ring[k % AHEAD] = start;
        }
    }
    out = have_counts ? Py_BuildValue("(dL)", total, (long long)count) : Py_BuildValue("(dO)", total, Py_None);
done:
    PyBuffer_Release(&draws);
    if (sums.obj != NULL) PyBuffer_Release(&sums);
    if (counts.obj != NULL) PyBuffer_Release(&counts);
    return out;
}

/* prefix_sums(column, upto, prefix, counts): prefix[0] = 0.0 and prefix[i + 1] = prefix[i] + the column's value at
 * i mod n (0.0 where it is NaN: not logged), for i < upto <= 2n; counts (None: not wanted) likewise adds 1 where the
 * value is logged. The additions of bootstrap.py's _prefixes (accumulate over the column twice), in its order. */
PyObject *cm_prefix_sums(PyObject *mod, PyObject *args) {
    Py_buffer column = {0}, prefix = {0}, counts = {0};
    Py_ssize_t upto;
    PyObject *column_obj, *prefix_obj, *counts_obj, *out = NULL;
    (void)mod;
    if (!PyArg_ParseTuple(args, "OnOO", &column_obj, &upto, &prefix_obj, &counts_obj)) return NULL;
    int have_counts = counts_obj != Py_None;
    if (PyObject_GetBuffer(column_obj, &column, PyBUF_FORMAT) < 0) goto done;
    if (PyObject_GetBuffer(prefix_obj, &prefix, PyBUF_FORMAT | PyBUF_WRITABLE) < 0) goto done;
    if (have_counts && PyObject_GetBuffer(counts_obj, &counts, PyBUF_FORMAT | PyBUF_WRITABLE) < 0) goto done;
    Py_ssize_t n = column.len / 8;
    if (n <= 0 || upto < 0 || upto > 2 * n) {
        PyErr_SetString(PyExc_ValueError, "the column must hold a value and upto be within twice its length");
        goto done;
    }
    if (items_of(&column, "d", n, "column") < 0 || items_of(&prefix, "d", upto + 1, "prefix") < 0 ||
        (have_counts && items_of(&counts, "q", upto + 1, "counts") < 0))
        goto done;
    const double *v = (const double *)column.buf;
    double *p = (double *)prefix.buf;
    int64_t *c = have_counts ? (int64_t *)counts.buf : NULL;
    double sum = 0.0;
    int64_t count = 0;
    p[0] = 0.0;
    if (c != NULL) c[0] = 0;
    for (Py_ssize_t i = 0; i < upto; i++) {
        double x = v[i < n ? i : i - n];
        int logged = x == x;
        sum += logged ? x : 0.0;
        p[i + 1] = sum;
        if (c != NULL) {
            count += logged;
            c[i + 1] = count;
        }
    }
    out = Py_NewRef(Py_None);
done:
    if (column.obj != NULL) PyBuffer_Release(&column);
    if (prefix.obj != NULL) PyBuffer_Release(&prefix);
    if (counts.obj != NULL) PyBuffer_Release(&counts);
    return out;
}

/* spans(prefix, n, width, out): out[i] = prefix[i + width] - prefix[i] for i < n, of 'd' or 'q' items alike (out of
 * prefix's); bootstrap.py's _spans. */
PyObject *cm_spans(PyObject *mod, PyObject *args) {
    Py_buffer prefix = {0}, spans = {0};
    Py_ssize_t n, width;
    PyObject *prefix_obj, *spans_obj, *out = NULL;
    (void)mod;
    if (!PyArg_ParseTuple(args, "OnnO", &prefix_obj, &n, &width, &spans_obj)) return NULL;
    if (PyObject_GetBuffer(prefix_obj, &prefix, PyBUF_FORMAT) < 0) goto done;
    if (PyObject_GetBuffer(spans_obj, &spans, PyBUF_FORMAT | PyBUF_WRITABLE) < 0) goto done;
    const char *format = prefix.format != NULL && strchr(prefix.format, 'q') != NULL ? "q" : "d";
    if (n < 0 || width < 0 || n > PY_SSIZE_T_MAX - width - 1) {
        PyErr_SetString(PyExc_ValueError, "n and width must be within the prefix");
        goto done;
    }
    if (items_of(&prefix, format, n + width, "prefix") < 0 || items_of(&spans, format, n, "out") < 0) goto done;
    if (format[0] == 'd') {
        const double *p = (const double *)prefix.buf;
        double *s = (double *)spans.buf;
        for (Py_ssize_t i = 0; i < n; i++) s[i] = p[i + width] - p[i];
    } else {
        const int64_t *p = (const int64_t *)prefix.buf;
        int64_t *s = (int64_t *)spans.buf;
        for (Py_ssize_t i = 0; i < n; i++) s[i] = p[i + width] - p[i];
    }
    out = Py_NewRef(Py_None);
done:
    if (prefix.obj != NULL) PyBuffer_Release(&prefix);
    if (spans.obj != NULL) PyBuffer_Release(&spans);
    return out;
}
