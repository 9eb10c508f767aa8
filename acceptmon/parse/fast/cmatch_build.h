/* cmatch_build.h: a Program from the steps native.py gives (included once, by cmatch.c). */
#ifndef ACCEPTMON_CMATCH_BUILD_H
#define ACCEPTMON_CMATCH_BUILD_H
#include "cmatch.h"

/* ---- building a Program ---------------------------------------------------------------------- */

static int text_of(PyObject *obj, Text *out) {
    char *s;
    if (PyBytes_AsStringAndSize(obj, &s, &out->n) < 0) return -1;
    out->s = (const uint8_t *)s;
    return 0;
}

static int texts_of(PyObject *seq, Text **out, int *n) {
    PyObject *fast = PySequence_Fast(seq, "texts must be a sequence of bytes");
    if (fast == NULL) return -1;
    *n = (int)PySequence_Fast_GET_SIZE(fast);
    *out = PyMem_Calloc((size_t)(*n ? *n : 1), sizeof(Text));
    int rc = *out == NULL ? -1 : 0;
    for (int i = 0; rc == 0 && i < *n; i++) rc = text_of(PySequence_Fast_GET_ITEM(fast, i), &(*out)[i]);
    Py_DECREF(fast);
    if (*out == NULL) PyErr_NoMemory();
    return rc;
}

/* (code, slot, texts) per step */
static int steps_of(PyObject *seq, Tmpl *t) {
    PyObject *fast = PySequence_Fast(seq, "a template is a sequence of steps");
    if (fast == NULL) return -1;
    t->nsteps = (int)PySequence_Fast_GET_SIZE(fast);
    t->steps = PyMem_Calloc((size_t)(t->nsteps ? t->nsteps : 1), sizeof(Step));
    int rc = t->steps == NULL ? -1 : 0;
    for (int i = 0; rc == 0 && i < t->nsteps; i++) {
        PyObject *texts;
        Step *st = &t->steps[i];
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(fast, i), "iiO", &st->code, &st->slot, &texts)) rc = -1;
        else if (st->code < OP_LIT || st->code > OP_EXTRA) rc = -1, PyErr_SetString(PyExc_ValueError, "bad step");
        else rc = texts_of(texts, &st->texts, &st->ntexts);
        if (rc == 0 && st->slot >= t->nslots) t->nslots = st->slot + 1;
    }
    Py_DECREF(fast);
    return rc;
}

static int probe_order(const void *a, const void *b) {
    const Probe *x = a, *y = b;
    int kx = (x->pair & 0xff) << 16 | (x->pair >> 8) << 8 | (255 - x->off);
    int ky = (y->pair & 0xff) << 16 | (y->pair >> 8) << 8 | (255 - y->off);
    return kx - ky;
}

/* The needle pass's probes: every needle's pairs at offsets 0 .. stride-1, so that a pass looking at
 * every stride-th position still meets each occurrence at exactly one of its pairs. */
static int probes_of(Program *pg) {
    int shortest = 1 << 30;
    for (int i = 0; i < pg->nneedles; i++) {
        if (pg->needles[i].n < 2) return PyErr_SetString(PyExc_ValueError, "a needle is under 2 bytes"), -1;
        if (pg->needles[i].n < shortest) shortest = (int)pg->needles[i].n;
    }
    pg->stride = shortest - 1 < 4 ? shortest - 1 : 4;
    pg->nprobes = 0;
    memset(pg->bigram, 0, sizeof pg->bigram);
    for (int i = 0; i < pg->nneedles; i++) {
        for (int j = 0; j < pg->stride; j++) {
            uint16_t pair = (uint16_t)(pg->needles[i].s[j] | pg->needles[i].s[j + 1] << 8);
            pg->probes[pg->nprobes++] = (Probe){pair, (uint8_t)i, (uint8_t)j};
            pg->bigram[pair >> 3] |= (uint8_t)(1 << (pair & 7));
        }
    }
    qsort(pg->probes, (size_t)pg->nprobes, sizeof(Probe), probe_order);
    for (int b = 0, k = 0; b <= 256; b++) {
        while (k < pg->nprobes && (pg->probes[k].pair & 0xff) < b) k++;
        pg->by_first[b] = (uint16_t)k;
    }
    return 0;
}

static void program_free(Program *pg) {
    for (int i = 0; pg->tmpls != NULL && i < pg->ntmpls; i++) {
        for (int j = 0; pg->tmpls[i].steps != NULL && j < pg->tmpls[i].nsteps; j++) PyMem_Free(pg->tmpls[i].steps[j].texts);
        PyMem_Free(pg->tmpls[i].steps);
    }
    PyMem_Free(pg->tmpls);
    PyMem_Free(pg->needles);
    pg->tmpls = NULL, pg->needles = NULL;
    Py_CLEAR(pg->keep);
}

static void Program_dealloc(Program *pg) {
    program_free(pg);
    Py_TYPE(pg)->tp_free((PyObject *)pg);
}

/* Program(prefix, suffix, templates, needles, nlaunch, keep): needles are the counted anchors, then
 * nlaunch launch anchors, then 'accept', each at least 2 bytes; keep is any object that keeps every
 * bytes object given alive. */
static int Program_init(Program *pg, PyObject *args, PyObject *kw) {
    PyObject *prefix, *suffix, *templates, *needles, *keep;
    (void)kw;
    if (!PyArg_ParseTuple(args, "SSOOiO", &prefix, &suffix, &templates, &needles, &pg->nlaunch, &keep)) return -1;
    program_free(pg);
    Py_INCREF(keep);
    pg->keep = keep;
    if (text_of(prefix, &pg->prefix) < 0 || text_of(suffix, &pg->suffix) < 0) return -1;
    PyObject *fast = PySequence_Fast(templates, "templates must be a sequence");
    if (fast == NULL) return -1;
    pg->ntmpls = (int)PySequence_Fast_GET_SIZE(fast);
    pg->tmpls = PyMem_Calloc((size_t)(pg->ntmpls ? pg->ntmpls : 1), sizeof(Tmpl));
    int rc = pg->tmpls == NULL ? -1 : 0;
    for (int i = 0; rc == 0 && i < pg->ntmpls; i++) {
        rc = steps_of(PySequence_Fast_GET_ITEM(fast, i), &pg->tmpls[i]);
        if (rc == 0 && pg->tmpls[i].nslots > pg->maxslots) pg->maxslots = pg->tmpls[i].nslots;
    }
    Py_DECREF(fast);
    if (rc < 0 || texts_of(needles, &pg->needles, &pg->nneedles) < 0) return -1;
    if (pg->nlaunch < 0 || pg->nlaunch >= pg->nneedles || pg->nneedles > 64)
        return PyErr_SetString(PyExc_ValueError, "bad needles"), -1;
    return probes_of(pg);
}

#endif
