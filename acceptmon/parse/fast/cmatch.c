/* The fast lane's compiled matcher: the templates of acceptmon/parse/fast/templates.py, matched in C.
 *
 * A Program holds the envelope (an optional lead, literal prefix, timestamp, rank, literal suffix), the templates as
 * steps (literal, one of several literals, a value of a kind, an unknown key), the anchors the lane
 * counts and the word 'accept'. Program.scan(buf, s, e, base, plans) reads the lines of buf[s:e]
 * (complete lines: buf[e-1] is a newline) and does in one call what the pure-Python lane does with
 * re.finditer, %-formatting and bytes.count: it writes the CSV or JSONL rows of the lines a template
 * matches (or, for typed plans, builds each row's record values: a list of (plan, dict) where the rows' bytes
 * would be; cmatch_rows.c), counts the matches of each template, the non-overlapping occurrences of each anchor, and
 * the lines that say 'accept'. Each step accepts exactly the text its regular expression in
 * acceptmon/parse/fast/pieces.py accepts and captures the same bytes (native.py
 * refuses templates where a greedy step could differ from the expression's backtracking); the
 * pure-Python lane is the fallback, and tests/test_fastlane.py holds both to the general parser.
 *
 * A scan holds its own references to everything it reads (the buffer, each plan's recipe and memo),
 * converts every recipe to C codes checked against the template before it reads a line, and counts
 * itself in the program, so that a memo callback that changes the plans, scans again or calls
 * __init__ again cannot pull anything from under it.
 */
#include "cmatch.h"

#include <limits.h>

/* ---- counting -------------------------------------------------------------------------------- */

/* Whether needle t (of head `head`) starts at p[s0] (len - s0 >= its length): its first four bytes as one word,
 * then the rest. */
static inline int needle_at(const uint8_t *p, Py_ssize_t s0, const Text *t, uint32_t head) {
    if (t->n >= 4) {
        uint32_t w;
        memcpy(&w, p + s0, 4);
        if (w != head) return 0;
    }
    return memcmp(p + s0, t->s, (size_t)t->n) == 0;
}

/* Non-overlapping occurrences of each needle in p[0:len] (as bytes.count), and the lines holding
 * the last needle ('accept'); one pass over every stride-th pair of bytes, a needle checked only
 * where one of its probes' pairs is (and, with trigrams, the pair's next byte too: an occurrence is met once, in
 * order of its start). A byte range's probes are sorted by their second byte: the look stops past the pair's.
 * Offsets throughout: no pointer is formed outside the buffer. */
static void count_needles(const Program *pg, const uint8_t *p, Py_ssize_t len, Py_ssize_t *counts,
                          Py_ssize_t *accept_lines) {
    Py_ssize_t next[MAX_NEEDLES], line_end = 0;
    int n = pg->nneedles, last = n - 1;
    for (int i = 0; i < n; i++) next[i] = 0, counts[i] = 0;
    *accept_lines = 0;
    for (Py_ssize_t at = 0; at + 1 < len; at += pg->stride) {
        uint16_t h = (uint16_t)(p[at] | p[at + 1] << 8);
        if (!(pg->bigram[h >> 3] & (1 << (h & 7)))) continue;
        if (pg->trigrams && at + 2 < len) { /* an occurrence here has its needle's next byte at at + 2 */
            uint16_t tri = TRIGRAM(p[at], p[at + 1], p[at + 2]);
            if (!(pg->trigram[tri >> 3] & (1 << (tri & 7)))) continue;
        }
        for (int k = pg->by_first[p[at]]; k < pg->by_first[p[at] + 1]; k++) {
            const Probe *pr = &pg->probes[k];
            if (pr->pair != h) {
                if ((pr->pair >> 8) > p[at + 1]) break; /* sorted by second byte: no later probe has this pair */
                continue;
            }
            const Text *t = &pg->needles[pr->needle];
            Py_ssize_t s0 = at - pr->off; /* next[] >= 0, so s0 >= 0 below */
            if (s0 < next[pr->needle] || len - s0 < t->n || !needle_at(p, s0, t, pg->head[pr->needle])) continue;
            counts[pr->needle]++;
            next[pr->needle] = s0 + t->n;
            if (pr->needle == last && s0 >= line_end) {
                const uint8_t *nl = memchr(p + s0, '\n', (size_t)(len - s0));
                line_end = nl ? nl - p + 1 : len;
                (*accept_lines)++;
            }
        }
    }
}

/* Whether the counts (of count_needles) hold a launch anchor. */
static int holds_launch(const Program *pg, const Py_ssize_t *counts) {
    int ncounted = pg->nneedles - 1 - pg->nlaunch;
    for (int i = ncounted; i < ncounted + pg->nlaunch; i++)
        if (counts[i]) return 1;
    return 0;
}

/* ---- scan ------------------------------------------------------------------------------------ */

/* Whether a line holds one of the counted anchors (the needles before the launch anchors and 'accept'). */
static int holds_anchor(const Program *pg, const uint8_t *p, Py_ssize_t len) {
    Py_ssize_t counts[MAX_NEEDLES], accepts;
    count_needles(pg, p, len, counts, &accepts);
    for (int i = 0; i < pg->nneedles - 1 - pg->nlaunch; i++)
        if (counts[i]) return 1;
    return 0;
}

/* How a scan goes on past a line it cannot say: to the end (the caller checks the counts), or it stops there. */
typedef struct {
    int on; /* stop at the first line that holds a counted anchor and matches no template, or whose date is the
               parser's to give */
    Py_ssize_t at; /* where the scan stopped: that line's offset, or e */
    int enveloped; /* the line it stopped at has the program's envelope */
} Stop;

/* Where a scan's rows go: bytes into o, or (typed plans) (owner, dict) records into the list records, or (typed
 * plans of tuples, asked for) the columns cols (cmatch_cols.c). */
typedef struct {
    Out o;
    PyObject *records; /* a typed scan's: a new list; NULL for bytes rows */
    Out scratch; /* a typed string's pieces */
    Py_ssize_t n; /* rows written */
    int columnar; /* the rows go into cols */
    Cols cols;
} Rows;

/* One match into the scan's entries: (offset of the newline before the line, template, its row: b"" if none). */
static int add_entry(PyObject *entries, Py_ssize_t at, int tmpl, PyObject *row) {
    PyObject *entry = Py_BuildValue("niO", at, tmpl, row);
    int rc = entry == NULL ? -1 : PyList_Append(entries, entry);
    Py_XDECREF(entry);
    return rc;
}

/* The row of a matched line (its plan writes one) into the rows, and with entries the match into them (unless its
 * plan is False): -1 (a Python error set) if that fails. */
static int emit(Rows *r, const Plan *pl, long long line, const Cap *env, const Cap *caps, PyObject *entries,
                Py_ssize_t at, int tmpl) {
    size_t from = r->o.len;
    PyObject *row = NULL;
    if (pl->recipe != NULL && r->columnar && pl->shape == Py_None) { /* (a columnar scan has no entries) */
        if (cm_cols_add(&r->cols, &r->scratch, tmpl, pl, line, env, caps) < 0) return -1;
        r->n++;
    } else if (pl->recipe != NULL && r->records != NULL) {
        row = cm_record(&r->scratch, pl, line, env, caps);
        if (row == NULL || PyList_Append(r->records, row) < 0) return Py_XDECREF(row), -1;
        if (r->columnar && cm_cols_record(&r->cols) < 0) return Py_DECREF(row), -1;
        r->n++;
    } else if (pl->recipe != NULL) {
        if (cm_row(&r->o, pl, line, env, caps) < 0) return -1;
        r->n++;
    }
    int rc = 0;
    if (entries != NULL && !pl->parser) {
        if (row == NULL) row = PyBytes_FromStringAndSize(r->o.buf ? r->o.buf + from : "", (Py_ssize_t)(r->o.len - from));
        rc = row == NULL ? -1 : add_entry(entries, at, tmpl, row);
    }
    Py_XDECREF(row);
    return rc;
}

/* The lines of buf[s:e]: hits per template, rows into r (and, with entries, each match that is not the parser's
 * into it); -1 (a Python error set) if a row fails, 1 if a matched line's year-less date is the parser's to give
 * and the scan does not stop (its result is then None). */
static int scan_lines(const Program *pg, const uint8_t *buf, Py_ssize_t s, Py_ssize_t e, long long base,
                      const Plan *plans, Py_ssize_t *hits, Py_ssize_t *nlines, Rows *r, Year *y, Stop *stop,
                      PyObject *entries) {
    Cap env[4], caps[MAX_SLOTS];
    const uint8_t *p = buf + s, *stop_at = buf + e;
    long long line = base; /* scan checked that base + the lines of buf[s:e] does not overflow */
    stop->at = e;
    while (p < stop_at) {
        const uint8_t *end = memchr(p, '\n', (size_t)(stop_at - p));
        if (end == NULL) break;
        if (((line + 1) & 255) == 0) { /* let another thread (the pool's result reader) take the GIL */
            Py_BEGIN_ALLOW_THREADS
            Py_END_ALLOW_THREADS
        }
        const uint8_t *m = pg->envelope == ENV_YEARLESS ? cm_yearless(p, end, env) : cm_envelope(pg, p, end, env);
        int matched = 0;
        for (int i = 0; i < pg->ntmpls; i++) {
            const Tmpl *t = &pg->tmpls[i];
            int bare = t->nsteps > 0 && t->steps[0].code == OP_BARE;
            if (bare ? m != NULL : m == NULL) continue; /* a bare template's line has no envelope, another's has */
            if (!cm_match(t, p, bare ? p : m, end, caps)) continue;
            if (stop->on && plans[i].parser) break; /* the parser's line: stop at it */
            if (bare) {
                for (int k = 0; k < 4; k++) env[k].p = p, env[k].n = 0;
            } else if (pg->envelope == ENV_YEARLESS && (plans[i].recipe != NULL || plans[i].parser)) {
                /* (a line only counted is not dated: the parser dates the lines of the kinds it builds) */
                Year before = *y;
                if (!cm_date(y, env)) {
                    if (!stop->on) return 1;
                    *y = before;
                    break;
                }
            }
            matched = 1;
            hits[i]++;
            if (emit(r, &plans[i], line + 1, env, caps, entries, (p - buf) - 1, i) < 0) return -1;
            break;
        }
        if (!matched && stop->on && holds_anchor(pg, p, end - p)) {
            stop->at = p - buf, stop->enveloped = m != NULL;
            break;
        }
        line++;
        p = end + 1;
    }
    *nlines = (Py_ssize_t)(line - base);
    return 0;
}

static PyObject *list_of(const Py_ssize_t *v, int n) {
    PyObject *list = PyList_New(n);
    for (int i = 0; list != NULL && i < n; i++) {
        PyObject *item = PyLong_FromSsize_t(v[i]);
        if (item == NULL) Py_CLEAR(list);
        else PyList_SET_ITEM(list, i, item);
    }
    return list;
}

/* The scan's arguments checked: a range of whole lines in the buffer, and line numbers that fit. */
static int range_ok(const Py_buffer *view, Py_ssize_t s, Py_ssize_t e, long long base) {
    if (s < 0 || e < s || e > view->len || (e > s && ((const uint8_t *)view->buf)[e - 1] != '\n')) {
        PyErr_SetString(PyExc_ValueError, "scan: bad range (0 <= s <= e <= len(buf), buf[e - 1] a newline)");
        return 0;
    }
    if (base < 0) {
        PyErr_SetString(PyExc_ValueError, "scan: a negative base line");
        return 0;
    }
    if (base > LLONG_MAX - (long long)(e - s)) {
        PyErr_SetString(PyExc_OverflowError, "scan: base plus the lines of the range overflows a line number");
        return 0;
    }
    return 1;
}

static PyObject *scan_result(const Rows *r, const Plan *plans, const Py_ssize_t *hits, int ntmpls,
                             const Py_ssize_t *counts, int ncounted, Py_ssize_t accepts, Py_ssize_t nlines,
                             const Year *y, const Stop *stop) {
    PyObject *rows = r->columnar          ? cm_cols_result(&r->cols, plans, r->records)
                     : r->records != NULL ? Py_NewRef(r->records)
                                          : PyBytes_FromStringAndSize(r->o.buf ? r->o.buf : "", (Py_ssize_t)r->o.len);
    PyObject *hits_list = list_of(hits, ntmpls), *counts_list = list_of(counts, ncounted), *result = NULL;
    if (rows != NULL && hits_list != NULL && counts_list != NULL)
        result = Py_BuildValue("nOOOnniini", r->n, rows, hits_list, counts_list, accepts, nlines, y->year, y->month,
                               stop->at, stop->enveloped);
    Py_XDECREF(rows);
    Py_XDECREF(hits_list);
    Py_XDECREF(counts_list);
    return result;
}

static PyObject *Program_scan(Program *pg, PyObject *args) {
    Py_buffer view;
    Py_ssize_t s, e;
    long long base;
    PyObject *plans_obj;
    Year year = {0, 0, {0}};
    Stop stop = {0, 0, 0};
    PyObject *entries = Py_None;
    int columns = 0;
    if (!PyArg_ParseTuple(args, "y*nnLO|iipOp", &view, &s, &e, &base, &plans_obj, &year.year, &year.month, &stop.on,
                          &entries, &columns))
        return NULL;
    if (entries != Py_None && !PyList_CheckExact(entries)) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_TypeError, "scan: entries must be a list or None");
        return NULL;
    }
    if (!pg->ready) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_RuntimeError, "scan: the program is not built (its __init__ did not run, or failed)");
        return NULL;
    }
    if (pg->ready && pg->envelope == ENV_YEARLESS && (year.year < 0 || year.year > 9999 || year.month < 0 || year.month > 12)) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "scan: a year-less envelope needs the year (0-9999, 0: none) and month (0-12)");
        return NULL;
    }
    if (!range_ok(&view, s, e, base)) {
        PyBuffer_Release(&view);
        return NULL;
    }
    pg->scans++; /* from here on __init__ refuses: the counts and tables below stay those of this program */
    int ntmpls = pg->ntmpls, ncounted = pg->nneedles - 1 - pg->nlaunch;
    PyObject *result = NULL;
    Plan *plans = PyMem_Calloc((size_t)(ntmpls ? ntmpls : 1), sizeof(Plan));
    Py_ssize_t *hits = PyMem_Calloc((size_t)(ntmpls ? ntmpls : 1), sizeof(Py_ssize_t));
    Py_ssize_t counts[MAX_NEEDLES], accepts = 0, nlines = 0;
    Rows rows = {{NULL, 0, 0}, NULL, {NULL, 0, 0}, 0, 0, {0, NULL, NULL, NULL, {NULL, 0, 0}}};
    if (plans == NULL || hits == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int typed = cm_plans_of(pg, plans_obj, plans);
    if (typed < 0) goto done;
    rows.columnar = typed && columns && entries == Py_None && cm_cols_fit(ntmpls);
    if ((rows.columnar && cm_cols_init(&rows.cols, ntmpls) < 0) || (typed && (rows.records = PyList_New(0)) == NULL))
        goto done;
    if (!stop.on) { /* the whole range is said or nothing: a launch anchor anywhere in it is the parser's */
        Py_BEGIN_ALLOW_THREADS /* bytes only: the buffer is held by the view */
        count_needles(pg, (const uint8_t *)view.buf + s, e - s, counts, &accepts);
        Py_END_ALLOW_THREADS
        if (holds_launch(pg, counts)) {
            result = Py_NewRef(Py_None);
            goto done;
        }
    }
    int rc = scan_lines(pg, view.buf, s, e, base, plans, hits, &nlines, &rows, &year, &stop,
                        entries == Py_None ? NULL : entries);
    if (rc < 0) goto done;
    if (rc == 0 && stop.on) { /* the counts of the lines read, up to the stop: a scan that stops again and again
                               * reads each line once, not the rest of the range each time */
        Py_BEGIN_ALLOW_THREADS
        count_needles(pg, (const uint8_t *)view.buf + s, stop.at - s, counts, &accepts);
        Py_END_ALLOW_THREADS
        rc = holds_launch(pg, counts);
    }
    result = rc ? Py_NewRef(Py_None)
                : scan_result(&rows, plans, hits, ntmpls, counts, ncounted, accepts, nlines, &year, &stop);
done:
    PyMem_Free(rows.o.buf);
    PyMem_Free(rows.scratch.buf);
    Py_XDECREF(rows.records);
    cm_cols_free(&rows.cols);
    cm_plans_free(plans, ntmpls);
    PyMem_Free(hits);
    PyBuffer_Release(&view);
    pg->scans--;
    return result;
}

static PyObject *Program_plan_ok(Program *pg, PyObject *args) {
    int i;
    PyObject *plan;
    if (!PyArg_ParseTuple(args, "iO", &i, &plan)) return NULL;
    if (!pg->ready) {
        PyErr_SetString(PyExc_RuntimeError, "plan_ok: the program is not built (its __init__ did not run, or failed)");
        return NULL;
    }
    if (i < 0 || i >= pg->ntmpls) return PyErr_SetString(PyExc_IndexError, "plan_ok: no such template"), NULL;
    int ok = cm_plan_ok(pg, i, plan);
    return ok < 0 ? NULL : PyBool_FromLong(ok);
}

static PyMethodDef Program_methods[] = {
    {"plan_ok", (PyCFunction)Program_plan_ok, METH_VARARGS,
     "plan_ok(i, plan) -> whether a scan takes this plan for template i (False: its rows are the parser's)"},
    {"scan", (PyCFunction)Program_scan, METH_VARARGS,
     "scan(buf, s, e, base, plans[, year, month, stop, entries, columns]) -> (rows, row bytes (typed plans: a list\n"
     "of (owner, dict); with columns, where every plan is of tuples and there are no entries: (order, per template\n"
     "None or (owner, rows, columns), records of the other plans)), hits per template, count per counted anchor, accept lines, lines, year, month, where it\n"
     "stopped, whether that line has the envelope), or\n"
     "None if a launch anchor is in the lines (with stop, in the lines read; without, a year-less date is the\n"
     "parser's to give).\n"
     "entries: a list that gets (offset of the newline before the line, template, row bytes or b'' (typed: the\n"
     "(owner, dict) row)) per match whose plan is not False"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ProgramType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "acceptmon.parse.fast.cmatch.Program",
    .tp_basicsize = sizeof(Program),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The fast lane's templates, compiled: see acceptmon/parse/fast/native.py.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)cm_program_init,
    .tp_dealloc = (destructor)cm_program_dealloc,
    .tp_methods = Program_methods,
};

static PyMethodDef module_functions[] = {
    {"find_any", cm_find_any, METH_VARARGS, "find_any(buf, start, end, words) -> first offset of any word, or -1"},
    {"newlines", cm_newlines, METH_VARARGS, "newlines(buf, start, end) -> the number of newlines in buf[start:end]"},
    {"pack_spans", cm_pack_spans, METH_VARARGS,
     "pack_spans(rows, width, cell, prefix, counts, n, length): a column's block sums into rows, start by start"},
    {"block_totals_each", cm_block_totals_each, METH_VARARGS,
     "block_totals_each(draws, n, rows, counted) -> block_totals of each replicate over each table, without the GIL"},
    {"random_bytes", cm_random_bytes, METH_VARARGS,
     "random_bytes(state, k, size) -> (k random.Random.randbytes(size) from getstate()[1], the state after)"},
    {"prefix_sums", cm_prefix_sums, METH_VARARGS,
     "prefix_sums(column, upto, prefix, counts): the column's prefix sums, twice round, into prefix (bootstrap.py)"},
    {"nans", cm_nans, METH_O, "nans(column) -> NaNs in an array('d'), or None for another column (columns.py)"},
    {"spans", cm_spans, METH_VARARGS, "spans(prefix, n, width, out): out[i] = prefix[i + width] - prefix[i] (bootstrap.py)"},
    {"bounded", cm_bounded, METH_VARARGS,
     "bounded(column, low, high) -> values logged, or -1 where one is not a number within the bounds (plain.py)"},
    {"every", cm_every, METH_VARARGS,
     "every(columns, tests=None) -> bytes: 1 where each column's entry passes its test, else 0 (diagnose/detector.py)"},
    {"log2_sums", cm_log2_sums, METH_VARARGS,
     "log2_sums(seqs, lengths, totals) -> [(key, count, total, first)] per log2 bucket of seq, or None "
     "(detect_context.py)"},
    {"added", cm_added, METH_VARARGS,
     "added(values, start) -> the floats added one by one to start, or None where one is not a float (plain.py)"},
    {"kept_keys", cm_kept_keys, METH_VARARGS,
     "kept_keys(steady, running, tputs) -> each kept line's #running-req once, in order (plain.py)"},
    {"keyed_sums", cm_keyed_sums, METH_VARARGS,
     "keyed_sums(steady, running, tputs, lengths, number, starts) -> per bucket its kept lines' sums, or None "
     "(plain.py)"},
    {"reserve_max", cm_reserve_max, METH_VARARGS,
     "reserve_max(running, tokens, usage, lines, c, start) -> (largest r*c/(t/u), its first line), or None "
     "(detect_load.py)"},
    {"grouped", cm_grouped, METH_VARARGS,
     "grouped(keys, values) -> {key: its values not None, in order}, or None where a key is not a str (plain.py)"},
    {"woven", cm_woven, METH_VARARGS, "woven(order, columns) -> each row's value, the next of its piece's column"},
    {"unwoven", cm_unwoven, METH_VARARGS, "unwoven(order, values, n) -> each of the n pieces' values, in order"},
    {"spread", cm_spread, METH_VARARGS, "spread(order, values) -> [values[piece] for piece in order]"},
    {"interleaved", cm_interleaved, METH_VARARGS,
     "interleaved(order, units, loads, state) -> (tput, running, steady) carried per unit, or None (facts.py)"},
    {"drafts_each", cm_drafts_each, METH_VARARGS,
     "drafts_each(rates, cumulative, batch, tokens, drafted) -> (kept, drafts), or None (diagnose/depth.py)"},
    {"last_rates", cm_last_rates, METH_VARARGS,
     "last_rates(warm, rates, lines) -> (last rates, lines) of warm rows, or None (detect_accept.py)"},
    {"masked", cm_masked, METH_VARARGS, "masked(values, mask) -> [v if m else None], or None (plain.py)"},
    {"filled", cm_filled, METH_VARARGS,
     "filled(mask, fill, values) -> [next fill if m else v], or None (facts.py)"},
    {"int_extremes", cm_int_extremes, METH_O,
     "int_extremes(column) -> (min, max) of a non-empty array('q'), or None for another column (plain.py)"},
    {"has_none", cm_has_none, METH_O, "has_none(values) -> whether a value is None (plain.py)"},
    {"codes", cm_codes, METH_O, "codes(values) -> (distinct, uint16 codes) of a list, or None (unmade.py's Coded)"},
    {"decoded", cm_decoded, METH_VARARGS, "decoded(values, codes) -> the list codes() coded (unmade.py's Coded)"},
    {"doubles", cm_doubles, METH_O, "doubles(values) -> a float column's bytes as array('d') holds them (NaN: None)"},
    {"weighed", cm_weighed, METH_VARARGS,
     "weighed(rates, drafts, totals) -> the totals with each position's rates times drafts added, or None "
     "(positions.py)"},
    {"intervals", cm_intervals, METH_VARARGS,
     "intervals(accepted, drafted, emitted, widths, before, known) -> each line's interval, or None (tokens.py)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef scan_module = {
    PyModuleDef_HEAD_INIT, "cmatch", "The fast lane's compiled matcher (see acceptmon/parse/fast/native.py).", -1,
    module_functions, NULL, NULL, NULL, NULL,
};

/* The numbers of the protocol, for native.py to read (it writes none of them itself). */
static const struct {
    const char *name;
    long value;
} CONSTANTS[] = {
    {"VERSION", CMATCH_VERSION}, {"SLOT", SLOT}, {"BOOL_SLOT", BOOL_SLOT}, {"JSON_RANK", JSON_RANK}, {"JSON_EXTRA", JSON_EXTRA},
    {"CONV_SLOT", CONV_SLOT}, {"CONV_PERCENT", CONV_PERCENT}, {"CONV_FLOATS_CSV", CONV_FLOATS_CSV},
    {"CONV_FLOATS_JSON", CONV_FLOATS_JSON}, {"PERCENT_DIGITS", PERCENT_DIGITS}, {"DEP_TEXT", DEP_TEXT},
    {"DEP_NUMBER", DEP_NUMBER}, {"DEP_PERCENT", DEP_PERCENT}, {"DEP_FLOATS", DEP_FLOATS},
    {"MAX_SLOTS", MAX_SLOTS}, {"MAX_NEEDLES", MAX_NEEDLES}, {"MAX_DEPS", MAX_DEPS}, {"MAX_LEADS", MAX_LEADS},
    {"OP_LIT", OP_LIT}, {"OP_ALT", OP_ALT}, {"OP_INT", OP_INT}, {"OP_FLOAT", OP_FLOAT}, {"OP_BOOL", OP_BOOL},
    {"OP_STR", OP_STR}, {"OP_LINT", OP_LINT}, {"OP_LFLOAT", OP_LFLOAT}, {"OP_LSTR", OP_LSTR},
    {"OP_EXTRA", OP_EXTRA}, {"OP_LIST", OP_LIST}, {"OP_BARE", OP_BARE}, {"OP_LKEY", OP_LKEY}, {"OP_VEND", OP_VEND}, {"ENV_DATED", ENV_DATED},
    {"ENV_YEARLESS", ENV_YEARLESS}, {"SPEC_DIGITS", SPEC_DIGITS}, {"MAX_OUTS", MAX_OUTS}, {"IN_DRAFTED", IN_DRAFTED},
    {"IN_ACCEPTED", IN_ACCEPTED}, {"IN_POSITIONS", IN_POSITIONS}, {"IN_LOGGED", IN_LOGGED},
    {"IN_SPEC_TOKENS", IN_SPEC_TOKENS}, {"IN_EMITTED", IN_EMITTED}, {"NIN", NIN}, {"OUT_RATE", OUT_RATE},
    {"OUT_LEN", OUT_LEN}, {"OUT_SOURCE", OUT_SOURCE}, {"OUT_CELL", OUT_CELL},
    {"TEST_KNOWN", TEST_KNOWN}, {"TEST_NONE", TEST_NONE},
};

PyMODINIT_FUNC PyInit_cmatch(void) {
    if (PyType_Ready(&ProgramType) < 0) return NULL;
    PyObject *m = PyModule_Create(&scan_module);
    if (m == NULL) return NULL;
    int rc = PyModule_AddObjectRef(m, "Program", (PyObject *)&ProgramType);
    for (size_t i = 0; rc == 0 && i < sizeof CONSTANTS / sizeof CONSTANTS[0]; i++)
        rc = PyModule_AddIntConstant(m, CONSTANTS[i].name, CONSTANTS[i].value);
    if (rc < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
