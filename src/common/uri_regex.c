/* uri_regex.c - rover's (Go regexp / RE2) endpoint patterns translated to POSIX ERE (see
 * uri_regex.h). One left-to-right pass with no recursion: outside a class each token is copied,
 * rewritten or refused; a class `[...]` is collected into its parts and re-emitted in the order
 * POSIX needs (a literal `]` first, `^` never first, `[` late, `-` last). */
#include "common/uri_regex.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

struct out {
    char *p;
    size_t n, cap;
    bool full;
};

static void put(struct out *o, const char *s)
{
    size_t len = strlen(s);
    if (o->full || o->n + len >= o->cap) {
        o->full = true;
        return;
    }
    memcpy(o->p + o->n, s, len);
    o->n += len;
    o->p[o->n] = '\0';
}

static void putc1(struct out *o, char c)
{
    char s[2] = {c, '\0'};
    put(o, s);
}

static skp_err fail(char *err, size_t cap, const char *fmt, ...)
{
    if (err && cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, cap, fmt, ap);
        va_end(ap);
    }
    return SKP_EINVAL;
}

static bool ere_special(char c)
{
    return c && strchr(".[]{}()\\*+?^$|", c) != NULL;
}

/* A literal character outside a class. */
static void put_literal(struct out *o, char c)
{
    if (ere_special(c))
        putc1(o, '\\');
    putc1(o, c);
}

/* The character an escape `\c` stands for when it is a literal, else 0. */
static char escaped_literal(char c)
{
    switch (c) {
    case 't':
        return '\t';
    case 'n':
        return '\n';
    case 'r':
        return '\r';
    case 'f':
        return '\f';
    default:
        break;
    }
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return 0;
    return c; /* escaped punctuation (or a byte >= 0x80) is itself */
}

/* The class body of a shorthand, and whether it is negated; NULL when c is no shorthand. */
static const char *shorthand(char c, bool *negated)
{
    *negated = c == 'D' || c == 'W' || c == 'S';
    switch (c) {
    case 'd':
    case 'D':
        return "0-9";
    case 'w':
    case 'W':
        return "A-Za-z0-9_";
    case 's':
    case 'S':
        return "[:space:]";
    default:
        return NULL;
    }
}

/* ---- character classes --------------------------------------------------------------------- */
struct cls {
    bool neg, rbracket, caret, lbracket, dash;
    char items[4 * SKP_URI_REGEX_MAX];
    struct out body;
};

/* One literal member (possibly the start or end of a range, which the caller handles). */
static void cls_literal(struct cls *k, char c)
{
    switch (c) {
    case ']':
        k->rbracket = true;
        break;
    case '^':
        k->caret = true;
        break;
    case '[':
        k->lbracket = true;
        break;
    case '-':
        k->dash = true;
        break;
    default:
        putc1(&k->body, c);
    }
}

static bool range_end_ok(char c)
{
    return c != ']' && c != '^' && c != '[' && c != '-' && c != '\\';
}

/* Reads one member at *i (a literal or a shorthand). Returns 1 for a literal in *lit, 2 for a
 * shorthand (already added), 0 on a refusal (err filled). */
static int cls_member(const char *rx, size_t *i, struct cls *k, char *lit, char *err, size_t cap)
{
    char c = rx[*i];
    if (c == '[' && rx[*i + 1] == ':') { /* a POSIX class such as [:alpha:], as RE2 reads it */
        const char *end = strstr(rx + *i + 2, ":]");
        size_t n = end ? (size_t)(end - (rx + *i)) + 2 : 0;
        char name[16];
        if (!end || n - 4 >= sizeof(name)) {
            fail(err, cap, "malformed [:class:]");
            return 0;
        }
        memcpy(name, rx + *i + 2, n - 4);
        name[n - 4] = '\0';
        static const char *const known[] = {"alnum", "alpha", "ascii", "blank", "cntrl",
                                            "digit", "graph", "lower", "print", "punct",
                                            "space", "upper", "word",  "xdigit"};
        size_t w = 0;
        while (w < sizeof(known) / sizeof(known[0]) && strcmp(known[w], name) != 0)
            w++;
        if (w == sizeof(known) / sizeof(known[0])) {
            fail(err, cap, "unknown class [:%s:]", name);
            return 0;
        }
        if (strcmp(name, "word") == 0)
            put(&k->body, "A-Za-z0-9_");
        else if (strcmp(name, "ascii") == 0)
            put(&k->body, "\x01-\x7f");
        else {
            put(&k->body, "[:");
            put(&k->body, name);
            put(&k->body, ":]");
        }
        *i += n;
        return 2;
    }
    if (c == '[') {
        fail(err, cap, "nested or intersected character classes are not supported");
        return 0;
    }
    if (c == '&' && rx[*i + 1] == '&') {
        fail(err, cap, "class intersection (&&) is not supported");
        return 0;
    }
    if (c != '\\') {
        *lit = c;
        (*i)++;
        return 1;
    }
    char e = rx[*i + 1];
    bool neg;
    const char *sh = shorthand(e, &neg);
    if (sh) {
        if (neg) {
            fail(err, cap, "\\%c inside a character class is not supported", e);
            return 0;
        }
        put(&k->body, sh);
        *i += 2;
        return 2;
    }
    char l = e ? escaped_literal(e) : 0;
    if (!l) {
        fail(err, cap, e ? "unsupported escape \\%c in a character class" : "pattern ends in \\",
             e);
        return 0;
    }
    *lit = l;
    *i += 2;
    return 1;
}

/* Parses the class starting after its '[' at *i, emits it, leaves *i after its ']'. */
static skp_err emit_class(const char *rx, size_t *i, struct out *o, char *err, size_t cap)
{
    struct cls k = {.body = {.cap = sizeof(k.items)}};
    k.body.p = k.items;
    k.items[0] = '\0';
    if (rx[*i] == '^') {
        k.neg = true;
        (*i)++;
    }
    bool first = true;
    for (;;) {
        char c = rx[*i];
        if (!c)
            return fail(err, cap, "unterminated character class");
        if (c == ']' && !first) {
            (*i)++;
            break;
        }
        first = false;
        char lo;
        int kind = cls_member(rx, i, &k, &lo, err, cap);
        if (!kind)
            return SKP_EINVAL;
        if (kind == 2)
            continue;
        if (rx[*i] == '-' && rx[*i + 1] && rx[*i + 1] != ']') {
            size_t j = *i + 1;
            char hi;
            int k2 = cls_member(rx, &j, &k, &hi, err, cap);
            if (!k2)
                return SKP_EINVAL;
            if (k2 == 2)
                return fail(err, cap, "a range cannot end in a class shorthand");
            if (!range_end_ok(lo) || !range_end_ok(hi))
                return fail(err, cap, "a range from or to ] ^ [ - \\ is not supported");
            if ((unsigned char)hi < (unsigned char)lo)
                return fail(err, cap, "illegal character range %c-%c", lo, hi);
            char r[4] = {lo, '-', hi, '\0'};
            put(&k.body, r);
            *i = j;
            continue;
        }
        cls_literal(&k, lo);
    }
    if (k.body.full)
        return fail(err, cap, "character class too long");
    bool empty = k.body.n == 0 && !k.rbracket;
    if (!k.neg && empty && k.caret && !k.lbracket && !k.dash) {
        put(o, "\\^");
        return SKP_OK;
    }
    put(o, "[");
    if (k.neg)
        put(o, "^");
    if (k.rbracket)
        put(o, "]");
    if (!k.neg && empty && k.caret && k.dash) {
        put(o, "-^");
        k.dash = false;
        k.caret = false;
    }
    if (!k.neg && empty && k.caret) { /* ^ with [ : "[[^]" would start a bracket symbol */
        put(o, k.lbracket ? "[^" : "^");
        k.lbracket = false;
        k.caret = false;
    }
    put(o, k.items);
    if (k.caret)
        put(o, "^");
    if (k.lbracket)
        put(o, "[");
    if (k.dash)
        put(o, "-");
    put(o, "]");
    return SKP_OK;
}

/* ---- outside classes ----------------------------------------------------------------------- */

/* Leading inline flags `(?imsux)`: sets *icase, returns the bytes consumed (0 = none). */
static size_t leading_flags(const char *rx, int *icase, char *err, size_t cap, skp_err *e)
{
    *e = SKP_OK;
    if (rx[0] != '(' || rx[1] != '?')
        return 0;
    size_t i = 2;
    while (rx[i] && strchr("imsux", rx[i]))
        i++;
    if (i == 2 || rx[i] != ')')
        return 0; /* not a flag group: the main loop refuses or reads it */
    for (size_t j = 2; j < i; j++) {
        if (rx[j] == 'i')
            *icase = 1;
        else if (rx[j] == 'x') {
            *e = fail(err, cap, "the comments flag (?x) is not supported");
            return 0;
        }
    }
    return i + 1;
}

/* `{n}`, `{n,}`, `{n,m}` at rx+i; returns its length (0 = not a repetition: a literal '{', as in
 * RE2) and in *count the largest number of copies it asks for ({n,} counts n + 1). */
static size_t repetition(const char *rx, size_t i, long *count)
{
    size_t j = i + 1;
    long lo = 0;
    long hi = -1;
    size_t digits = 0;
    while (rx[j] >= '0' && rx[j] <= '9') {
        if (lo <= 100000)
            lo = lo * 10 + (rx[j] - '0');
        j++, digits++;
    }
    if (!digits)
        return 0;
    if (rx[j] == ',') {
        j++;
        if (rx[j] >= '0' && rx[j] <= '9')
            hi = 0;
        while (rx[j] >= '0' && rx[j] <= '9') {
            if (hi <= 100000)
                hi = hi * 10 + (rx[j] - '0');
            j++;
        }
        if (hi < 0)
            hi = lo + 1;
    } else {
        hi = lo;
    }
    if (rx[j] != '}')
        return 0;
    *count = hi > lo ? hi : lo;
    return j - i + 1;
}

/* The size of the pattern once repetitions are expanded (what regcomp builds), per open group:
 * glibc's regcomp copies a repeated item count times, so `(a{1000}){1000}` would be a million
 * nodes. Bounded as RE2 bounds it: a count above 1000, or an expansion above SIZE_LIMIT, is
 * refused. */
#define REPEAT_MAX 1000
#define SIZE_LIMIT 20000
struct weights {
    long sum[SKP_URI_REGEX_MAX + 2]; /* per depth: the size of the group so far */
    long last;                       /* the size of the last item (what a quantifier repeats) */
    int depth;
};

static void weigh_item(struct weights *w, long size)
{
    w->last = size;
    w->sum[w->depth] += size;
}

static bool weigh_repeat(struct weights *w, long count)
{
    long grown = w->last * (count > 0 ? count - 1 : 0);
    w->sum[w->depth] += grown;
    w->last += grown;
    return w->sum[w->depth] <= SIZE_LIMIT;
}

static skp_err escape_outside(const char *rx, size_t *i, struct out *o, char *err, size_t cap)
{
    char e = rx[*i + 1];
    bool neg;
    const char *sh = shorthand(e, &neg);
    if (sh) {
        put(o, neg ? "[^" : "[");
        put(o, sh);
        put(o, "]");
        *i += 2;
        return SKP_OK;
    }
    if (e == 'Q') {
        const char *end = strstr(rx + *i + 2, "\\E");
        size_t stop = end ? (size_t)(end - rx) : strlen(rx);
        for (size_t j = *i + 2; j < stop; j++)
            put_literal(o, rx[j]);
        *i = end ? stop + 2 : stop;
        return SKP_OK;
    }
    if (e == 'E') { /* a stray \E ends nothing */
        *i += 2;
        return SKP_OK;
    }
    if (!e)
        return fail(err, cap, "pattern ends in \\");
    if (e >= '1' && e <= '9')
        return fail(err, cap, "back-references (\\%c) are not supported", e);
    if (e == 'b' || e == 'B' || e == 'A' || e == 'z' || e == 'Z' || e == 'G')
        return fail(err, cap, "boundary \\%c is not supported", e);
    char l = escaped_literal(e);
    if (!l)
        return fail(err, cap, "unsupported escape \\%c", e);
    put_literal(o, l);
    *i += 2;
    return SKP_OK;
}

static skp_err group_open(const char *rx, size_t *i, struct out *o, char *err, size_t cap)
{
    if (rx[*i + 1] != '?') {
        put(o, "(");
        (*i)++;
        return SKP_OK;
    }
    if (rx[*i + 2] == ':') {
        put(o, "(");
        *i += 3;
        return SKP_OK;
    }
    char k = rx[*i + 2];
    if (k == '=' || k == '!' || (k == '<' && (rx[*i + 3] == '=' || rx[*i + 3] == '!')))
        return fail(err, cap, "lookaround groups are not supported");
    if ((k == '<' && rx[*i + 3] != '=' && rx[*i + 3] != '!') || (k == 'P' && rx[*i + 3] == '<')) {
        /* a named group matches as a plain one: (?P<name>re) and (?<name>re) */
        size_t j = *i + (k == 'P' ? 4 : 3);
        size_t start = j;
        while (rx[j] == '_' || (rx[j] >= 'a' && rx[j] <= 'z') || (rx[j] >= 'A' && rx[j] <= 'Z') ||
               (j > start && rx[j] >= '0' && rx[j] <= '9'))
            j++;
        if (j == start || rx[j] != '>')
            return fail(err, cap, "malformed group name");
        put(o, "(");
        *i = j + 1;
        return SKP_OK;
    }
    if (k == '>')
        return fail(err, cap, "atomic groups are not supported");
    return fail(err, cap,
                "inline flags are supported only as (?flags) at the start of the pattern");
}

/* What came last, for the quantifier that may follow: as in RE2, a quantifier needs an item to
 * repeat (not the start, `(`, `|` or an anchor), one `?` after a quantifier makes it lazy (same
 * answer to "is there a match"), and anything else stacked on a quantifier is refused - glibc would
 * nest them (`a?????`), which costs it time and memory out of all proportion to the pattern. */
enum last { LAST_NONE, LAST_ITEM, LAST_QUANT, LAST_LAZY };

static skp_err quantifier(const char *rx, size_t *i, size_t rep, long count, enum last *last,
                          struct weights *w, struct out *o, char *err, size_t cap)
{
    char c = rx[*i];
    int len = rep ? (int)rep : 1;
    if (*last == LAST_QUANT && c == '?') {
        (*i)++;
        *last = LAST_LAZY;
        return SKP_OK;
    }
    if (*last == LAST_QUANT && c == '+')
        return fail(err, cap, "possessive quantifiers are not supported");
    if (*last == LAST_NONE)
        return fail(err, cap, "missing argument to repetition operator %.*s", len, rx + *i);
    if (*last != LAST_ITEM)
        return fail(err, cap, "bad repetition operator %.*s", len, rx + *i);
    if (rep) {
        if (count > REPEAT_MAX)
            return fail(err, cap, "repeat count above %d", REPEAT_MAX);
        if (!weigh_repeat(w, count))
            return fail(err, cap, "pattern too large once repetitions are expanded");
    }
    for (size_t j = 0; j < (size_t)len; j++)
        putc1(o, rx[*i + j]);
    *i += (size_t)len;
    *last = LAST_QUANT;
    return SKP_OK;
}

skp_err skpx_uri_regex_translate(const char *rx, char *out, size_t cap, int *icase, char *err,
                                 size_t err_cap)
{
    if (err && err_cap)
        err[0] = '\0';
    *icase = 0;
    if (!out || !cap)
        return SKP_ETOOBIG;
    out[0] = '\0';
    if (strlen(rx) > SKP_URI_REGEX_MAX)
        return fail(err, err_cap, "longer than %d bytes", SKP_URI_REGEX_MAX);
    struct out o = {.p = out, .cap = cap};
    skp_err e;
    size_t i = leading_flags(rx, icase, err, err_cap, &e);
    if (e)
        return e;
    struct weights w = {.depth = 0};
    enum last last = LAST_NONE;
    while (rx[i]) {
        char c = rx[i];
        size_t rep = 0;
        long count = 0;
        if (c == '*' || c == '+' || c == '?' ||
            (c == '{' && (rep = repetition(rx, i, &count)) != 0)) {
            e = quantifier(rx, &i, rep, count, &last, &w, &o, err, err_cap);
            if (e)
                return e;
            continue;
        }
        last = LAST_ITEM;
        if (c == '\\') {
            e = escape_outside(rx, &i, &o, err, err_cap);
            weigh_item(&w, 1);
        } else if (c == '[') {
            i++;
            e = emit_class(rx, &i, &o, err, err_cap);
            weigh_item(&w, 1);
        } else if (c == '(') {
            e = group_open(rx, &i, &o, err, err_cap);
            w.sum[++w.depth] = 0;
            last = LAST_NONE;
        } else if (c == ')') {
            if (w.depth == 0)
                return fail(err, err_cap, "unbalanced parenthesis");
            long inner = w.sum[w.depth--] + 1;
            weigh_item(&w, inner);
            put(&o, ")");
            i++;
        } else if (c == '{' || c == '}') {
            put_literal(&o, c); /* not a repetition: a literal, as in RE2 */
            weigh_item(&w, 1);
            i++;
        } else {
            putc1(&o, c); /* . | ^ $ ] and ordinary characters */
            if (c == '|' || c == '^' || c == '$')
                last = LAST_NONE; /* nothing a quantifier could repeat */
            if (c != '|')
                weigh_item(&w, 1);
            i++;
        }
        if (e)
            return e;
    }
    if (w.depth != 0)
        return fail(err, err_cap, "unclosed group");
    if (o.full) {
        out[0] = '\0';
        return SKP_ETOOBIG;
    }
    return SKP_OK;
}

skp_err skpx_uri_regex_compile(regex_t *re, const char *rx, char *err, size_t err_cap)
{
    char ere[SKP_URI_REGEX_OUT_MAX];
    int icase = 0;
    skp_err e = skpx_uri_regex_translate(rx, ere, sizeof(ere), &icase, err, err_cap);
    if (e)
        return e;
    int rc = regcomp(re, ere, REG_EXTENDED | REG_NOSUB | (icase ? REG_ICASE : 0));
    if (rc == REG_ESPACE)
        return SKP_ENOMEM;
    if (rc != 0) {
        char why[128];
        regerror(rc, NULL, why, sizeof(why));
        return fail(err, err_cap, "%s", why);
    }
    return SKP_OK;
}
