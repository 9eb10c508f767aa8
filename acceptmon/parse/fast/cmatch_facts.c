/* cmatch_facts.c: the per-row loops that turn the lane's rows of several plans (a vLLM log's spec and throughput
 * lines, interleaved) into the doctor's facts, and the depth inputs' and detectors' loops over them:
 *   woven        each row's value of a column, from the pieces' columns by the rows' order (parse/unmade.py)
 *   unwoven      a column of every row split into the pieces' columns (measure/plain.py)
 *   spread       each row's piece's value (measure/facts.py: each row's kind)
 *   interleaved  each row's load as the normalizer carries it per unit, and whether it is steady (measure/facts.py)
 *   drafts_each  the rows whose per-position rates are weighed, with their drafts (diagnose/depth.py)
 *   last_rates   warm rows' last per-position rate, and their lines (diagnose/detect_accept.py)
 *   masked       a column's values where a mask is true, else None (measure/plain.py)
 *   filled       a column's values, those where a mask is true replaced in order (measure/facts.py)
 *   int_extremes the least and the largest of a column of machine ints (measure/plain.py)
 * Each is the Python loop beside it (kept where the module is not built), value for value. The loops that read
 * values' truth or compare them run only on values of the lane's exact types (None, bool, int, float, str, list,
 * tuple), checked before anything is changed, so that no Python code runs inside them; for other values they return
 * None and Python does it.
 */
#include "cmatch.h"

/* The rows' pieces, from order (bytes: each row's piece by its index): their number of rows into counts (n of them);
 * -1 with ValueError where a row's piece is not below n. */
static int piece_counts(const unsigned char *order, Py_ssize_t rows, Py_ssize_t n, Py_ssize_t *counts) {
    for (Py_ssize_t j = 0; j < n; j++) counts[j] = 0;
    for (Py_ssize_t i = 0; i < rows; i++) {
        if (order[i] >= n) {
            PyErr_SetString(PyExc_ValueError, "a row's piece is past the pieces");
            return -1;
        }
        counts[order[i]]++;
    }
    return 0;
}

/* woven(order, columns) -> [value, ...]: row i's value is the next one of columns[order[i]] (each piece's column holds
 * its rows' values, in order, and as many as order gives it rows). */
PyObject *cm_woven(PyObject *mod, PyObject *args) {
    Py_buffer order = {0};
    PyObject *columns_obj, *columns = NULL, *out = NULL, **seqs = NULL;
    Py_ssize_t *counts = NULL, n = 0;
    (void)mod;
    if (!PyArg_ParseTuple(args, "y*O", &order, &columns_obj) ||
        (columns = PySequence_Fast(columns_obj, "columns must be a sequence")) == NULL)
        goto done;
    n = PySequence_Fast_GET_SIZE(columns);
    if ((seqs = PyMem_Calloc((size_t)n + 1, sizeof *seqs)) == NULL ||
        (counts = PyMem_Calloc((size_t)n + 1, sizeof *counts)) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t j = 0; j < n; j++)
        if ((seqs[j] = PySequence_Fast(PySequence_Fast_GET_ITEM(columns, j), "a column must be a sequence")) == NULL)
            goto done;
    const unsigned char *at = order.buf;
    if (piece_counts(at, order.len, n, counts) < 0) goto done;
    for (Py_ssize_t j = 0; j < n; j++)
        if (counts[j] != PySequence_Fast_GET_SIZE(seqs[j])) {
            PyErr_SetString(PyExc_ValueError, "a piece's column and its rows are of different lengths");
            goto done;
        }
    if ((out = PyList_New(order.len)) == NULL) goto done;
    for (Py_ssize_t j = 0; j < n; j++) counts[j] = 0; /* (now each piece's next value) */
    for (Py_ssize_t i = 0; i < order.len; i++) {
        unsigned char j = at[i];
        PyList_SET_ITEM(out, i, Py_NewRef(PySequence_Fast_GET_ITEM(seqs[j], counts[j])));
        counts[j]++;
    }
done:
    for (Py_ssize_t j = 0; seqs != NULL && j < n; j++) Py_XDECREF(seqs[j]);
    PyMem_Free(seqs);
    PyMem_Free(counts);
    Py_XDECREF(columns);
    if (order.obj != NULL) PyBuffer_Release(&order);
    return out;
}

/* unwoven(order, values, n) -> [[value, ...], ...]: each of the n pieces' values, in order (woven's inverse). */
PyObject *cm_unwoven(PyObject *mod, PyObject *args) {
    Py_buffer order = {0};
    PyObject *values_obj, *values = NULL, *out = NULL;
    Py_ssize_t n, *counts = NULL;
    (void)mod;
    if (!PyArg_ParseTuple(args, "y*On", &order, &values_obj, &n) ||
        (values = PySequence_Fast(values_obj, "values must be a sequence")) == NULL)
        goto done;
    if (n < 0 || n > 256 || PySequence_Fast_GET_SIZE(values) != order.len) {
        PyErr_SetString(PyExc_ValueError, "values and order of different lengths, or pieces not within 0..256");
        goto done;
    }
    if ((counts = PyMem_Calloc((size_t)n + 1, sizeof *counts)) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    const unsigned char *at = order.buf;
    if (piece_counts(at, order.len, n, counts) < 0 || (out = PyList_New(n)) == NULL) goto done;
    for (Py_ssize_t j = 0; j < n; j++) {
        PyObject *piece = PyList_New(counts[j]);
        if (piece == NULL) {
            Py_CLEAR(out);
            goto done;
        }
        PyList_SET_ITEM(out, j, piece);
        counts[j] = 0;
    }
    for (Py_ssize_t i = 0; i < order.len; i++) {
        unsigned char j = at[i];
        PyList_SET_ITEM(PyList_GET_ITEM(out, j), counts[j]++, Py_NewRef(PySequence_Fast_GET_ITEM(values, i)));
    }
done:
    PyMem_Free(counts);
    Py_XDECREF(values);
    if (order.obj != NULL) PyBuffer_Release(&order);
    return out;
}

/* spread(order, values) -> [values[order[i]], ...]. */
PyObject *cm_spread(PyObject *mod, PyObject *args) {
    Py_buffer order = {0};
    PyObject *values_obj, *values = NULL, *out = NULL;
    (void)mod;
    if (!PyArg_ParseTuple(args, "y*O", &order, &values_obj) ||
        (values = PySequence_Fast(values_obj, "values must be a sequence")) == NULL)
        goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(values);
    const unsigned char *at = order.buf;
    for (Py_ssize_t i = 0; i < order.len; i++)
        if (at[i] >= n) {
            PyErr_SetString(PyExc_IndexError, "a row's piece is past the values");
            goto done;
        }
    if ((out = PyList_New(order.len)) == NULL) goto done;
    for (Py_ssize_t i = 0; i < order.len; i++) PyList_SET_ITEM(out, i, Py_NewRef(PySequence_Fast_GET_ITEM(values, at[i])));
done:
    Py_XDECREF(values);
    if (order.obj != NULL) PyBuffer_Release(&order);
    return out;
}

/* A value of the lane's exact types, whose truth and comparisons run no Python code. */
static int plain_value(PyObject *v) {
    return v == Py_None || PyBool_Check(v) || PyLong_CheckExact(v) || PyFloat_CheckExact(v) || PyUnicode_CheckExact(v) ||
           PyList_CheckExact(v) || PyTuple_CheckExact(v);
}

/* Whether every value of a list or tuple is plain_value's. */
static int all_plain(PyObject *seq) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **v = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < n; i++)
        if (!plain_value(v[i])) return 0;
    return 1;
}

/* The truth of a plain_value's value (bool(v)), which runs no Python code. */
static int truth(PyObject *v) {
    if (v == Py_None) return 0;
    if (PyBool_Check(v)) return v == Py_True;
    if (PyFloat_CheckExact(v)) return PyFloat_AS_DOUBLE(v) != 0.0;
    if (PyLong_CheckExact(v)) return PyObject_IsTrue(v);
    return PyObject_Size(v) > 0; /* (str, list, tuple) */
}

/* v == 0 for a plain_value's value, as Python compares it (None, a text, a list: False). */
static int is_zero(PyObject *v) {
    if (PyFloat_CheckExact(v)) return PyFloat_AS_DOUBLE(v) == 0.0;
    if (PyLong_CheckExact(v) || PyBool_Check(v)) return !PyObject_IsTrue(v);
    return 0;
}

/* interleaved(order, units, loads, state) -> (tput, running, steady), or None: rows of several pieces in order
 * (order: each row's piece; units: each row's unit, a str), each one's load as measure/facts.py's _interleaved
 * carries it. loads[j] is None (piece j's rows carry their unit's load) or (tput, running, queue), piece j's rows'
 * own; state maps a unit to [after, tput, running, queue], changed in place as the rows go: a load row's values
 * that are not None replace its unit's, each row's `after` is cleared. A load row's load is its own, another row's
 * its unit's; a row is steady where that queue == 0 and its unit's `after` was not set. None, and state unchanged, where a value is not of the lane's types. */
PyObject *cm_interleaved(PyObject *mod, PyObject *args) {
    Py_buffer order = {0};
    PyObject *units_obj, *loads_obj, *state, *units = NULL, *loads = NULL, *out = NULL, *res[3] = {NULL, NULL, NULL};
    PyObject *cols[256][3];
    Py_ssize_t n = 0, counts[256];
    (void)mod;
    memset(cols, 0, sizeof cols);
    if (!PyArg_ParseTuple(args, "y*OOO!", &order, &units_obj, &loads_obj, &PyDict_Type, &state) ||
        (units = PySequence_Fast(units_obj, "units must be a sequence")) == NULL ||
        (loads = PySequence_Fast(loads_obj, "loads must be a sequence")) == NULL)
        goto done;
    n = PySequence_Fast_GET_SIZE(loads);
    const unsigned char *at = order.buf;
    if (n > 256 || PySequence_Fast_GET_SIZE(units) != order.len) {
        PyErr_SetString(PyExc_ValueError, "units and order of different lengths, or more than 256 pieces");
        goto done;
    }
    if (piece_counts(at, order.len, n, counts) < 0) goto done;
    for (Py_ssize_t j = 0; j < n; j++) {
        PyObject *load = PySequence_Fast_GET_ITEM(loads, j), *three;
        if (load == Py_None) continue;
        if ((three = PySequence_Fast(load, "a piece's loads must be a sequence")) == NULL) goto done;
        int ok = PySequence_Fast_GET_SIZE(three) == 3;
        for (int c = 0; ok && c < 3; c++)
            ok = (cols[j][c] = PySequence_Fast(PySequence_Fast_GET_ITEM(three, c), "a load column must be a sequence")) != NULL &&
                 PySequence_Fast_GET_SIZE(cols[j][c]) == counts[j];
        Py_DECREF(three);
        if (!ok) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "a piece's loads are not 3 columns of its rows");
            goto done;
        }
        if (!all_plain(cols[j][2])) goto python;
    }
    for (Py_ssize_t i = 0; i < order.len; i++) {
        PyObject *unit = PySequence_Fast_GET_ITEM(units, i);
        if (!PyUnicode_CheckExact(unit)) goto python;
    }
    { /* (every unit's state: [after, tput, running, queue] of the lane's types) */
        Py_ssize_t pos = 0;
        PyObject *key, *now;
        while (PyDict_Next(state, &pos, &key, &now))
            if (!PyUnicode_CheckExact(key) || !PyList_CheckExact(now) || PyList_GET_SIZE(now) != 4 || !all_plain(now))
                goto python;
    }
    for (int c = 0; c < 3; c++)
        if ((res[c] = PyList_New(order.len)) == NULL) goto done;
    for (Py_ssize_t j = 0; j < n; j++) counts[j] = 0;
    PyObject *last_unit = NULL, *now = NULL;
    for (Py_ssize_t i = 0; i < order.len; i++) {
        unsigned char j = at[i];
        PyObject *unit = PySequence_Fast_GET_ITEM(units, i);
        if (unit != last_unit) {
            now = PyDict_GetItemWithError(state, unit); /* (str keys: no Python code runs) */
            if (now == NULL) {
                if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, unit);
                goto fail;
            }
            last_unit = unit;
        }
        PyObject *own[3] = {PyList_GET_ITEM(now, 1), PyList_GET_ITEM(now, 2), PyList_GET_ITEM(now, 3)};
        if (cols[j][0] != NULL) { /* (a load row: its own values, and its unit's where they are not None) */
            Py_ssize_t k = counts[j]++;
            for (int c = 0; c < 3; c++) {
                own[c] = PySequence_Fast_GET_ITEM(cols[j][c], k);
                if (own[c] != Py_None) PyList_SetItem(now, c + 1, Py_NewRef(own[c]));
            }
        }
        PyObject *after = PyList_GET_ITEM(now, 0);
        PyList_SET_ITEM(res[0], i, Py_NewRef(own[0]));
        PyList_SET_ITEM(res[1], i, Py_NewRef(own[1]));
        PyList_SET_ITEM(res[2], i, PyBool_FromLong(is_zero(own[2]) && !truth(after)));
        if (after != Py_False) PyList_SetItem(now, 0, Py_NewRef(Py_False));
    }
    out = PyTuple_Pack(3, res[0], res[1], res[2]);
    goto done;
python:
    out = Py_NewRef(Py_None);
    goto done;
fail:
    out = NULL;
done:
    for (int c = 0; c < 3; c++) Py_XDECREF(res[c]);
    for (Py_ssize_t j = 0; j < n && j < 256; j++)
        for (int c = 0; c < 3; c++) Py_XDECREF(cols[j][c]);
    Py_XDECREF(units);
    Py_XDECREF(loads);
    if (order.obj != NULL) PyBuffer_Release(&order);
    return out;
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
        if (!all_plain(seqs[c])) goto python;
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
        if (!truth(row) || !truth(PySequence_Fast_GET_ITEM(seqs[2], i)) || truth(PySequence_Fast_GET_ITEM(seqs[1], i)))
            continue;
        if (truth(tokens))
            k = Py_NewRef(tokens);
        else if ((k = PyLong_FromSsize_t(PySequence_Fast_GET_SIZE(row))) == NULL) /* (a list or tuple, not empty) */
            goto fail;
        PyObject *d = PyNumber_TrueDivide(truth(drafted) ? drafted : zero, k);
        Py_DECREF(k);
        if (d == NULL) goto fail;
        int rc = PyList_Append(kept, row) < 0 ? -1 : PyList_Append(drafts, d);
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
    if (!all_plain(warm)) goto python;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *r = PySequence_Fast_GET_ITEM(rates, i);
        if (!truth(PySequence_Fast_GET_ITEM(warm, i))) continue;
        if (!plain_value(r)) goto python;
        if ((PyList_CheckExact(r) || PyTuple_CheckExact(r)) && PySequence_Fast_GET_SIZE(r) > 0) {
            PyObject *last = PySequence_Fast_GET_ITEM(r, PySequence_Fast_GET_SIZE(r) - 1);
            if (last != Py_None && !PyFloat_CheckExact(last) && !PyLong_CheckExact(last)) goto python;
        }
    }
    if ((lasts = PyList_New(0)) == NULL || (at = PyList_New(0)) == NULL) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *r = PySequence_Fast_GET_ITEM(rates, i);
        if (!truth(PySequence_Fast_GET_ITEM(warm, i)) || !(PyList_CheckExact(r) || PyTuple_CheckExact(r))) continue;
        Py_ssize_t size = PySequence_Fast_GET_SIZE(r);
        PyObject *last = size ? PySequence_Fast_GET_ITEM(r, size - 1) : Py_None;
        if (last == Py_None) continue;
        PyObject *f = PyNumber_Float(last);
        if (f == NULL) goto fail;
        int rc = PyList_Append(lasts, f) < 0 ? -1 : PyList_Append(at, PySequence_Fast_GET_ITEM(lines, i));
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
    if (!all_plain(mask)) {
        out = Py_NewRef(Py_None);
        goto done;
    }
    if ((out = PyList_New(n)) == NULL) goto done;
    for (Py_ssize_t i = 0; i < n; i++)
        PyList_SET_ITEM(out, i,
                        Py_NewRef(truth(PySequence_Fast_GET_ITEM(mask, i)) ? PySequence_Fast_GET_ITEM(values, i) : Py_None));
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
    if (!all_plain(mask)) goto python;
    for (Py_ssize_t i = 0; i < n; i++) kept += truth(PySequence_Fast_GET_ITEM(mask, i));
    if (kept != PySequence_Fast_GET_SIZE(fill)) goto python;
    if ((out = PyList_New(n)) == NULL) goto done;
    for (Py_ssize_t i = 0, j = 0; i < n; i++) {
        PyObject *v = truth(PySequence_Fast_GET_ITEM(mask, i)) ? PySequence_Fast_GET_ITEM(fill, j++)
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
