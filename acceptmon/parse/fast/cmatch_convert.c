/* cmatch_convert.c: the value of a captured group that is not its text, as the parser's converter gives it.
 *
 * A percentage (values.to_percent) is the LFLOAT step's text, digits with an optional '.' and digits, read as
 * Python's float() reads it, checked to be from 0 to 100, and divided by 100 and rounded to PERCENT_DIGITS decimal
 * digits as Python's round() does: to the correctly rounded decimal string of that many digits, read back. A list
 * (values.to_float_list) is the LIST step's text, such numbers with ", " between, each read as float() reads it.
 * A cell prints a float as repr() does (the csv module's str(), json's float repr): the list ';'-joined in CSV,
 * a JSON array in JSONL; an entry spelt as the FLOAT step reads a shortest repr is copied without its trailing
 * zeros. Both conversions use CPython's own string <-> double functions, so a value is the very float the parser's
 * converter makes.
 */
#include "cmatch.h"

/* The number of a loose float's text (at most 30 digits, '.', 30 digits: the steps' bound), as float() reads it. */
static int loose(const uint8_t *p, Py_ssize_t n, double *v) {
    char text[72];
    if (n <= 0 || n >= (Py_ssize_t)sizeof text) return PyErr_SetString(PyExc_ValueError, "not a loose number"), -1;
    memcpy(text, p, (size_t)n);
    text[n] = '\0';
    *v = PyOS_string_to_double(text, NULL, PyExc_ValueError);
    return *v == -1.0 && PyErr_Occurred() ? -1 : 0;
}

/* A percentage's text as its fraction, round(value / 100, PERCENT_DIGITS). */
static int percent(const Cap *c, double *v) {
    double x;
    if (loose(c->p, c->n, &x) < 0) return -1;
    if (!(x >= 0.0 && x <= 100.0)) return PyErr_SetString(PyExc_ValueError, "a percentage from 0 to 100"), -1;
    char *s = PyOS_double_to_string(x / 100.0, 'f', PERCENT_DIGITS, 0, NULL);
    if (s == NULL) return -1;
    *v = PyOS_string_to_double(s, NULL, PyExc_ValueError);
    PyMem_Free(s);
    return *v == -1.0 && PyErr_Occurred() ? -1 : 0;
}

static int put_repr(Out *o, double v) {
    char *s = PyOS_double_to_string(v, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (s == NULL) return -1;
    int rc = cm_out_put(o, s, strlen(s));
    PyMem_Free(s);
    return rc;
}

/* The list's next entry from offset *at (entries are separated by ", "), *at moved past it. */
static Cap entry(const Cap *c, Py_ssize_t *at) {
    Py_ssize_t from = *at, to = from;
    while (to < c->n && c->p[to] != ',') to++;
    *at = to < c->n ? to + 2 : c->n; /* the LIST step put a space after every comma */
    return (Cap){c->p + from, to - from};
}

/* An entry's cell: its text without trailing zeros where that is the float's repr (the FLOAT step's rule, the
 * usual spelling: 0.837), else the repr of the float it reads as. */
static int entry_cell(Out *o, Cap e) {
    Cap shortest;
    if (cm_float_value(e.p, e.p + e.n, &shortest) == e.p + e.n) return cm_out_put(o, shortest.p, (size_t)shortest.n);
    double v;
    return loose(e.p, e.n, &v) < 0 ? -1 : put_repr(o, v);
}

int cm_convert_cell(Out *o, int conv, const Cap *c) {
    double v;
    if (c->n <= 0) return PyErr_SetString(PyExc_ValueError, "no value to convert"), -1;
    if (conv == CONV_PERCENT) return percent(c, &v) < 0 ? -1 : put_repr(o, v);
    int json = conv == CONV_FLOATS_JSON;
    if (json && cm_out_put(o, "[", 1) < 0) return -1;
    for (Py_ssize_t at = 0; at < c->n;)
        if ((at > 0 && cm_out_put(o, json ? "," : ";", 1) < 0) || entry_cell(o, entry(c, &at)) < 0) return -1;
    return json ? cm_out_put(o, "]", 1) : 0;
}

PyObject *cm_convert_value(int conv, const Cap *c) {
    double v;
    if (c->n <= 0) return PyErr_SetString(PyExc_ValueError, "no value to convert"), NULL;
    if (conv == CONV_PERCENT) return percent(c, &v) < 0 ? NULL : PyFloat_FromDouble(v);
    PyObject *list = PyList_New(0);
    for (Py_ssize_t at = 0; list != NULL && at < c->n;) {
        Cap e = entry(c, &at);
        PyObject *item = loose(e.p, e.n, &v) < 0 ? NULL : PyFloat_FromDouble(v);
        if (item == NULL || PyList_Append(list, item) < 0) Py_CLEAR(list);
        Py_XDECREF(item);
    }
    return list;
}
