/* cmatch_match.c: one line against the envelope and a template's steps.
 *
 * Each function accepts exactly the text its regular expression in pieces.py accepts, read greedily;
 * native.py builds a Program only where greedy reading and the expression's backtracking agree.
 */
#include "cmatch.h"

/* ---- byte classes ---------------------------------------------------------------------------- */

static inline int is_digit(uint8_t c) { return c >= '0' && c <= '9'; }
static inline int is_upper(uint8_t c) { return c >= 'A' && c <= 'Z'; }
/* STR: [ !#-+\--\[\]-~] */
static inline int in_str(uint8_t c) { return c >= 0x20 && c <= 0x7e && c != '"' && c != ',' && c != '\\'; }
/* loose STR: [^,\r\n\x1b] */
static inline int in_lstr(uint8_t c) { return c != ',' && c != '\r' && c != '\n' && c != 0x1b; }
/* unknown key: [^:,\r\n\x1b] */
static inline int in_key(uint8_t c) { return c != ':' && in_lstr(c); }
/* unknown key's value: [^,\r\n\t\x1b] */
static inline int in_value(uint8_t c) { return c != '\t' && in_lstr(c); }

static inline int starts(const uint8_t *p, const uint8_t *end, const Text *t) {
    return end - p >= t->n && (t->n == 0 || (p[0] == t->s[0] && memcmp(p, t->s, (size_t)t->n) == 0));
}

static inline const uint8_t *digits(const uint8_t *p, const uint8_t *end) {
    while (p < end && is_digit(*p)) p++;
    return p;
}

/* ---- the envelope ---------------------------------------------------------------------------- */

static int two(const uint8_t *p) { return (p[0] - '0') * 10 + (p[1] - '0'); }

/* DATE [ T] TIME FRACTION of pieces.py; env[0..2] = date, time, fraction. */
static const uint8_t *timestamp(const uint8_t *p, const uint8_t *end, Cap *env) {
    if (end - p < 19) return NULL;
    for (int i = 0; i < 4; i++)
        if (!is_digit(p[i])) return NULL;
    if (memcmp(p, "0000", 4) == 0 || p[4] != '-' || p[7] != '-') return NULL;
    if (!is_digit(p[5]) || !is_digit(p[6]) || !is_digit(p[8]) || !is_digit(p[9])) return NULL;
    int month = two(p + 5), day = two(p + 8);
    if (month < 1 || month > 12 || day < 1 || day > 31) return NULL;
    if (day > 28 && month == 2) return NULL;
    if (day == 31 && !(month == 1 || month == 3 || month == 5 || month == 7 || month == 8 || month == 10 || month == 12))
        return NULL;
    if (p[10] != ' ' && p[10] != 'T') return NULL;
    const uint8_t *t = p + 11;
    if (t[2] != ':' || t[5] != ':') return NULL;
    if (!is_digit(t[0]) || !is_digit(t[1]) || two(t) > 23) return NULL;
    if (!is_digit(t[3]) || !is_digit(t[4]) || t[3] > '5') return NULL;
    if (!is_digit(t[6]) || !is_digit(t[7]) || t[6] > '5') return NULL;
    env[0].p = p, env[0].n = 10;
    env[1].p = t, env[1].n = 8;
    const uint8_t *f = t + 8;
    env[2].p = f, env[2].n = 0;
    if (end - f >= 4 && f[0] == '.' && is_digit(f[1]) && is_digit(f[2]) && is_digit(f[3])) {
        env[2].n = memcmp(f + 1, "000", 3) ? 4 : 0; /* .000 is read, and printed as none */
        return f + 4;
    }
    return f;
}

/* [A-Z][A-Z_]*[0-9]+ */
static const uint8_t *rank_token(const uint8_t *p, const uint8_t *end) {
    if (p >= end || !is_upper(*p)) return NULL;
    p++;
    while (p < end && (is_upper(*p) || *p == '_')) p++;
    const uint8_t *d = digits(p, end);
    return d > p ? d : NULL;
}

/* RANK of pieces.py: (?: (?=TOKEN))?((?<= )TOKEN(?: TOKEN)*|); env[3] = the rank. Every token
 * follows a space, the first one too: a token glued to the timestamp is no rank (the envelope's
 * (?:\s[A-Z][A-Z_]*+\d++)*+ refuses it, and so does the suffix after an empty rank). */
static const uint8_t *rank(const uint8_t *p, const uint8_t *end, Cap *env) {
    env[3].p = p, env[3].n = 0;
    const uint8_t *q = (p < end && *p == ' ') ? rank_token(p + 1, end) : NULL;
    if (q == NULL) return p;
    for (;;) {
        const uint8_t *r = (q < end && *q == ' ') ? rank_token(q + 1, end) : NULL;
        if (r == NULL) break;
        q = r;
    }
    env[3].p = p + 1, env[3].n = q - (p + 1);
    return q;
}

static const uint8_t *step(const Step *st, const uint8_t *p, const uint8_t *end, Cap *caps);

/* One of the program's leads, then its prefix; a line that starts with the prefix has no lead. */
static const uint8_t *lead(const Program *pg, const uint8_t *p, const uint8_t *end) {
    if (starts(p, end, &pg->prefix)) return p;
    for (int i = 0; i < pg->nleads; i++) {
        const uint8_t *q = p;
        for (int j = 0; j < pg->leads[i].nsteps && q != NULL; j++) q = step(&pg->leads[i].steps[j], q, end, NULL);
        if (q != NULL && starts(q, end, &pg->prefix)) return q;
    }
    return NULL;
}

const uint8_t *cm_envelope(const Program *pg, const uint8_t *p, const uint8_t *end, Cap *env) {
    p = lead(pg, p, end);
    if (p == NULL) return NULL;
    p = timestamp(p + pg->prefix.n, end, env);
    if (p == NULL) return NULL;
    p = rank(p, end, env);
    if (!starts(p, end, &pg->suffix)) return NULL;
    return p + pg->suffix.n;
}

/* ---- vLLM's envelope ------------------------------------------------------------------------ */

/* \x1b[ [0-9;]* [A-Za-z]: the colour the parser strips (ANSI) before it matches; skipped where vLLM colours. */
static const uint8_t *ansi(const uint8_t *p, const uint8_t *end) {
    while (end - p >= 3 && p[0] == 0x1b && p[1] == '[') {
        const uint8_t *q = p + 2;
        while (q < end && (is_digit(*q) || *q == ';')) q++;
        if (q >= end || !((*q >= 'A' && *q <= 'Z') || (*q >= 'a' && *q <= 'z'))) return p;
        p = q + 1;
    }
    return p;
}

static inline int in_word(uint8_t c) { return is_digit(c) || is_upper(c) || (c >= 'a' && c <= 'z') || c == '_'; }

/* (?:\((?:(?P<process>[\w.-]++)\s)?pid=\d++(?:,\sip=[\w.:]++)?\)\s++): one process prefix, ASCII only
 * (a narrower set than the envelope's \w, never a wider one), its colour around it skipped. */
static const uint8_t *process(const uint8_t *p, const uint8_t *end) {
    p = ansi(p, end);
    if (p >= end || *p != '(') return NULL;
    const uint8_t *q = p + 1;
    while (q < end && (in_word(*q) || *q == '.' || *q == '-')) q++;
    if (q < end && *q == ' ' && q > p + 1) q++;
    else q = p + 1; /* no process name: the group is left out, as the possessive name then finds no space */
    if (end - q < 4 || memcmp(q, "pid=", 4) != 0) return NULL;
    const uint8_t *d = digits(q + 4, end);
    if (d == q + 4) return NULL;
    if (end - d >= 5 && memcmp(d, ", ip=", 5) == 0) {
        const uint8_t *w = d + 5;
        while (w < end && (in_word(*w) || *w == '.' || *w == ':')) w++;
        if (w == d + 5) return NULL;
        d = w;
    }
    if (d >= end || *d != ')') return NULL;
    q = ansi(d + 1, end);
    if (q >= end || *q != ' ') return NULL;
    while (q < end && *q == ' ') q++;
    return q;
}

static const char *const LEVELS[] = {"DEBUG ", "INFO ", "WARNING ", "ERROR ", "CRITICAL "};
static const int DAYS[13] = {0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

/* vllm_envelope.toml without its stream prefixes (a line with one is the parser's): up to two process
 * prefixes, LEVEL MM-DD HH:MM:SS, [file.py:N] (or file.py:N] before 0.8.3), a space. */
const uint8_t *cm_yearless(const uint8_t *p, const uint8_t *end, Cap *env) {
    for (int i = 0; i < 2; i++) {
        const uint8_t *q = process(p, end);
        if (q == NULL) break;
        p = q;
    }
    p = ansi(p, end);
    int level = -1;
    for (int i = 0; level < 0 && i < 5; i++) {
        size_t n = strlen(LEVELS[i]);
        if ((size_t)(end - p) >= n && memcmp(p, LEVELS[i], n) == 0) level = i, p += n;
    }
    if (level < 0) return NULL;
    p = ansi(p, end);
    if (end - p < 15) return NULL;
    const uint8_t *t = p + 6;
    for (int i = 0; i < 14; i++)
        if (i != 2 && i != 5 && i != 8 && i != 11 && !is_digit(p[i])) return NULL;
    if (p[2] != '-' || p[5] != ' ' || t[2] != ':' || t[5] != ':') return NULL;
    int month = two(p), day = two(p + 3);
    if (month < 1 || month > 12 || day < 1 || day > DAYS[month]) return NULL;
    if (two(t) > 23 || two(t + 3) > 59 || two(t + 6) > 59) return NULL;
    env[0].p = p, env[0].n = 5;
    env[1].p = t, env[1].n = 8;
    env[2].p = t + 8, env[2].n = 0;
    env[3].p = t + 8, env[3].n = 0;
    p = ansi(t + 8, end);
    if (p >= end || *p != ' ') return NULL;
    p = ansi(p + 1, end);
    if (p < end && *p == '[') p++;
    const uint8_t *q = p;
    while (q < end && (in_word(*q) || *q == '.' || *q == '/' || *q == '-')) q++;
    if (q == p || q >= end || *q != ':') return NULL;
    const uint8_t *d = digits(q + 1, end);
    if (d == q + 1 || d >= end || *d != ']') return NULL;
    p = ansi(d + 1, end);
    return p < end && *p == ' ' ? p + 1 : NULL;
}

int cm_date(Year *y, Cap *env) {
    int month = two(env[0].p), day = two(env[0].p + 3), year = y->year;
    if (year == 0) return 0; /* no year yet: the parser's to give */
    if (month == 2 && day == 29) return 0; /* a ValueError in a common year: the parser's to say */
    if (y->month && month < y->month - 6) {
        year = ++y->year; /* New Year */
        y->month = month;
    } else if (y->month && month > y->month + 6) {
        year = y->year - 1; /* a late line from before New Year: the month stays */
    } else {
        y->month = month;
    }
    if (year < 1 || year > 9999) return 0;
    y->date[0] = (char)('0' + year / 1000), y->date[1] = (char)('0' + year / 100 % 10);
    y->date[2] = (char)('0' + year / 10 % 10), y->date[3] = (char)('0' + year % 10);
    y->date[4] = '-';
    memcpy(y->date + 5, env[0].p, 5);
    env[0].p = (const uint8_t *)y->date, env[0].n = 10;
    return 1;
}

/* ---- values ---------------------------------------------------------------------------------- */

/* FLOAT of pieces.py: the capture is the shortest repr (trailing zeros dropped, ".0" kept). */
static inline const uint8_t *float_value(const uint8_t *p, const uint8_t *end, Cap *cap) {
    const uint8_t *d1 = digits(p, end);
    Py_ssize_t n1 = d1 - p;
    if (n1 == 0 || d1 >= end || *d1 != '.') return NULL;
    const uint8_t *d2 = digits(d1 + 1, end);
    Py_ssize_t n2 = d2 - (d1 + 1);
    if (n2 == 0) return NULL;
    int zero = n1 == 1 && p[0] == '0';
    if (!zero && (p[0] == '0' || n1 > 9)) return NULL;
    Py_ssize_t f = n2;
    while (f > 0 && d1[f] == '0') f--;
    if (f == 0) {
        cap->p = p, cap->n = n1 + 2;
    } else {
        if (f > 6) return NULL;
        if (zero && f >= 4 && memcmp(d1 + 1, "0000", 4) == 0) return NULL;
        cap->p = p, cap->n = n1 + 1 + f;
    }
    return d2;
}

const uint8_t *cm_float_value(const uint8_t *p, const uint8_t *end, Cap *cap) {
    return float_value(p, end, cap); /* the step's own stays static, so the matcher's loop inlines it */
}

/* [0-9]{1,30}(?:\.[0-9]{1,30})? */
static const uint8_t *loose_float(const uint8_t *p, const uint8_t *end) {
    const uint8_t *d1 = digits(p, end);
    if (d1 == p || d1 - p > 30) return NULL;
    if (d1 + 1 < end && *d1 == '.' && is_digit(d1[1])) {
        const uint8_t *d2 = digits(d1 + 1, end);
        return d2 - (d1 + 1) > 30 ? NULL : d2;
    }
    return d1;
}

/* An unknown key and its value; a capturing step puts the key in its slot, the value in the next. */
static const uint8_t *extra(const Step *st, const uint8_t *p, const uint8_t *end, Cap *caps) {
    for (int i = 0; i < st->ntexts; i++) {
        const Text *k = &st->texts[i];
        if (starts(p, end, k) && end - p >= k->n + 2 && p[k->n] == ':' && p[k->n + 1] == ' ') return NULL;
    }
    const uint8_t *q = p;
    while (q < end && in_key(*q)) q++;
    if (q == p || end - q < 2 || q[0] != ':' || q[1] != ' ') return NULL;
    const uint8_t *v = q + 2, *w = v;
    while (w < end && in_value(*w)) w++;
    if (w == v || w[-1] == ' ') return NULL;
    if (st->slot >= 0) {
        caps[st->slot].p = p, caps[st->slot].n = q - p;
        caps[st->slot + 1].p = v, caps[st->slot + 1].n = w - v;
    }
    return w;
}

static const uint8_t *step(const Step *st, const uint8_t *p, const uint8_t *end, Cap *caps) {
    const uint8_t *q = p;
    switch (st->code) {
    case OP_LIT:
        return starts(p, end, &st->texts[0]) ? p + st->texts[0].n : NULL;
    case OP_LKEY:
        if (!starts(p, end, &st->texts[0])) return NULL;
        q = p + st->texts[0].n;
        if (st->slot >= 0) caps[st->slot].p = p, caps[st->slot].n = q - 2 - p, caps[st->slot + 1].p = q;
        return q;
    case OP_VEND: /* its key's step set where the value starts (named_keys) */
        if (st->slot >= 0) caps[st->slot].n = p - caps[st->slot].p;
        return p;
    case OP_ALT:
        for (int i = 0; i < st->ntexts; i++)
            if (starts(p, end, &st->texts[i])) return p + st->texts[i].n;
        return NULL;
    case OP_INT:
        q = digits(p, end);
        if (q == p || q - p > 18 || (p[0] == '0' && q - p > 1)) return NULL;
        break;
    case OP_LINT:
        q = digits(p, end);
        if (q == p || q - p > 30) return NULL;
        break;
    case OP_FLOAT: {
        Cap c;
        q = float_value(p, end, &c);
        if (q != NULL && st->slot >= 0) caps[st->slot] = c;
        return q;
    }
    case OP_LFLOAT:
        q = loose_float(p, end);
        if (q == NULL) return NULL;
        break;
    case OP_LIST: /* loose floats joined by ", ": a ", " goes on the list only before a digit */
        q = loose_float(p, end);
        while (q != NULL && end - q >= 3 && q[0] == ',' && q[1] == ' ' && is_digit(q[2])) q = loose_float(q + 2, end);
        if (q == NULL) return NULL;
        break;
    case OP_BOOL:
        if (end - p >= 4 && memcmp(p, "True", 4) == 0) q = p + 4;
        else if (end - p >= 5 && memcmp(p, "False", 5) == 0) q = p + 5;
        else return NULL;
        break;
    case OP_STR:
        while (q < end && in_str(*q)) q++;
        break;
    case OP_LSTR:
        while (q < end && in_lstr(*q)) q++;
        break;
    case OP_EXTRA:
        return extra(st, p, end, caps);
    case OP_BARE:
        return p;
    default:
        return NULL;
    }
    if (st->slot >= 0) caps[st->slot].p = p, caps[st->slot].n = q - p;
    return q;
}

/* A template's steps from p, then (?<![ \t])(?:, )?\r*(?=\n): true if the whole line [line, end) matches (the
 * byte before the line is a newline, never a space). */
int cm_match(const Tmpl *t, const uint8_t *line, const uint8_t *p, const uint8_t *end, Cap *caps) {
    for (int i = 0; i < t->nsteps && p != NULL; i++) p = step(&t->steps[i], p, end, caps);
    if (p == NULL || (p > line && (p[-1] == ' ' || p[-1] == '\t'))) return 0;
    if (end - p >= 2 && p[0] == ',' && p[1] == ' ') p += 2;
    while (p < end && *p == '\r') p++;
    return p == end;
}
