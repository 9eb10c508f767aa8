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

enum { PASS_WORDS = 64, MAX_STRIDE = 8 }; /* words looked for in one pass (more: one by one); bytes it steps */

/* How common a byte is in log text, to pick the pairs a word is looked for by: letters, digits and spaces are
   most lines' bytes; capitals fewer; punctuation fewest. Any pairs find the word: this only weighs how often a
   candidate is compared in vain. */
static int commonness(uint8_t c) {
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == ' ') return 2;
    return c >= 'A' && c <= 'Z' ? 1 : 0;
}

typedef struct {
    const uint8_t *text;
    Py_ssize_t n, at; /* its length (> the stride), and the offset of the first of the pairs it is looked for by */
} Word;

typedef struct {
    unsigned pair; /* the two bytes, the first in the low byte */
    int word; /* the word's index */
    Py_ssize_t off; /* where in it the pair lies */
} WordProbe;

/* The first offset in [start, end) of buf where any word starts, or -1: one pass over every stride-th pair of the
   buffer for all the words (each longer than the stride). A word is looked for by `stride` pairs of its bytes, at
   offsets at .. at + stride - 1: where it occurs, one of them lies on a pair the pass looks at. The pairs are marked
   in a table of the 65536 pairs; a marked pair's probes are compared where they would put their word. A word met
   later in the pass may start before one met earlier (its pairs lie further into it): the pass goes on until no
   word can start before the best start found. Offsets throughout: no pointer is formed outside the buffer. */
static Py_ssize_t find_pass(const uint8_t *buf, Py_ssize_t start, Py_ssize_t end, Word *words, int count,
                            int stride) {
    uint64_t marked[65536 / 64] = {0};
    WordProbe probes[PASS_WORDS * MAX_STRIDE];
    int by_first[257] = {0}, nprobes = 0;
    Py_ssize_t most = 0; /* the largest offset of a word's first pair */
    for (int i = 0; i < count; i++) {
        Word *w = &words[i];
        int window = 0; /* the least common window of `stride` pairs */
        for (Py_ssize_t a = 0; a + stride < w->n; a++) {
            int c = 0;
            for (int k = 0; k < stride; k++) c += commonness(w->text[a + k]) + commonness(w->text[a + k + 1]);
            if (a == 0 || c < window) window = c, w->at = a;
        }
        if (w->at > most) most = w->at;
        for (int k = 0; k < stride; k++) {
            const uint8_t *t = w->text + w->at + k;
            WordProbe *pr = &probes[nprobes++];
            pr->pair = t[0] | (unsigned)t[1] << 8, pr->word = i, pr->off = w->at + k;
            marked[pr->pair >> 6] |= (uint64_t)1 << (pr->pair & 63);
            by_first[t[0] + 1]++;
        }
    }
    for (int b = 0; b < 256; b++) by_first[b + 1] += by_first[b];
    WordProbe sorted[PASS_WORDS * MAX_STRIDE];
    int fill[256];
    memcpy(fill, by_first, sizeof fill);
    for (int k = 0; k < nprobes; k++) sorted[fill[probes[k].pair & 255]++] = probes[k];
    Py_ssize_t best = -1, last = end - 2; /* the last offset a pair the pass looks at starts at */
    for (Py_ssize_t p = start; p <= last; p += stride) {
        unsigned pair = buf[p] | (unsigned)buf[p + 1] << 8;
        if (!(marked[pair >> 6] >> (pair & 63) & 1)) continue;
        for (int k = by_first[buf[p]]; k < by_first[buf[p] + 1]; k++) {
            const WordProbe *pr = &sorted[k];
            const Word *w = &words[pr->word];
            Py_ssize_t begin = p - pr->off;
            if (pr->pair != pair || begin < start || w->n > end - begin || (best >= 0 && begin >= best)) continue;
            if (memcmp(buf + begin, w->text, (size_t)w->n) == 0) {
                best = begin;
                if (best + most + stride - 1 < last) last = best + most + stride - 1;
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
    int count = 0, stride = MAX_STRIDE; /* the shortest word's length less one, at most MAX_STRIDE */
    const uint8_t *buf = (const uint8_t *)view.buf;
    for (Py_ssize_t i = 0; fast != NULL && i < size; i++) {
        char *s;
        Py_ssize_t n; /* the word is read while fast holds it */
        if (PyBytes_AsStringAndSize(PySequence_Fast_GET_ITEM(fast, i), &s, &n) < 0) {
            Py_CLEAR(fast);
            break;
        }
        if (n >= 2 && count < PASS_WORDS) { /* looked for in the pass */
            Word *w = &pass[count++];
            w->text = (const uint8_t *)s, w->n = n, w->at = 0;
            if (n - 1 < stride) stride = (int)(n - 1);
            continue;
        }
        Py_ssize_t stop = best < 0 || best > end - n + 1 ? end : best + n - 1; /* only earlier starts */
        if (n == 0 || stop - start < n) continue;
        Py_ssize_t hit = find(buf, start, stop, (const uint8_t *)s, n);
        if (hit >= 0) best = hit;
    }
    if (fast != NULL && count > 0) {
        Py_ssize_t hit = find_pass(buf, start, end, pass, count, stride);
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
