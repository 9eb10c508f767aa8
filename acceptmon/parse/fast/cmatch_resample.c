/* cmatch_resample.c: the replicates' draws and block sums for the circular block bootstrap, acceptmon/measure/bootstrap.py.
 *
 * The bootstrap draws, per replicate, k uniform block starts (64 random bits each from random.Random, reduced mod n)
 * and adds up the precomputed sum (and count) of the block at each of the first k - 1; Python does the last,
 * cut-short block. This is that loop: the same draws (Python's Mersenne Twister, from its state), the same additions
 * in the same order as bootstrap.py's own (a double accumulator from 0.0, the blocks in the order drawn), so both
 * give the same replicates to the last bit. */
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

/* Python's Mersenne Twister (random.Random: MT19937, CPython's _randommodule.c): its state is getstate()[1], the
 * 624 words and the position of the next one. The draws here are the words random.Random gives, in its order. */
#define MT_N 624
#define MT_M 397

typedef struct {
    uint32_t mt[MT_N];
    Py_ssize_t index;
} Twister;

static void twist(Twister *t) {
    static const uint32_t mag01[2] = {0x0U, 0x9908b0dfU};
    uint32_t *mt = t->mt, y;
    int k;
    for (k = 0; k < MT_N - MT_M; k++) {
        y = (mt[k] & 0x80000000U) | (mt[k + 1] & 0x7fffffffU);
        mt[k] = mt[k + MT_M] ^ (y >> 1) ^ mag01[y & 1U];
    }
    for (; k < MT_N - 1; k++) {
        y = (mt[k] & 0x80000000U) | (mt[k + 1] & 0x7fffffffU);
        mt[k] = mt[k + (MT_M - MT_N)] ^ (y >> 1) ^ mag01[y & 1U];
    }
    y = (mt[MT_N - 1] & 0x80000000U) | (mt[0] & 0x7fffffffU);
    mt[MT_N - 1] = mt[MT_M - 1] ^ (y >> 1) ^ mag01[y & 1U];
    t->index = 0;
}

static uint32_t next_word(Twister *t) {
    if (t->index >= MT_N) twist(t);
    uint32_t y = t->mt[t->index++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680U;
    y ^= (y << 15) & 0xefc60000U;
    return y ^ (y >> 18);
}

/* The state after `words` more words, without tempering the ones passed over. */
static void skip_words(Twister *t, uint64_t words) {
    while (words > 0) {
        if (t->index >= MT_N) twist(t);
        uint64_t take = (uint64_t)(MT_N - t->index);
        if (take > words) take = words;
        t->index += (Py_ssize_t)take;
        words -= take;
    }
}

/* A random.Random state's words (getstate()[1]: 624 words below 2**32 and a position 0..624); else an exception. */
static int twister_of(PyObject *state, Twister *t) {
    if (!PyTuple_Check(state) || PyTuple_GET_SIZE(state) != MT_N + 1) {
        PyErr_SetString(PyExc_ValueError, "state must be random.Random's getstate()[1]: 625 integers");
        return -1;
    }
    for (Py_ssize_t i = 0; i < MT_N; i++) {
        unsigned long w = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(state, i));
        if (w == (unsigned long)-1 && PyErr_Occurred()) return -1;
        if (w > 0xffffffffUL) {
            PyErr_SetString(PyExc_ValueError, "a state word must be below 2**32");
            return -1;
        }
        t->mt[i] = (uint32_t)w;
    }
    t->index = PyLong_AsSsize_t(PyTuple_GET_ITEM(state, MT_N));
    if (t->index == -1 && PyErr_Occurred()) return -1;
    if (t->index < 0 || t->index > MT_N) {
        PyErr_SetString(PyExc_ValueError, "the state's position must be within 0..624");
        return -1;
    }
    return 0;
}

static PyObject *state_value(const Twister *t) {
    PyObject *out = PyTuple_New(MT_N + 1);
    for (Py_ssize_t i = 0; out != NULL && i <= MT_N; i++) {
        PyObject *v = i < MT_N ? PyLong_FromUnsignedLong(t->mt[i]) : PyLong_FromSsize_t(t->index);
        if (v == NULL) Py_CLEAR(out);
        else PyTuple_SET_ITEM(out, i, v);
    }
    return out;
}

/* The full blocks of one replicate: sums (and counts, where not NULL) at starts[0, full), added in that order from
 * 0.0. Reads only the memory it is given: callers let go of the GIL around it. */
static void blocks_added(const size_t *starts, Py_ssize_t full, const double *s, const int64_t *c, double *total_out,
                         int64_t *count_out) {
    double total = 0.0;
    int64_t count = 0;
    for (Py_ssize_t k = 0; k < full && k < AHEAD; k++) {
        PREFETCH(s + starts[k]);
        if (c != NULL) PREFETCH(c + starts[k]);
    }
    for (Py_ssize_t k = 0; k < full; k++) {
        if (k + AHEAD < full) {
            PREFETCH(s + starts[k + AHEAD]);
            if (c != NULL) PREFETCH(c + starts[k + AHEAD]);
        }
        total += s[starts[k]];
        if (c != NULL) count += c[starts[k]];
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

/* What the GIL-free part of block_totals_drawn works on. */
typedef struct {
    Twister t;
    Py_ssize_t skip, n, blocks, count, ncol;
    Py_buffer *sums, *counts;
    size_t *starts, *lasts;
    double *totals;
    int64_t *counted;
} Drawing;

/* Skip, then each replicate: its `blocks` draws (two words each, the first the low half: random.randbytes(8 * blocks)
 * read as little-endian 64-bit numbers) reduced mod n, the first blocks - 1 added over each table, the last kept. */
static void drawn_and_added(Drawing *d) {
    skip_words(&d->t, 2 * (uint64_t)d->skip);
    for (Py_ssize_t r = 0; r < d->count; r++) {
        for (Py_ssize_t k = 0; k < d->blocks; k++) {
            uint64_t low = next_word(&d->t);
            uint64_t draw = low | (uint64_t)next_word(&d->t) << 32;
            d->starts[k] = (size_t)(draw % (uint64_t)d->n);
        }
        d->lasts[r] = d->starts[d->blocks - 1];
        for (Py_ssize_t j = 0; j < d->ncol; j++)
            blocks_added(d->starts, d->blocks - 1, d->sums[j].buf, d->counts[j].obj ? d->counts[j].buf : NULL,
                         &d->totals[r * d->ncol + j], &d->counted[r * d->ncol + j]);
    }
}

static PyObject *drawn_value(const Drawing *d) {
    PyObject *state = state_value(&d->t), *lasts = PyList_New(d->count), *rows = PyList_New(d->count), *out = NULL;
    for (Py_ssize_t r = 0; lasts != NULL && rows != NULL && r < d->count; r++) {
        PyObject *last = PyLong_FromSize_t(d->lasts[r]), *row = PyList_New(d->ncol);
        for (Py_ssize_t j = 0; row != NULL && j < d->ncol; j++) {
            PyObject *v = totals_value(d->totals[r * d->ncol + j], d->counted[r * d->ncol + j], d->counts[j].obj != NULL);
            if (v == NULL) Py_CLEAR(row);
            else PyList_SET_ITEM(row, j, v);
        }
        if (last == NULL || row == NULL) {
            Py_XDECREF(last), Py_XDECREF(row);
            Py_CLEAR(rows);
            break;
        }
        PyList_SET_ITEM(lasts, r, last), PyList_SET_ITEM(rows, r, row);
    }
    if (state != NULL && lasts != NULL && rows != NULL) out = PyTuple_Pack(3, state, lasts, rows);
    Py_XDECREF(state), Py_XDECREF(lasts), Py_XDECREF(rows);
    return out;
}

/* block_totals_drawn(state, skip, n, blocks, count, tables) -> (state, lasts, totals): from a random.Random state
 * (getstate()[1]), past `skip` draws, `count` replicates of `blocks` draws each, as bootstrap.py draws them
 * (rng.randbytes(8 * blocks), 64-bit little-endian, mod n). Per replicate: the last draw's start (lasts), and over
 * each (sums, counts) of tables the first blocks - 1 starts' sums added in order from 0.0 and their counts (None
 * without counts). `state` is the generator's after these draws. The GIL is let go while it draws and adds. */
PyObject *cm_block_totals_drawn(PyObject *mod, PyObject *args) {
    PyObject *state, *tables, *out = NULL;
    Drawing d = {0};
    Py_ssize_t cells;
    (void)mod;
    if (!PyArg_ParseTuple(args, "OnnnnO!", &state, &d.skip, &d.n, &d.blocks, &d.count, &PyList_Type, &tables))
        return NULL;
    if (twister_of(state, &d.t) < 0) return NULL;
    if (d.n <= 0 || d.blocks <= 0 || d.count < 0 || d.skip < 0) {
        PyErr_SetString(PyExc_ValueError, "n and blocks must be positive, count and skip not negative");
        return NULL;
    }
    d.ncol = PyList_GET_SIZE(tables);
    if ((d.ncol > 0 && d.count > PY_SSIZE_T_MAX / d.ncol / 8) || d.blocks > PY_SSIZE_T_MAX / 8 ||
        d.count > PY_SSIZE_T_MAX / 8)
        return PyErr_NoMemory();
    cells = d.count * d.ncol > 0 ? d.count * d.ncol : 1;
    d.sums = PyMem_Calloc((size_t)(d.ncol ? d.ncol : 1), sizeof(Py_buffer));
    d.counts = PyMem_Calloc((size_t)(d.ncol ? d.ncol : 1), sizeof(Py_buffer));
    d.starts = PyMem_Calloc((size_t)d.blocks, sizeof(size_t));
    d.lasts = PyMem_Calloc((size_t)(d.count ? d.count : 1), sizeof(size_t));
    d.totals = PyMem_Calloc((size_t)cells, sizeof(double));
    d.counted = PyMem_Calloc((size_t)cells, sizeof(int64_t));
    if (d.sums == NULL || d.counts == NULL || d.starts == NULL || d.lasts == NULL || d.totals == NULL ||
        d.counted == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t j = 0; j < d.ncol; j++) { /* (each buffer held: the list may change once the GIL is let go) */
        PyObject *sums_obj, *counts_obj, *t = PyList_GET_ITEM(tables, j);
        if (!PyArg_ParseTuple(t, "OO", &sums_obj, &counts_obj)) goto done;
        if (tables_of(sums_obj, counts_obj, d.n, &d.sums[j], &d.counts[j]) < 0) goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    drawn_and_added(&d);
    Py_END_ALLOW_THREADS
    out = drawn_value(&d);
done:
    for (Py_ssize_t j = 0; j < d.ncol && d.sums != NULL && d.counts != NULL; j++) {
        if (d.sums[j].obj != NULL) PyBuffer_Release(&d.sums[j]);
        if (d.counts[j].obj != NULL) PyBuffer_Release(&d.counts[j]);
    }
    PyMem_Free(d.sums), PyMem_Free(d.counts), PyMem_Free(d.starts), PyMem_Free(d.lasts), PyMem_Free(d.totals);
    PyMem_Free(d.counted);
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
    const char *format = view.format == NULL ? "B" : view.format;
    if (format[0] == '@' || format[0] == '=') format++;
    if (view.itemsize != 8 || strcmp(format, "d") != 0) {
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }
    const double *v = (const double *)view.buf;
    Py_ssize_t n = view.len / 8, count = 0;
    for (Py_ssize_t i = 0; i < n; i++) count += v[i] != v[i];
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(count);
}
