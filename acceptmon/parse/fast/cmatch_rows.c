/* cmatch_rows.c: a scan's plans, read before any line, and the CSV or JSONL row of a matched line.
 *
 * plans_of takes its own references to every recipe and memo and turns each recipe into C codes
 * checked against the captures of its template, so that what the plans list holds later (a memo
 * callback may change it) does not matter to a running scan.
 */
#include "cmatch.h"

#include <limits.h>

/* ---- output ---------------------------------------------------------------------------------- */

int cm_out_put(Out *o, const void *s, size_t n) {
    if (n == 0) return 0; /* an empty cell (a bare line's timestamp) may come first, before there is a buffer */
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

void cm_plans_free(Plan *plans, int n) {
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
int cm_plans_of(const Program *pg, PyObject *plans, Plan *out) {
    if (!PyList_Check(plans) || PyList_GET_SIZE(plans) != pg->ntmpls) {
        PyErr_SetString(PyExc_ValueError, "one plan per template");
        return -1;
    }
    for (int i = 0; i < pg->ntmpls; i++) {
        PyObject *p = PyList_GET_ITEM(plans, i), *recipe, *deps, *memo;
        Plan *pl = &out[i];
        pl->parser = p == Py_False;
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
    return cm_out_put(o, q, (size_t)(num + sizeof num - q));
}

static int cell(Out *o, const Cell *c, long long line, const Cap *env, const Cap *caps, PyObject *cells) {
    switch (c->kind) {
    case CELL_TEXT:
        return cm_out_put(o, PyBytes_AS_STRING(c->text), (size_t)PyBytes_GET_SIZE(c->text));
    case CELL_LINE:
        return line_number(o, line);
    case CELL_ENV:
        return cm_out_put(o, env[c->i].p, (size_t)env[c->i].n);
    case CELL_JSON_RANK:
        if (env[3].n == 0) return cm_out_put(o, "null", 4);
        return cm_out_put(o, "\"", 1) || cm_out_put(o, env[3].p, (size_t)env[3].n) || cm_out_put(o, "\"", 1);
    case CELL_SLOT:
        return cm_out_put(o, caps[c->i].p, (size_t)caps[c->i].n);
    case CELL_BOOL:
        return caps[c->i].n == 4 ? cm_out_put(o, "true", 4) : cm_out_put(o, "false", 5);
    default:
        break;
    }
    if (cells == NULL || c->i >= PyTuple_GET_SIZE(cells) || !PyBytes_Check(PyTuple_GET_ITEM(cells, c->i))) {
        PyErr_SetString(PyExc_ValueError, "a recipe asks for a derived cell that is not there");
        return -1;
    }
    PyObject *b = PyTuple_GET_ITEM(cells, c->i); /* cells is held until the row is written */
    return cm_out_put(o, PyBytes_AS_STRING(b), (size_t)PyBytes_GET_SIZE(b));
}

int cm_row(Out *o, const Plan *pl, long long line, const Cap *env, const Cap *caps) {
    PyObject *cells = pl->ndep ? derived(pl, caps) : NULL;
    if (pl->ndep && cells == NULL) return -1;
    int rc = 0;
    for (Py_ssize_t i = 0; rc == 0 && i < pl->ncells; i++) rc = cell(o, &pl->cells[i], line, env, caps, cells);
    Py_XDECREF(cells);
    return rc;
}
