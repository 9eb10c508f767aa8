/* cmatch_convert.c: the value of a captured group that is not its text, as the parser's converter gives it.
 *
 * A percentage (values.to_percent) is the LFLOAT step's text, digits with an optional '.' and digits, read as
 * Python's float() reads it, checked to be from 0 to 100, and divided by 100 and rounded to PERCENT_DIGITS decimal
 * digits as Python's round() does: to the correctly rounded decimal string of that many digits, read back. A list
 * (values.to_float_list) is the LIST step's text, such numbers with ", " between, each read as float() reads it.
 * A cell prints a float as repr() does (the csv module's str(), json's float repr): the list ';'-joined in CSV,
 * a JSON array in JSONL; an entry spelt as the FLOAT step reads a shortest repr is copied without its trailing
 * zeros. A number of at most 15 significant digits and 22 decimals is read exactly as M / 10^d (M and 10^d are
 * exact doubles and one division rounds correctly: the very float float() makes), and a percentage whose fraction
 * then has at most PERCENT_DIGITS decimals is printed from its digits (its repr, as no other number of at most 15
 * digits is the same float); any other number goes through CPython's own string <-> double functions, which switch
 * the x87 control word on every call (17 % of a vLLM run's time when every number went through them).
 */
#include "cmatch.h"

#include <float.h>
#include <math.h>

/* A plain decimal's digits: [0-9]+ with an optional '.' and [0-9]+, as an integer and its number of decimals. */
typedef struct {
    uint64_t m; /* the digits as one integer (valid where exact) */
    int scale;  /* the number of decimals */
    int exact;  /* at most 15 significant digits and 22 decimals: m and 10^scale are exact doubles */
} Decimal;

static const double POW10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                               1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
#define MAX_EXACT_DIGITS 15
#define MAX_EXACT_SCALE 22

static Decimal decimal(const uint8_t *p, Py_ssize_t n) {
    Decimal d = {0, 0, 0};
    int significant = 0, dot = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint8_t c = p[i];
        if (c == '.' && !dot && i > 0 && i + 1 < n) {
            dot = 1;
            continue;
        }
        if (c < '0' || c > '9') return d; /* not plain: not exact */
        if (dot) d.scale++;
        if (significant || c != '0') {
            if (++significant > MAX_EXACT_DIGITS) return d;
            d.m = d.m * 10 + (uint64_t)(c - '0');
        }
    }
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD == 0 /* double arithmetic in doubles: one rounding per division */
    d.exact = n > 0 && d.scale <= MAX_EXACT_SCALE;
#endif
    return d;
}

double cm_read_float(const uint8_t *p, Py_ssize_t n, int *exact) {
    Decimal d = decimal(p, n);
    *exact = d.exact;
    return d.exact ? (double)d.m / POW10[d.scale] : 0.0;
}

int cm_loose(const uint8_t *p, Py_ssize_t n, double *v) {
    int exact;
    *v = cm_read_float(p, n, &exact);
    if (exact) return 0;
    char text[72];
    if (n <= 0 || n >= (Py_ssize_t)sizeof text) return PyErr_SetString(PyExc_ValueError, "not a loose number"), -1;
    memcpy(text, p, (size_t)n);
    text[n] = '\0';
    *v = PyOS_string_to_double(text, NULL, PyExc_ValueError);
    return *v == -1.0 && PyErr_Occurred() ? -1 : 0;
}

/* A percentage's text as its fraction, round(value / 100, PERCENT_DIGITS); its decimal digits where exact. */
static int percent(const Cap *c, double *v, Decimal *digits) {
    Decimal d = decimal(c->p, c->n);
    d.scale += 2; /* value / 100 */
    if (d.exact && d.scale <= PERCENT_DIGITS && d.m <= (uint64_t)100 * (uint64_t)POW10[d.scale - 2]) {
        /* value / 100 is within a few units in the last place of the decimal m / 10^scale, which has at most
         * PERCENT_DIGITS decimals: round() gives that decimal's float, the correctly rounded m / 10^scale */
        *digits = d;
        return *v = (double)d.m / POW10[d.scale], 0;
    }
    digits->exact = 0;
    double x;
    if (cm_loose(c->p, c->n, &x) < 0) return -1;
    if (!(x >= 0.0 && x <= 100.0)) return PyErr_SetString(PyExc_ValueError, "a percentage from 0 to 100"), -1;
    char *s = PyOS_double_to_string(x / 100.0, 'f', PERCENT_DIGITS, 0, NULL);
    if (s == NULL) return -1;
    *v = PyOS_string_to_double(s, NULL, PyExc_ValueError);
    PyMem_Free(s);
    return *v == -1.0 && PyErr_Occurred() ? -1 : 0;
}

/* The repr of an exact decimal from 1e-4 to below 1e16 (fixed notation) that has at most 15 significant digits: its
 * digits without trailing zeros (no other such decimal is the same float, so repr's shortest digits are these),
 * ".0" after a whole number, written to the end of text[0 .. REPR_MAX); its length, or 0 if the decimal is outside
 * that range (repr writes an exponent). *start is where it begins. */
static Py_ssize_t digits_text(Decimal d, char *text, const char **start) {
    while (d.scale > 0 && d.m % 10 == 0) d.m /= 10, d.scale--;
    char *end = text + REPR_MAX, *q = end;
    if (d.m == 0) d.scale = 0; /* 0.0 */
    if (d.scale == 0) *--q = '0', *--q = '.';
    uint64_t m = d.m;
    int written = 0;
    while (m > 0 || written <= d.scale) {
        if (written == d.scale && d.scale > 0) *--q = '.';
        *--q = (char)('0' + m % 10);
        m /= 10, written++;
    }
    /* zeros after the point before the first digit: 0.000123 has 3; repr writes 1.23e-05 with 4 */
    Py_ssize_t zeros = 0;
    if (q[0] == '0' && d.m != 0)
        while (q[2 + zeros] == '0') zeros++;
    *start = q;
    return zeros >= 4 ? 0 : end - q;
}

static int put_digits(Out *o, Decimal d) {
    char text[REPR_MAX];
    const char *start;
    Py_ssize_t n = digits_text(d, text, &start);
    return n == 0 ? 0 : cm_out_put(o, start, (size_t)n) < 0 ? -1 : 1;
}

/* round(x, ndigits) without a decimal string, where that is sure to be Python's: x * 10^ndigits (one rounding, at
 * most half a unit in the last place off the exact product) is more than a unit in the last place from the middle
 * between two integers, so the exact product's nearest integer m is the computed one's; m / 10^ndigits (both exact
 * doubles, one correctly rounded division) is then the float that reading m's decimal gives. 0 where not sure (a
 * tie or nearly one, a negative x or -0.0, a product past 1e14, doubles not evaluated as doubles). */
static int round_fast(double x, int ndigits, Decimal *d) {
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD == 0
    if (ndigits < 0 || ndigits > MAX_EXACT_SCALE || !(x >= 0.0) || signbit(x)) return 0;
    double p = x * POW10[ndigits];
    if (!(p < 1e14)) return 0;
    double whole = floor(p), frac = p - whole; /* exact: p below 2^52 */
    if (fabs(frac - 0.5) <= nextafter(p, INFINITY) - p) return 0;
    d->m = (uint64_t)whole + (frac > 0.5);
    d->scale = ndigits;
    d->exact = 1;
    return 1;
#else
    (void)x, (void)ndigits, (void)d;
    return 0;
#endif
}

int cm_round(double x, int ndigits, double *v, char *repr, Py_ssize_t *n) {
    if (n != NULL) *n = 0;
    Decimal fast;
    if (round_fast(x, ndigits, &fast)) {
        const char *start;
        *v = (double)fast.m / POW10[fast.scale];
        if (repr != NULL) {
            *n = digits_text(fast, repr, &start);
            memmove(repr, start, (size_t)*n);
        }
        return 0;
    }
    char *s = PyOS_double_to_string(x, 'f', ndigits, 0, NULL);
    if (s == NULL) return -1;
    Decimal d = decimal((const uint8_t *)s, (Py_ssize_t)strlen(s));
    if (d.exact) {
        const char *start;
        *v = (double)d.m / POW10[d.scale];
        if (repr != NULL) {
            *n = digits_text(d, repr, &start);
            memmove(repr, start, (size_t)*n);
        }
    } else {
        *v = PyOS_string_to_double(s, NULL, PyExc_ValueError);
    }
    PyMem_Free(s);
    return *v == -1.0 && PyErr_Occurred() ? -1 : 0;
}

static int put_repr(Out *o, double v) {
    char *s = PyOS_double_to_string(v, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (s == NULL) return -1;
    int rc = cm_out_put(o, s, strlen(s));
    PyMem_Free(s);
    return rc;
}

Cap cm_entry(const Cap *c, Py_ssize_t *at) {
    Py_ssize_t from = *at, to = from;
    while (to < c->n && c->p[to] != ',') to++;
    *at = to < c->n ? to + 2 : c->n; /* the LIST step put a space after every comma */
    return (Cap){c->p + from, to - from};
}

/* An entry's cell: its text without trailing zeros where that is the float's repr (the FLOAT step's rule, the
 * usual spelling: 0.837), else the repr of the float it reads as. */
static int entry_cell(Out *o, Cap e) {
    Cap shortest;
    if (cm_float_value(e.p, e.p + e.n, &shortest) == e.p + e.n) return cm_out_put(o, shortest.p, (size_t)shortest.n);
    double v;
    return cm_loose(e.p, e.n, &v) < 0 ? -1 : put_repr(o, v);
}

int cm_convert_cell(Out *o, int conv, const Cap *c) {
    double v;
    if (c->n <= 0) return PyErr_SetString(PyExc_ValueError, "no value to convert"), -1;
    if (conv == CONV_PERCENT) {
        Decimal digits;
        if (percent(c, &v, &digits) < 0) return -1;
        int put = digits.exact ? put_digits(o, digits) : 0;
        return put != 0 ? (put < 0 ? -1 : 0) : put_repr(o, v);
    }
    int json = conv == CONV_FLOATS_JSON;
    if (json && cm_out_put(o, "[", 1) < 0) return -1;
    for (Py_ssize_t at = 0; at < c->n;)
        if ((at > 0 && cm_out_put(o, json ? "," : ";", 1) < 0) || entry_cell(o, cm_entry(c, &at)) < 0) return -1;
    return json ? cm_out_put(o, "]", 1) : 0;
}

int cm_percent_ok(const Cap *c) {
    double v;
    Decimal digits;
    return percent(c, &v, &digits);
}

PyObject *cm_convert_value(int conv, const Cap *c) {
    double v;
    if (c->n <= 0) return PyErr_SetString(PyExc_ValueError, "no value to convert"), NULL;
    Decimal digits;
    if (conv == CONV_PERCENT) return percent(c, &v, &digits) < 0 ? NULL : PyFloat_FromDouble(v);
    PyObject *list = PyList_New(0);
    for (Py_ssize_t at = 0; list != NULL && at < c->n;) {
        Cap e = cm_entry(c, &at);
        PyObject *item = cm_loose(e.p, e.n, &v) < 0 ? NULL : PyFloat_FromDouble(v);
        if (item == NULL || PyList_Append(list, item) < 0) Py_CLEAR(list);
        Py_XDECREF(item);
    }
    return list;
}
