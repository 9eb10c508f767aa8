/* cmatch_masks.c: the doctor's detectors' loops over a stretch of lines (acceptmon/diagnose), the same answers as
 * their Python, which stays where the module is not built:
 *   every      the doctor's masks over a block's lines and-ed, each column's test asked in C (diagnose/detector.py)
 *   log2_sums  accept lengths added per log2 bucket of the sequence length (diagnose/detect_context.py's LongContext)
 */
#include "cmatch.h"
#include <math.h>

/* A column's test, line by line (every's tests): TEST_TRUTH the entry's truth; TEST_KNOWN whether it is not None;
 * TEST_NONE whether it is None; 0 to 5 (Py_LT to Py_GE) the entry compared with a bound, ``absent`` for None; the
 * answer turned over where ``negate``. */
typedef struct {
    int code, absent, negate;
    PyObject *bound; /* (borrowed from the tests list, which the caller holds) */
} Test;

static int test_of(PyObject *spec, Test *test) {
    test->code = TEST_TRUTH, test->absent = 0, test->negate = 0, test->bound = Py_None;
    if (spec == Py_None) return 0;
    if (!PyArg_ParseTuple(spec, "iOpp", &test->code, &test->bound, &test->absent, &test->negate)) return -1;
    if (test->code < TEST_NONE || test->code > Py_GE) {
        PyErr_SetString(PyExc_ValueError, "a test's code is -3 to 5");
        return -1;
    }
    return 0;
}

/* 1 or 0: the test's answer for one entry; -1 with an error set. */
static int tested(const Test *test, PyObject *v) {
    int answer;
    if (test->code == TEST_KNOWN || test->code == TEST_NONE) {
        answer = (v == Py_None) == (test->code == TEST_NONE);
    } else if (test->code == TEST_TRUTH) {
        answer = v == Py_True ? 1 : v == Py_False || v == Py_None ? 0 : PyObject_IsTrue(v);
    } else {
        answer = v == Py_None ? test->absent : PyObject_RichCompareBool(v, test->bound, test->code);
    }
    return answer < 0 ? -1 : answer != test->negate;
}

/* every(columns, tests=None) -> bytes: line by line, 1 where the entry of each column passes its test (tests: one
 * per column, None for the entry's truth as ``a and b and ...`` takes it, else (code, bound, absent, negate): see
 * Test), else 0: the doctor's masks and-ed (diagnose/detector.py's every). A column is a list or tuple, bytes (a
 * mask every gave: a byte that is not 0 is true; tested for its truth alone), or any other iterable, read once; all
 * of one length (ValueError else); at least one. */
PyObject *cm_every(PyObject *mod, PyObject *args) {
    PyObject *columns, *tests_obj = Py_None, *tests = NULL, *list = NULL, *out = NULL;
    (void)mod;
    if (!PyArg_ParseTuple(args, "O|O", &columns, &tests_obj)) return NULL;
    list = PySequence_Fast(columns, "every takes a sequence of columns");
    if (list == NULL) return NULL;
    Py_ssize_t ncols = PySequence_Fast_GET_SIZE(list), n = -1;
    if (tests_obj != Py_None) {
        tests = PySequence_Fast(tests_obj, "tests must be a sequence");
        if (tests == NULL) goto done;
        if (PySequence_Fast_GET_SIZE(tests) != ncols) {
            PyErr_SetString(PyExc_ValueError, "every takes one test per column");
            goto done;
        }
    }
    if (ncols == 0) PyErr_SetString(PyExc_ValueError, "every needs a column");
    for (Py_ssize_t c = 0; c < ncols && !PyErr_Occurred(); c++) {
        PyObject *column = PySequence_Fast_GET_ITEM(list, c);
        Test test;
        if (test_of(tests == NULL ? Py_None : PySequence_Fast_GET_ITEM(tests, c), &test) < 0) break;
        int is_bytes = PyBytes_Check(column);
        if (is_bytes && test.code != TEST_TRUTH) {
            PyErr_SetString(PyExc_ValueError, "a mask of bytes is tested for its truth alone");
            break;
        }
        PyObject *seq = is_bytes ? Py_NewRef(column) : PySequence_Fast(column, "a column must be iterable");
        if (seq == NULL) break;
        Py_ssize_t len = is_bytes ? PyBytes_GET_SIZE(seq) : PySequence_Fast_GET_SIZE(seq);
        if (n < 0) {
            n = len;
            out = PyBytes_FromStringAndSize(NULL, n);
            if (out != NULL) memset(PyBytes_AS_STRING(out), 1, (size_t)n);
        } else if (len != n) {
            PyErr_SetString(PyExc_ValueError, "every takes columns of one length");
        }
        char *mark = out != NULL && !PyErr_Occurred() ? PyBytes_AS_STRING(out) : NULL;
        if (mark != NULL && is_bytes) {
            const char *b = PyBytes_AS_STRING(seq);
            for (Py_ssize_t i = 0; i < n; i++) mark[i] &= b[i] != 0;
        } else if (mark != NULL) {
            for (Py_ssize_t i = 0; i < n; i++) {
                if (!mark[i]) continue; /* `and` reads no further: a later entry's test is never asked */
                if (i >= PySequence_Fast_GET_SIZE(seq)) { /* (a comparison's Python code shortened the list) */
                    PyErr_SetString(PyExc_RuntimeError, "a column changed size while it was read");
                    break;
                }
                PyObject *v = Py_NewRef(PySequence_Fast_GET_ITEM(seq, i));
                int answer = tested(&test, v);
                Py_DECREF(v);
                if (answer < 0) break;
                mark[i] = (char)answer;
            }
        }
        Py_DECREF(seq);
    }
done:
    Py_DECREF(list);
    Py_XDECREF(tests);
    if (PyErr_Occurred()) Py_CLEAR(out);
    return out;
}

/* log2_sums(seqs, lengths, totals) -> [(key, count, total, first)], keys in the order first seen, or None: each
 * sequence length's key int(seq).bit_length(), with its lines counted, their lengths added in order to totals.get(key,
 * 0.0), and the place of its first line (diagnose/detect_context.py's LongContext). None where a seq is not a float
 * below 2**63 in magnitude, a length not a float or an int within EXACT, or a total not a float: Python does it. */
PyObject *cm_log2_sums(PyObject *mod, PyObject *args) {
    PyObject *seqs_obj, *lengths_obj, *totals, *seqs = NULL, *lengths = NULL, *out = NULL;
    int64_t count[64] = {0};
    double sum[64];
    Py_ssize_t first[64];
    int order[64], nkeys = 0;
    (void)mod;
    if (!PyArg_ParseTuple(args, "OOO!", &seqs_obj, &lengths_obj, &PyDict_Type, &totals)) return NULL;
    seqs = PySequence_Fast(seqs_obj, "seqs must be a sequence");
    lengths = seqs == NULL ? NULL : PySequence_Fast(lengths_obj, "lengths must be a sequence");
    if (lengths == NULL) goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seqs);
    if (PySequence_Fast_GET_SIZE(lengths) != n) {
        PyErr_SetString(PyExc_ValueError, "seqs and lengths must be of one length");
        goto done;
    }
    PyObject **s = PySequence_Fast_ITEMS(seqs), **l = PySequence_Fast_ITEMS(lengths);
    for (Py_ssize_t i = 0; i < n; i++) {
        double d, x;
        if (!PyFloat_CheckExact(s[i]) || !cm_double_at(l[i], &x)) goto python;
        d = PyFloat_AS_DOUBLE(s[i]);
        if (!(fabs(d) < 9223372036854775808.0)) goto python; /* (NaN too) */
        long long whole = (long long)d;                      /* int(d): toward zero */
        uint64_t mag = whole < 0 ? (uint64_t)0 - (uint64_t)whole : (uint64_t)whole;
        int key = 0;
        for (; mag; mag >>= 1) key++;
        if (count[key] == 0) {
            PyObject *k = PyLong_FromLong(key), *start;
            if (k == NULL) goto done;
            start = PyDict_GetItemWithError(totals, k);
            Py_DECREF(k);
            if (start == NULL && PyErr_Occurred()) goto done;
            if (start != NULL && !PyFloat_CheckExact(start)) goto python;
            sum[key] = start == NULL ? 0.0 : PyFloat_AS_DOUBLE(start);
            first[key] = i, order[nkeys++] = key;
        }
        count[key]++;
        sum[key] += x;
    }
    out = PyList_New(nkeys);
    for (int j = 0; out != NULL && j < nkeys; j++) {
        int key = order[j];
        PyObject *t = Py_BuildValue("(iLdn)", key, (long long)count[key], sum[key], first[key]);
        if (t == NULL) Py_CLEAR(out);
        else PyList_SET_ITEM(out, j, t);
    }
    goto done;
python:
    out = Py_NewRef(Py_None);
done:
    Py_XDECREF(seqs);
    Py_XDECREF(lengths);
    return out;
}
