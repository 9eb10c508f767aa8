/* cmatch_cols.c: a typed scan's rows as columns (the runs', compare's and doctor's records not made yet).
 *
 * Where every plan's row is the tuple of its varying values (a plan whose shape is None), a scan asked for columns
 * keeps each plan's values field by field instead: no tuple per row, and no object per number. A column of numbers
 * that are all floats is kept as doubles, one of ints that fit in 64 bits as such (the line numbers, the counts). The
 * steps that give numbers keep a column of one type (INT: at most 18 digits; FLOAT: a decimal), but a column would
 * still become a list of objects at a value of another type, those before it made as objects then: each column
 * holds, value for value and type for type, what cm_record's tuples would hold in that place. A converted or derived
 * number (a percentage's fraction, a spec line's accept rate) is kept so too. A text the same as one of the last few
 * distinct ones of its column (the rank, vLLM's engines) is that same object: equal, and pickled once; a column whose
 * texts keep differing (the timestamps) stops looking.
 */
#include "cmatch.h"

enum { COL_EMPTY, COL_F64, COL_I64, COL_OBJ };
#define TEXTS 8 /* distinct texts a column remembers */
#define TEXT_MISSES 64 /* new texts in a row after which a column stops looking among them */

struct Col {
    int mode; /* COL_* */
    Out raw; /* COL_F64, COL_I64: the values, 8 bytes each */
    PyObject *list; /* COL_OBJ: the values */
    PyObject *texts[TEXTS]; /* a text column's last distinct values (the list holds them), or NULL */
    Out bytes[TEXTS]; /* their bytes */
    int next; /* the entry the next new text takes */
    int misses; /* new texts in a row */
};

int cm_cols_fit(int ntmpls) {
    return ntmpls < COLS_RECORD;
}

int cm_cols_record(Cols *c) {
    uint8_t at = COLS_RECORD;
    return cm_out_put(&c->order, &at, 1);
}

int cm_cols_init(Cols *c, int ntmpls) {
    size_t n = (size_t)(ntmpls ? ntmpls : 1);
    c->ntmpls = ntmpls;
    c->cols = PyMem_Calloc(n, sizeof(Col *));
    c->nfields = PyMem_Calloc(n, sizeof(Py_ssize_t));
    c->nrows = PyMem_Calloc(n, sizeof(Py_ssize_t));
    c->order = (Out){NULL, 0, 0};
    if (c->cols == NULL || c->nfields == NULL || c->nrows == NULL) return PyErr_NoMemory(), -1;
    return 0;
}

void cm_cols_free(Cols *c) {
    for (int i = 0; c->cols != NULL && i < c->ntmpls; i++) {
        for (Py_ssize_t j = 0; c->cols[i] != NULL && j < c->nfields[i]; j++) {
            Col *col = &c->cols[i][j];
            Py_CLEAR(col->list);
            PyMem_Free(col->raw.buf);
            for (int k = 0; k < TEXTS; k++) PyMem_Free(col->bytes[k].buf);
        }
        PyMem_Free(c->cols[i]);
    }
    PyMem_Free(c->cols);
    PyMem_Free(c->nfields);
    PyMem_Free(c->nrows);
    PyMem_Free(c->order.buf);
    c->cols = NULL, c->nfields = c->nrows = NULL, c->order = (Out){NULL, 0, 0};
}

/* ---- one value into a column ----------------------------------------------------------------- */

/* The column's machine values made objects: it is a list from here on. */
static int to_objects(Col *c) {
    Py_ssize_t n = (Py_ssize_t)(c->raw.len / 8);
    PyObject *list = PyList_New(n);
    for (Py_ssize_t i = 0; list != NULL && i < n; i++) {
        double d;
        long long q;
        PyObject *v;
        if (c->mode == COL_F64) {
            memcpy(&d, c->raw.buf + 8 * i, 8);
            v = PyFloat_FromDouble(d);
        } else {
            memcpy(&q, c->raw.buf + 8 * i, 8);
            v = PyLong_FromLongLong(q);
        }
        if (v == NULL) Py_CLEAR(list);
        else PyList_SET_ITEM(list, i, v);
    }
    if (list == NULL) return -1;
    c->list = list, c->mode = COL_OBJ, c->raw.len = 0;
    return 0;
}

/* An object into the column (v stolen; NULL: the error of making it). */
static int put_obj(Col *c, PyObject *v) {
    if (v == NULL) return -1;
    if (c->mode == COL_EMPTY && (c->list = PyList_New(0)) != NULL) c->mode = COL_OBJ;
    if (c->mode != COL_OBJ && (c->mode == COL_EMPTY || to_objects(c) < 0)) return Py_DECREF(v), -1;
    int rc = PyList_Append(c->list, v);
    Py_DECREF(v);
    return rc;
}

static int put_double(Col *c, double v) {
    if (c->mode == COL_EMPTY) c->mode = COL_F64;
    return c->mode == COL_F64 ? cm_out_put(&c->raw, &v, 8) : put_obj(c, PyFloat_FromDouble(v));
}

static int put_long(Col *c, long long v) {
    if (c->mode == COL_EMPTY) c->mode = COL_I64;
    return c->mode == COL_I64 ? cm_out_put(&c->raw, &v, 8) : put_obj(c, PyLong_FromLongLong(v));
}

/* A number object as the column keeps it: a float or an int of 64 bits as a machine value where the column is of
 * them (or empty), else the object. */
static int put_number_obj(Col *c, PyObject *v) {
    if (v != NULL && PyFloat_CheckExact(v) && (c->mode == COL_EMPTY || c->mode == COL_F64)) {
        double d = PyFloat_AS_DOUBLE(v);
        Py_DECREF(v);
        return put_double(c, d);
    }
    if (v != NULL && PyLong_CheckExact(v) && (c->mode == COL_EMPTY || c->mode == COL_I64)) {
        int overflow;
        long long q = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (!overflow && !(q == -1 && PyErr_Occurred())) {
            Py_DECREF(v);
            return put_long(c, q);
        }
        if (PyErr_Occurred()) return Py_DECREF(v), -1;
    }
    return put_obj(c, v);
}

/* A captured number (cm_number's value): an int of at most 18 digits and a plain decimal read here, the rest by
 * cm_number. */
static int put_number(Col *c, const Cap *cap) {
    const uint8_t *p = cap->p;
    Py_ssize_t n = cap->n;
    if (n > 0 && n < 64 && !memchr(p, '.', (size_t)n) && !memchr(p, 'e', (size_t)n) && !memchr(p, 'E', (size_t)n)) {
        Py_ssize_t i = p[0] == '-';
        long long q = 0;
        if (n - i >= 1 && n - i <= 18) {
            for (; i < n && p[i] >= '0' && p[i] <= '9'; i++) q = q * 10 + (p[i] - '0');
            if (i == n) return put_long(c, p[0] == '-' ? -q : q);
        }
    } else if (n > 0 && n < 64) {
        int exact;
        double v = cm_read_float(p, n, &exact);
        if (exact) return put_double(c, v);
    }
    return put_number_obj(c, cm_number(cap));
}

/* A text (UTF-8, strict): one of the column's last distinct texts again where its bytes are the same. */
static int put_text(Col *c, const char *s, Py_ssize_t n) {
    int look = c->misses < TEXT_MISSES;
    for (int k = 0; look && k < TEXTS && c->texts[k] != NULL; k++) {
        if ((Py_ssize_t)c->bytes[k].len == n && (n == 0 || memcmp(c->bytes[k].buf, s, (size_t)n) == 0)) {
            c->misses = 0;
            return put_obj(c, Py_NewRef(c->texts[k]));
        }
    }
    PyObject *v = PyUnicode_DecodeUTF8(n ? s : "", n, "strict");
    if (v == NULL || put_obj(c, Py_NewRef(v)) < 0) return Py_XDECREF(v), -1;
    if (look) {
        int k = c->next;
        c->texts[k] = NULL, c->bytes[k].len = 0;
        if (cm_out_put(&c->bytes[k], s, (size_t)n) < 0) return Py_DECREF(v), -1;
        c->texts[k] = v; /* the list holds it */
        c->next = (k + 1) % TEXTS, c->misses++;
    }
    Py_DECREF(v);
    return 0;
}

static int put_field(Col *c, Out *scratch, const Field *f, long long line, const Cap *env, const Cap *caps,
                     PyObject *cells) {
    switch (f->kind) {
    case FIELD_LINE:
        return put_long(c, line);
    case FIELD_NUMBER:
        return put_number(c, &caps[f->i]);
    case FIELD_RANK:
        return env[3].n ? put_text(c, (const char *)env[3].p, env[3].n) : put_obj(c, Py_NewRef(Py_None));
    case FIELD_STR:
        if (cm_pieces(scratch, f, env, caps) < 0) return -1;
        return put_text(c, scratch->buf, (Py_ssize_t)scratch->len);
    default: /* a converted or derived value: a number kept as a machine value, where its column is of them */
        return put_number_obj(c, cm_field(scratch, f, line, env, caps, cells));
    }
}

int cm_cols_add(Cols *c, Out *scratch, int tmpl, const Plan *pl, long long line, const Cap *env, const Cap *caps) {
    if (tmpl < 0 || tmpl >= c->ntmpls || tmpl >= COLS_RECORD || pl->shape != Py_None || pl->fields == NULL)
        return PyErr_SetString(PyExc_ValueError, "columns: no such template, or its plan is not of tuples"), -1;
    if (c->cols[tmpl] == NULL) {
        if ((c->cols[tmpl] = PyMem_Calloc((size_t)(pl->nfields ? pl->nfields : 1), sizeof(Col))) == NULL)
            return PyErr_NoMemory(), -1;
        c->nfields[tmpl] = pl->nfields;
    } else if (c->nfields[tmpl] != pl->nfields) {
        return PyErr_SetString(PyExc_ValueError, "columns: a template's plan changed in a scan"), -1;
    }
    PyObject *cells = pl->ndep ? cm_derived(pl, caps) : NULL; /* the only Python code a row runs, before the rest */
    if (pl->ndep && cells == NULL) return -1;
    int rc = 0;
    for (Py_ssize_t j = 0; rc == 0 && j < pl->nfields; j++)
        rc = put_field(&c->cols[tmpl][j], scratch, &pl->fields[j], line, env, caps, cells);
    Py_XDECREF(cells);
    uint8_t at = (uint8_t)tmpl;
    if (rc < 0 || cm_out_put(&c->order, &at, 1) < 0) return -1;
    c->nrows[tmpl]++;
    return 0;
}

/* ---- the scan's result ------------------------------------------------------------------------ */

static PyObject *column(const Col *c) {
    if (c->mode == COL_OBJ) return Py_NewRef(c->list);
    if (c->mode == COL_EMPTY) return PyList_New(0);
    return Py_BuildValue("(sy#)", c->mode == COL_F64 ? "d" : "q", c->raw.buf ? c->raw.buf : "", (Py_ssize_t)c->raw.len);
}

static PyObject *plan_columns(const Cols *c, int i, const Plan *pl) {
    PyObject *list = PyList_New(c->nfields[i]);
    for (Py_ssize_t j = 0; list != NULL && j < c->nfields[i]; j++) {
        PyObject *v = column(&c->cols[i][j]);
        if (v == NULL) Py_CLEAR(list);
        else PyList_SET_ITEM(list, j, v);
    }
    if (list == NULL) return NULL;
    PyObject *got = Py_BuildValue("(OnN)", pl->owner, c->nrows[i], list);
    return got;
}

PyObject *cm_cols_result(const Cols *c, const Plan *plans, PyObject *records) {
    PyObject *each = PyList_New(c->ntmpls);
    for (int i = 0; each != NULL && i < c->ntmpls; i++) {
        PyObject *v = c->cols[i] == NULL ? Py_NewRef(Py_None) : plan_columns(c, i, &plans[i]);
        if (v == NULL) Py_CLEAR(each);
        else PyList_SET_ITEM(each, i, v);
    }
    if (each == NULL) return NULL;
    return Py_BuildValue("(y#NO)", c->order.buf ? c->order.buf : "", (Py_ssize_t)c->order.len, each, records);
}
