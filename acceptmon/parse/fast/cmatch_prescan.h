/* cmatch_prescan.h: the searches of the parallel pre-scan, acceptmon/parse/prescan.py (included once, by cmatch.c). */
#ifndef ACCEPTMON_CMATCH_PRESCAN_H
#define ACCEPTMON_CMATCH_PRESCAN_H
#include "cmatch.h"
#include "cmatch_build.h"

/* ---- the parallel pre-scan (acceptmon/parse/prescan.py) --------------------------------------------- */

static int span_of(Py_buffer *view, Py_ssize_t *start, Py_ssize_t *end) {
    if (*start < 0) *start = 0;
    if (*end > view->len) *end = view->len;
    if (*end < *start) *end = *start;
    return 0;
}

/* find_any(buf, start, end, words) -> the first offset in buf[start:end] where any word starts, or -1 */
static PyObject *find_any(PyObject *mod, PyObject *args) {
    Py_buffer view;
    Py_ssize_t start, end;
    PyObject *words;
    (void)mod;
    if (!PyArg_ParseTuple(args, "y*nnO", &view, &start, &end, &words)) return NULL;
    span_of(&view, &start, &end);
    PyObject *fast = PySequence_Fast(words, "words must be a sequence of bytes");
    Py_ssize_t best = -1;
    for (Py_ssize_t i = 0; fast != NULL && i < PySequence_Fast_GET_SIZE(fast); i++) {
        Text t;
        if (text_of(PySequence_Fast_GET_ITEM(fast, i), &t) < 0) {
            Py_CLEAR(fast);
            break;
        }
        Py_ssize_t stop = best < 0 || best + t.n - 1 > end ? end : best + t.n - 1; /* only earlier starts */
        if (t.n == 0 || stop - start < t.n) continue;
        const uint8_t *base = (const uint8_t *)view.buf;
        const uint8_t *hit = memmem(base + start, (size_t)(stop - start), t.s, (size_t)t.n);
        if (hit != NULL) best = hit - base;
    }
    PyBuffer_Release(&view);
    if (fast == NULL) return NULL;
    Py_DECREF(fast);
    return PyLong_FromSsize_t(best);
}

/* newlines(buf, start, end) -> how many newlines buf[start:end] holds */
static PyObject *newlines(PyObject *mod, PyObject *args) {
    Py_buffer view;
    Py_ssize_t start, end, n = 0;
    (void)mod;
    if (!PyArg_ParseTuple(args, "y*nn", &view, &start, &end)) return NULL;
    span_of(&view, &start, &end);
    const uint8_t *p = (const uint8_t *)view.buf + start, *stop = (const uint8_t *)view.buf + end;
    while (p < stop && (p = memchr(p, '\n', (size_t)(stop - p))) != NULL) n++, p++;
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(n);
}

static PyMethodDef module_functions[] = {
    {"find_any", find_any, METH_VARARGS, "find_any(buf, start, end, words) -> first offset of any word, or -1"},
    {"newlines", newlines, METH_VARARGS, "newlines(buf, start, end) -> the number of newlines in buf[start:end]"},
    {NULL, NULL, 0, NULL},
};

#endif
