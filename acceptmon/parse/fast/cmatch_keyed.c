/* cmatch_keyed.c: two of the doctor's loops over a stretch of lines, the same answers as their Python, which stays
 * where the module is not built or a value is not one read here: its #running-req buckets summed in one pass
 * (diagnose/state.py's RunState._buckets: kept_keys, keyed_sums), and the largest speculative KV reserve
 * (diagnose/detect_load.py's Retractions: reserve_max); and values grouped by their line's key (grouped: a run's
 * throughputs by unit, measure/figures.py; a unit's lines, measure/plain.py).
 *
 * A line is kept where its steady flag and its #running-req are true and its throughput is logged (not None). Each
 * kept line adds, to its bucket: one line, its throughput (added one by one in line order, from the bucket's
 * total), its #running-req, and its accept length where logged (counted, and added in order from the bucket's). */
#include "cmatch.h"

#define EXACT ((int64_t)1 << 53)

/* A float, or an int within EXACT, as a double (as Python adds it to a float); 0 for anything else. */
static int number_at(PyObject *v, double *x) {
    if (PyFloat_CheckExact(v)) return *x = PyFloat_AS_DOUBLE(v), 1;
    if (!PyLong_CheckExact(v)) return 0;
    int overflow = 0;
    long long got = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (got == -1 && PyErr_Occurred()) return PyErr_Clear(), 0;
    if (overflow || got > EXACT || got < -EXACT) return 0;
    return *x = (double)got, 1;
}

typedef struct {
    PyObject *steady, *running, *tputs; /* sequences (PySequence_Fast) of one length */
    Py_ssize_t n;
} Lines;

static int lines_of(Lines *l, PyObject *steady, PyObject *running, PyObject *tputs) {
    l->steady = PySequence_Fast(steady, "steady must be a sequence");
    l->running = l->steady ? PySequence_Fast(running, "running must be a sequence") : NULL;
    l->tputs = l->running ? PySequence_Fast(tputs, "tputs must be a sequence") : NULL;
    if (l->tputs == NULL) return -1;
    l->n = PySequence_Fast_GET_SIZE(l->steady);
    if (PySequence_Fast_GET_SIZE(l->running) != l->n || PySequence_Fast_GET_SIZE(l->tputs) != l->n)
        return PyErr_SetString(PyExc_ValueError, "columns of different lengths"), -1;
    return 0;
}

static void lines_free(Lines *l) {
    Py_XDECREF(l->steady);
    Py_XDECREF(l->running);
    Py_XDECREF(l->tputs);
}

/* 1 if line i is kept, 0 if not, -1 with an error set. */
static int kept(const Lines *l, Py_ssize_t i) {
    if (PySequence_Fast_GET_ITEM(l->tputs, i) == Py_None) return 0;
    int s = PyObject_IsTrue(PySequence_Fast_GET_ITEM(l->steady, i));
    if (s <= 0) return s;
    return PyObject_IsTrue(PySequence_Fast_GET_ITEM(l->running, i));
}

/* kept_keys(steady, running, tputs) -> the #running-req of the kept lines, each once, in the order first kept. */
PyObject *cm_kept_keys(PyObject *mod, PyObject *args) {
    PyObject *steady, *running, *tputs, *out = NULL, *seen = NULL;
    Lines l = {NULL, NULL, NULL, 0};
    (void)mod;
    if (!PyArg_ParseTuple(args, "OOO", &steady, &running, &tputs) || lines_of(&l, steady, running, tputs) < 0) goto done;
    if ((out = PyList_New(0)) == NULL || (seen = PySet_New(NULL)) == NULL) goto fail;
    for (Py_ssize_t i = 0; i < l.n; i++) {
        int k = kept(&l, i);
        if (k < 0) goto fail;
        if (!k) continue;
        PyObject *r = PySequence_Fast_GET_ITEM(l.running, i);
        int in = PySet_Contains(seen, r);
        if (in < 0 || (!in && (PySet_Add(seen, r) < 0 || PyList_Append(out, r) < 0))) goto fail;
    }
    goto done;
fail:
    Py_CLEAR(out);
done:
    Py_XDECREF(seen);
    lines_free(&l);
    return out;
}

typedef struct {
    long long lines, running, counted;
    double tput, total;
} Sums;

/* keyed_sums(steady, running, tputs, lengths, number, starts) -> per bucket (lines, throughput, running, accept
 * lengths counted, their total): number maps each kept #running-req to its bucket's index, starts gives each
 * bucket's (throughput, accept length total) to add from (floats). None where a value is not one read here. */
PyObject *cm_keyed_sums(PyObject *mod, PyObject *args) {
    PyObject *steady, *running, *tputs, *lengths_obj, *number, *starts_obj, *lengths = NULL, *starts = NULL;
    PyObject *out = NULL;
    Sums *sums = NULL;
    Lines l = {NULL, NULL, NULL, 0};
    (void)mod;
    if (!PyArg_ParseTuple(args, "OOOOO!O", &steady, &running, &tputs, &lengths_obj, &PyDict_Type, &number, &starts_obj) ||
        lines_of(&l, steady, running, tputs) < 0 ||
        (lengths = PySequence_Fast(lengths_obj, "lengths must be a sequence")) == NULL ||
        (starts = PySequence_Fast(starts_obj, "starts must be a sequence")) == NULL)
        goto done;
    if (PySequence_Fast_GET_SIZE(lengths) != l.n) {
        PyErr_SetString(PyExc_ValueError, "columns of different lengths");
        goto done;
    }
    Py_ssize_t nb = PySequence_Fast_GET_SIZE(starts);
    if ((sums = PyMem_Calloc((size_t)(nb ? nb : 1), sizeof(Sums))) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t b = 0; b < nb; b++) {
        PyObject *s = PySequence_Fast_GET_ITEM(starts, b);
        if (!PyTuple_CheckExact(s) || PyTuple_GET_SIZE(s) != 2 || !PyFloat_CheckExact(PyTuple_GET_ITEM(s, 0)) ||
            !PyFloat_CheckExact(PyTuple_GET_ITEM(s, 1)))
            goto python;
        sums[b].tput = PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(s, 0));
        sums[b].total = PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(s, 1));
    }
    for (Py_ssize_t i = 0; i < l.n; i++) {
        int k = kept(&l, i);
        if (k < 0) goto done;
        if (!k) continue;
        PyObject *r = PySequence_Fast_GET_ITEM(l.running, i), *at = PyDict_GetItemWithError(number, r);
        if (at == NULL) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_KeyError, "a kept #running-req without a bucket");
            goto done;
        }
        Py_ssize_t b = PyLong_AsSsize_t(at);
        if (b == -1 && PyErr_Occurred()) goto done;
        if (b < 0 || b >= nb) {
            PyErr_SetString(PyExc_IndexError, "a bucket index out of range");
            goto done;
        }
        double t, x, a;
        PyObject *len = PySequence_Fast_GET_ITEM(lengths, i);
        if (!number_at(PySequence_Fast_GET_ITEM(l.tputs, i), &t) || !PyLong_CheckExact(r) || !number_at(r, &x) ||
            (len != Py_None && !number_at(len, &a)))
            goto python;
        sums[b].lines++;
        sums[b].tput += t;
        sums[b].running += (long long)x;
        if (len != Py_None) sums[b].counted++, sums[b].total += a;
    }
    out = PyList_New(nb);
    for (Py_ssize_t b = 0; out != NULL && b < nb; b++) {
        PyObject *t = Py_BuildValue("(LdLLd)", sums[b].lines, sums[b].tput, sums[b].running, sums[b].counted, sums[b].total);
        if (t == NULL) Py_CLEAR(out);
        else PyList_SET_ITEM(out, b, t);
    }
    goto done;
python:
    out = Py_NewRef(Py_None);
done:
    PyMem_Free(sums);
    Py_XDECREF(lengths);
    Py_XDECREF(starts);
    lines_free(&l);
    return out;
}

/* reserve_max(running, tokens, usage, lines, c, start) -> (the largest speculative KV reserve r*c / (t / u) of the
 * lines where r, t and u are all true, or start where none is larger, and the first line that reached it, or None):
 * diagnose/detect_load.py's Retractions, its ints multiplied exactly and divided as Python divides ints within 2**53
 * and floats. None where a value is not one read here, or a pool t / u is 0 (Python's ZeroDivisionError). */
PyObject *cm_reserve_max(PyObject *mod, PyObject *args) {
    PyObject *cols[4], *seqs[4] = {NULL, NULL, NULL, NULL}, *out = NULL, *best_line = Py_None;
    long long c;
    double best;
    (void)mod;
    if (!PyArg_ParseTuple(args, "OOOOLd", &cols[0], &cols[1], &cols[2], &cols[3], &c, &best)) return NULL;
    for (int j = 0; j < 4; j++)
        if ((seqs[j] = PySequence_Fast(cols[j], "columns must be sequences")) == NULL) goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seqs[0]);
    for (int j = 1; j < 4; j++)
        if (PySequence_Fast_GET_SIZE(seqs[j]) != n) {
            PyErr_SetString(PyExc_ValueError, "columns of different lengths");
            goto done;
        }
    if (c < 0 || c > EXACT) goto python;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *r = PySequence_Fast_GET_ITEM(seqs[0], i), *t = PySequence_Fast_GET_ITEM(seqs[1], i);
        PyObject *u = PySequence_Fast_GET_ITEM(seqs[2], i);
        int judged = 1;
        for (int j = 0; j < 3 && judged; j++) {
            judged = PyObject_IsTrue(PySequence_Fast_GET_ITEM(seqs[j], i));
            if (judged < 0) goto done;
        }
        if (!judged) continue;
        double rv, tv, uv;
        if (!PyLong_CheckExact(r) || !PyLong_CheckExact(t) || !number_at(r, &rv) || !number_at(t, &tv) ||
            !number_at(u, &uv))
            goto python;
        if (rv < 0 || (c && rv > (double)(EXACT / c))) goto python; /* r * c within 2**53 */
        double pool = tv / uv;
        if (pool == 0.0) goto python;
        double x = (double)((long long)rv * c) / pool;
        if (x > best) best = x, best_line = PySequence_Fast_GET_ITEM(seqs[3], i);
    }
    out = Py_BuildValue("(dO)", best, best_line);
    goto done;
python:
    out = Py_NewRef(Py_None);
done:
    for (int j = 0; j < 4; j++) Py_XDECREF(seqs[j]);
    return out;
}

/* grouped(keys, values) -> {key: [value, ...]}: each value that is not None under its line's key (str), in line
 * order, the keys in the order of their first value kept; None where a key is not a str (Python groups them: only a
 * str's hash and equality run no Python code while the sequences are read). */
PyObject *cm_grouped(PyObject *mod, PyObject *args) {
    PyObject *keys_obj, *values_obj, *keys = NULL, *values = NULL, *out = NULL, *last = NULL, *into = NULL;
    (void)mod;
    if (!PyArg_ParseTuple(args, "OO", &keys_obj, &values_obj) ||
        (keys = PySequence_Fast(keys_obj, "keys must be a sequence")) == NULL ||
        (values = PySequence_Fast(values_obj, "values must be a sequence")) == NULL)
        goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(keys);
    if (PySequence_Fast_GET_SIZE(values) != n) {
        PyErr_SetString(PyExc_ValueError, "keys and values of different lengths");
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (!PyUnicode_CheckExact(PySequence_Fast_GET_ITEM(keys, i))) {
            out = Py_NewRef(Py_None);
            goto done;
        }
    if ((out = PyDict_New()) == NULL) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PySequence_Fast_GET_ITEM(values, i), *k = PySequence_Fast_GET_ITEM(keys, i);
        if (v == Py_None) continue;
        if (k != last) { /* (a key object like the line before's: its list at hand) */
            into = PyDict_GetItemWithError(out, k);
            if (into == NULL) {
                if (PyErr_Occurred() || (into = PyList_New(0)) == NULL) goto fail;
                int rc = PyDict_SetItem(out, k, into);
                Py_DECREF(into); /* (the dict holds it) */
                if (rc < 0) goto fail;
            }
            last = k;
        }
        if (PyList_Append(into, v) < 0) goto fail;
    }
    goto done;
fail:
    Py_CLEAR(out);
done:
    Py_XDECREF(keys);
    Py_XDECREF(values);
    return out;
}
