/* cmatch_resample.c: one replicate's block sums for the circular block bootstrap, acceptmon/measure/bootstrap.py.
 *
 * The bootstrap draws, per replicate, k uniform block starts (64 random bits each, reduced mod n) and adds up the
 * precomputed sum (and count) of the block at each of the first k - 1; Python does the last, cut-short block. This
 * is that loop, the same additions in the same order as bootstrap.py's own (a double accumulator from 0.0, the
 * blocks in the order drawn), so both give the same replicates to the last bit. The draws themselves are
 * random.Random's, made here as its randbytes makes them (random_bytes). */
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
int cm_eight_byte(const Py_buffer *view, const char *format) {
    const char *got = view->format == NULL ? "B" : view->format;
    if (got[0] == '@' || got[0] == '=') got++;
    return view->itemsize == 8 && strcmp(got, format) == 0;
}

/* A buffer of 8-byte items of the format wanted ('d' or 'q'), at least n long; else an exception set. */
static int items_of(Py_buffer *view, const char *format, Py_ssize_t n, const char *what) {
    if (!cm_eight_byte(view, format) || view->len / 8 < n) {
        PyErr_Format(PyExc_ValueError, "%s must be an array('%s') of at least %zd items", what, format, n);
        return -1;
    }
    return 0;
}

/* draw mod n without a division, where the compiler has 128-bit integers: Lemire, Kaser and Kurz, "Faster remainder by
 * direct computation" (2019), exact for every 64-bit draw and n > 0 with magic = ceil(2^128 / n) (0 for n = 1). A
 * replicate reduces tens of thousands of draws by one n, and a 64-bit division took most of the adding's time. */
#ifdef __SIZEOF_INT128__
typedef unsigned __int128 Magic;
static Magic magic_of(uint64_t n) { return ~(Magic)0 / n + 1; }
static inline uint64_t reduced(uint64_t draw, Magic magic, uint64_t n) {
    Magic low = magic * draw; /* mod 2^128 */
    Magic bottom = ((low & UINT64_MAX) * n) >> 64, top = (low >> 64) * n;
    return (uint64_t)((bottom + top) >> 64);
}
#else
typedef uint64_t Magic;
static Magic magic_of(uint64_t n) { return n; }
static inline uint64_t reduced(uint64_t draw, Magic magic, uint64_t n) { return (void)magic, draw % n; }
#endif

/* The full blocks of one replicate over the ncol tables packed in rows of width 8-byte cells (pack_spans): the
 * first k - 1 of the k little-endian 64-bit draws in raw[0, len) are block starts (draw mod n, worked out once for
 * every table), added in the order drawn from 0.0 (sums[j]), and counted (counts[j], where counted[j]). Reads only
 * the memory it is given: callers let go of the GIL around it. */
static void blocks_added(const uint8_t *raw, Py_ssize_t len, Py_ssize_t n, const uint8_t *rows, Py_ssize_t width,
                         Py_ssize_t ncol, const char *counted, double *total_out, int64_t *count_out) {
    for (Py_ssize_t j = 0; j < ncol; j++) total_out[j] = 0.0, count_out[j] = 0;
    Py_ssize_t full = len / 8 - 1; /* the last draw is the cut-short block's, which Python adds */
    size_t ring[AHEAD] = {0};      /* the starts of the next AHEAD blocks, their rows asked for ahead */
    size_t stride = (size_t)width * 8;
    Magic magic = magic_of((uint64_t)n);
    for (Py_ssize_t k = 0; k < full + AHEAD; k++) {
        if (k >= AHEAD) { /* the block drawn AHEAD before, added in the order drawn, before its slot is reused */
            const uint8_t *row = rows + ring[k % AHEAD] * stride;
            for (Py_ssize_t j = 0; j < ncol; j++) {
                double sum;
                memcpy(&sum, row, 8), row += 8;
                total_out[j] += sum;
                if (counted[j]) {
                    int64_t count;
                    memcpy(&count, row, 8), row += 8;
                    count_out[j] += count;
                }
            }
        }
        if (k < full) {
            uint64_t draw = 0;
            for (int b = 7; b >= 0; b--) draw = draw << 8 | raw[8 * k + b];
            size_t start = (size_t)reduced(draw, magic, (uint64_t)n);
            PREFETCH(rows + start * stride);
            PREFETCH(rows + start * stride + stride - 1); /* (a row may cross into the next cache line) */
            ring[k % AHEAD] = start;
        }
    }
}

/* pack_spans(rows, width, cell, prefix, counts, n, length): one column's block sums into rows (a writable buffer of n
 * rows of width 8-byte cells) for block_totals_each: the sum of the block of `length` from each start i < n,
 * prefix[i + length] - prefix[i] (prefix an array('d') of the column's prefix sums, bootstrap.py's _prefixes), in cell
 * `cell` of row i and, where the column has counts (an array('q') of their prefix sums, or None), its count so in
 * the next cell: bootstrap.py's _block_sums, made in place. A replicate reads its blocks at random starts, and one
 * start's values of every column then share a cache line. */
PyObject *cm_pack_spans(PyObject *mod, PyObject *args) {
    PyObject *rows_obj, *prefix_obj, *counts_obj, *out = NULL;
    Py_ssize_t width, cell, n, length;
    Py_buffer rows = {0}, prefix = {0}, counts = {0};
    (void)mod;
    if (!PyArg_ParseTuple(args, "OnnOOnn", &rows_obj, &width, &cell, &prefix_obj, &counts_obj, &n, &length))
        return NULL;
    int have_counts = counts_obj != Py_None;
    if (n <= 0 || length < 0 || length > PY_SSIZE_T_MAX - n || cell < 0 || width <= cell + have_counts ||
        width > PY_SSIZE_T_MAX / 8 / n) {
        PyErr_SetString(PyExc_ValueError, "n must be positive, and the column's cells within the row's width");
        return NULL;
    }
    if (PyObject_GetBuffer(rows_obj, &rows, PyBUF_WRITABLE) < 0) goto done;
    if (PyObject_GetBuffer(prefix_obj, &prefix, PyBUF_FORMAT) < 0) goto done;
    if (have_counts && PyObject_GetBuffer(counts_obj, &counts, PyBUF_FORMAT) < 0) goto done;
    if (items_of(&prefix, "d", n + length, "prefix") < 0 || (have_counts && items_of(&counts, "q", n + length, "counts") < 0))
        goto done;
    if (rows.len < n * width * 8) {
        PyErr_SetString(PyExc_ValueError, "rows must hold n rows of width cells");
        goto done;
    }
    uint8_t *at = (uint8_t *)rows.buf + 8 * cell;
    size_t stride = (size_t)width * 8;
    const double *p = (const double *)prefix.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        double sum = p[i + length] - p[i];
        memcpy(at + (size_t)i * stride, &sum, 8);
    }
    const int64_t *c = have_counts ? (const int64_t *)counts.buf : NULL;
    for (Py_ssize_t i = 0; c != NULL && i < n; i++) {
        int64_t count = c[i + length] - c[i];
        memcpy(at + 8 + (size_t)i * stride, &count, 8);
    }
    out = Py_NewRef(Py_None);
done:
    if (rows.obj != NULL) PyBuffer_Release(&rows);
    if (prefix.obj != NULL) PyBuffer_Release(&prefix);
    if (counts.obj != NULL) PyBuffer_Release(&counts);
    return out;
}

static PyObject *totals_value(double total, int64_t count, int have_counts) {
    return have_counts ? Py_BuildValue("(dL)", total, (long long)count) : Py_BuildValue("(dO)", total, Py_None);
}

/* block_totals_each(draws, n, rows, counted) -> [[(total, count) per table] per replicate]: each replicate's draws (a
 * list of bytes, each 8 * k bytes: k little-endian 64-bit draws, of which the first k - 1 are block starts, draw mod
 * n) over each table packed in rows (pack_spans, with counted: which tables have counts): total adds the table's sums[start] over them,
 * count its counts[start] (None without counts). The GIL is let go while it adds: another thread draws the next
 * replicates meanwhile. */
PyObject *cm_block_totals_each(PyObject *mod, PyObject *args) {
    PyObject *draws_list, *rows_obj, *counted_obj, *out = NULL, **held = NULL;
    Py_ssize_t n, nrep = 0, ncol = 0, got = 0, width = 0;
    Py_buffer rows = {0};
    double *totals = NULL;
    int64_t *counts = NULL;
    char *counted = NULL;
    (void)mod;
    if (!PyArg_ParseTuple(args, "O!nOO!", &PyList_Type, &draws_list, &n, &rows_obj, &PyTuple_Type, &counted_obj))
        return NULL;
    nrep = PyList_GET_SIZE(draws_list), ncol = PyTuple_GET_SIZE(counted_obj);
    if (ncol > 0 && nrep > PY_SSIZE_T_MAX / ncol / 8) return PyErr_NoMemory();
    Py_ssize_t cells = nrep * ncol > 0 ? nrep * ncol : 1;
    held = PyMem_Calloc((size_t)(nrep ? nrep : 1), sizeof(PyObject *));
    totals = PyMem_Calloc((size_t)cells, sizeof(double));
    counts = PyMem_Calloc((size_t)cells, sizeof(int64_t));
    counted = PyMem_Calloc((size_t)(ncol ? ncol : 1), 1);
    if (held == NULL || totals == NULL || counts == NULL || counted == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (n <= 0) {
        PyErr_SetString(PyExc_ValueError, "n must be positive");
        goto done;
    }
    for (Py_ssize_t j = 0; j < ncol; j++) {
        int truth = PyObject_IsTrue(PyTuple_GET_ITEM(counted_obj, j));
        if (truth < 0) goto done;
        counted[j] = (char)truth, width += 1 + truth;
    }
    if (PyObject_GetBuffer(rows_obj, &rows, PyBUF_SIMPLE) < 0) goto done;
    if (width > 0 && (n > PY_SSIZE_T_MAX / 8 / width || rows.len < n * width * 8)) {
        PyErr_SetString(PyExc_ValueError, "rows must hold n rows of the tables counted says (pack_spans)");
        goto done;
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
    for (Py_ssize_t r = 0; r < nrep && ncol > 0; r++)
        blocks_added((const uint8_t *)PyBytes_AS_STRING(held[r]), PyBytes_GET_SIZE(held[r]), n,
                     (const uint8_t *)rows.buf, width, ncol, counted, &totals[r * ncol], &counts[r * ncol]);
    Py_END_ALLOW_THREADS
    out = PyList_New(nrep);
    for (Py_ssize_t r = 0; out != NULL && r < nrep; r++) {
        PyObject *row = PyList_New(ncol);
        for (Py_ssize_t j = 0; row != NULL && j < ncol; j++) {
            PyObject *v = totals_value(totals[r * ncol + j], counts[r * ncol + j], counted[j]);
            if (v == NULL) Py_CLEAR(row);
            else PyList_SET_ITEM(row, j, v);
        }
        if (row == NULL) Py_CLEAR(out);
        else PyList_SET_ITEM(out, r, row);
    }
done:
    for (Py_ssize_t r = 0; held != NULL && r < got; r++) Py_DECREF(held[r]);
    if (rows.obj != NULL) PyBuffer_Release(&rows);
    PyMem_Free(held), PyMem_Free(totals), PyMem_Free(counts), PyMem_Free(counted);
    return out;
}

/* Python's Mersenne Twister (Modules/_randommodule.c), on its state as random.Random.getstate gives it: 624 words
 * and the index of the next one. */
#define MT_N 624
#define MT_M 397

static uint32_t mt_next(uint32_t *mt, Py_ssize_t *index) {
    static const uint32_t mag01[2] = {0x0U, 0x9908b0dfU};
    uint32_t y;
    if (*index >= MT_N) { /* the next 624 words at once */
        int kk;
        for (kk = 0; kk < MT_N - MT_M; kk++) {
            y = (mt[kk] & 0x80000000U) | (mt[kk + 1] & 0x7fffffffU);
            mt[kk] = mt[kk + MT_M] ^ (y >> 1) ^ mag01[y & 0x1U];
        }
        for (; kk < MT_N - 1; kk++) {
            y = (mt[kk] & 0x80000000U) | (mt[kk + 1] & 0x7fffffffU);
            mt[kk] = mt[kk + (MT_M - MT_N)] ^ (y >> 1) ^ mag01[y & 0x1U];
        }
        y = (mt[MT_N - 1] & 0x80000000U) | (mt[0] & 0x7fffffffU);
        mt[MT_N - 1] = mt[MT_M - 1] ^ (y >> 1) ^ mag01[y & 0x1U];
        *index = 0;
    }
    y = mt[(*index)++];
    y ^= (y >> 11);
    y ^= (y << 7) & 0x9d2c5680U;
    y ^= (y << 15) & 0xefc60000U;
    y ^= (y >> 18);
    return y;
}

/* random_bytes(state, k, size) -> ([bytes] * k, state after): what k calls of random.Random.randbytes(size) give
 * (size a multiple of 4: each 4 bytes one word, little-endian, in the order drawn) and the state they leave, from a
 * random.Random's getstate()[1] (624 words and an index, 0 to 624). */
PyObject *cm_random_bytes(PyObject *mod, PyObject *args) {
    PyObject *state, *out = NULL, *list = NULL, *after = NULL;
    Py_ssize_t k, size, index;
    uint32_t mt[MT_N];
    (void)mod;
    if (!PyArg_ParseTuple(args, "O!nn", &PyTuple_Type, &state, &k, &size)) return NULL;
    if (PyTuple_GET_SIZE(state) != MT_N + 1 || k < 0 || size < 0 || size % 4 != 0) {
        PyErr_SetString(PyExc_ValueError, "a state of 625 ints, k >= 0 and a size that is a multiple of 4");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < MT_N; i++) {
        unsigned long w = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(state, i));
        if (w == (unsigned long)-1 && PyErr_Occurred()) return NULL;
        if (w > 0xffffffffUL) {
            PyErr_SetString(PyExc_ValueError, "a state word past 32 bits");
            return NULL;
        }
        mt[i] = (uint32_t)w;
    }
    index = PyLong_AsSsize_t(PyTuple_GET_ITEM(state, MT_N));
    if (index == -1 && PyErr_Occurred()) return NULL;
    if (index < 0 || index > MT_N) {
        PyErr_SetString(PyExc_ValueError, "a state index outside 0 to 624");
        return NULL;
    }
    if ((list = PyList_New(k)) == NULL) return NULL;
    for (Py_ssize_t r = 0; r < k; r++) {
        PyObject *b = PyBytes_FromStringAndSize(NULL, size);
        if (b == NULL) goto done;
        PyList_SET_ITEM(list, r, b);
    }
    Py_BEGIN_ALLOW_THREADS /* (the bytes are this call's alone until it returns) */
    for (Py_ssize_t r = 0; r < k; r++) {
        uint8_t *p = (uint8_t *)PyBytes_AS_STRING(PyList_GET_ITEM(list, r));
        for (Py_ssize_t i = 0; i < size; i += 4) {
            uint32_t w = mt_next(mt, &index);
            p[i] = (uint8_t)w, p[i + 1] = (uint8_t)(w >> 8), p[i + 2] = (uint8_t)(w >> 16), p[i + 3] = (uint8_t)(w >> 24);
        }
    }
    Py_END_ALLOW_THREADS
    if ((after = PyTuple_New(MT_N + 1)) == NULL) goto done;
    for (Py_ssize_t i = 0; i <= MT_N; i++) {
        PyObject *v = i < MT_N ? PyLong_FromUnsignedLong(mt[i]) : PyLong_FromSsize_t(index);
        if (v == NULL) goto done;
        PyTuple_SET_ITEM(after, i, v);
    }
    out = PyTuple_Pack(2, list, after);
done:
    Py_XDECREF(list);
    Py_XDECREF(after);
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
    if (!cm_eight_byte(&view, "d")) {
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }
    const double *v = (const double *)view.buf;
    Py_ssize_t n = view.len / 8, count = 0;
    for (Py_ssize_t i = 0; i < n; i++) count += v[i] != v[i];
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(count);
}
