/* cmatch.h: the types of the fast lane's compiled matcher (see cmatch.c). */
#ifndef ACCEPTMON_CMATCH_H
#define ACCEPTMON_CMATCH_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define CMATCH_VERSION 1
#define SLOT 16

enum { OP_LIT, OP_ALT, OP_INT, OP_FLOAT, OP_BOOL, OP_STR, OP_LINT, OP_LFLOAT, OP_LSTR, OP_EXTRA };

typedef struct {
    const uint8_t *s;
    Py_ssize_t n;
} Text;

typedef struct {
    int code;
    int slot; /* group index to capture into, or -1 */
    Text *texts; /* OP_LIT: one; OP_ALT: alternatives; OP_EXTRA: known keys */
    int ntexts;
} Step;

typedef struct {
    Step *steps;
    int nsteps;
    int nslots;
} Tmpl;

typedef struct {
    PyObject_HEAD
    PyObject *keep; /* the bytes objects that Text pointers point into */
    Text prefix, suffix;
    Tmpl *tmpls;
    int ntmpls;
    int maxslots;
    Text *needles; /* the counted anchors, then the launch anchors, then 'accept' last */
    uint16_t *heads; /* first two bytes of each needle */
    int nneedles, nlaunch;
    uint8_t bigram[8192];
} Program;

typedef struct {
    const uint8_t *p;
    Py_ssize_t n;
} Cap;

#endif
