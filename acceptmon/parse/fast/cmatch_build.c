/* cmatch_build.c: Program.__init__, a Program from the steps native.py gives.
 *
 * The program owns copies of every text it is given (nothing points into a Python object), checks
 * every count and number it is given, and is usable only once the whole of __init__ succeeded.
 */
#include "cmatch.h"

#include <limits.h>

/* True for the steps that capture a group (the others take no slot); OP_EXTRA captures two, its key's and its
 * value's; OP_LKEY its key's, and starts its value's, which OP_VEND ends. */
int cm_captures(int code) {
    return code == OP_INT || code == OP_LINT || code == OP_FLOAT || code == OP_BOOL || code == OP_STR ||
           code == OP_LSTR || code == OP_LFLOAT || code == OP_LIST || code == OP_EXTRA || code == OP_LKEY ||
           code == OP_VEND;
}

static int text_copy(PyObject *obj, Text *out) {
    char *s;
    Py_ssize_t n;
    if (PyBytes_AsStringAndSize(obj, &s, &n) < 0) return -1;
    uint8_t *copy = PyMem_Malloc((size_t)(n ? n : 1));
    if (copy == NULL) return PyErr_NoMemory(), -1;
    memcpy(copy, s, (size_t)n);
    out->s = copy, out->n = n;
    return 0;
}

static void text_free(Text *t) {
    PyMem_Free((void *)t->s);
    t->s = NULL, t->n = 0;
}

static void texts_free(Text *texts, int n) {
    for (int i = 0; texts != NULL && i < n; i++) text_free(&texts[i]);
    PyMem_Free(texts);
}

/* A sequence's length as an int no larger than most, or -1 (ValueError). */
static int length_of(PyObject *fast, Py_ssize_t most, const char *what) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    if (n > most) return PyErr_Format(PyExc_ValueError, "more than %zd %s", most, what), -1;
    return (int)n;
}

/* Copies of a sequence of bytes; *n counts the texts copied so far, so that a failure frees them. */
static int texts_of(PyObject *seq, Text **out, int *n, Py_ssize_t most) {
    *out = NULL, *n = 0;
    PyObject *fast = PySequence_Fast(seq, "texts must be a sequence of bytes");
    if (fast == NULL) return -1;
    int len = length_of(fast, most, "texts");
    int rc = len < 0 ? -1 : 0;
    if (rc == 0 && (*out = PyMem_Calloc((size_t)(len ? len : 1), sizeof(Text))) == NULL) rc = -1, PyErr_NoMemory();
    for (int i = 0; rc == 0 && i < len; i++) {
        rc = text_copy(PySequence_Fast_GET_ITEM(fast, i), &(*out)[i]);
        if (rc == 0) (*n)++;
    }
    Py_DECREF(fast);
    return rc;
}

static int bad_step(const char *why) {
    PyErr_Format(PyExc_ValueError, "bad step: %s", why);
    return -1;
}

/* One step: (code, slot, texts). */
static int step_of(PyObject *obj, Step *st, Tmpl *t) {
    PyObject *texts;
    if (!PyTuple_Check(obj)) return PyErr_SetString(PyExc_TypeError, "a step is a tuple (code, slot, texts)"), -1;
    if (!PyArg_ParseTuple(obj, "iiO", &st->code, &st->slot, &texts)) return -1;
    if (st->code < 0 || st->code >= OP_COUNT) return bad_step("no such code");
    int width = st->code == OP_EXTRA || st->code == OP_LKEY ? 2 : 1; /* groups a capturing step fills */
    if (cm_captures(st->code) ? st->slot < -1 || st->slot > MAX_SLOTS - width : st->slot != -1)
        return bad_step(cm_captures(st->code) ? "slot out of range" : "a step that does not capture takes no slot");
    if (st->code == OP_BARE && st != t->steps) return bad_step("a bare template says so in its first step only");
    int rc = texts_of(texts, &st->texts, &st->ntexts, INT_MAX);
    if (rc == 0 && st->code == OP_LIT && st->ntexts != 1) return bad_step("a literal is one text");
    if (rc == 0 && st->code == OP_LKEY &&
        (st->ntexts != 1 || st->texts[0].n < 3 || memcmp(st->texts[0].s + st->texts[0].n - 2, ": ", 2) != 0))
        return bad_step("a named key is one text, 'key: '");
    if (rc == 0 && st->slot + width > t->nslots) t->nslots = st->slot + width;
    return rc;
}

/* Each capturing OP_LKEY's value ended by one OP_VEND after it, before another key, and each OP_VEND ending one: a
 * value's text is [key's end, OP_VEND), set in that order on every matched line. */
static int named_keys(const Tmpl *t) {
    int open = -1; /* the slot of the key whose value is being matched */
    for (int i = 0; i < t->nsteps; i++) {
        const Step *st = &t->steps[i];
        if (st->slot < 0 || (st->code != OP_LKEY && st->code != OP_EXTRA && st->code != OP_VEND)) continue;
        if (st->code == OP_VEND ? st->slot != open + 1 || open < 0 : open >= 0)
            return bad_step("a named key's value ends at the OP_VEND of the next slot, before another key");
        open = st->code == OP_LKEY ? st->slot : -1;
    }
    return open >= 0 ? bad_step("a named key's value has no end") : 0;
}

/* A template: a sequence of steps. */
static int steps_of(PyObject *seq, Tmpl *t) {
    PyObject *fast = PySequence_Fast(seq, "a template is a sequence of steps");
    if (fast == NULL) return -1;
    int len = length_of(fast, INT_MAX, "steps");
    int rc = len < 0 ? -1 : 0;
    if (rc == 0 && (t->steps = PyMem_Calloc((size_t)(len ? len : 1), sizeof(Step))) == NULL) rc = -1, PyErr_NoMemory();
    for (int i = 0; rc == 0 && i < len; i++) {
        t->nsteps = i + 1; /* freed with the rest, whatever step_of copied */
        rc = step_of(PySequence_Fast_GET_ITEM(fast, i), &t->steps[i], t);
    }
    Py_DECREF(fast);
    return rc == 0 ? named_keys(t) : rc;
}

static int probe_order(const void *a, const void *b) {
    const Probe *x = a, *y = b;
    int kx = (x->pair & 0xff) << 16 | (x->pair >> 8) << 8 | (255 - x->off);
    int ky = (y->pair & 0xff) << 16 | (y->pair >> 8) << 8 | (255 - y->off);
    return kx - ky;
}

/* The needle pass's probes: every needle's pairs at offsets 0 .. stride-1, so that a pass looking at
 * every stride-th position still meets each occurrence at exactly one of its pairs; where every needle has a byte
 * after each such pair, the three bytes there too (a pass tests both tables before it looks at a probe). */
static int probes_of(Program *pg) {
    Py_ssize_t shortest = PY_SSIZE_T_MAX;
    for (int i = 0; i < pg->nneedles; i++) {
        if (pg->needles[i].n < 2) return PyErr_SetString(PyExc_ValueError, "a needle is under 2 bytes"), -1;
        if (pg->needles[i].n < shortest) shortest = pg->needles[i].n;
    }
    pg->stride = shortest - 1 < 4 ? (int)shortest - 1 : 4;
    pg->nprobes = 0;
    pg->trigrams = shortest >= pg->stride + 2;
    memset(pg->bigram, 0, sizeof pg->bigram);
    memset(pg->trigram, 0, sizeof pg->trigram);
    for (int i = 0; i < pg->nneedles; i++) {
        const uint8_t *s = pg->needles[i].s;
        pg->head[i] = 0;
        if (pg->needles[i].n >= 4) memcpy(&pg->head[i], s, 4);
        for (int j = 0; j < pg->stride; j++) {
            uint16_t pair = (uint16_t)(s[j] | s[j + 1] << 8);
            pg->probes[pg->nprobes++] = (Probe){pair, (uint8_t)i, (uint8_t)j};
            pg->bigram[pair >> 3] |= (uint8_t)(1 << (pair & 7));
            if (pg->trigrams) {
                uint16_t tri = TRIGRAM(s[j], s[j + 1], s[j + 2]);
                pg->trigram[tri >> 3] |= (uint8_t)(1 << (tri & 7));
            }
        }
    }
    qsort(pg->probes, (size_t)pg->nprobes, sizeof(Probe), probe_order);
    for (int b = 0, k = 0; b <= 256; b++) {
        while (k < pg->nprobes && (pg->probes[k].pair & 0xff) < b) k++;
        pg->by_first[b] = (uint16_t)k;
    }
    return 0;
}

/* Everything the program holds freed, and every count and table zeroed: an empty, unusable program. */
static void tmpls_free(Tmpl *tmpls, int n) {
    for (int i = 0; tmpls != NULL && i < n; i++) {
        for (int j = 0; tmpls[i].steps != NULL && j < tmpls[i].nsteps; j++)
            texts_free(tmpls[i].steps[j].texts, tmpls[i].steps[j].ntexts);
        PyMem_Free(tmpls[i].steps);
    }
    PyMem_Free(tmpls);
}

static void program_free(Program *pg) {
    pg->ready = 0;
    tmpls_free(pg->tmpls, pg->ntmpls);
    tmpls_free(pg->leads, pg->nleads);
    texts_free(pg->needles, pg->nneedles);
    text_free(&pg->prefix);
    text_free(&pg->suffix);
    pg->tmpls = NULL, pg->leads = NULL, pg->needles = NULL;
    pg->envelope = ENV_DATED;
    pg->ntmpls = pg->nleads = pg->maxslots = pg->nneedles = pg->nlaunch = pg->stride = pg->nprobes = 0;
    memset(pg->probes, 0, sizeof pg->probes);
    memset(pg->by_first, 0, sizeof pg->by_first);
    memset(pg->bigram, 0, sizeof pg->bigram);
    memset(pg->trigram, 0, sizeof pg->trigram);
    memset(pg->head, 0, sizeof pg->head);
    pg->trigrams = 0;
}

void cm_program_dealloc(Program *pg) {
    program_free(pg);
    Py_TYPE(pg)->tp_free((PyObject *)pg);
}

/* Step sequences (templates, or leads): *n counts those copied so far, so that a failure frees them. */
static int tmpls_of(PyObject *seq, Tmpl **out, int *n, Py_ssize_t most, const char *what) {
    PyObject *fast = PySequence_Fast(seq, "templates and leads must be sequences");
    if (fast == NULL) return -1;
    int len = length_of(fast, most, what);
    int rc = len < 0 ? -1 : 0;
    if (rc == 0 && (*out = PyMem_Calloc((size_t)(len ? len : 1), sizeof(Tmpl))) == NULL) rc = -1, PyErr_NoMemory();
    for (int i = 0; rc == 0 && i < len; i++) {
        *n = i + 1; /* freed with the rest, whatever steps_of copied */
        rc = steps_of(PySequence_Fast_GET_ITEM(fast, i), &(*out)[i]);
    }
    Py_DECREF(fast);
    return rc;
}

/* A lead reads literals and loose digits only, and captures nothing. */
static int leads_ok(const Program *pg) {
    for (int i = 0; i < pg->nleads; i++)
        for (int j = 0; j < pg->leads[i].nsteps; j++) {
            const Step *st = &pg->leads[i].steps[j];
            if ((st->code != OP_LIT && st->code != OP_LINT) || st->slot != -1 || pg->leads[i].nslots > 0)
                return bad_step("a lead is literals and loose digits, and captures nothing");
        }
    if (pg->nleads > 0 && pg->envelope != ENV_DATED)
        return PyErr_SetString(PyExc_ValueError, "only a dated envelope has leads"), -1;
    return 0;
}

/* Program(prefix, suffix, templates, needles, nlaunch[, envelope[, leads]]): needles are the counted anchors, then
 * nlaunch launch anchors, then 'accept', each at least 2 bytes; leads (a dated envelope's) are step sequences of
 * literals and loose digits. A failed __init__ leaves an empty program that scan refuses; __init__ during a scan of
 * the same program is refused. */
int cm_program_init(Program *pg, PyObject *args, PyObject *kw) {
    PyObject *prefix, *suffix, *templates, *needles, *leads = NULL;
    int nlaunch, envelope = ENV_DATED;
    if (pg->scans > 0) {
        PyErr_SetString(PyExc_RuntimeError, "Program.__init__ while the program is scanning");
        return -1;
    }
    program_free(pg);
    if (kw != NULL && PyDict_GET_SIZE(kw) > 0) {
        PyErr_SetString(PyExc_TypeError, "Program() takes no keyword arguments");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "SSOOi|iO", &prefix, &suffix, &templates, &needles, &nlaunch, &envelope, &leads))
        return -1;
    if (envelope != ENV_DATED && envelope != ENV_YEARLESS) {
        PyErr_SetString(PyExc_ValueError, "no such envelope");
        return -1;
    }
    int rc = text_copy(prefix, &pg->prefix) < 0 || text_copy(suffix, &pg->suffix) < 0 ? -1 : 0;
    if (rc == 0) rc = tmpls_of(templates, &pg->tmpls, &pg->ntmpls, INT_MAX, "templates");
    for (int i = 0; rc == 0 && i < pg->ntmpls; i++)
        if (pg->tmpls[i].nslots > pg->maxslots) pg->maxslots = pg->tmpls[i].nslots;
    if (rc == 0 && leads != NULL) rc = tmpls_of(leads, &pg->leads, &pg->nleads, MAX_LEADS, "leads");
    pg->envelope = envelope;
    if (rc == 0) rc = leads_ok(pg);
    if (rc == 0) rc = texts_of(needles, &pg->needles, &pg->nneedles, MAX_NEEDLES);
    if (rc == 0 && (nlaunch < 0 || nlaunch >= pg->nneedles))
        rc = -1, PyErr_SetString(PyExc_ValueError, "bad needles: the launch anchors and 'accept' come last");
    if (rc == 0) pg->nlaunch = nlaunch, rc = probes_of(pg);
    if (rc < 0) {
        program_free(pg);
        return -1;
    }
    pg->ready = 1;
    return 0;
}
