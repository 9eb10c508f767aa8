/* cmatch_columns.c: five loops over the fast lane's columns that the runs' and the doctor's fold run on every row
 * (acceptmon/measure/plain.py, acceptmon/measure/tokens.py, acceptmon/diagnose), the same answers as their Python,
 * which stays where the module is not built:
 *   bounded    whether each value logged in a column is a plain number within a field's bounds (plain._bounded)
 *   intervals  the accept length and rate of the interval each line counting since server start closes
 *              (tokens.Intervals.close_each)
 *   added      floats added one by one in order, as functools.reduce(add, ...) adds them (measure/plain.py's added)
 *   weighed    vLLM's per-position rates weighted by each line's drafts, added per position (measure/positions.py)
 *   has_none   whether a column holds None, by identity (measure/plain.py's has_none, for `None in column`)
 * and a value read as a double as Python adds it (cm_double_at, which cmatch_masks.c reads too).
 */
#include "cmatch.h"
#include <math.h>

/* Integers added, multiplied and divided as doubles give Python's int arithmetic where every operand and result is
 * at most this in magnitude (int / int is then float(a) / float(b), as CPython divides small ints). */
#define EXACT ((int64_t)1 << 53)

/* -1, 0 or 1: v against the bound (an int compared exactly, as Python compares an int with a float); -2 with an
 * error set. */
static int against(PyObject *v, double d, int exact, double bound) {
    if (exact) return (d > bound) - (d < bound);
    PyObject *b = PyFloat_FromDouble(bound);
    if (b == NULL) return -2;
    int gt = PyObject_RichCompareBool(v, b, Py_GT), lt = gt < 0 ? -1 : PyObject_RichCompareBool(v, b, Py_LT);
    Py_DECREF(b);
    return gt < 0 || lt < 0 ? -2 : gt - lt;
}

/* A machine column's answer to bounded (an array of doubles or of 64-bit ints: every value logged), or -2 where
 * the column is no such array or holds an int past EXACT (its values are then read as objects), -3 with an error
 * set. */
static Py_ssize_t bounded_array(PyObject *column, double low, double high, int open) {
    Py_buffer view = {0};
    if (!PyObject_CheckBuffer(column) || PyBytes_Check(column) || PyByteArray_Check(column)) return -2;
    if (PyObject_GetBuffer(column, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -3;
    int doubles = cm_eight_byte(&view, "d");
    Py_ssize_t n = view.len / 8, answer = doubles || cm_eight_byte(&view, "q") ? n : -2;
    for (Py_ssize_t i = 0; answer >= 0 && i < n; i++) {
        double d;
        if (doubles) {
            d = ((const double *)view.buf)[i];
            if (isnan(d)) answer = -1;
        } else {
            int64_t x = ((const int64_t *)view.buf)[i];
            if (x > EXACT || x < -EXACT) answer = -2;
            d = (double)x;
        }
        if (answer >= 0 && (d < low || (open ? d >= high : d > high))) answer = -1;
    }
    PyBuffer_Release(&view);
    return answer;
}

/* bounded(column, low, high) -> the number of values logged (not None), or -1 where one is not an int or a float (a
 * bool, a subclass, text), is NaN, or is outside low <= v <= high (v < high where high is infinite). An array of
 * doubles or of 64-bit ints is read as it is, each value a float or an int. */
PyObject *cm_bounded(PyObject *mod, PyObject *args) {
    PyObject *column;
    double low, high;
    (void)mod;
    if (!PyArg_ParseTuple(args, "Odd", &column, &low, &high)) return NULL;
    Py_ssize_t machine = bounded_array(column, low, high, isinf(high) && high > 0);
    if (machine == -3) return NULL;
    if (machine != -2) return PyLong_FromSsize_t(machine);
    PyObject *seq = PySequence_Fast(column, "column must be a sequence");
    if (seq == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq), logged = 0;
    PyObject **items = PySequence_Fast_ITEMS(seq);
    int open = isinf(high) && high > 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = items[i];
        double d = 0.0;
        int exact = 1;
        if (v == Py_None) continue;
        if (PyFloat_CheckExact(v)) {
            d = PyFloat_AS_DOUBLE(v);
            if (isnan(d)) goto refused;
        } else if (PyLong_CheckExact(v)) {
            int overflow = 0;
            long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
            if (x == -1 && PyErr_Occurred()) goto error;
            exact = !overflow && x <= EXACT && x >= -EXACT;
            d = (double)x;
        } else {
            goto refused;
        }
        int lo = against(v, d, exact, low), hi = lo == -2 ? 0 : against(v, d, exact, high);
        if (lo == -2 || hi == -2) goto error;
        if (lo < 0 || (open ? hi >= 0 : hi > 0)) goto refused;
        logged++;
    }
    Py_DECREF(seq);
    return PyLong_FromSsize_t(logged);
refused:
    Py_DECREF(seq);
    return PyLong_FromLong(-1);
error:
    Py_DECREF(seq);
    return NULL;
}

/* An int of the column at i into *x: 1; 0 where it is None (allowed) or not an int within EXACT (the caller leaves
 * the columns to Python); -1 with an error set. */
static int int_at(PyObject *seq, Py_ssize_t i, int none_ok, int64_t *x, int *none) {
    PyObject *v = PySequence_Fast_GET_ITEM(seq, i);
    *none = v == Py_None;
    if (*none) return none_ok;
    if (!PyLong_CheckExact(v)) return 0;
    int overflow = 0;
    long long got = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (got == -1 && PyErr_Occurred()) return -1;
    *x = (int64_t)got;
    return !overflow && got <= EXACT && got >= -EXACT;
}

static PyObject *rounded(double x) {
    double v;
    return cm_round(x, SPEC_DIGITS, &v, NULL, NULL) < 0 ? NULL : PyFloat_FromDouble(v);
}

static int small(int64_t x) { return x <= EXACT && x >= -EXACT; }

/* a * b into *p where a, b and the product are small (exact as doubles): 1; else 0. */
static int product(int64_t a, int64_t b, int64_t *p) {
    if (!small(a) || !small(b)) return 0;
    if (a != 0 && (b > EXACT / (a < 0 ? -a : a) || b < -EXACT / (a < 0 ? -a : a))) return 0;
    *p = a * b;
    return 1;
}

/* One line's interval as Intervals.close_each computes it: (length, rate) rounded, or (None, None); Py_None where
 * a number is past what doubles hold exactly (Python's ints then); NULL with an error set. */
static PyObject *closed(int64_t d_acc, int64_t d_drafted, int emitted_known, int64_t d_emitted, int64_t k) {
    if (d_drafted <= 0 || d_acc < 0 || k == 0) return PyTuple_Pack(2, Py_None, Py_None);
    int64_t top;
    double length;
    if (!small(d_drafted) || !small(d_acc)) return Py_NewRef(Py_None);
    if (emitted_known && d_emitted >= 0) {
        if (!product(d_emitted, k, &top)) return Py_NewRef(Py_None);
        length = (double)top / (double)d_drafted;
    } else {
        if (!product(d_acc, k, &top)) return Py_NewRef(Py_None);
        length = 1 + (double)top / (double)d_drafted;
    }
    PyObject *len = rounded(length), *rate = len == NULL ? NULL : rounded((double)d_acc / (double)d_drafted);
    PyObject *pair = rate == NULL ? NULL : PyTuple_Pack(2, len, rate);
    Py_XDECREF(len);
    Py_XDECREF(rate);
    return pair;
}

/* The counters before the lines, (accepted, drafted, emitted) or None, into c[0..2] and *none (emitted None): 1; 0
 * where one is not a small int (Python's loop then); -1 with an error set. */
static int counters_before(PyObject *before, int64_t c[3], int *none) {
    c[0] = c[1] = c[2] = 0;
    *none = 0;
    if (before == Py_None) return 1;
    if (!PyTuple_Check(before) || PyTuple_GET_SIZE(before) != 3) {
        PyErr_SetString(PyExc_ValueError, "before must be None or (accepted, drafted, emitted)");
        return -1;
    }
    int got = 1, is_none;
    for (int i = 0; got > 0 && i < 3; i++) {
        got = int_at(before, i, i == 2, &c[i], &is_none);
        if (i == 2) *none = is_none;
    }
    return got;
}

/* intervals(accepted, drafted, emitted, widths, before, known) -> [(length, rate) or (None, None)] per line, or None
 * where a value is not an int that a double holds exactly (Python's loop then reads them): what
 * tokens.Intervals.close_each gives of the lines zip(accepted, drafted, emitted, widths), ``before`` the counters
 * (accepted, drafted, emitted) before them or None, ``known`` whether the first line's interval is known (a line
 * before it, or the run's launch). */
PyObject *cm_intervals(PyObject *mod, PyObject *args) {
    PyObject *cols[4], *seqs[4] = {NULL, NULL, NULL, NULL}, *before, *list = NULL, *out = NULL;
    int known, b_none, got;
    int64_t b[3];
    (void)mod;
    if (!PyArg_ParseTuple(args, "OOOOOp", &cols[0], &cols[1], &cols[2], &cols[3], &before, &known)) return NULL;
    for (int c = 0; c < 4; c++)
        if ((seqs[c] = PySequence_Fast(cols[c], "the columns must be sequences")) == NULL) goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seqs[0]);
    for (int c = 1; c < 4; c++)
        if (PySequence_Fast_GET_SIZE(seqs[c]) != n) {
            PyErr_SetString(PyExc_ValueError, "the columns must be of one length");
            goto done;
        }
    if ((got = counters_before(before, b, &b_none)) <= 0) goto fallback;
    if ((list = PyList_New(n)) == NULL) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t now[3] = {0, 0, 0}, k = 0;
        int none, e_none = 0, k_none = 0;
        got = int_at(seqs[0], i, 0, &now[0], &none);
        if (got > 0) got = int_at(seqs[1], i, 0, &now[1], &none);
        if (got > 0) got = int_at(seqs[2], i, 1, &now[2], &e_none);
        if (got > 0) got = int_at(seqs[3], i, 1, &k, &k_none);
        if (got <= 0) goto fallback;
        PyObject *pair;
        if (!known) {
            pair = PyTuple_Pack(2, Py_None, Py_None);
            known = 1;
        } else {
            int emitted_known = !e_none && !b_none;
            pair = closed(now[0] - b[0], now[1] - b[1], emitted_known, emitted_known ? now[2] - b[2] : 0, k);
            if (pair == Py_None) {
                Py_DECREF(pair);
                got = 0;
                goto fallback;
            }
        }
        if (pair == NULL) goto done;
        PyList_SET_ITEM(list, i, pair);
        b[0] = now[0], b[1] = now[1], b[2] = now[2], b_none = e_none;
    }
    out = list;
    list = NULL;
    goto done;
fallback:
    if (got == 0) out = Py_NewRef(Py_None);
done:
    Py_XDECREF(list);
    for (int c = 0; c < 4; c++) Py_XDECREF(seqs[c]);
    return out;
}

/* A value as a double: a float, or an int within EXACT (as Python adds it to a float): 1; 0 where it is neither. */
int cm_double_at(PyObject *v, double *x) {
    if (PyFloat_CheckExact(v)) {
        *x = PyFloat_AS_DOUBLE(v);
        return 1;
    }
    if (!PyLong_CheckExact(v)) return 0;
    int overflow = 0;
    long long got = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (got == -1 && PyErr_Occurred()) PyErr_Clear();
    else if (!overflow && got <= EXACT && got >= -EXACT) {
        *x = (double)got;
        return 1;
    }
    return 0;
}

/* added(values, start) -> start + values[0] + values[1] + ..., added one by one in order as doubles (as
 * functools.reduce(add, values, start) adds floats), or None where a value is not a float or an int within EXACT: Python
 * adds them (plain.py's added). */
PyObject *cm_added(PyObject *mod, PyObject *args) {
    PyObject *values_obj, *values;
    double total;
    (void)mod;
    if (!PyArg_ParseTuple(args, "Od", &values_obj, &total)) return NULL;
    values = PySequence_Fast(values_obj, "values must be a sequence");
    if (values == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(values);
    PyObject **v = PySequence_Fast_ITEMS(values);
    for (Py_ssize_t i = 0; i < n; i++) {
        double x;
        if (!cm_double_at(v[i], &x)) {
            Py_DECREF(values);
            Py_RETURN_NONE;
        }
        total += x;
    }
    Py_DECREF(values);
    return PyFloat_FromDouble(total);
}

/* weighed(rates, drafts, totals) -> positions.weighed's totals: each position's rate of each row (a list or tuple;
 * None or empty: none) times the row's drafts, added to that position's total row by row, as
 * functools.reduce(add, ...) adds them; a rate None (and, where rows are ragged or a column holds a None, any zero)
 * counts as 0.0, as `p or 0.0` gives. None where a total or a draft is not a float, a rate not a float or an int
 * within EXACT, or the lengths differ: Python weighs them. */
PyObject *cm_weighed(PyObject *mod, PyObject *args) {
    PyObject *rates_obj, *drafts_obj, *totals_obj, *rates = NULL, *drafts = NULL, *totals = NULL, *out = NULL;
    double *acc = NULL, *d = NULL;
    (void)mod;
    if (!PyArg_ParseTuple(args, "OOO", &rates_obj, &drafts_obj, &totals_obj)) return NULL;
    if ((rates = PySequence_Fast(rates_obj, "rates must be a sequence")) == NULL ||
        (drafts = PySequence_Fast(drafts_obj, "drafts must be a sequence")) == NULL ||
        (totals = PySequence_Fast(totals_obj, "totals must be a sequence")) == NULL)
        goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(rates), nt = PySequence_Fast_GET_SIZE(totals), width = 0;
    PyObject **row = PySequence_Fast_ITEMS(rates);
    if (PySequence_Fast_GET_SIZE(drafts) != n) goto python;
    int uniform = 1;
    for (Py_ssize_t k = 0; k < n; k++) {
        if (row[k] == Py_None) {
            uniform = 0;
            continue;
        }
        if (!PyList_CheckExact(row[k]) && !PyTuple_CheckExact(row[k])) goto python;
        width = Py_MAX(width, Py_SIZE(row[k]));
    }
    for (Py_ssize_t k = 0; uniform && k < n; k++) uniform = Py_SIZE(row[k]) == width;
    Py_ssize_t nout = Py_MAX(nt, width);
    acc = PyMem_Calloc((size_t)(nout ? nout : 1), sizeof(double));
    d = PyMem_Calloc((size_t)(n ? n : 1), sizeof(double));
    if (acc == NULL || d == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t j = 0; j < nt; j++) {
        PyObject *t = PySequence_Fast_GET_ITEM(totals, j);
        if (!PyFloat_CheckExact(t)) goto python;
        acc[j] = PyFloat_AS_DOUBLE(t);
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *v = PySequence_Fast_GET_ITEM(drafts, k);
        if (!PyFloat_CheckExact(v)) goto python;
        d[k] = PyFloat_AS_DOUBLE(v);
    }
    for (Py_ssize_t i = 0; i < width; i++) {
        int or_zero = !uniform; /* `p or 0.0`: the ragged rows' way, and a uniform column's that holds a None */
        for (Py_ssize_t k = 0; !or_zero && k < n; k++) or_zero = PySequence_Fast_ITEMS(row[k])[i] == Py_None;
        double a = acc[i];
        for (Py_ssize_t k = 0; k < n; k++) {
            if (row[k] == Py_None || Py_SIZE(row[k]) <= i) continue;
            PyObject *p = PySequence_Fast_ITEMS(row[k])[i];
            double x = 0.0;
            if (p != Py_None && !cm_double_at(p, &x)) goto python;
            if (or_zero && x == 0.0) x = 0.0; /* -0.0 is false too */
            a = a + x * d[k];
        }
        acc[i] = a;
    }
    out = PyList_New(nout);
    for (Py_ssize_t j = 0; out != NULL && j < nout; j++) {
        PyObject *v = PyFloat_FromDouble(acc[j]);
        if (v == NULL) Py_CLEAR(out);
        else PyList_SET_ITEM(out, j, v);
    }
    goto done;
python:
    out = Py_NewRef(Py_None);
done:
    PyMem_Free(acc);
    PyMem_Free(d);
    Py_XDECREF(rates);
    Py_XDECREF(drafts);
    Py_XDECREF(totals);
    return out;
}

/* has_none(values) -> whether a value is None: for a list or a tuple by identity alone (None in values compares each
 * value with None, and only None equals None among the lane's values: numbers, texts, bools, lists), else as `in`
 * does. */
PyObject *cm_has_none(PyObject *mod, PyObject *values) {
    (void)mod;
    if (!PyList_CheckExact(values) && !PyTuple_CheckExact(values)) {
        int in = PySequence_Contains(values, Py_None);
        return in < 0 ? NULL : PyBool_FromLong(in);
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(values);
    PyObject **v = PySequence_Fast_ITEMS(values);
    for (Py_ssize_t i = 0; i < n; i++)
        if (v[i] == Py_None) Py_RETURN_TRUE;
    Py_RETURN_FALSE;
}
