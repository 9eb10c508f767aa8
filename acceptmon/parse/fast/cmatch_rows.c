/* cmatch_rows.c: a scan's plans, read before any line, and the CSV or JSONL row (or typed record) of a matched line.
 *
 * plans_of takes its own references to every recipe and memo (and a typed plan's shape, names and owner) and turns
 * each recipe into C codes checked against the captures of its template, so that what the plans list holds later
 * (a memo callback may change it) does not matter to a running scan.
 *
 * A typed plan's row is a record's values, built here as json.loads would give them of the JSON cells the same
 * steps would write: a copy of the plan's shape (its file name one string for all rows), each varying field set
 * from its steps; or, a plan whose shape is None, the varying fields' values alone, a tuple in the order of names
 * (the caller knows the shape: a consumer that reads columns takes them so, without a dict per row). Only the steps whose JSON text C reads back exactly are taken (a number of the INT or FLOAT step,
 * a string of printable pieces that need no escape); any other is refused before a line is read.
 */
#include "cmatch.h"

#include <limits.h>

/* ---- output ---------------------------------------------------------------------------------- */

int cm_out_grow(Out *o, const void *s, size_t n) {
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
        Py_CLEAR(plans[i].shape);
        Py_CLEAR(plans[i].names);
        Py_CLEAR(plans[i].owner);
        Py_CLEAR(plans[i].derive.spec);
        PyMem_Free(plans[i].cells);
        for (Py_ssize_t j = 0; plans[i].fields != NULL && j < plans[i].nfields; j++) PyMem_Free(plans[i].fields[j].cells);
        PyMem_Free(plans[i].fields);
    }
    PyMem_Free(plans);
}

/* The code of the step of the template that captures group ``slot``, or -1 (a recipe may print only those). */
int cm_capturer(const Tmpl *t, long slot) {
    for (int i = 0; i < t->nsteps; i++)
        if (slot >= 0 && t->steps[i].slot == slot && cm_captures(t->steps[i].code)) return t->steps[i].code;
    return -1;
}

/* The memo: a mapping or a callable; or (compiled derive, callable), where the callable computes the lines the
 * compiled derive declines. */
static int memo_of(const Tmpl *t, PyObject *memo, Plan *pl) {
    if (PyTuple_Check(memo)) {
        PyObject *spec, *fallback;
        if (!PyArg_ParseTuple(memo, "O!O", &PyTuple_Type, &spec, &fallback)) return -1;
        if (cm_derive_of(t, spec, &pl->derive) < 0) return -1;
        memo = fallback;
    }
    pl->memo = Py_NewRef(memo);
    pl->dict_memo = 0;
    if (PyDict_Check(memo) && !PyCallable_Check(memo)) { /* a subclass's [] may be its own: then Python asks it */
        PyObject *own = PyObject_GetAttrString((PyObject *)Py_TYPE(memo), "__getitem__");
        PyObject *dicts = own ? PyObject_GetAttrString((PyObject *)&PyDict_Type, "__getitem__") : NULL;
        pl->dict_memo = own != NULL && own == dicts;
        Py_XDECREF(own);
        Py_XDECREF(dicts);
        if (PyErr_Occurred()) return -1;
    }
    return 0;
}

/* True if a step of the template captures group ``slot``. */
static int captured(const Tmpl *t, long slot) {
    return cm_capturer(t, slot) >= 0;
}

static int not_captured(void) {
    PyErr_SetString(PyExc_ValueError, "a recipe names a group the template does not capture");
    return -1;
}

/* Whether step i is an unknown key: OP_EXTRA, or OP_LKEY (its value ended by an OP_VEND). */
static int unknown_key(const Tmpl *t, int i) {
    return t->steps[i].code == OP_EXTRA || t->steps[i].code == OP_LKEY;
}

/* JSON_EXTRA: the object of the template's unknown keys, each of which it captures with its value (a template has one
 * at least). */
static int extra_of(const Tmpl *t, Cell *c) {
    int n = 0;
    for (int i = 0; i < t->nsteps; i++) {
        if (!unknown_key(t, i)) continue;
        if (t->steps[i].slot < 0) return not_captured();
        n++;
    }
    if (n == 0) return not_captured();
    return c->kind = CELL_EXTRA, c->tmpl = t, 0;
}

/* One recipe item as a cell: bytes as they are; 0 the line; 1-4 date, time, fraction, rank; JSON_RANK; JSON_EXTRA;
 * SLOT + i and BOOL_SLOT + i a group the template captures; CONV_SLOT + MAX_SLOTS * c + i that group converted
 * (CONV_* c: a percentage of the LFLOAT step, a list of the LIST step); -1 - k derived cell k. */
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
    if (code == JSON_EXTRA) return extra_of(t, c);
    if (code >= SLOT && code < BOOL_SLOT && captured(t, code - SLOT)) return c->kind = CELL_SLOT, c->i = (int)(code - SLOT), 0;
    if (code >= BOOL_SLOT && code < BOOL_SLOT + MAX_SLOTS && captured(t, code - BOOL_SLOT))
        return c->kind = CELL_BOOL, c->i = (int)(code - BOOL_SLOT), 0;
    if (code >= CONV_SLOT && code < CONV_SLOT + NCONV * MAX_SLOTS) {
        int conv = (int)((code - CONV_SLOT) / MAX_SLOTS), slot = (int)((code - CONV_SLOT) % MAX_SLOTS);
        if (cm_capturer(t, slot) != (conv == CONV_PERCENT ? OP_LFLOAT : OP_LIST)) return not_captured();
        return c->kind = CELL_CONV, c->i = slot, c->conv = conv, 0;
    }
    return not_captured();
}

/* Whether the step that captures a dependency's group reads the text its DEP_* kind converts. */
static int dep_fits(int code, int kind) {
    if (kind == DEP_NUMBER) return code == OP_INT || code == OP_FLOAT;
    if (kind == DEP_PERCENT) return code == OP_LFLOAT;
    if (kind == DEP_FLOATS) return code == OP_LIST;
    return kind == DEP_TEXT;
}

/* The dependencies of a plan (slot + MAX_SLOTS * DEP_*), each a group the template captures. */
static int deps_of(const Tmpl *t, PyObject *deps, Plan *pl) {
    if (PyTuple_GET_SIZE(deps) > MAX_DEPS) return PyErr_SetString(PyExc_ValueError, "too many dependencies"), -1;
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(deps); j++) {
        PyObject *d = PyTuple_GET_ITEM(deps, j);
        long code = PyLong_Check(d) ? PyLong_AsLong(d) : -1;
        if (code == -1 && PyErr_Occurred()) return -1;
        long slot = code % MAX_SLOTS, kind = code / MAX_SLOTS;
        int step = code < 0 ? -1 : cm_capturer(t, slot);
        if (step < 0 || kind >= NDEP || !dep_fits(step, (int)kind))
            return PyErr_SetString(PyExc_ValueError, "a dependency slot is out of range"), -1;
        pl->dep[pl->ndep] = (int)slot, pl->depkind[pl->ndep++] = (int)kind;
    }
    return 0;
}

/* A recipe (or a typed field's steps) in C: n cells checked against the template. */
static int cells_of(const Tmpl *t, PyObject *recipe, Cell **cells, Py_ssize_t *n) {
    *n = PyTuple_GET_SIZE(recipe);
    *cells = PyMem_Calloc((size_t)(*n ? *n : 1), sizeof(Cell));
    if (*cells == NULL) return PyErr_NoMemory(), -1;
    for (Py_ssize_t j = 0; j < *n; j++)
        if (cell_of(t, PyTuple_GET_ITEM(recipe, j), &(*cells)[j]) < 0) return -1;
    return 0;
}

/* (recipe, deps, memo): a plan whose rows are bytes. */
static int bytes_plan(const Tmpl *t, PyObject *p, Plan *pl) {
    PyObject *recipe, *deps, *memo;
    if (!PyArg_ParseTuple(p, "O!O!O", &PyTuple_Type, &recipe, &PyTuple_Type, &deps, &memo)) return -1;
    pl->recipe = Py_NewRef(recipe);
    if (memo_of(t, memo, pl) < 0) return -1;
    return cells_of(t, recipe, &pl->cells, &pl->ncells) < 0 ? -1 : deps_of(t, deps, pl);
}

static int not_a_field(void) {
    PyErr_SetString(PyExc_ValueError, "a typed field's steps are not a value the scan builds");
    return -1;
}

/* Whether a cell is the literal '"' that opens or closes a JSON string. */
static int quote(const Cell *c) {
    return c->kind == CELL_TEXT && PyBytes_GET_SIZE(c->text) == 1 && PyBytes_AS_STRING(c->text)[0] == '"';
}

/* Whether a piece between a string's quotes is read back as it is: literal bytes that JSON does not escape (no
 * quote, backslash or control byte), an envelope piece (digits, the rank's name), or a group of the STR step or of
 * the LINT step (an engine's digits). */
static int plain_piece(const Tmpl *t, const Cell *c) {
    if (c->kind == CELL_ENV) return 1;
    if (c->kind == CELL_SLOT) { /* printable ASCII but '"', ',' and '\\'; or an engine's digits */
        int code = cm_capturer(t, c->i);
        return code == OP_STR || code == OP_LINT;
    }
    if (c->kind != CELL_TEXT) return 0;
    const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(c->text);
    for (Py_ssize_t i = 0; i < PyBytes_GET_SIZE(c->text); i++)
        if (b[i] < 0x20 || b[i] == '"' || b[i] == '\\') return 0;
    return 1;
}

/* One typed field from its steps (a tuple of bytes | int): its kind, and for a string its pieces. */
static int field_of(const Tmpl *t, PyObject *steps, Field *f) {
    if (!PyTuple_Check(steps)) return PyErr_SetString(PyExc_TypeError, "a typed field's steps are a tuple"), -1;
    if (cells_of(t, steps, &f->cells, &f->ncells) < 0) return -1;
    Cell *c = f->cells;
    if (f->ncells == 1) {
        int code = c->kind == CELL_SLOT ? cm_capturer(t, c->i) : -1;
        f->i = c->i;
        if (c->kind == CELL_LINE) f->kind = FIELD_LINE;
        else if (c->kind == CELL_JSON_RANK) f->kind = FIELD_RANK;
        else if (c->kind == CELL_SLOT && (code == OP_INT || code == OP_FLOAT)) f->kind = FIELD_NUMBER;
        else if (c->kind == CELL_BOOL && cm_capturer(t, c->i) == OP_BOOL) f->kind = FIELD_BOOL;
        else if (c->kind == CELL_CONV) f->kind = FIELD_CONV, f->conv = c->conv;
        else if (c->kind == CELL_DERIVED) f->kind = FIELD_DERIVED;
        else return not_a_field();
        return 0;
    }
    if (f->ncells < 2 || !quote(&c[0]) || !quote(&c[f->ncells - 1])) return not_a_field();
    for (Py_ssize_t j = 1; j < f->ncells - 1; j++)
        if (!plain_piece(t, &c[j])) return not_a_field();
    f->kind = FIELD_STR;
    return 0;
}

/* (fields, deps, memo, shape, names, owner): a typed plan, each row a record, or (shape None) its varying values (see
 * the top of this file). */
static int typed_plan(const Tmpl *t, PyObject *p, Plan *pl) {
    PyObject *fields, *deps, *memo, *shape, *names, *owner;
    if (!PyArg_ParseTuple(p, "O!O!OOO!O", &PyTuple_Type, &fields, &PyTuple_Type, &deps, &memo, &shape, &PyTuple_Type,
                          &names, &owner))
        return -1;
    if ((shape != Py_None && !PyDict_CheckExact(shape)) || PyTuple_GET_SIZE(names) != PyTuple_GET_SIZE(fields))
        return PyErr_SetString(PyExc_ValueError, "a typed plan: a dict shape or None, and a name per field"), -1;
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(names); j++)
        if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(names, j)))
            return PyErr_SetString(PyExc_TypeError, "a typed field's name is a str"), -1;
    pl->recipe = Py_NewRef(fields);
    if (memo_of(t, memo, pl) < 0) return -1;
    pl->shape = Py_NewRef(shape), pl->names = Py_NewRef(names), pl->owner = Py_NewRef(owner);
    pl->nfields = PyTuple_GET_SIZE(fields);
    pl->fields = PyMem_Calloc((size_t)(pl->nfields ? pl->nfields : 1), sizeof(Field));
    if (pl->fields == NULL) return PyErr_NoMemory(), -1;
    for (Py_ssize_t j = 0; j < pl->nfields; j++)
        if (field_of(t, PyTuple_GET_ITEM(fields, j), &pl->fields[j]) < 0) return -1;
    return deps_of(t, deps, pl);
}

/* 1 if a scan takes plan ``p`` for template ``i`` as it is, 0 if it refuses it (a typed field it does not build, a
 * recipe its template does not capture): the one judge of a plan, read as a scan reads it (cm_plans_of). */
int cm_plan_ok(const Program *pg, int i, PyObject *p) {
    if (!PyTuple_Check(p)) return 1; /* None or False: nothing to build */
    Plan *pl = PyMem_Calloc(1, sizeof(Plan));
    if (pl == NULL) return PyErr_NoMemory(), -1;
    int rc = (PyTuple_GET_SIZE(p) == 6 ? typed_plan : bytes_plan)(&pg->tmpls[i], p, pl);
    cm_plans_free(pl, 1);
    if (rc == 0) return 1;
    if (!PyErr_ExceptionMatches(PyExc_ValueError) && !PyErr_ExceptionMatches(PyExc_TypeError)) return -1;
    PyErr_Clear();
    return 0;
}

/* plans[i]: None (counted only), False (counted; the general parser writes its rows), (recipe, dependency slots
 * tuple, memo: a mapping, a callable, or (compiled derive, callable): memo_of), or a typed plan (fields, dependency
 * slots, memo, shape, names, owner); a scan's plans are typed or not, all of them. Every plan is read here, before
 * any line, into out[i] with its own references: what the list holds later does not matter to this scan. */
int cm_plans_of(const Program *pg, PyObject *plans, Plan *out) {
    if (!PyList_Check(plans) || PyList_GET_SIZE(plans) != pg->ntmpls) {
        PyErr_SetString(PyExc_ValueError, "one plan per template");
        return -1;
    }
    int typed = -1; /* not known yet */
    for (int i = 0; i < pg->ntmpls; i++) {
        PyObject *p = PyList_GET_ITEM(plans, i);
        out[i].parser = p == Py_False;
        if (!PyTuple_Check(p)) continue;
        int is_typed = PyTuple_GET_SIZE(p) == 6;
        if (typed >= 0 && is_typed != typed)
            return PyErr_SetString(PyExc_ValueError, "a scan's plans are all typed or none"), -1;
        typed = is_typed;
        if ((is_typed ? typed_plan : bytes_plan)(&pg->tmpls[i], p, &out[i]) < 0) return -1;
    }
    return typed == 1;
}

/* ---- rows ------------------------------------------------------------------------------------ */


/* Dependency i of a plan as the memo's key holds it (see DEP_*). */
static PyObject *dep_value(const Plan *pl, int i, const Cap *caps) {
    const Cap *c = &caps[pl->dep[i]];
    switch (pl->depkind[i]) {
    case DEP_NUMBER:
        return cm_number(c);
    case DEP_PERCENT:
        return cm_convert_value(CONV_PERCENT, c);
    case DEP_FLOATS: {
        PyObject *list = cm_convert_value(CONV_FLOATS_JSON, c), *tuple = list ? PyList_AsTuple(list) : NULL;
        Py_XDECREF(list);
        return tuple;
    }
    default:
        return PyBytes_FromStringAndSize((const char *)c->p, c->n);
    }
}

PyObject *cm_derived(const Plan *pl, const Cap *caps) {
    PyObject *key;
    if (pl->derive.spec != NULL) {
        /* a dependency the compiled derive does not read is converted all the same: the parser refuses a line whose
         * value its converter refuses (a percentage over 100), and a scan leaves that line's region to it */
        for (int i = 0; i < pl->ndep; i++)
            if (pl->depkind[i] == DEP_PERCENT && cm_percent_ok(&caps[pl->dep[i]]) < 0) return NULL;
        PyObject *cells;
        int done = cm_derive(&pl->derive, caps, &cells);
        if (done != 0) return done < 0 ? NULL : cells; /* else declined: the memo's */
    }
    if (pl->ndep == 1) {
        key = dep_value(pl, 0, caps);
    } else {
        key = PyTuple_New(pl->ndep);
        for (int i = 0; key != NULL && i < pl->ndep; i++) {
            PyObject *b = dep_value(pl, i, caps);
            if (b == NULL) Py_CLEAR(key);
            else PyTuple_SET_ITEM(key, i, b);
        }
    }
    if (key == NULL) return NULL;
    /* a mapping's item, or a callable's result (a plan that remembers nothing): either may run any Python code; a
     * dict's item found in C, as its [] finds it (a miss is its [] again: a subclass's __missing__) */
    PyObject *cells = pl->dict_memo ? PyDict_GetItemWithError(pl->memo, key) : NULL;
    if (cells != NULL) Py_INCREF(cells);
    else if (PyErr_Occurred()) cells = NULL;
    else if (PyCallable_Check(pl->memo)) cells = PyObject_CallOneArg(pl->memo, key);
    else cells = PyObject_GetItem(pl->memo, key);
    Py_DECREF(key);
    if (cells != NULL && !PyTuple_Check(cells)) {
        Py_DECREF(cells);
        PyErr_SetString(PyExc_TypeError, "derived cells must be a tuple");
        return NULL;
    }
    return cells;
}

/* ---- an unknown key's JSON ------------------------------------------------------------------ */

/* Whether a captured text has a byte beyond ASCII (it is then decoded as the parser decodes it). */
static int wide(const uint8_t *p, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++)
        if (p[i] >= 0x80) return 1;
    return 0;
}

/* A string as json.dumps writes it (ensure_ascii) of the text the parser decodes ("utf-8", "replace"). */
static int json_string(Out *o, const uint8_t *p, Py_ssize_t n) {
    static const char hex[] = "0123456789abcdef";
    int decoded = wide(p, n);
    PyObject *u = decoded ? PyUnicode_DecodeUTF8((const char *)p, n, "replace") : NULL;
    if (decoded && u == NULL) return -1;
    Py_ssize_t len = decoded ? PyUnicode_GET_LENGTH(u) : n;
    int rc = cm_out_put(o, "\"", 1);
    for (Py_ssize_t i = 0; rc == 0 && i < len; i++) {
        Py_UCS4 ch = decoded ? PyUnicode_READ_CHAR(u, i) : p[i];
        char esc[12];
        size_t k = 0;
        if (ch == '"' || ch == '\\') {
            esc[k++] = '\\', esc[k++] = (char)ch;
        } else if (ch >= 0x20 && ch < 0x7f) {
            esc[k++] = (char)ch;
        } else if (ch == '\b' || ch == '\t' || ch == '\n' || ch == '\f' || ch == '\r') {
            esc[k++] = '\\', esc[k++] = "btn?fr"[ch - '\b'];
        } else {
            Py_UCS4 units[2] = {ch, 0};
            int nunits = 1;
            if (ch > 0xffff) units[0] = 0xd800 + ((ch - 0x10000) >> 10), units[1] = 0xdc00 + ((ch - 0x10000) & 0x3ff), nunits = 2;
            for (int j = 0; j < nunits; j++) {
                esc[k++] = '\\', esc[k++] = 'u';
                for (int shift = 12; shift >= 0; shift -= 4) esc[k++] = hex[(units[j] >> shift) & 0xf];
            }
        }
        rc = cm_out_put(o, esc, k);
    }
    Py_XDECREF(u);
    return rc < 0 ? -1 : cm_out_put(o, "\"", 1);
}

/* Whether two captured keys are one key of the parser's dict: the same bytes, or (both not ASCII) the same text once
 * decoded (two invalid sequences are both U+FFFD). 1, 0, or -1 (an error set). */
static int same_key(const Cap *a, const Cap *b) {
    if (a->n == b->n && memcmp(a->p, b->p, (size_t)a->n) == 0) return 1;
    if (!wide(a->p, a->n) || !wide(b->p, b->n)) return 0; /* an ASCII key is never equal to a key that decodes to more than ASCII */
    PyObject *x = PyUnicode_DecodeUTF8((const char *)a->p, a->n, "replace");
    PyObject *y = x ? PyUnicode_DecodeUTF8((const char *)b->p, b->n, "replace") : NULL;
    int same = y ? PyUnicode_Compare(x, y) == 0 : -1;
    if (same == 0 && PyErr_Occurred()) same = -1;
    Py_XDECREF(x);
    Py_XDECREF(y);
    return same;
}

/* The template's unknown keys as the parser's dict holds them (extra[key] = value, in line order): a key said twice
 * where it was first, with the value said last. */
static int json_extra(Out *o, const Tmpl *t, const Cap *caps) {
    int rc = cm_out_put(o, "{", 1), first = 1;
    for (int i = 0; rc == 0 && i < t->nsteps; i++) {
        const Step *st = &t->steps[i];
        if (!unknown_key(t, i)) continue;
        const Cap *key = &caps[st->slot], *value = &caps[st->slot + 1];
        int seen = 0;
        for (int j = 0; rc == 0 && !seen && j < t->nsteps; j++) {
            const Step *other = &t->steps[j];
            if (!unknown_key(t, j) || j == i) continue;
            int same = same_key(key, &caps[other->slot]);
            if (same < 0) rc = -1;
            else if (same && j < i) seen = 1;
            else if (same) value = &caps[other->slot + 1];
        }
        if (rc < 0 || seen) continue;
        if ((!first && cm_out_put(o, ",", 1) < 0) || json_string(o, key->p, key->n) < 0 || cm_out_put(o, ":", 1) < 0 ||
            json_string(o, value->p, value->n) < 0)
            rc = -1;
        first = 0;
    }
    return rc < 0 ? -1 : cm_out_put(o, "}", 1);
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
    case CELL_CONV:
        return cm_convert_cell(o, c->conv, &caps[c->i]);
    case CELL_EXTRA:
        return json_extra(o, c->tmpl, caps);
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
    PyObject *cells = pl->ndep ? cm_derived(pl, caps) : NULL;
    if (pl->ndep && cells == NULL) return -1;
    int rc = 0;
    for (Py_ssize_t i = 0; rc == 0 && i < pl->ncells; i++) rc = cell(o, &pl->cells[i], line, env, caps, cells);
    Py_XDECREF(cells);
    return rc == 0 ? 0 : -1; /* a cell of several puts says 1 (a || b) when one fails */
}

/* ---- typed records --------------------------------------------------------------------------- */

PyObject *cm_number(const Cap *c) {
    char text[64];
    if (c->n <= 0 || c->n >= (Py_ssize_t)sizeof text)
        return PyErr_SetString(PyExc_ValueError, "a number cell of no or too many characters"), NULL;
    memcpy(text, c->p, (size_t)c->n);
    text[c->n] = '\0';
    if (!memchr(text, '.', (size_t)c->n) && !memchr(text, 'e', (size_t)c->n) && !memchr(text, 'E', (size_t)c->n))
        return PyLong_FromString(text, NULL, 10);
    int exact;
    double v = cm_read_float(c->p, c->n, &exact);
    if (!exact) v = PyOS_string_to_double(text, NULL, NULL);
    return v == -1.0 && PyErr_Occurred() ? NULL : PyFloat_FromDouble(v);
}

int cm_pieces(Out *scratch, const Field *f, const Cap *env, const Cap *caps) {
    scratch->len = 0;
    for (Py_ssize_t j = 1; j < f->ncells - 1; j++) {
        const Cell *c = &f->cells[j];
        const Cap *piece = c->kind == CELL_ENV ? &env[c->i] : &caps[c->i];
        int rc = c->kind == CELL_TEXT ? cm_out_put(scratch, PyBytes_AS_STRING(c->text), (size_t)PyBytes_GET_SIZE(c->text))
                                      : cm_out_put(scratch, piece->p, (size_t)piece->n);
        if (rc < 0) return -1;
    }
    return 0;
}

/* A string of pieces, decoded as UTF-8 (strict). */
static PyObject *text(Out *scratch, const Field *f, const Cap *env, const Cap *caps) {
    if (cm_pieces(scratch, f, env, caps) < 0) return NULL;
    return PyUnicode_DecodeUTF8(scratch->buf ? scratch->buf : "", (Py_ssize_t)scratch->len, "strict");
}

static int scalar(PyObject *v) {
    return v == Py_None || PyBool_Check(v) || PyLong_CheckExact(v) || PyFloat_CheckExact(v) || PyUnicode_CheckExact(v);
}

/* A derived value for one record: a scalar as it is, a list of scalars copied (each record its own list, as
 * json.loads gives); anything else is refused. */
static PyObject *derived_value(PyObject *cells, int k) {
    if (cells == NULL || k >= PyTuple_GET_SIZE(cells))
        return PyErr_SetString(PyExc_ValueError, "a typed field asks for a derived cell that is not there"), NULL;
    PyObject *v = PyTuple_GET_ITEM(cells, k); /* cells is held until the record is built */
    if (scalar(v)) return Py_NewRef(v);
    if (PyList_CheckExact(v)) {
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(v); i++)
            if (!scalar(PyList_GET_ITEM(v, i))) goto refused;
        return PyList_GetSlice(v, 0, PyList_GET_SIZE(v));
    }
refused:
    PyErr_SetString(PyExc_TypeError, "a derived value is a scalar or a list of scalars");
    return NULL;
}

PyObject *cm_field(Out *scratch, const Field *f, long long line, const Cap *env, const Cap *caps, PyObject *cells) {
    switch (f->kind) {
    case FIELD_LINE:
        return PyLong_FromLongLong(line);
    case FIELD_RANK:
        return env[3].n ? PyUnicode_DecodeUTF8((const char *)env[3].p, env[3].n, "strict") : Py_NewRef(Py_None);
    case FIELD_NUMBER:
        return cm_number(&caps[f->i]);
    case FIELD_BOOL:
        return Py_NewRef(caps[f->i].n == 4 ? Py_True : Py_False);
    case FIELD_STR:
        return text(scratch, f, env, caps);
    case FIELD_CONV:
        return cm_convert_value(f->conv, &caps[f->i]);
    default:
        return derived_value(cells, f->i);
    }
}

/* Whether v holds no reference to another object: it can be in no reference cycle. */
static int atomic(PyObject *v) {
    return v == Py_None || PyFloat_CheckExact(v) || PyLong_CheckExact(v) || PyUnicode_CheckExact(v) || PyBool_Check(v);
}

/* The varying fields' values, a tuple in the order of the plan's names (a plan whose shape is None). A tuple of
 * atomic values alone is untracked by the cyclic collector, as the interpreter untracks such a tuple at its first
 * collection: a block's rows, alive until their turn, are not walked by each young collection. */
static PyObject *values(Out *scratch, const Plan *pl, long long line, const Cap *env, const Cap *caps, PyObject *cells) {
    PyObject *t = PyTuple_New(pl->nfields);
    int untrack = 1;
    for (Py_ssize_t j = 0; t != NULL && j < pl->nfields; j++) {
        PyObject *v = cm_field(scratch, &pl->fields[j], line, env, caps, cells);
        if (v == NULL) {
            Py_CLEAR(t);
        } else {
            untrack &= atomic(v);
            PyTuple_SET_ITEM(t, j, v);
        }
    }
    if (t != NULL && untrack) PyObject_GC_UnTrack(t);
    return t;
}

PyObject *cm_record(Out *scratch, const Plan *pl, long long line, const Cap *env, const Cap *caps) {
    PyObject *cells = pl->ndep ? cm_derived(pl, caps) : NULL; /* the only Python code a record runs, before the rest */
    if (pl->ndep && cells == NULL) return NULL;
    PyObject *d, *rec = NULL;
    if (pl->shape == Py_None) {
        d = values(scratch, pl, line, env, caps, cells);
    } else {
        d = PyDict_Copy(pl->shape);
        for (Py_ssize_t j = 0; d != NULL && j < pl->nfields; j++) {
            PyObject *v = cm_field(scratch, &pl->fields[j], line, env, caps, cells);
            if (v == NULL || PyDict_SetItem(d, PyTuple_GET_ITEM(pl->names, j), v) < 0) Py_CLEAR(d);
            Py_XDECREF(v);
        }
    }
    if (d != NULL) rec = PyTuple_Pack(2, pl->owner, d);
    Py_XDECREF(d);
    Py_XDECREF(cells);
    return rec;
}
