/* The fast lane's compiled matcher: the templates of acceptmon/parse/fast/templates.py, matched in C.
 *
 * A Program holds the envelope (literal prefix, timestamp, rank, literal suffix), the templates as
 * steps (literal, one of several literals, a value of a kind, an unknown key), the anchors the lane
 * counts and the word 'accept'. Program.scan(buf, s, e, base, plans) reads the lines of buf[s:e]
 * (complete lines: buf[e-1] is a newline) and does in one call what the pure-Python lane does with
 * re.finditer, %-formatting and bytes.count: it writes the CSV or JSONL rows of the lines a template
 * matches, counts the matches of each template, the non-overlapping occurrences of each anchor, and
 * the lines that say 'accept'. Each step accepts exactly the text its regular expression in
 * acceptmon/parse/fast/pieces.py accepts and captures the same bytes (native.py
 * refuses templates where a greedy step could differ from the expression's backtracking); the
 * pure-Python lane is the fallback, and tests/test_fastlane.py holds both to the general parser.
 */
#include "cmatch.h"
#include "cmatch_build.h"
#include "cmatch_match.h"
#include "cmatch_prescan.h"

/* ---- output ---------------------------------------------------------------------------------- */

typedef struct {
    char *buf;
    size_t len, cap;
} Out;

static int out_put(Out *o, const void *s, size_t n) {
    if (o->len + n > o->cap) {
        size_t cap = o->cap ? o->cap : 1 << 16;
        while (cap < o->len + n) cap *= 2;
        char *b = PyMem_Realloc(o->buf, cap);
        if (b == NULL) return PyErr_NoMemory(), -1;
        o->buf = b, o->cap = cap;
    }
    memcpy(o->buf + o->len, s, n);
    o->len += n;
    return 0;
}

typedef struct {
    PyObject *recipe; /* tuple of bytes | int, or NULL: the template is only counted */
    PyObject *memo; /* derived cells by dependency text */
    int dep[8];
    int ndep;
} Plan;

static PyObject *derived(const Plan *pl, const Cap *caps) {
    PyObject *key;
    if (pl->ndep == 1) {
        key = PyBytes_FromStringAndSize((const char *)caps[pl->dep[0]].p, caps[pl->dep[0]].n);
    } else {
        key = PyTuple_New(pl->ndep);
        for (int i = 0; key != NULL && i < pl->ndep; i++) {
            PyObject *b = PyBytes_FromStringAndSize((const char *)caps[pl->dep[i]].p, caps[pl->dep[i]].n);
            if (b == NULL) Py_CLEAR(key);
            else PyTuple_SET_ITEM(key, i, b);
        }
    }
    if (key == NULL) return NULL;
    PyObject *cells = PyObject_GetItem(pl->memo, key);
    Py_DECREF(key);
    if (cells != NULL && !PyTuple_Check(cells)) {
        Py_DECREF(cells);
        PyErr_SetString(PyExc_TypeError, "derived cells must be a tuple");
        return NULL;
    }
    return cells;
}

static int cell(Out *o, PyObject *item, long long line, const Cap *env, const Cap *caps, PyObject *cells) {
    if (PyBytes_Check(item)) return out_put(o, PyBytes_AS_STRING(item), (size_t)PyBytes_GET_SIZE(item));
    long code = PyLong_AsLong(item);
    if (code == -1 && PyErr_Occurred()) return -1;
    if (code == 0) {
        char num[24], *q = num + sizeof num;
        unsigned long long v = line < 0 ? 0ULL - (unsigned long long)line : (unsigned long long)line;
        do *--q = (char)('0' + v % 10); while (v /= 10);
        if (line < 0) *--q = '-';
        return out_put(o, q, (size_t)(num + sizeof num - q));
    }
    if (code >= 1 && code <= 4) return out_put(o, env[code - 1].p, (size_t)env[code - 1].n);
    if (code == JSON_RANK && env[3].n == 0) return out_put(o, "null", 4);
    if (code == JSON_RANK) return out_put(o, "\"", 1) || out_put(o, env[3].p, (size_t)env[3].n) || out_put(o, "\"", 1);
    if (code >= BOOL_SLOT) return caps[code - BOOL_SLOT].n == 4 ? out_put(o, "true", 4) : out_put(o, "false", 5);
    if (code >= SLOT) return out_put(o, caps[code - SLOT].p, (size_t)caps[code - SLOT].n);
    Py_ssize_t k = -1 - code;
    if (cells == NULL || k >= PyTuple_GET_SIZE(cells) || !PyBytes_Check(PyTuple_GET_ITEM(cells, k))) {
        PyErr_SetString(PyExc_ValueError, "a recipe asks for a derived cell that is not there");
        return -1;
    }
    PyObject *b = PyTuple_GET_ITEM(cells, k);
    return out_put(o, PyBytes_AS_STRING(b), (size_t)PyBytes_GET_SIZE(b));
}

static int row(Out *o, const Plan *pl, long long line, const Cap *env, const Cap *caps) {
    PyObject *cells = pl->ndep ? derived(pl, caps) : NULL;
    if (pl->ndep && cells == NULL) return -1;
    int rc = 0;
    for (Py_ssize_t i = 0; rc == 0 && i < PyTuple_GET_SIZE(pl->recipe); i++)
        rc = cell(o, PyTuple_GET_ITEM(pl->recipe, i), line, env, caps, cells);
    Py_XDECREF(cells);
    return rc;
}

/* True if a step of the template captures group ``slot`` (a recipe may print only those). */
static int captured(const Tmpl *t, long slot) {
    for (int i = 0; i < t->nsteps; i++)
        if (t->steps[i].slot == slot && slot >= 0) return 1;
    return 0;
}

/* plans[i]: None (counted only), False (counted; the general parser writes its rows), or
 * (recipe tuple, dependency slots tuple, memo mapping). Returns the number of template slots
 * checked, -1 on error. */
static int plans_of(const Program *pg, PyObject *plans, Plan *out) {
    if (!PyList_Check(plans) || PyList_GET_SIZE(plans) != pg->ntmpls) {
        PyErr_SetString(PyExc_ValueError, "one plan per template");
        return -1;
    }
    for (int i = 0; i < pg->ntmpls; i++) {
        PyObject *p = PyList_GET_ITEM(plans, i), *deps;
        Plan *pl = &out[i];
        memset(pl, 0, sizeof *pl);
        if (!PyTuple_Check(p)) continue;
        if (!PyArg_ParseTuple(p, "O!O!O", &PyTuple_Type, &pl->recipe, &PyTuple_Type, &deps, &pl->memo)) return -1;
        pl->ndep = (int)PyTuple_GET_SIZE(deps);
        if (pl->ndep > 8) return PyErr_SetString(PyExc_ValueError, "too many dependencies"), -1;
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(pl->recipe); j++) {
            PyObject *item = PyTuple_GET_ITEM(pl->recipe, j);
            long code = PyBytes_Check(item) ? 0 : PyLong_AsLong(item);
            long slot = code >= BOOL_SLOT ? code - BOOL_SLOT : code - SLOT;
            if ((code == -1 && PyErr_Occurred()) || (code >= SLOT && !captured(&pg->tmpls[i], slot)) ||
                (code > JSON_RANK && code < SLOT))
                return PyErr_SetString(PyExc_ValueError, "a recipe names a group the template does not capture"), -1;
        }
        for (int j = 0; j < pl->ndep; j++) {
            pl->dep[j] = (int)PyLong_AsLong(PyTuple_GET_ITEM(deps, j));
            if (!captured(&pg->tmpls[i], pl->dep[j]))
                return PyErr_SetString(PyExc_ValueError, "a dependency slot is out of range"), -1;
        }
    }
    return 0;
}

/* ---- counting -------------------------------------------------------------------------------- */

/* Non-overlapping occurrences of each needle in [p, end) (as bytes.count), and the lines holding
 * the last needle ('accept'); one pass over every stride-th pair of bytes, a needle checked only
 * where one of its probes' pairs is (an occurrence is met once, in order of its start). */
static void count_needles(const Program *pg, const uint8_t *p, const uint8_t *end, Py_ssize_t *counts,
                          Py_ssize_t *accept_lines) {
    const uint8_t *next[64];
    int n = pg->nneedles, last = n - 1;
    for (int i = 0; i < n; i++) next[i] = p, counts[i] = 0;
    const uint8_t *line_end = p;
    *accept_lines = 0;
    for (const uint8_t *q = p; q + 1 < end; q += pg->stride) {
        uint16_t h = (uint16_t)(q[0] | q[1] << 8);
        if (!(pg->bigram[h >> 3] & (1 << (h & 7)))) continue;
        for (int k = pg->by_first[q[0]]; k < pg->by_first[q[0] + 1]; k++) {
            const Probe *pr = &pg->probes[k];
            const uint8_t *s0 = q - pr->off;
            const Text *t = &pg->needles[pr->needle];
            if (pr->pair != h || s0 < p || s0 < next[pr->needle] || end - s0 < t->n || memcmp(s0, t->s, (size_t)t->n))
                continue;
            counts[pr->needle]++;
            next[pr->needle] = s0 + t->n;
            if (pr->needle == last && s0 >= line_end) {
                const uint8_t *nl = memchr(s0, '\n', (size_t)(end - s0));
                line_end = nl ? nl + 1 : end;
                (*accept_lines)++;
            }
        }
    }
}

/* ---- scan ------------------------------------------------------------------------------------ */

/* The lines of buf[s:e]: hits per template, rows into o; -1 (a Python error set) if a row fails. */
static int scan_lines(Program *pg, const uint8_t *buf, Py_ssize_t s, Py_ssize_t e, long long base, Plan *plans,
                            Py_ssize_t *hits, Py_ssize_t *nrows, Py_ssize_t *nlines, Out *o) {
    Cap env[4], caps[256];
    const uint8_t *p = buf + s, *stop = buf + e;
    long long line = base;
    while (p < stop) {
        const uint8_t *end = memchr(p, '\n', (size_t)(stop - p));
        if (end == NULL) break;
        if ((++line & 255) == 0) { /* let another thread (the pool's result reader) take the GIL */
            Py_BEGIN_ALLOW_THREADS
            Py_END_ALLOW_THREADS
        }
        const uint8_t *m = envelope(pg, p, end, env);
        for (int i = 0; m != NULL && i < pg->ntmpls; i++) {
            if (!match(&pg->tmpls[i], m, end, caps)) continue;
            hits[i]++;
            if (plans[i].recipe != NULL) {
                if (row(o, &plans[i], line, env, caps) < 0) return -1;
                (*nrows)++;
            }
            break;
        }
        p = end + 1;
    }
    *nlines = line - base;
    return 0;
}

static PyObject *Program_scan(Program *pg, PyObject *args) {
    Py_buffer view;
    Py_ssize_t s, e;
    long long base;
    PyObject *plans_obj;
    if (!PyArg_ParseTuple(args, "y*nnLO", &view, &s, &e, &base, &plans_obj)) return NULL;
    PyObject *result = NULL, *hits_list = NULL, *counts_list = NULL;
    Plan *plans = PyMem_Calloc((size_t)(pg->ntmpls ? pg->ntmpls : 1), sizeof(Plan));
    Py_ssize_t *hits = PyMem_Calloc((size_t)(pg->ntmpls ? pg->ntmpls : 1), sizeof(Py_ssize_t));
    Py_ssize_t counts[64], accepts = 0, nrows = 0, nlines = 0;
    Out o = {NULL, 0, 0};
    if (plans == NULL || hits == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (s < 0 || e < s || e > view.len || (e > s && ((const uint8_t *)view.buf)[e - 1] != '\n') || pg->maxslots > 256) {
        PyErr_SetString(PyExc_ValueError, "scan: bad range or program");
        goto done;
    }
    if (plans_of(pg, plans_obj, plans) < 0) goto done;
    Py_BEGIN_ALLOW_THREADS /* bytes only: the buffer is held by the view */
    count_needles(pg, (const uint8_t *)view.buf + s, (const uint8_t *)view.buf + e, counts, &accepts);
    Py_END_ALLOW_THREADS
    int ncounted = pg->nneedles - 1 - pg->nlaunch;
    for (int i = ncounted; i < ncounted + pg->nlaunch; i++) {
        if (counts[i]) {
            result = Py_NewRef(Py_None);
            goto done;
        }
    }
    if (scan_lines(pg, view.buf, s, e, base, plans, hits, &nrows, &nlines, &o) < 0) goto done;
    hits_list = PyList_New(pg->ntmpls);
    counts_list = PyList_New(ncounted);
    if (hits_list == NULL || counts_list == NULL) goto done;
    for (int i = 0; i < pg->ntmpls; i++) PyList_SET_ITEM(hits_list, i, PyLong_FromSsize_t(hits[i]));
    for (int i = 0; i < ncounted; i++) PyList_SET_ITEM(counts_list, i, PyLong_FromSsize_t(counts[i]));
    result = Py_BuildValue("nNOOnn", nrows, PyBytes_FromStringAndSize(o.buf ? o.buf : "", (Py_ssize_t)o.len),
                           hits_list, counts_list, accepts, nlines);
done:
    Py_XDECREF(hits_list);
    Py_XDECREF(counts_list);
    PyMem_Free(o.buf);
    PyMem_Free(plans);
    PyMem_Free(hits);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef Program_methods[] = {
    {"scan", (PyCFunction)Program_scan, METH_VARARGS,
     "scan(buf, s, e, base, plans) -> (rows, row bytes, hits per template, count per counted anchor, accept lines,\n"
     "lines), or None if a launch anchor is in the lines"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ProgramType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "acceptmon.parse.fast.cmatch.Program",
    .tp_basicsize = sizeof(Program),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The fast lane's templates, compiled: see acceptmon/parse/fast/native.py.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Program_init,
    .tp_dealloc = (destructor)Program_dealloc,
    .tp_methods = Program_methods,
};

static struct PyModuleDef scan_module = {
    PyModuleDef_HEAD_INIT, "cmatch", "The fast lane's compiled matcher (see acceptmon/parse/fast/native.py).", -1,
    module_functions,
};

PyMODINIT_FUNC PyInit_cmatch(void) {
    if (PyType_Ready(&ProgramType) < 0) return NULL;
    PyObject *m = PyModule_Create(&scan_module);
    if (m == NULL) return NULL;
    Py_INCREF(&ProgramType);
    if (PyModule_AddObject(m, "Program", (PyObject *)&ProgramType) < 0 ||
        PyModule_AddIntConstant(m, "VERSION", CMATCH_VERSION) < 0) {
        Py_DECREF(&ProgramType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
