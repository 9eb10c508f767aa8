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

enum { PASS_WORDS = 64 }; /* words looked for in one pass; more are looked for one by one */

/* How common a byte is in log text, to pick the pair a word is looked for by: letters, digits and spaces are
   most lines' bytes; capitals fewer; punctuation fewest. Any pair finds the word: this only weighs how often a
   candidate is compared in vain. */
static int commonness(uint8_t c) {
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == ' ') return 2;
    return c >= 'A' && c <= 'Z' ? 1 : 0;
}

typedef struct {
    const uint8_t *text;
    Py_ssize_t n, at; /* its length (>= 2), and the offset of the pair it is looked for by */
} Word;

/* The first offset in [start, end) of buf where any word starts, or -1: one pass over the buffer for all the words
   (of 2 bytes or more), which each are looked for by a pair of their bytes marked in a table of the 65536 pairs;
   a marked pair's words are compared where it would put them. A word whose pair lies `at` bytes into it may start
   before one found earlier in the pass: the pass goes on `most` bytes past the best start. */
static Py_ssize_t find_pass(const uint8_t *buf, Py_ssize_t start, Py_ssize_t end, const Word *words, int count) {
    uint64_t marked[65536 / 64] = {0};
    Py_ssize_t most = 0, best = -1;
    for (int i = 0; i < count; i++) {
        unsigned pair = words[i].text[words[i].at] | (unsigned)words[i].text[words[i].at + 1] << 8;
        marked[pair >> 6] |= (uint64_t)1 << (pair & 63);
        if (words[i].at > most) most = words[i].at;
    }
    Py_ssize_t last = end - 2; /* the last offset a pair starts at */
    for (Py_ssize_t p = start; p <= last; p++) {
        unsigned pair = buf[p] | (unsigned)buf[p + 1] << 8;
        if (!(marked[pair >> 6] >> (pair & 63) & 1)) continue;
        for (int i = 0; i < count; i++) {
            const Word *w = &words[i];
            Py_ssize_t begin = p - w->at;
            if (begin < start || w->n > end - begin || (best >= 0 && begin >= best)) continue;
            if (w->text[w->at] == buf[p] && w->text[w->at + 1] == buf[p + 1] &&
                memcmp(buf + begin, w->text, (size_t)w->n) == 0) {
                best = begin;
                if (best + most < last) last = best + most;
            }
        }
    }
    return best;
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
    Py_ssize_t best = -1, size = fast == NULL ? 0 : PySequence_Fast_GET_SIZE(fast);
    Word pass[PASS_WORDS];
    int count = 0;
    const uint8_t *buf = (const uint8_t *)view.buf;
    for (Py_ssize_t i = 0; fast != NULL && i < size; i++) {
        char *s;
        Py_ssize_t n; /* the word is read while fast holds it */
        if (PyBytes_AsStringAndSize(PySequence_Fast_GET_ITEM(fast, i), &s, &n) < 0) {
            Py_CLEAR(fast);
            break;
        }
        if (n >= 2 && count < PASS_WORDS) { /* looked for in the pass, by its least common pair */
            Word *w = &pass[count++];
            w->text = (const uint8_t *)s, w->n = n, w->at = 0;
            for (Py_ssize_t k = 1; k + 1 < n; k++)
                if (commonness(w->text[k]) + commonness(w->text[k + 1]) <
                    commonness(w->text[w->at]) + commonness(w->text[w->at + 1]))
                    w->at = k;
            continue;
        }
        Py_ssize_t stop = best < 0 || best > end - n + 1 ? end : best + n - 1; /* only earlier starts */
        if (n == 0 || stop - start < n) continue;
        Py_ssize_t hit = find(buf, start, stop, (const uint8_t *)s, n);
        if (hit >= 0) best = hit;
    }
    if (fast != NULL && count > 0) {
        Py_ssize_t hit = find_pass(buf, start, end, pass, count);
        if (hit >= 0 && (best < 0 || hit < best)) best = hit;
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
