/* cmatch_facts.c: the doctor's per-line loops over a stretch of stats lines as columns:
 *   drafts_each  the rows whose per-position rates are weighed, with their drafts (diagnose/depth.py)
 *   last_rates   warm rows' last per-position rate, and their lines (diagnose/detect_accept.py)
 *   masked       a column's values where a mask is true, else None (measure/plain.py)
 *   filled       a column's values, those where a mask is true replaced in order (measure/facts.py)
 *   int_extremes the least and the largest of a column of machine ints (measure/plain.py)
 *   doubles      a column of floats as an array('d') holds them, NaN where not logged (measure/columns.py)
 * Each is the Python loop beside it (kept where the module is not built), value for value. The loops that read
 * values' truth or compare them run only on values of the lane's exact types (None, bool, int, float, str, list,
 * tuple: cm_plain_value), checked before anything is changed, so that no Python code runs inside them; for other
 * values they return None and Python does it.
 */
#include "cmatch.h"

/* A value of the lane's exact types, whose truth and comparisons run no Python code. */
int cm_plain_value(PyObject *v) {
    return v == Py_None || PyBool_Check(v) || PyLong_CheckExact(v) || PyFloat_CheckExact(v) || PyUnicode_CheckExact(v) ||
           PyList_CheckExact(v) || PyTuple_CheckExact(v);
}

/* Whether every value of a list or tuple is cm_plain_value's. */
int cm_all_plain(PyObject *seq) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **v = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < n; i++)
        if (!cm_plain_value(v[i])) return 0;
    return 1;
}

/* The truth of a cm_plain_value's value (bool(v)), which runs no Python code. */
int cm_truth(PyObject *v) {
    if (v == Py_None) return 0;
    if (PyBool_Check(v)) return v == Py_True;
    if (PyFloat_CheckExact(v)) return PyFloat_AS_DOUBLE(v) != 0.0;
    if (PyLong_CheckExact(v)) return PyObject_IsTrue(v);
    return PyObject_Size(v) > 0; /* (str, list, tuple) */
}

/* x onto a and y onto b: 0; -1 with an error set (a pair of result lists, row by row). */
static int append_pair(PyObject *a, PyObject *x, PyObject *b, PyObject *y) {
    return PyList_Append(a, x) < 0 ? -1 : PyList_Append(b, y);
}

/* drafts_each(rates, cumulative, batch, tokens, drafted) -> (kept, drafts), or None: diagnose/depth.py's loop, row
 * by row: a row whose rates and batch are true and cumulative false is kept, with drafts (drafted or 0) / k, k its
 * width: tokens or len(rates) (measure/tokens.py's width; its last resort, the launch's steps, is never reached by
 * a row with rates). None where a value is not of the lane's types, or rates are neither None, a list nor a tuple. */
PyObject *cm_drafts_each(PyObject *mod, PyObject *args) {
    PyObject *objs[5], *seqs[5] = {NULL, NULL, NULL, NULL, NULL}, *kept = NULL, *drafts = NULL, *out = NULL;
    PyObject *zero = NULL;
    (void)mod;
    if (!PyArg_ParseTuple(args, "OOOOO", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4])) return NULL;
    for (int c = 0; c < 5; c++)
        if ((seqs[c] = PySequence_Fast(objs[c], "columns must be sequences")) == NULL) goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seqs[0]);
    for (int c = 0; c < 5; c++) {
        if (PySequence_Fast_GET_SIZE(seqs[c]) != n) {
            PyErr_SetString(PyExc_ValueError, "columns of different lengths");
            goto done;
        }
        if (!cm_all_plain(seqs[c])) goto python;
    }
    for (Py_ssize_t i = 0; i < n; i++) { /* (rates of another type: len() may raise, as Python's loop says) */
        PyObject *row = PySequence_Fast_GET_ITEM(seqs[0], i);
        if (row != Py_None && !PyList_CheckExact(row) && !PyTuple_CheckExact(row)) goto python;
    }
    if ((kept = PyList_New(0)) == NULL || (drafts = PyList_New(0)) == NULL || (zero = PyLong_FromLong(0)) == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *row = PySequence_Fast_GET_ITEM(seqs[0], i), *tokens = PySequence_Fast_GET_ITEM(seqs[3], i);
        PyObject *drafted = PySequence_Fast_GET_ITEM(seqs[4], i), *k;
        if (!cm_truth(row) || !cm_truth(PySequence_Fast_GET_ITEM(seqs[2], i)) || cm_truth(PySequence_Fast_GET_ITEM(seqs[1], i)))
            continue;
        if (cm_truth(tokens))
            k = Py_NewRef(tokens);
        else if ((k = PyLong_FromSsize_t(PySequence_Fast_GET_SIZE(row))) == NULL) /* (a list or tuple, not empty) */
            goto fail;
        PyObject *d = PyNumber_TrueDivide(cm_truth(drafted) ? drafted : zero, k);
        Py_DECREF(k);
        if (d == NULL) goto fail;
        int rc = append_pair(kept, row, drafts, d);
        Py_DECREF(d);
        if (rc < 0) goto fail;
    }
    out = PyTuple_Pack(2, kept, drafts);
    goto done;
python:
    out = Py_NewRef(Py_None);
    goto done;
fail:
    out = NULL;
done:
    Py_XDECREF(zero);
    Py_XDECREF(kept);
    Py_XDECREF(drafts);
    for (int c = 0; c < 5; c++) Py_XDECREF(seqs[c]);
    return out;
}

/* last_rates(warm, rates, lines) -> (lasts, lines), or None: the rows that are warm and whose rates are a non-empty
 * list or tuple ending in a value not None: that value as a float, and the row's line (diagnose/detect_accept.py).
 * None where a warm row's value is not of the lane's types, or a last rate is not an int or a float. */
PyObject *cm_last_rates(PyObject *mod, PyObject *args) {
    PyObject *warm_obj, *rates_obj, *lines_obj, *warm = NULL, *rates = NULL, *lines = NULL, *lasts = NULL, *at = NULL;
    PyObject *out = NULL;
    (void)mod;
    if (!PyArg_ParseTuple(args, "OOO", &warm_obj, &rates_obj, &lines_obj) ||
        (warm = PySequence_Fast(warm_obj, "warm must be a sequence")) == NULL ||
        (rates = PySequence_Fast(rates_obj, "rates must be a sequence")) == NULL ||
        (lines = PySequence_Fast(lines_obj, "lines must be a sequence")) == NULL)
        goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(warm);
    if (PySequence_Fast_GET_SIZE(rates) != n || PySequence_Fast_GET_SIZE(lines) != n) {
        PyErr_SetString(PyExc_ValueError, "columns of different lengths");
        goto done;
    }
    if (!cm_all_plain(warm)) goto python;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *r = PySequence_Fast_GET_ITEM(rates, i);
        if (!cm_truth(PySequence_Fast_GET_ITEM(warm, i))) continue;
        if (!cm_plain_value(r)) goto python;
        if ((PyList_CheckExact(r) || PyTuple_CheckExact(r)) && PySequence_Fast_GET_SIZE(r) > 0) {
            PyObject *last = PySequence_Fast_GET_ITEM(r, PySequence_Fast_GET_SIZE(r) - 1);
            if (last != Py_None && !PyFloat_CheckExact(last) && !PyLong_CheckExact(last)) goto python;
        }
    }
    if ((lasts = PyList_New(0)) == NULL || (at = PyList_New(0)) == NULL) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *r = PySequence_Fast_GET_ITEM(rates, i);
        if (!cm_truth(PySequence_Fast_GET_ITEM(warm, i)) || !(PyList_CheckExact(r) || PyTuple_CheckExact(r))) continue;
        Py_ssize_t size = PySequence_Fast_GET_SIZE(r);
        PyObject *last = size ? PySequence_Fast_GET_ITEM(r, size - 1) : Py_None;
        if (last == Py_None) continue;
        PyObject *f = PyNumber_Float(last);
        if (f == NULL) goto fail;
        int rc = append_pair(lasts, f, at, PySequence_Fast_GET_ITEM(lines, i));
        Py_DECREF(f);
        if (rc < 0) goto fail;
    }
    out = PyTuple_Pack(2, lasts, at);
    goto done;
python:
    out = Py_NewRef(Py_None);
    goto done;
fail:
    out = NULL;
done:
    Py_XDECREF(lasts);
    Py_XDECREF(at);
    Py_XDECREF(warm);
    Py_XDECREF(rates);
    Py_XDECREF(lines);
    return out;
}

/* masked(values, mask) -> [value if kept else None, ...], or None where a mask entry is not of the lane's types. */
PyObject *cm_masked(PyObject *mod, PyObject *args) {
    PyObject *values_obj, *mask_obj, *values = NULL, *mask = NULL, *out = NULL;
    (void)mod;
    if (!PyArg_ParseTuple(args, "OO", &values_obj, &mask_obj) ||
        (values = PySequence_Fast(values_obj, "values must be a sequence")) == NULL ||
        (mask = PySequence_Fast(mask_obj, "mask must be a sequence")) == NULL)
        goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(values);
    if (PySequence_Fast_GET_SIZE(mask) != n) {
        PyErr_SetString(PyExc_ValueError, "values and mask of different lengths");
        goto done;
    }
    if (!cm_all_plain(mask)) {
        out = Py_NewRef(Py_None);
        goto done;
    }
    if ((out = PyList_New(n)) == NULL) goto done;
    for (Py_ssize_t i = 0; i < n; i++)
        PyList_SET_ITEM(out, i,
                        Py_NewRef(cm_truth(PySequence_Fast_GET_ITEM(mask, i)) ? PySequence_Fast_GET_ITEM(values, i) : Py_None));
done:
    Py_XDECREF(values);
    Py_XDECREF(mask);
    return out;
}

/* filled(mask, fill, values) -> [next of fill if kept else value, ...], or None where a mask entry is not of the
 * lane's types or fill does not hold one value per true entry (Python's loop then says what it says). */
PyObject *cm_filled(PyObject *mod, PyObject *args) {
    PyObject *mask_obj, *fill_obj, *values_obj, *mask = NULL, *fill = NULL, *values = NULL, *out = NULL;
    (void)mod;
    if (!PyArg_ParseTuple(args, "OOO", &mask_obj, &fill_obj, &values_obj) ||
        (mask = PySequence_Fast(mask_obj, "mask must be a sequence")) == NULL ||
        (fill = PySequence_Fast(fill_obj, "fill must be a sequence")) == NULL ||
        (values = PySequence_Fast(values_obj, "values must be a sequence")) == NULL)
        goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(mask), kept = 0;
    if (PySequence_Fast_GET_SIZE(values) != n) {
        PyErr_SetString(PyExc_ValueError, "mask and values of different lengths");
        goto done;
    }
    if (!cm_all_plain(mask)) goto python;
    for (Py_ssize_t i = 0; i < n; i++) kept += cm_truth(PySequence_Fast_GET_ITEM(mask, i));
    if (kept != PySequence_Fast_GET_SIZE(fill)) goto python;
    if ((out = PyList_New(n)) == NULL) goto done;
    for (Py_ssize_t i = 0, j = 0; i < n; i++) {
        PyObject *v = cm_truth(PySequence_Fast_GET_ITEM(mask, i)) ? PySequence_Fast_GET_ITEM(fill, j++)
                                                                : PySequence_Fast_GET_ITEM(values, i);
        PyList_SET_ITEM(out, i, Py_NewRef(v));
    }
    goto done;
python:
    out = Py_NewRef(Py_None);
done:
    Py_XDECREF(mask);
    Py_XDECREF(fill);
    Py_XDECREF(values);
    return out;
}

/* int_extremes(column) -> (min(column), max(column)) of a non-empty array('q'), read as it is; None for any other
 * column (a float's NaN makes min and max depend on the order: Python's then). */
PyObject *cm_int_extremes(PyObject *mod, PyObject *column) {
    Py_buffer view = {0};
    (void)mod;
    if (!PyObject_CheckBuffer(column) || PyBytes_Check(column) || PyByteArray_Check(column)) Py_RETURN_NONE;
    if (PyObject_GetBuffer(column, &view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) return NULL;
    PyObject *out;
    if (!cm_eight_byte(&view, "q") || view.len < 8) {
        out = Py_NewRef(Py_None);
    } else {
        const int64_t *v = (const int64_t *)view.buf;
        int64_t low = v[0], high = v[0];
        for (Py_ssize_t i = 1; i < view.len / 8; i++) {
            if (v[i] < low) low = v[i];
            if (v[i] > high) high = v[i];
        }
        out = Py_BuildValue("(LL)", (long long)low, (long long)high);
    }
    PyBuffer_Release(&view);
    return out;
}

/* doubles(values) -> bytes: a list's (or tuple's) floats as an array('d') holds them, 8 bytes each in the machine's
 * order, NaN for a None (not logged): what array('d').extend of them with NaN for None appends; None for a column
 * of other values (an int among them: Python converts them). */
PyObject *cm_doubles(PyObject *mod, PyObject *values) {
    (void)mod;
    if (!PyList_CheckExact(values) && !PyTuple_CheckExact(values)) Py_RETURN_NONE;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(values);
    PyObject **v = PySequence_Fast_ITEMS(values);
    for (Py_ssize_t i = 0; i < n; i++)
        if (v[i] != Py_None && !PyFloat_CheckExact(v[i])) Py_RETURN_NONE;
    if (n > PY_SSIZE_T_MAX / 8) return PyErr_NoMemory();
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * 8);
    if (out == NULL) return NULL;
    char *at = PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        double d = v[i] == Py_None ? Py_NAN : PyFloat_AS_DOUBLE(v[i]);
        memcpy(at + 8 * i, &d, 8);
    }
    return out;
}
