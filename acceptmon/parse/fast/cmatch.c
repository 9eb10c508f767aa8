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
 *
 * A scan holds its own references to everything it reads (the buffer, each plan's recipe and memo),
 * converts every recipe to C codes checked against the template before it reads a line, and counts
 * itself in the program, so that a memo callback that changes the plans, scans again or calls
 * __init__ again cannot pull anything from under it.
 */
#include "cmatch.h"

#include <limits.h>

/* ---- output ---------------------------------------------------------------------------------- */

typedef struct {
    char *buf;
    size_t len, cap;
} Out;

static int out_put(Out *o, const void *s, size_t n) {
    if (n > (size_t)PY_SSIZE_T_MAX - o->len) return PyErr_NoMemory(), -1;
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

/* ---- plans ----------------------------------------------------------------------------------- */

enum { CELL_TEXT, CELL_LINE, CELL_ENV, CELL_JSON_RANK, CELL_SLOT, CELL_BOOL, CELL_DERIVED };

typedef struct {
    int kind; /* CELL_* */
    int i; /* CELL_ENV: env index; CELL_SLOT, CELL_BOOL: group; CELL_DERIVED: index in the derived cells */
    PyObject *text; /* CELL_TEXT: a bytes object of the recipe (the plan holds the recipe) */
} Cell;

typedef struct {
    PyObject *recipe; /* a strong reference to the tuple of bytes | int, or NULL: the template is only counted */
    PyObject *memo; /* a strong reference to the derived cells by dependency text */
    Cell *cells; /* the recipe in C, checked against the template */
    Py_ssize_t ncells;
    int dep[MAX_DEPS];
    int ndep;
} Plan;

static void plans_free(Plan *plans, int n) {
    for (int i = 0; plans != NULL && i < n; i++) {
        Py_CLEAR(plans[i].recipe);
        Py_CLEAR(plans[i].memo);
        PyMem_Free(plans[i].cells);
    }
    PyMem_Free(plans);
}

/* True if a step of the template captures group ``slot`` (a recipe may print only those). */
static int captured(const Tmpl *t, long slot) {
    for (int i = 0; i < t->nsteps; i++)
        if (slot >= 0 && t->steps[i].slot == slot && cm_captures(t->steps[i].code)) return 1;
    return 0;
}

static int not_captured(void) {
    PyErr_SetString(PyExc_ValueError, "a recipe names a group the template does not capture");
    return -1;
}

/* One recipe item as a cell: bytes as they are; 0 the line; 1-4 date, time, fraction, rank; JSON_RANK;
 * SLOT + i and BOOL_SLOT + i a group the template captures; -1 - k derived cell k. */
static int cell_of(const Tmpl *t, PyObject *item, Cell *c) {
    c->text = NULL;
    if (PyBytes_Check(item)) return c->kind = CELL_TEXT, c->text = item, 0;
    if (!PyLong_Check(item)) return PyErr_SetString(PyExc_TypeError, "a recipe holds bytes and ints"), -1;
    long code = PyLong_AsLong(item);
    if (code == -1 && PyErr_Occurred()) return -1;
    if (code < 0 && code >= -(long)INT_MAX) return c->kind = CELL_DERIVED, c->i = (int)(-1 - code), 0;
    if (code == 0) return c->kind = CELL_LINE, 0;
    if (code >= 1 && code <= 4) return c->kind = CELL_ENV, c->i = (int)code - 1, 0;
    if (code == JSON_RANK) return c->kind = CELL_JSON_RANK, 0;
    if (code >= SLOT && code < BOOL_SLOT && captured(t, code - SLOT)) return c->kind = CELL_SLOT, c->i = (int)(code - SLOT), 0;
    if (code >= BOOL_SLOT && code < BOOL_SLOT + MAX_SLOTS && captured(t, code - BOOL_SLOT))
        return c->kind = CELL_BOOL, c->i = (int)(code - BOOL_SLOT), 0;
    return not_captured();
}

/* plans[i]: None (counted only), False (counted; the general parser writes its rows), or
 * (recipe tuple, dependency slots tuple, memo mapping). Every plan is read here, before any line, into
 * out[i] with its own references: what the list holds later does not matter to this scan. */
static int plans_of(const Program *pg, PyObject *plans, Plan *out) {
    if (!PyList_Check(plans) || PyList_GET_SIZE(plans) != pg->ntmpls) {
        PyErr_SetString(PyExc_ValueError, "one plan per template");
        return -1;
    }
    for (int i = 0; i < pg->ntmpls; i++) {
        PyObject *p = PyList_GET_ITEM(plans, i), *recipe, *deps, *memo;
        Plan *pl = &out[i];
        if (!PyTuple_Check(p)) continue;
        if (!PyArg_ParseTuple(p, "O!O!O", &PyTuple_Type, &recipe, &PyTuple_Type, &deps, &memo)) return -1;
        pl->recipe = Py_NewRef(recipe), pl->memo = Py_NewRef(memo);
        if (PyTuple_GET_SIZE(deps) > MAX_DEPS) return PyErr_SetString(PyExc_ValueError, "too many dependencies"), -1;
        pl->ncells = PyTuple_GET_SIZE(recipe);
        pl->cells = PyMem_Calloc((size_t)(pl->ncells ? pl->ncells : 1), sizeof(Cell));
        if (pl->cells == NULL) return PyErr_NoMemory(), -1;
        for (Py_ssize_t j = 0; j < pl->ncells; j++)
            if (cell_of(&pg->tmpls[i], PyTuple_GET_ITEM(recipe, j), &pl->cells[j]) < 0) return -1;
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(deps); j++) {
            PyObject *d = PyTuple_GET_ITEM(deps, j);
            long slot = PyLong_Check(d) ? PyLong_AsLong(d) : -1;
            if (slot == -1 && PyErr_Occurred()) return -1;
            if (!captured(&pg->tmpls[i], slot))
                return PyErr_SetString(PyExc_ValueError, "a dependency slot is out of range"), -1;
            pl->dep[pl->ndep++] = (int)slot;
        }
    }
    return 0;
}

/* ---- rows ------------------------------------------------------------------------------------ */

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
    PyObject *cells = PyObject_GetItem(pl->memo, key); /* may run any Python code: see the top of this file */
    Py_DECREF(key);
    if (cells != NULL && !PyTuple_Check(cells)) {
        Py_DECREF(cells);
        PyErr_SetString(PyExc_TypeError, "derived cells must be a tuple");
        return NULL;
    }
    return cells;
}

static int line_number(Out *o, long long line) {
    char num[24], *q = num + sizeof num;
    unsigned long long v = (unsigned long long)line; /* scan refuses a negative base */
    do *--q = (char)('0' + v % 10); while (v /= 10);
    return out_put(o, q, (size_t)(num + sizeof num - q));
}

static int cell(Out *o, const Cell *c, long long line, const Cap *env, const Cap *caps, PyObject *cells) {
    switch (c->kind) {
    case CELL_TEXT:
        return out_put(o, PyBytes_AS_STRING(c->text), (size_t)PyBytes_GET_SIZE(c->text));
    case CELL_LINE:
        return line_number(o, line);
    case CELL_ENV:
        return out_put(o, env[c->i].p, (size_t)env[c->i].n);
    case CELL_JSON_RANK:
        if (env[3].n == 0) return out_put(o, "null", 4);
        return out_put(o, "\"", 1) || out_put(o, env[3].p, (size_t)env[3].n) || out_put(o, "\"", 1);
    case CELL_SLOT:
        return out_put(o, caps[c->i].p, (size_t)caps[c->i].n);
    case CELL_BOOL:
        return caps[c->i].n == 4 ? out_put(o, "true", 4) : out_put(o, "false", 5);
    default:
        break;
    }
    if (cells == NULL || c->i >= PyTuple_GET_SIZE(cells) || !PyBytes_Check(PyTuple_GET_ITEM(cells, c->i))) {
        PyErr_SetString(PyExc_ValueError, "a recipe asks for a derived cell that is not there");
        return -1;
    }
    PyObject *b = PyTuple_GET_ITEM(cells, c->i); /* cells is held until the row is written */
    return out_put(o, PyBytes_AS_STRING(b), (size_t)PyBytes_GET_SIZE(b));
}

static int row(Out *o, const Plan *pl, long long line, const Cap *env, const Cap *caps) {
    PyObject *cells = pl->ndep ? derived(pl, caps) : NULL;
    if (pl->ndep && cells == NULL) return -1;
    int rc = 0;
    for (Py_ssize_t i = 0; rc == 0 && i < pl->ncells; i++) rc = cell(o, &pl->cells[i], line, env, caps, cells);
    Py_XDECREF(cells);
    return rc;
}

/* ---- counting -------------------------------------------------------------------------------- */

/* Non-overlapping occurrences of each needle in p[0:len] (as bytes.count), and the lines holding
 * the last needle ('accept'); one pass over every stride-th pair of bytes, a needle checked only
 * where one of its probes' pairs is (an occurrence is met once, in order of its start). Offsets
 * throughout: no pointer is formed outside the buffer. */
static void count_needles(const Program *pg, const uint8_t *p, Py_ssize_t len, Py_ssize_t *counts,
                          Py_ssize_t *accept_lines) {
    Py_ssize_t next[MAX_NEEDLES], line_end = 0;
    int n = pg->nneedles, last = n - 1;
    for (int i = 0; i < n; i++) next[i] = 0, counts[i] = 0;
    *accept_lines = 0;
    for (Py_ssize_t at = 0; at + 1 < len; at += pg->stride) {
        uint16_t h = (uint16_t)(p[at] | p[at + 1] << 8);
        if (!(pg->bigram[h >> 3] & (1 << (h & 7)))) continue;
        for (int k = pg->by_first[p[at]]; k < pg->by_first[p[at] + 1]; k++) {
            const Probe *pr = &pg->probes[k];
            const Text *t = &pg->needles[pr->needle];
            Py_ssize_t s0 = at - pr->off; /* next[] >= 0, so s0 >= 0 below */
            if (pr->pair != h || s0 < next[pr->needle] || len - s0 < t->n || memcmp(p + s0, t->s, (size_t)t->n))
                continue;
            counts[pr->needle]++;
            next[pr->needle] = s0 + t->n;
            if (pr->needle == last && s0 >= line_end) {
                const uint8_t *nl = memchr(p + s0, '\n', (size_t)(len - s0));
                line_end = nl ? nl - p + 1 : len;
                (*accept_lines)++;
            }
        }
    }
}

/* ---- scan ------------------------------------------------------------------------------------ */

/* The lines of buf[s:e]: hits per template, rows into o; -1 (a Python error set) if a row fails. */
static int scan_lines(const Program *pg, const uint8_t *buf, Py_ssize_t s, Py_ssize_t e, long long base,
                      const Plan *plans, Py_ssize_t *hits, Py_ssize_t *nrows, Py_ssize_t *nlines, Out *o) {
    Cap env[4], caps[MAX_SLOTS];
    const uint8_t *p = buf + s, *stop = buf + e;
    long long line = base; /* scan checked that base + the lines of buf[s:e] does not overflow */
    while (p < stop) {
        const uint8_t *end = memchr(p, '\n', (size_t)(stop - p));
        if (end == NULL) break;
        if ((++line & 255) == 0) { /* let another thread (the pool's result reader) take the GIL */
            Py_BEGIN_ALLOW_THREADS
            Py_END_ALLOW_THREADS
        }
        const uint8_t *m = cm_envelope(pg, p, end, env);
        for (int i = 0; m != NULL && i < pg->ntmpls; i++) {
            if (!cm_match(&pg->tmpls[i], p, m, end, caps)) continue;
            hits[i]++;
            if (plans[i].recipe != NULL) {
                if (row(o, &plans[i], line, env, caps) < 0) return -1;
                (*nrows)++;
            }
            break;
        }
        p = end + 1;
    }
    *nlines = (Py_ssize_t)(line - base);
    return 0;
}

static PyObject *list_of(const Py_ssize_t *v, int n) {
    PyObject *list = PyList_New(n);
    for (int i = 0; list != NULL && i < n; i++) {
        PyObject *item = PyLong_FromSsize_t(v[i]);
        if (item == NULL) Py_CLEAR(list);
        else PyList_SET_ITEM(list, i, item);
    }
    return list;
}

/* The scan's arguments checked: a range of whole lines in the buffer, and line numbers that fit. */
static int range_ok(const Py_buffer *view, Py_ssize_t s, Py_ssize_t e, long long base) {
    if (s < 0 || e < s || e > view->len || (e > s && ((const uint8_t *)view->buf)[e - 1] != '\n')) {
        PyErr_SetString(PyExc_ValueError, "scan: bad range (0 <= s <= e <= len(buf), buf[e - 1] a newline)");
        return 0;
    }
    if (base < 0) {
        PyErr_SetString(PyExc_ValueError, "scan: a negative base line");
        return 0;
    }
    if (base > LLONG_MAX - (long long)(e - s)) {
        PyErr_SetString(PyExc_OverflowError, "scan: base plus the lines of the range overflows a line number");
        return 0;
    }
    return 1;
}

static PyObject *scan_result(Py_ssize_t nrows, const Out *o, const Py_ssize_t *hits, int ntmpls,
                             const Py_ssize_t *counts, int ncounted, Py_ssize_t accepts, Py_ssize_t nlines) {
    PyObject *rows = PyBytes_FromStringAndSize(o->buf ? o->buf : "", (Py_ssize_t)o->len);
    PyObject *hits_list = list_of(hits, ntmpls), *counts_list = list_of(counts, ncounted), *result = NULL;
    if (rows != NULL && hits_list != NULL && counts_list != NULL)
        result = Py_BuildValue("nOOOnn", nrows, rows, hits_list, counts_list, accepts, nlines);
    Py_XDECREF(rows);
    Py_XDECREF(hits_list);
    Py_XDECREF(counts_list);
    return result;
}

static PyObject *Program_scan(Program *pg, PyObject *args) {
    Py_buffer view;
    Py_ssize_t s, e;
    long long base;
    PyObject *plans_obj;
    if (!PyArg_ParseTuple(args, "y*nnLO", &view, &s, &e, &base, &plans_obj)) return NULL;
    if (!pg->ready) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_RuntimeError, "scan: the program is not built (its __init__ did not run, or failed)");
        return NULL;
    }
    if (!range_ok(&view, s, e, base)) {
        PyBuffer_Release(&view);
        return NULL;
    }
    pg->scans++; /* from here on __init__ refuses: the counts and tables below stay those of this program */
    int ntmpls = pg->ntmpls, ncounted = pg->nneedles - 1 - pg->nlaunch;
    PyObject *result = NULL;
    Plan *plans = PyMem_Calloc((size_t)(ntmpls ? ntmpls : 1), sizeof(Plan));
    Py_ssize_t *hits = PyMem_Calloc((size_t)(ntmpls ? ntmpls : 1), sizeof(Py_ssize_t));
    Py_ssize_t counts[MAX_NEEDLES], accepts = 0, nrows = 0, nlines = 0;
    Out o = {NULL, 0, 0};
    if (plans == NULL || hits == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (plans_of(pg, plans_obj, plans) < 0) goto done;
    Py_BEGIN_ALLOW_THREADS /* bytes only: the buffer is held by the view */
    count_needles(pg, (const uint8_t *)view.buf + s, e - s, counts, &accepts);
    Py_END_ALLOW_THREADS
    for (int i = ncounted; i < ncounted + pg->nlaunch; i++) {
        if (counts[i]) {
            result = Py_NewRef(Py_None);
            goto done;
        }
    }
    if (scan_lines(pg, view.buf, s, e, base, plans, hits, &nrows, &nlines, &o) < 0) goto done;
    result = scan_result(nrows, &o, hits, ntmpls, counts, ncounted, accepts, nlines);
done:
    PyMem_Free(o.buf);
    plans_free(plans, ntmpls);
    PyMem_Free(hits);
    PyBuffer_Release(&view);
    pg->scans--;
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
    .tp_init = (initproc)cm_program_init,
    .tp_dealloc = (destructor)cm_program_dealloc,
    .tp_methods = Program_methods,
};

static PyMethodDef module_functions[] = {
    {"find_any", cm_find_any, METH_VARARGS, "find_any(buf, start, end, words) -> first offset of any word, or -1"},
    {"newlines", cm_newlines, METH_VARARGS, "newlines(buf, start, end) -> the number of newlines in buf[start:end]"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef scan_module = {
    PyModuleDef_HEAD_INIT, "cmatch", "The fast lane's compiled matcher (see acceptmon/parse/fast/native.py).", -1,
    module_functions, NULL, NULL, NULL, NULL,
};

/* The numbers of the protocol, for native.py to read (it writes none of them itself). */
static const struct {
    const char *name;
    long value;
} CONSTANTS[] = {
    {"VERSION", CMATCH_VERSION}, {"SLOT", SLOT}, {"BOOL_SLOT", BOOL_SLOT}, {"JSON_RANK", JSON_RANK},
    {"MAX_SLOTS", MAX_SLOTS}, {"MAX_NEEDLES", MAX_NEEDLES}, {"MAX_DEPS", MAX_DEPS},
    {"OP_LIT", OP_LIT}, {"OP_ALT", OP_ALT}, {"OP_INT", OP_INT}, {"OP_FLOAT", OP_FLOAT}, {"OP_BOOL", OP_BOOL},
    {"OP_STR", OP_STR}, {"OP_LINT", OP_LINT}, {"OP_LFLOAT", OP_LFLOAT}, {"OP_LSTR", OP_LSTR},
    {"OP_EXTRA", OP_EXTRA},
};

PyMODINIT_FUNC PyInit_cmatch(void) {
    if (PyType_Ready(&ProgramType) < 0) return NULL;
    PyObject *m = PyModule_Create(&scan_module);
    if (m == NULL) return NULL;
    int rc = PyModule_AddObjectRef(m, "Program", (PyObject *)&ProgramType);
    for (size_t i = 0; rc == 0 && i < sizeof CONSTANTS / sizeof CONSTANTS[0]; i++)
        rc = PyModule_AddIntConstant(m, CONSTANTS[i].name, CONSTANTS[i].value);
    if (rc < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
