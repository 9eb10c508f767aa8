/* cmatch.h: the types of the fast lane's compiled matcher (see cmatch.c). */
#ifndef ACCEPTMON_CMATCH_H
#define ACCEPTMON_CMATCH_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define CMATCH_VERSION 3
#define SLOT 16 /* recipe code of group 0; SLOT + i prints group i as captured */
#define BOOL_SLOT (SLOT + 256) /* BOOL_SLOT + i prints group i (True/False) as JSON's true/false */
#define JSON_RANK 5 /* recipe code: the rank as a JSON string, or null */

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
    uint16_t pair; /* two bytes of a needle, the first in the low byte */
    uint8_t needle, off; /* which needle, and where in it the pair is */
} Probe;

typedef struct {
    PyObject_HEAD
    PyObject *keep; /* the bytes objects that Text pointers point into */
    Text prefix, suffix;
    Tmpl *tmpls;
    int ntmpls;
    int maxslots;
    Text *needles; /* the counted anchors, then the launch anchors, then 'accept' last */
    int nneedles, nlaunch;
    int stride; /* the needle pass looks at every stride-th pair of bytes (stride < every needle's length) */
    Probe probes[256]; /* each needle's pairs at offsets 0 .. stride-1, by first byte, then second, then offset down */
    int nprobes;
    uint16_t by_first[257]; /* probes[by_first[b] .. by_first[b + 1]] begin with byte b */
    uint8_t bigram[8192]; /* the pairs of all probes */
} Program;

typedef struct {
    const uint8_t *p;
    Py_ssize_t n;
} Cap;

#endif
