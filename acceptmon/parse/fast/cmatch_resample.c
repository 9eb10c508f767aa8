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

/* Whether a buffer holds 8-byte items of the format wanted ('d' or 'q'). */
static int eight_byte(const Py_buffer *view, const char *format) {
    const char *got = view->format == NULL ? "B" : view->format;
    if (got[0] == '@' || got[0] == '=') got++;
    return view->itemsize == 8 && strcmp(got, format) == 0;
}

/* A buffer of 8-byte items of the format wanted ('d' or 'q'), at least n long; else an exception set. */
static int items_of(Py_buffer *view, const char *format, Py_ssize_t n, const char *what) {
    if (!eight_byte(view, format) || view->len / 8 < n) {
        PyErr_Format(PyExc_ValueError, "%s must be an array('%s') of at least %zd items", what, format, n);
        return -1;
    }
    return 0;
}

/* The full blocks of one replicate: the first k - 1 of the k little-endian 64-bit draws in raw[0, len) are block
 * starts (draw mod n), added in the order drawn from 0.0 (sums), and counted (counts, where not NULL). Reads only
 * the memory it is given: callers let go of the GIL around it. */
static void blocks_added(const uint8_t *raw, Py_ssize_t len, Py_ssize_t n, const double *s, const int64_t *c,
                         double *total_out, int64_t *count_out) {
    double total = 0.0;
    int64_t count = 0;
    Py_ssize_t full = len / 8 - 1; /* the last draw is the cut-short block's, which Python adds */
    size_t ring[AHEAD] = {0};      /* the starts of the next AHEAD blocks, their sums asked for ahead */
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
    *total_out = total, *count_out = count;
}

/* A column's tables as buffers: sums ('d') and counts ('q', or none: counts_obj None), each at least n long. */
static int tables_of(PyObject *sums_obj, PyObject *counts_obj, Py_ssize_t n, Py_buffer *sums, Py_buffer *counts) {
    if (PyObject_GetBuffer(sums_obj, sums, PyBUF_FORMAT) < 0) return -1;
    if (counts_obj != Py_None && PyObject_GetBuffer(counts_obj, counts, PyBUF_FORMAT) < 0) return -1;
    if (items_of(sums, "d", n, "sums") < 0) return -1;
    return counts_obj != Py_None ? items_of(counts, "q", n, "counts") : 0;
}

static PyObject *totals_value(double total, int64_t count, int have_counts) {
    return have_counts ? Py_BuildValue("(dL)", total, (long long)count) : Py_BuildValue("(dO)", total, Py_None);
}

/* block_totals_each(draws, n, tables) -> [[(total, count) per table] per replicate]: each replicate's draws (a list
 * of bytes, each 8 * k bytes: k little-endian 64-bit draws, of which the first k - 1 are block starts, draw mod n)
 * over each (sums, counts) of tables: total adds sums[start] over them, count counts[start] (None without counts).
 * The GIL is let go while it adds: another thread draws the next replicates meanwhile. */
PyObject *cm_block_totals_each(PyObject *mod, PyObject *args) {
    PyObject *draws_list, *tables, *out = NULL, **held = NULL;
    Py_ssize_t n, nrep = 0, ncol = 0, got = 0;
    Py_buffer *sums = NULL, *counts = NULL;
    double *totals = NULL;
    int64_t *counted = NULL;
    (void)mod;
    if (!PyArg_ParseTuple(args, "O!nO!", &PyList_Type, &draws_list, &n, &PyList_Type, &tables)) return NULL;
    nrep = PyList_GET_SIZE(draws_list), ncol = PyList_GET_SIZE(tables);
    if (ncol > 0 && nrep > PY_SSIZE_T_MAX / ncol / 8) return PyErr_NoMemory();
    Py_ssize_t cells = nrep * ncol > 0 ? nrep * ncol : 1;
    held = PyMem_Calloc((size_t)(nrep ? nrep : 1), sizeof(PyObject *));
    sums = PyMem_Calloc((size_t)(ncol ? ncol : 1), sizeof(Py_buffer));
    counts = PyMem_Calloc((size_t)(ncol ? ncol : 1), sizeof(Py_buffer));
    totals = PyMem_Calloc((size_t)cells, sizeof(double));
    counted = PyMem_Calloc((size_t)cells, sizeof(int64_t));
    if (held == NULL || sums == NULL || counts == NULL || totals == NULL || counted == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (n <= 0) {
        PyErr_SetString(PyExc_ValueError, "n must be positive");
        goto done;
    }
    for (Py_ssize_t j = 0; j < ncol; j++) {
        PyObject *sums_obj, *counts_obj, *t = PyList_GET_ITEM(tables, j);
        if (!PyArg_ParseTuple(t, "OO", &sums_obj, &counts_obj)) goto done;
        if (tables_of(sums_obj, counts_obj, n, &sums[j], &counts[j]) < 0) goto done;
    }
    for (; got < nrep; got++) { /* the list may change once the GIL is let go: each draws object held here */
        PyObject *d = PyList_GET_ITEM(draws_list, got);
        if (!PyBytes_Check(d) || PyBytes_GET_SIZE(d) % 8 != 0 || PyBytes_GET_SIZE(d) == 0) {
            PyErr_SetString(PyExc_ValueError, "each replicate's draws are bytes, a whole number of 8-byte draws");
            goto done;
        }
        held[got] = Py_NewRef(d);
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < nrep; r++)
        for (Py_ssize_t j = 0; j < ncol; j++)
            blocks_added((const uint8_t *)PyBytes_AS_STRING(held[r]), PyBytes_GET_SIZE(held[r]), n, sums[j].buf,
                         counts[j].obj ? counts[j].buf : NULL, &totals[r * ncol + j], &counted[r * ncol + j]);
    Py_END_ALLOW_THREADS
    out = PyList_New(nrep);
    for (Py_ssize_t r = 0; out != NULL && r < nrep; r++) {
        PyObject *row = PyList_New(ncol);
        for (Py_ssize_t j = 0; row != NULL && j < ncol; j++) {
            PyObject *v = totals_value(totals[r * ncol + j], counted[r * ncol + j], counts[j].obj != NULL);
            if (v == NULL) Py_CLEAR(row);
            else PyList_SET_ITEM(row, j, v);
        }
        if (row == NULL) Py_CLEAR(out);
        else PyList_SET_ITEM(out, r, row);
    }
done:
    for (Py_ssize_t r = 0; held != NULL && r < got; r++) Py_DECREF(held[r]);
    for (Py_ssize_t j = 0; j < ncol && sums != NULL && counts != NULL; j++) {
        if (sums[j].obj != NULL) PyBuffer_Release(&sums[j]);
        if (counts[j].obj != NULL) PyBuffer_Release(&counts[j]);
    }
    PyMem_Free(held), PyMem_Free(sums), PyMem_Free(counts), PyMem_Free(totals), PyMem_Free(counted);
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

/* nans(column) -> how many of an array('d')'s values are NaN (not logged: columns.missing), or None where the column
 * is not a buffer of doubles (Python counts them). */
PyObject *cm_nans(PyObject *mod, PyObject *column) {
    Py_buffer view = {0};
    (void)mod;
    if (!PyObject_CheckBuffer(column)) Py_RETURN_NONE;
    if (PyObject_GetBuffer(column, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) { /* (one not contiguous) */
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    if (!eight_byte(&view, "d")) {
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }
    const double *v = (const double *)view.buf;
    Py_ssize_t n = view.len / 8, count = 0;
    for (Py_ssize_t i = 0; i < n; i++) count += v[i] != v[i];
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(count);
}
