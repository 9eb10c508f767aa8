/* cmatch.h: the types and the shared functions of the fast lane's compiled matcher.
 *
 * The module is fourteen translation units, built together into one extension (hatch_build.py):
 *   cmatch.c          the Program type's scan (rows, counts) and the module itself
 *   cmatch_build.c    Program.__init__: the program's own copies of the steps and texts it is given
 *   cmatch_rows.c     a scan's plans (its own references, recipes checked) and the row of a matched line
 *   cmatch_cols.c     a typed scan's rows as columns (runs, compare, doctor: records not made yet)
 *   cmatch_convert.c  a percentage's or a list's value, from its captured text, as the parser's converter gives it
 *   cmatch_derive.c   a vLLM spec line's derived cells, as its kind's derive (spec_values) computes them
 *   cmatch_match.c    one line against the envelope and a template's steps
 *   cmatch_prescan.c  the parallel pre-scan's searches (find_any, newlines)
 *   cmatch_resample.c the block bootstrap's draws and sums of replicates, prefix sums and block sums (random_bytes,
 *                     pack_spans, block_totals_each, prefix_sums, spans: acceptmon/measure/bootstrap.py), and a
 *                     float column's values not logged (nans: acceptmon/measure/columns.py)
 *   cmatch_columns.c  the runs' and the doctor's loops over the lane's columns (bounded: measure/plain.py;
 *                     intervals: measure/tokens.py; added, has_none: measure/plain.py; weighed: measure/positions.py)
 *   cmatch_masks.c    the detectors' loops over a stretch of lines (every: diagnose/detector.py; log2_sums:
 *                     diagnose/detect_context.py)
 *   cmatch_keyed.c    the doctor's #running-req buckets of a stretch of lines, summed in one pass (kept_keys,
 *                     keyed_sums: diagnose/state.py), its largest KV reserve (reserve_max: detect_load.py), and
 *                     values grouped by key (grouped: measure/figures.py, measure/plain.py)
 *   cmatch_weave.c    rows of several plans woven and unwoven, and their loads carried per unit (woven, unwoven,
 *                     spread, interleaved: parse/unmade.py, measure/plain.py, measure/facts.py); a list as its
 *                     distinct values and codes, and back (codes, decoded: parse/unmade.py)
 *   cmatch_facts.c    the doctor's loops over a stretch of lines as columns (drafts_each: diagnose/depth.py;
 *                     last_rates: diagnose/detect_accept.py; masked, int_extremes: measure/plain.py; filled:
 *                     measure/facts.py; doubles: measure/columns.py), and which values they read (cm_plain_value)
 * The numbers below are the protocol with acceptmon/parse/fast/native.py and rows.py: the module
 * exports each of them (OP_LIT, SLOT, ...) and native.py reads them from it.
 */
#ifndef ACCEPTMON_CMATCH_H
#define ACCEPTMON_CMATCH_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define CMATCH_VERSION 43
#define SLOT 16 /* recipe code of group 0; SLOT + i prints group i as captured */
#define MAX_SLOTS 256 /* groups a template may capture */
#define BOOL_SLOT (SLOT + MAX_SLOTS) /* BOOL_SLOT + i prints group i (True/False) as JSON's true/false */
#define JSON_RANK 5 /* recipe code: the rank as a JSON string, or null */
#define JSON_EXTRA 6 /* recipe code: the JSON object of the template's unknown keys (OP_EXTRA, OP_LKEY steps) */
#define CONV_SLOT (BOOL_SLOT + MAX_SLOTS) /* CONV_SLOT + MAX_SLOTS * c + i prints group i converted by CONV_* c */
#define PERCENT_DIGITS 8 /* a percentage's fraction is rounded to this many decimal digits (values.to_percent) */
#define MAX_NEEDLES 64 /* anchors a program counts (launch anchors and 'accept' included) */
#define MAX_DEPS 8 /* capture groups a derived cell may depend on */
#define MAX_LEADS 64 /* leads a dated envelope may have before its prefix */
#define REPR_MAX 48 /* a buffer for a float's repr of at most 15 digits in fixed notation */
#define SPEC_DIGITS 6 /* a spec line's derived rate and length are rounded to this many decimals (derive.py) */
#define MAX_OUTS 32 /* derived cells a compiled derive gives */

/* OP_BARE, a template's first step only: the template starts its line, behind no envelope (a line whose envelope
 * the program reads is never one of its lines); its rows have no timestamp and no rank. */
/* OP_EXTRA: an unknown key and its value (a capturing one puts them in its slot and the next); OP_LKEY: an unknown key
 * the template names ("key: ", captured without ": " in its slot), its value the text from there to the OP_VEND step
 * that captures the next slot (the steps between match it). */
enum {
    OP_LIT, OP_ALT, OP_INT, OP_FLOAT, OP_BOOL, OP_STR, OP_LINT, OP_LFLOAT, OP_LSTR, OP_EXTRA, OP_LIST, OP_BARE, OP_LKEY,
    OP_VEND, OP_COUNT
};

/* Envelopes a program reads: SGLang's (literal prefix, timestamp, rank, literal suffix) or vLLM's logging prefix
 * (process prefixes, level, year-less MM-DD HH:MM:SS, source), whose year is the scan's year state. */
enum { ENV_DATED, ENV_YEARLESS };

/* Conversions of a captured group whose value is not its text, as the parser's converters (values.py) give it:
 * a percentage (the LFLOAT step's text) as its fraction; a list (the LIST step's) of floats, written as the CSV
 * cell (';' between) or the JSON array; typed, a float or a list of floats. */
enum { CONV_PERCENT, CONV_FLOATS_CSV, CONV_FLOATS_JSON, NCONV };

/* A derived cell's dependency is slot + MAX_SLOTS * d: group slot, handed to the memo as its text (DEP_TEXT, bytes),
 * its number (DEP_NUMBER, of the INT or FLOAT step: an int or a float), a percentage's fraction (DEP_PERCENT), or a
 * list's floats (DEP_FLOATS, a tuple: a memo key is hashable). */
enum { DEP_TEXT, DEP_NUMBER, DEP_PERCENT, DEP_FLOATS, NDEP };

/* A compiled derive's inputs (groups) and outputs: the accept rate (draft_accept_rate too), the accept length, its
 * source, or a cell that is the same on every row (OUT_CELL: the launch's config). */
enum { IN_DRAFTED, IN_ACCEPTED, IN_POSITIONS, IN_LOGGED, IN_SPEC_TOKENS, IN_EMITTED, NIN };
enum { OUT_RATE, OUT_LEN, OUT_SOURCE, OUT_CELL };

typedef struct {
    const uint8_t *s; /* in a Program: its own copy (cmatch_build.c frees it) */
    Py_ssize_t n;
} Text;

typedef struct {
    int code;
    int slot; /* group index to capture into, or -1; -1 on every step that does not capture; OP_EXTRA: its key's
                 group, its value's the next */
    Text *texts; /* OP_LIT, OP_LKEY: one; OP_ALT: alternatives; OP_EXTRA: known keys */
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
    int envelope; /* ENV_* */
    int ready; /* set last by a successful __init__, cleared first by every __init__: scan refuses without it */
    int scans; /* scans running (a memo callback or another thread may start one): __init__ refuses while any */
    Text prefix, suffix;
    Tmpl *leads; /* ENV_DATED: step sequences (OP_LIT, OP_LINT) one of which may come before the prefix */
    int nleads;
    Tmpl *tmpls;
    int ntmpls;
    int maxslots;
    Text *needles; /* the counted anchors, then the launch anchors, then 'accept' last */
    int nneedles, nlaunch;
    int stride; /* the needle pass looks at every stride-th pair of bytes (stride < every needle's length) */
    Probe probes[MAX_NEEDLES * 4]; /* each needle's pairs at offsets 0 .. stride-1 (stride <= 4), by first byte,
                                      then second, then offset down */
    int nprobes;
    uint16_t by_first[257]; /* probes[by_first[b] .. by_first[b + 1]] begin with byte b */
    uint8_t bigram[8192]; /* the pairs of all probes */
    int trigrams; /* every needle is at least stride + 2 bytes: the pass also tests the three bytes at a probe */
    uint8_t trigram[8192]; /* the three bytes at each probe, hashed to 16 bits (TRIGRAM) */
    uint32_t head[MAX_NEEDLES]; /* each needle's first four bytes (as memcpy loads them), where it has four */
} Program;

typedef struct {
    const uint8_t *p;
    Py_ssize_t n;
} Cap;

/* The year of year-less timestamps as the parser keeps it (Parser._dated): the year and month of the last one; year 0
 * while the parser has none (a dated line is then the parser's to date). */
typedef struct {
    int year, month;
    char date[16]; /* the matched line's date, YYYY-MM-DD */
} Year;

typedef struct {
    char *buf;
    size_t len, cap;
} Out;

enum { CELL_TEXT, CELL_LINE, CELL_ENV, CELL_JSON_RANK, CELL_SLOT, CELL_BOOL, CELL_CONV, CELL_DERIVED, CELL_EXTRA };

typedef struct {
    int kind; /* CELL_* */
    int i; /* CELL_ENV: env index; CELL_SLOT, CELL_BOOL, CELL_CONV: group; CELL_DERIVED: index in the derived cells */
    int conv; /* CELL_CONV: CONV_* */
    PyObject *text; /* CELL_TEXT: a bytes object of the recipe (the plan holds the recipe) */
    const Tmpl *tmpl; /* CELL_EXTRA: the template whose unknown keys it writes (no __init__ while a scan runs) */
} Cell;

/* A typed plan's varying field, as the value json.loads would give of its JSON cell: the line number; the rank (None
 * or its text); a captured number (an int without '.', e or E, else a float); a captured True/False; a string of
 * pieces (captured text, envelope pieces, literal bytes) between JSON's quotes; a converted group (CONV_*); a derived
 * value (the memo's). */
enum { FIELD_LINE, FIELD_RANK, FIELD_NUMBER, FIELD_BOOL, FIELD_STR, FIELD_CONV, FIELD_DERIVED };

typedef struct {
    int kind; /* FIELD_* */
    int i; /* FIELD_NUMBER, FIELD_BOOL, FIELD_CONV: group; FIELD_DERIVED: index in the derived cells */
    int conv; /* FIELD_CONV: CONV_* */
    Cell *cells; /* FIELD_STR: the pieces between the quotes (CELL_TEXT, CELL_ENV, CELL_SLOT) */
    Py_ssize_t ncells;
} Field;

/* A plan's compiled derive (cmatch_derive.c): which groups it reads, and what each derived cell is. */
typedef struct {
    PyObject *spec; /* a strong reference to the tuple it was read from, which holds the objects below */
    PyObject *cells; /* each OUT_CELL output's cell, at its index */
    PyObject *none, *logged, *derived, *source; /* cells: no value; the accept length's sources; its default source */
    int in[NIN]; /* groups, -1 for none */
    int out[MAX_OUTS]; /* OUT_* */
    int nout;
    uint64_t launch_k; /* the launch's spec_num_steps, 0 for none */
    int typed; /* cells are values (PyFloat), not bytes */
} Derive;

typedef struct {
    PyObject *recipe; /* a strong reference to the tuple of bytes | int (typed: of the fields' steps), or NULL: the
                         template is only counted */
    PyObject *memo; /* a strong reference to the derived cells by dependencies (typed: their values): a mapping, or
                       a callable that gives them */
    int dict_memo; /* memo is a dict whose [] is dict's own (a subclass's __missing__ at most): looked up in C */
    Cell *cells; /* the recipe in C, checked against the template */
    Py_ssize_t ncells;
    int dep[MAX_DEPS]; /* groups */
    int depkind[MAX_DEPS]; /* DEP_* */
    int ndep;
    Derive derive; /* where derive.spec is set, the derived cells are this compiled derive's, and memo declines */
    int parser; /* the plan is False: the general parser writes this template's rows (a stopping scan stops) */
    /* A typed plan's (recipe is then its fields' steps): each row a copy of shape with the fields in place */
    PyObject *shape; /* a strong reference to the dict of every field, those the same in every row set; None: each
                        row is the tuple of the varying fields' values alone */
    PyObject *names; /* a strong reference to the tuple of the varying fields' names (exact str), as fields */
    PyObject *owner; /* a strong reference to what each row is paired with (the Python plan) */
    Field *fields;
    Py_ssize_t nfields;
} Plan;

/* The 16-bit hash of three bytes (b0, b1, b2) in the needle pass's trigram table. */
#define TRIGRAM(b0, b1, b2) ((uint16_t)((((uint32_t)(b0) | (uint32_t)(b1) << 8 | (uint32_t)(b2) << 16) * 2654435761u) >> 16))

/* cmatch_rows.c: n bytes at the end of o, which grows as needed (-1, MemoryError set, if it cannot) */
int cm_out_grow(Out *o, const void *s, size_t n);
static inline int cm_out_put(Out *o, const void *s, size_t n) {
    if (n == 0 || n > o->cap - o->len) return cm_out_grow(o, s, n); /* none yet, or too little room */
    memcpy(o->buf + o->len, s, n);
    o->len += n;
    return 0;
}
/* The code of the step of the template that captures group ``slot``, or -1. */
int cm_capturer(const Tmpl *t, long slot);
/* 1 if the plans are typed (each row a record), 0 if not (each row bytes), -1 (an error set) if they mix or fail */
int cm_plans_of(const Program *pg, PyObject *plans, Plan *out);
int cm_plan_ok(const Program *pg, int i, PyObject *p);
void cm_plans_free(Plan *plans, int n);
int cm_row(Out *o, const Plan *pl, long long line, const Cap *env, const Cap *caps);
/* A typed plan's row: a new (owner, dict) tuple, or NULL (an error set); scratch holds a string's pieces. */
PyObject *cm_record(Out *scratch, const Plan *pl, long long line, const Cap *env, const Cap *caps);
/* A row's derived cells (a new tuple), or NULL (an error set); the plan has dependencies (ndep > 0). */
PyObject *cm_derived(const Plan *pl, const Cap *caps);
/* A typed field's value (a new reference), or NULL (an error set); cells: the row's derived cells, or NULL. */
PyObject *cm_field(Out *scratch, const Field *f, long long line, const Cap *env, const Cap *caps, PyObject *cells);
/* A captured number as json.loads reads its text: an int if it has no '.', 'e' or 'E', else a float. */
PyObject *cm_number(const Cap *c);
/* A FIELD_STR's text (its pieces, undecoded) into scratch, from its start; -1 with an error set. */
int cm_pieces(Out *scratch, const Field *f, const Cap *env, const Cap *caps);

/* cmatch_cols.c: a typed scan's rows as columns, those of plans whose row is a tuple of its varying values (shape
 * None). Per template, once it has a row, a column per field; a byte per row names its template, or is COLS_RECORD
 * for a row of another plan, whose (owner, dict) record is in the scan's records. */
#define COLS_RECORD 255
typedef struct Col Col;
typedef struct {
    int ntmpls; /* fewer than COLS_RECORD: a row's template is a byte */
    Col **cols; /* per template: a column per field of its plan, NULL until its first row */
    Py_ssize_t *nfields, *nrows;
    Out order;
} Cols;
/* 1 if the scan's rows can be columns (a row's template fits in a byte), else 0. */
int cm_cols_fit(int ntmpls);
int cm_cols_init(Cols *c, int ntmpls);
/* A row of a plan not of tuples (its record in the scan's records) in the order; -1 with an error set. */
int cm_cols_record(Cols *c);
/* A matched line's row of template tmpl (its plan pl) into the columns; -1 with an error set. */
int cm_cols_add(Cols *c, Out *scratch, int tmpl, const Plan *pl, long long line, const Cap *env, const Cap *caps);
/* (order: bytes, per template None or (owner, rows, [column, ...]), records), each column a list, or a (typecode,
 * bytes) pair of machine values ('d': every value a float, 'q': an int of 64 bits); NULL with an error set. */
PyObject *cm_cols_result(const Cols *c, const Plan *plans, PyObject *records);
void cm_cols_free(Cols *c);

/* cmatch_convert.c: a converted group's cell into o, or its value (a new reference); -1 or NULL with an error set
 * (ValueError for a value the parser's converter refuses: a percentage over 100) */
int cm_convert_cell(Out *o, int conv, const Cap *c);
/* A plain decimal's float where it is read exactly without CPython (*exact set), as float() reads it. */
double cm_read_float(const uint8_t *p, Py_ssize_t n, int *exact);
/* A loose float's text (at most 30 digits, '.', 30 digits: the steps' bound) as float() reads it; -1 with an error
 * set. */
int cm_loose(const uint8_t *p, Py_ssize_t n, double *v);
/* A list's next entry from offset *at (the LIST step's entries are separated by ", "), *at moved past it. */
Cap cm_entry(const Cap *c, Py_ssize_t *at);
PyObject *cm_convert_value(int conv, const Cap *c);
/* 0 if the percentage converts, else -1 with its ValueError set (cm_convert_value's, without the value) */
int cm_percent_ok(const Cap *c);
/* round(x, ndigits) as Python's float round gives it: the correctly rounded decimal of ndigits decimals, read back;
 * its repr in repr[0 .. *n) (a buffer of REPR_MAX) where that is the decimal's digits, *n 0 where it is not (repr and
 * n NULL: the value alone). */
int cm_round(double x, int ndigits, double *v, char *repr, Py_ssize_t *n);

/* cmatch_derive.c: a plan's compiled derive read from its tuple (-1, an error set); a row's derived cells in *cells
 * (1), or 0 where the line is declined (its Python derive computes it), or -1 (an error set). */
int cm_derive_of(const Tmpl *t, PyObject *spec, Derive *d);
int cm_derive(const Derive *d, const Cap *caps, PyObject **cells);

/* cmatch_build.c */
int cm_program_init(Program *pg, PyObject *args, PyObject *kw);
void cm_program_dealloc(Program *pg);
int cm_captures(int code);

/* cmatch_match.c: env[0..3] = date, time, fraction, rank; caps[slot] for each capturing step */
const uint8_t *cm_envelope(const Program *pg, const uint8_t *p, const uint8_t *end, Cap *env);
/* vLLM's envelope: env[0..1] = MM-DD and time (the caller dates env[0] with cm_date), env[2..3] empty. */
const uint8_t *cm_yearless(const uint8_t *p, const uint8_t *end, Cap *env);
/* The line's date in the year state, as Parser._dated gives it (env[0] then points at y->date); 0 if the
 * parser must read the segment (29 February, a year out of range). */
int cm_date(Year *y, Cap *env);
int cm_match(const Tmpl *t, const uint8_t *line, const uint8_t *p, const uint8_t *end, Cap *caps);
/* The FLOAT step: the end of a float at p whose shortest repr is *cap (its text without trailing zeros), or NULL. */
const uint8_t *cm_float_value(const uint8_t *p, const uint8_t *end, Cap *cap);

/* cmatch_prescan.c */
PyObject *cm_find_any(PyObject *mod, PyObject *args);
PyObject *cm_newlines(PyObject *mod, PyObject *args);
PyObject *cm_pack_spans(PyObject *mod, PyObject *args);
PyObject *cm_block_totals_each(PyObject *mod, PyObject *args);
PyObject *cm_random_bytes(PyObject *mod, PyObject *args);
/* Whether a buffer holds 8-byte items of the format wanted ('d' or 'q'). */
int cm_eight_byte(const Py_buffer *view, const char *format);
PyObject *cm_prefix_sums(PyObject *mod, PyObject *args);
PyObject *cm_spans(PyObject *mod, PyObject *args);
PyObject *cm_nans(PyObject *mod, PyObject *column);

/* cmatch_columns.c */
PyObject *cm_bounded(PyObject *mod, PyObject *args);
/* a float, or an int within 2**53, as the double Python adds it as: 1; 0 where it is neither */
int cm_double_at(PyObject *v, double *x);
PyObject *cm_intervals(PyObject *mod, PyObject *args);
PyObject *cm_added(PyObject *mod, PyObject *args);
PyObject *cm_weighed(PyObject *mod, PyObject *args);
PyObject *cm_has_none(PyObject *mod, PyObject *values);

/* cmatch_masks.c */
/* every's tests other than a comparison (Py_LT to Py_GE): an entry's truth, whether it is not None, is None. */
#define TEST_TRUTH (-1)
#define TEST_KNOWN (-2)
#define TEST_NONE (-3)
PyObject *cm_every(PyObject *mod, PyObject *args);
PyObject *cm_log2_sums(PyObject *mod, PyObject *args);

/* cmatch_keyed.c */
PyObject *cm_kept_keys(PyObject *mod, PyObject *args);
PyObject *cm_keyed_sums(PyObject *mod, PyObject *args);
PyObject *cm_reserve_max(PyObject *mod, PyObject *args);
PyObject *cm_grouped(PyObject *mod, PyObject *args);

/* cmatch_weave.c */
PyObject *cm_woven(PyObject *mod, PyObject *args);
PyObject *cm_unwoven(PyObject *mod, PyObject *args);
PyObject *cm_spread(PyObject *mod, PyObject *args);
PyObject *cm_interleaved(PyObject *mod, PyObject *args);

/* cmatch_facts.c */
/* a value of the lane's exact types (None, bool, int, float, str, list, tuple): its truth runs no Python code */
int cm_plain_value(PyObject *v);
/* whether every value of a list or tuple is cm_plain_value's */
int cm_all_plain(PyObject *seq);
/* bool(v) of a cm_plain_value's value */
int cm_truth(PyObject *v);
PyObject *cm_drafts_each(PyObject *mod, PyObject *args);
PyObject *cm_last_rates(PyObject *mod, PyObject *args);
PyObject *cm_masked(PyObject *mod, PyObject *args);
PyObject *cm_filled(PyObject *mod, PyObject *args);
PyObject *cm_int_extremes(PyObject *mod, PyObject *column);
PyObject *cm_doubles(PyObject *mod, PyObject *values);
PyObject *cm_codes(PyObject *mod, PyObject *values);
PyObject *cm_decoded(PyObject *mod, PyObject *args);

#endif
