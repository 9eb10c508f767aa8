/* cmatch_derive.c: a vLLM spec line's derived cells, computed as acceptmon.parse.derive.spec_values computes them.
 *
 * A spec line's token counts differ line by line, so no memo helps, and calling the Python derive for each line was
 * most of a vLLM parse. A plan whose template captures what spec_values reads (acceptmon/parse/fast/compiled_derive.py
 * says which) hands its rows' derived cells to this twin, held to spec_values by tests on drawn values:
 *
 *   accept_rate = draft_accept_rate = None if drafted == 0 else round(accepted / drafted, SPEC_DIGITS)
 *   k = spec tokens or the number of per-position rates or the launch's spec_num_steps
 *   accept_len = round(logged + missing_bonus(logged, rates), SPEC_DIGITS), its source "logged"; without a logged
 *       mean, where drafted and k: round(emitted * k / drafted or 1 + accepted * k / drafted, SPEC_DIGITS), "derived"
 *
 * A line whose numbers this twin cannot compute exactly as Python does (a count or product beyond 2^53, where an
 * int is no longer an exact double; a logged mean too near the middle between the rates' sum and that sum plus one,
 * where the order of a sum could tip the bonus) is declined: its plan's Python derive computes it.
 */
#include "cmatch.h"

#include <math.h>

#define EXACT_INT ((uint64_t)1 << 53)
#define BONUS_MARGIN 1e-9

/* A count of the INT step (at most 18 digits) as an integer. */
static uint64_t count(const Cap *c) {
    uint64_t v = 0;
    for (Py_ssize_t i = 0; i < c->n; i++) v = v * 10 + (uint64_t)(c->p[i] - '0');
    return v;
}

/* The per-position rates: how many, and their sum left to right (as sum() adds floats). */
static int rates(const Cap *c, Py_ssize_t *n, double *total) {
    *n = 0, *total = 0.0;
    for (Py_ssize_t at = 0; at < c->n; (*n)++) {
        Cap e = cm_entry(c, &at);
        double v;
        if (cm_loose(e.p, e.n, &v) < 0) return -1;
        *total += v;
    }
    return 0;
}

/* A float's cell: its value (typed), or its repr's bytes. */
static PyObject *float_cell(const Derive *d, double x, int *declined) {
    double v;
    char repr[REPR_MAX];
    Py_ssize_t n;
    if (!isfinite(x)) return *declined = 1, NULL;
    if (d->typed) return cm_round(x, SPEC_DIGITS, &v, NULL, NULL) < 0 ? NULL : PyFloat_FromDouble(v);
    if (cm_round(x, SPEC_DIGITS, &v, repr, &n) < 0) return NULL;
    if (n > 0) return PyBytes_FromStringAndSize(repr, n);
    char *s = PyOS_double_to_string(v, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (s == NULL) return NULL;
    PyObject *b = PyBytes_FromString(s);
    PyMem_Free(s);
    return b;
}

typedef struct {
    PyObject *rate, *len, *source; /* cells: new references, or borrowed ones of the Derive's (the flags say) */
    int declined;
} Values;

/* The accept length: logged with its bonus, or derived from the counts; NULL where there is none. */
static int accept_len(const Derive *d, const Cap *caps, uint64_t drafted, uint64_t accepted, Values *out) {
    Py_ssize_t npos = 0;
    double total = 0.0;
    if (d->in[IN_POSITIONS] >= 0 && rates(&caps[d->in[IN_POSITIONS]], &npos, &total) < 0) return -1;
    if (d->in[IN_LOGGED] >= 0) {
        const Cap *c = &caps[d->in[IN_LOGGED]];
        double logged;
        if (cm_loose(c->p, c->n, &logged) < 0) return -1;
        int bonus = 0;
        if (npos > 0) { /* missing_bonus: the nearer of the rates' sum and that sum plus one */
            double without = fabs(logged - total), with = fabs(logged - 1 - total);
            if (fabs(without - with) < BONUS_MARGIN) return out->declined = 1, 0;
            bonus = without < with;
        }
        out->source = d->logged;
        out->len = float_cell(d, logged + bonus, &out->declined);
        return out->len == NULL && !out->declined ? -1 : 0;
    }
    uint64_t k = d->in[IN_SPEC_TOKENS] >= 0 ? count(&caps[d->in[IN_SPEC_TOKENS]]) : 0;
    if (k == 0) k = (uint64_t)npos;
    if (k == 0) k = d->launch_k;
    if (drafted == 0 || k == 0) return out->source = d->source, 0; /* no accept length: the default source */
    uint64_t by = d->in[IN_EMITTED] >= 0 ? count(&caps[d->in[IN_EMITTED]]) : accepted;
    if (k >= EXACT_INT || by > EXACT_INT / k) return out->declined = 1, 0;
    double ratio = (double)(by * k) / (double)drafted;
    out->source = d->derived;
    out->len = float_cell(d, d->in[IN_EMITTED] >= 0 ? ratio : 1 + ratio, &out->declined);
    return out->len == NULL && !out->declined ? -1 : 0;
}

/* The derived cells (a new tuple) in *cells: 1; 0 where the line is declined; -1 with an error set. */
int cm_derive(const Derive *d, const Cap *caps, PyObject **cells) {
    uint64_t drafted = count(&caps[d->in[IN_DRAFTED]]), accepted = count(&caps[d->in[IN_ACCEPTED]]);
    if (drafted > EXACT_INT || accepted > EXACT_INT) return 0;
    Values v = {NULL, NULL, NULL, 0};
    if (drafted > 0 && (v.rate = float_cell(d, (double)accepted / (double)drafted, &v.declined)) == NULL) {
        return v.declined ? 0 : -1;
    }
    if (accept_len(d, caps, drafted, accepted, &v) < 0 || v.declined) {
        Py_XDECREF(v.rate);
        Py_XDECREF(v.len);
        return v.declined ? 0 : -1;
    }
    PyObject *t = PyTuple_New(d->nout);
    for (int i = 0; t != NULL && i < d->nout; i++) {
        int code = d->out[i];
        PyObject *cell = code == OUT_RATE ? v.rate : code == OUT_LEN ? v.len : code == OUT_SOURCE ? v.source : NULL;
        if (code == OUT_CELL) cell = PyTuple_GET_ITEM(d->cells, i);
        PyTuple_SET_ITEM(t, i, Py_NewRef(cell ? cell : d->none));
    }
    Py_XDECREF(v.rate);
    Py_XDECREF(v.len);
    return t == NULL ? -1 : (*cells = t, 1);
}

/* (inputs, launch k, codes, cells, none, logged, derived, source, typed): see compiled_derive.py. Each input a group
 * its template captures with the step that reads it (a count: INT; the logged mean: FLOAT; the rates: LIST), drafted
 * and accepted always; each derived cell an OUT_* code, OUT_CELL's cell in cells; -1 with an error set. */
int cm_derive_of(const Tmpl *t, PyObject *spec, Derive *d) {
    static const int step[NIN] = {OP_INT, OP_INT, OP_LIST, OP_FLOAT, OP_INT, OP_INT};
    PyObject *in, *codes, *cells;
    long long k;
    int typed;
    if (!PyArg_ParseTuple(spec, "O!LO!O!OOOOp", &PyTuple_Type, &in, &k, &PyTuple_Type, &codes, &PyTuple_Type, &cells,
                          &d->none, &d->logged, &d->derived, &d->source, &typed))
        return -1;
    if (PyTuple_GET_SIZE(in) != NIN || k < 0 || (uint64_t)k >= EXACT_INT)
        return PyErr_SetString(PyExc_ValueError, "a compiled derive's inputs or launch k are out of range"), -1;
    for (int i = 0; i < NIN; i++) {
        long slot = PyLong_AsLong(PyTuple_GET_ITEM(in, i));
        if (slot == -1 && PyErr_Occurred()) return -1;
        int required = i == IN_DRAFTED || i == IN_ACCEPTED;
        if ((slot >= 0 || required) && cm_capturer(t, slot) != step[i])
            return PyErr_SetString(PyExc_ValueError, "a compiled derive's input is not a group its step reads"), -1;
        d->in[i] = slot < 0 ? -1 : (int)slot;
    }
    if (PyTuple_GET_SIZE(codes) > MAX_OUTS || PyTuple_GET_SIZE(cells) != PyTuple_GET_SIZE(codes))
        return PyErr_SetString(PyExc_ValueError, "a compiled derive's outputs: at most MAX_OUTS, a cell each"), -1;
    d->nout = (int)PyTuple_GET_SIZE(codes);
    for (int i = 0; i < d->nout; i++) {
        long code = PyLong_AsLong(PyTuple_GET_ITEM(codes, i));
        if (code == -1 && PyErr_Occurred()) return -1;
        if (code < OUT_RATE || code > OUT_CELL)
            return PyErr_SetString(PyExc_ValueError, "a compiled derive's output is out of range"), -1;
        d->out[i] = (int)code;
    }
    d->spec = Py_NewRef(spec), d->cells = cells, d->launch_k = (uint64_t)k, d->typed = typed;
    return 0;
}
