/* cmatch_prescan.c: the searches of the parallel pre-scan, acceptmon/parse/prescan.py. */
#include "cmatch.h"

/* [start, end) clamped into the buffer: 0 <= start <= end <= len. */
static void span_of(const Py_buffer *view, Py_ssize_t *start, Py_ssize_t *end) {
    if (*start < 0) *start = 0;
    if (*start > view->len) *start = view->len;
    if (*end > view->len) *end = view->len;
    if (*end < *start) *end = *start;
}

/* The first offset in [start, stop) of buf where word (n >= 1 bytes) starts, or -1. */
static Py_ssize_t find(const uint8_t *buf, Py_ssize_t start, Py_ssize_t stop, const uint8_t *word, Py_ssize_t n) {
    const uint8_t *hit = memmem(buf + start, (size_t)(stop - start), word, (size_t)n);
    return hit == NULL ? -1 : hit - buf;
}

/* find_any(buf, start, end, words) -> the first offset in buf[start:end] where any word starts, or -1 */
PyObject *cm_find_any(PyObject *mod, PyObject *args) {
    Py_buffer view;
    Py_ssize_t start, end;
    PyObject *words;
    (void)mod;
    if (!PyArg_ParseTuple(args, "y*nnO", &view, &start, &end, &words)) return NULL;
    span_of(&view, &start, &end);
    PyObject *fast = PySequence_Fast(words, "words must be a sequence of bytes");
    Py_ssize_t best = -1;
    for (Py_ssize_t i = 0; fast != NULL && i < PySequence_Fast_GET_SIZE(fast); i++) {
        char *s;
        Py_ssize_t n; /* the word is read while fast holds it */
        if (PyBytes_AsStringAndSize(PySequence_Fast_GET_ITEM(fast, i), &s, &n) < 0) {
            Py_CLEAR(fast);
            break;
        }
        Py_ssize_t stop = best < 0 || best > end - n + 1 ? end : best + n - 1; /* only earlier starts */
        if (n == 0 || stop - start < n) continue;
        Py_ssize_t hit = find((const uint8_t *)view.buf, start, stop, (const uint8_t *)s, n);
        if (hit >= 0) best = hit;
    }
    PyBuffer_Release(&view);
    if (fast == NULL) return NULL;
    Py_DECREF(fast);
    return PyLong_FromSsize_t(best);
}

/* newlines(buf, start, end) -> how many newlines buf[start:end] holds */
PyObject *cm_newlines(PyObject *mod, PyObject *args) {
    Py_buffer view;
    Py_ssize_t start, end, n = 0;
    (void)mod;
    if (!PyArg_ParseTuple(args, "y*nn", &view, &start, &end)) return NULL;
    span_of(&view, &start, &end);
    const uint8_t *buf = (const uint8_t *)view.buf;
    for (Py_ssize_t at = start; at < end;) {
        const uint8_t *nl = memchr(buf + at, '\n', (size_t)(end - at));
        if (nl == NULL) break;
        n++, at = nl - buf + 1;
    }
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(n);
}
