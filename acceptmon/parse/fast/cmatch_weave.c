/* cmatch_weave.c: rows of several plans (a vLLM log's spec and throughput lines, interleaved, one plan's piece each)
 * woven into one order and back, and each row's load carried per unit as the normalizer carries it:
 *   woven        each row's value of a column, from the pieces' columns by the rows' order (parse/unmade.py)
 *   unwoven      a column of every row split into the pieces' columns (measure/plain.py)
 *   spread       each row's piece's value (measure/facts.py: each row's kind)
 *   interleaved  each row's load as the normalizer carries it per unit, and whether it is steady (measure/facts.py)
 * Each is the Python loop beside it (kept where the module is not built), value for value; interleaved compares and
 * reads the truth of values of the lane's types alone (cm_all_plain, cmatch_facts.c) and returns None otherwise.
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
/* v == 0 for a cm_plain_value's value, as Python compares it (None, a text, a list: False). */
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
        if (!cm_all_plain(cols[j][2])) goto python;
    }
    for (Py_ssize_t i = 0; i < order.len; i++) {
        PyObject *unit = PySequence_Fast_GET_ITEM(units, i);
        if (!PyUnicode_CheckExact(unit)) goto python;
    }
    { /* (every unit's state: [after, tput, running, queue] of the lane's types) */
        Py_ssize_t pos = 0;
        PyObject *key, *now;
        while (PyDict_Next(state, &pos, &key, &now))
            if (!PyUnicode_CheckExact(key) || !PyList_CheckExact(now) || PyList_GET_SIZE(now) != 4 || !cm_all_plain(now))
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
        PyList_SET_ITEM(res[2], i, PyBool_FromLong(is_zero(own[2]) && !cm_truth(after)));
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

/* codes(values) -> (distinct, codes) | None: a list's values as its distinct objects (a tuple, in order of first
 * appearance) and each value's place among them (uint16, in the machine's order: an array('H')'s bytes), objects
 * told apart by identity (as a pickle's memo does); None for a list of more distinct objects than half its length
 * or than 65535 (nothing to gain), or for anything but a list with a value. parse/unmade.py's Coded. */
PyObject *cm_codes(PyObject *mod, PyObject *values) {
    (void)mod;
    if (!PyList_CheckExact(values) || PyList_GET_SIZE(values) == 0) Py_RETURN_NONE;
    Py_ssize_t n = PyList_GET_SIZE(values), most = n / 2 < 65535 ? n / 2 : 65535, size = 64, ndistinct = 0;
    while (size < 2 * most + 2) size *= 2;
    PyObject **keys = PyMem_Calloc((size_t)size, sizeof(PyObject *));
    uint16_t *slot_code = PyMem_Calloc((size_t)size, sizeof(uint16_t));
    PyObject *distinct = PyList_New(0), *codes = PyBytes_FromStringAndSize(NULL, 2 * n), *out = NULL;
    if (keys == NULL || slot_code == NULL) PyErr_NoMemory();
    if (keys == NULL || slot_code == NULL || distinct == NULL || codes == NULL) goto done;
    uint16_t *at = (uint16_t *)PyBytes_AS_STRING(codes);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PyList_GET_ITEM(values, i);
        size_t h = ((size_t)(uintptr_t)v >> 4) * 0x9E3779B97F4A7C15u, k = h & (size_t)(size - 1);
        while (keys[k] != NULL && keys[k] != v) k = (k + 1) & (size_t)(size - 1);
        if (keys[k] == NULL) {
            if (ndistinct >= most) { /* too many: the list as it is */
                out = Py_NewRef(Py_None);
                goto done;
            }
            if (PyList_Append(distinct, v) < 0) goto done;
            keys[k] = v, slot_code[k] = (uint16_t)ndistinct++;
        }
        at[i] = slot_code[k];
    }
    PyObject *tuple = PyList_AsTuple(distinct);
    if (tuple != NULL) out = Py_BuildValue("(NO)", tuple, codes);
done:
    PyMem_Free(keys), PyMem_Free(slot_code);
    Py_XDECREF(distinct);
    Py_XDECREF(codes);
    return out;
}

/* decoded(values, codes) -> list: codes' inverse, each code (uint16 items of a buffer, an array('H')) the value at its
 * place in the tuple values; ValueError for a code past its end. */
PyObject *cm_decoded(PyObject *mod, PyObject *args) {
    PyObject *values, *codes_obj, *out = NULL;
    Py_buffer codes = {0};
    (void)mod;
    if (!PyArg_ParseTuple(args, "O!O", &PyTuple_Type, &values, &codes_obj)) return NULL;
    if (PyObject_GetBuffer(codes_obj, &codes, PyBUF_FORMAT) < 0) return NULL;
    const char *format = codes.format == NULL ? "B" : codes.format;
    if (format[0] == '@' || format[0] == '=') format++;
    if (codes.itemsize != 2 || strcmp(format, "H") != 0) {
        PyErr_SetString(PyExc_ValueError, "codes must be an array('H')");
        goto done;
    }
    Py_ssize_t n = codes.len / 2, nvalues = PyTuple_GET_SIZE(values);
    const uint16_t *at = (const uint16_t *)codes.buf;
    for (Py_ssize_t i = 0; i < n; i++)
        if (at[i] >= nvalues) {
            PyErr_SetString(PyExc_ValueError, "a code past the values");
            goto done;
        }
    if ((out = PyList_New(n)) == NULL) goto done;
    for (Py_ssize_t i = 0; i < n; i++) PyList_SET_ITEM(out, i, Py_NewRef(PyTuple_GET_ITEM(values, at[i])));
done:
    PyBuffer_Release(&codes);
    return out;
}
