/* cont_policy.c - the bounded ServiceWithPolicyJSON parser (see cont_policy.h).
 *
 * Design: a recursive-descent reader over (pointer, end) that never allocates: strings are
 * decoded into caller buffers of fixed size (too long = refused), numbers read with strtod from a
 * bounded copy, values we do not want skipped with the same depth limit. Threshold is a string in
 * SkyWalking's JSON ("50"); a number is accepted too. Period and Count are numbers (strings of
 * digits accepted). */
#include "agent/cont_policy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hex.h"
#include "common/utf8.h"

struct jr {
    const char *start, *p, *end;
    int depth;
    char *reason;
    size_t cap;
    bool failed;
};

static const char *const k_targets[SKP_CONT_N_TARGETS] = {"ON_CPU", "OFF_CPU", "NETWORK"};
static const char *const k_monitors[SKP_CONT_N_MONITORS] = {"PROCESS_CPU", "PROCESS_THREAD_COUNT",
                                                            "SYSTEM_LOAD", "HTTP_ERROR_RATE",
                                                            "HTTP_AVG_RESPONSE_TIME"};

const char *skp__cont_target_name(int t)
{
    return t >= 0 && t < SKP_CONT_N_TARGETS ? k_targets[t] : "?";
}

const char *skp__cont_monitor_name(int m)
{
    return m >= 0 && m < SKP_CONT_N_MONITORS ? k_monitors[m] : "?";
}

static bool fail(struct jr *r, const char *what)
{
    if (!r->failed) {
        r->failed = true;
        if (r->reason && r->cap)
            snprintf(r->reason, r->cap, "%s at offset %zu", what, (size_t)(r->p - r->start));
    }
    return false;
}

static void ws(struct jr *r)
{
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
        r->p++;
}

static bool peek(struct jr *r, char c)
{
    ws(r);
    return r->p < r->end && *r->p == c;
}

static bool eat(struct jr *r, char c)
{
    if (!peek(r, c))
        return false;
    r->p++;
    return true;
}

/* The one-character escapes of a JSON string (after the backslash) and what each stands for. */
static const char k_escapes[] = "\"\\/bfnrt";
static const char k_unescaped[] = "\"\\/\b\f\n\r\t";

/* Reads a string into out (cap bytes incl. NUL); out NULL = skip. UTF-16 escapes are written as
 * UTF-8 (surrogate pairs joined; a lone surrogate becomes U+FFFD). */
static bool str(struct jr *r, char *out, size_t cap)
{
    if (!eat(r, '"'))
        return fail(r, "expected a string");
    size_t n = 0;
    while (r->p < r->end && *r->p != '"') {
        unsigned char c = (unsigned char)*r->p++;
        char buf[4];
        size_t k = 1;
        buf[0] = (char)c;
        if (c < 0x20)
            return fail(r, "control character in a string");
        if (c == '\\') {
            if (r->p >= r->end)
                return fail(r, "unterminated escape");
            char e = *r->p++;
            const char *simple = memchr(k_escapes, e, sizeof(k_escapes) - 1);
            if (simple) {
                buf[0] = k_unescaped[simple - k_escapes];
            } else if (e == 'u') {
                unsigned cp = 0;
                for (int i = 0; i < 4; i++) {
                    int h = r->p < r->end ? skpx_hex_value(*r->p++) : -1;
                    if (h < 0)
                        return fail(r, "bad \\u escape");
                    cp = cp << 4 | (unsigned)h;
                }
                if (cp >= 0xD800 && cp < 0xDC00 && r->end - r->p >= 6 && r->p[0] == '\\' &&
                    r->p[1] == 'u') {
                    unsigned lo = 0;
                    bool ok = true;
                    for (int i = 2; i < 6 && ok; i++) {
                        int h = skpx_hex_value(r->p[i]);
                        ok = h >= 0;
                        lo = lo << 4 | (unsigned)(h < 0 ? 0 : h);
                    }
                    if (ok && lo >= 0xDC00 && lo < 0xE000) {
                        r->p += 6;
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    }
                }
                if (cp >= 0xD800 && cp < 0xE000)
                    cp = 0xFFFD;
                k = skpx_utf8_put(cp, buf);
            } else {
                return fail(r, "bad escape");
            }
        }
        if (out) {
            if (n + k >= cap)
                return fail(r, "string too long");
            memcpy(out + n, buf, k);
        }
        n += k;
    }
    if (r->p >= r->end)
        return fail(r, "unterminated string");
    r->p++;
    if (out)
        out[n] = '\0';
    return true;
}

static bool number(struct jr *r, double *out)
{
    ws(r);
    char buf[64];
    size_t n = 0;
    while (r->p < r->end && n < sizeof(buf) - 1 &&
           (strchr("+-.eE", *r->p) || (*r->p >= '0' && *r->p <= '9')))
        buf[n++] = *r->p++;
    buf[n] = '\0';
    if (n == 0 || n == sizeof(buf) - 1)
        return fail(r, "expected a number");
    char *e = NULL;
    double v = strtod(buf, &e);
    if (!e || *e || !isfinite(v))
        return fail(r, "bad number");
    *out = v;
    return true;
}

/* A number, or a string holding one (Threshold is "50" in SkyWalking's JSON). */
static bool num_or_str(struct jr *r, double *out)
{
    if (!peek(r, '"'))
        return number(r, out);
    char buf[64];
    if (!str(r, buf, sizeof(buf)))
        return false;
    char *e = NULL;
    const char *s = buf;
    while (*s == ' ')
        s++;
    double v = strtod(s, &e);
    if (e == s || !isfinite(v))
        return fail(r, "parsing threshold error");
    while (*e == ' ')
        e++;
    if (*e)
        return fail(r, "parsing threshold error");
    *out = v;
    return true;
}

static bool lit(struct jr *r, const char *w)
{
    ws(r);
    size_t n = strlen(w);
    if ((size_t)(r->end - r->p) < n || memcmp(r->p, w, n) != 0)
        return fail(r, "unexpected token");
    r->p += n;
    return true;
}

static bool skip(struct jr *r)
{
    ws(r);
    if (r->p >= r->end)
        return fail(r, "unexpected end");
    if (++r->depth > SKP_CONT_JSON_DEPTH)
        return fail(r, "nested too deeply");
    bool ok = true;
    char c = *r->p;
    if (c == '"') {
        ok = str(r, NULL, 0);
    } else if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        r->p++;
        if (!eat(r, close)) {
            do {
                if (c == '{') {
                    ok = str(r, NULL, 0) && (eat(r, ':') || fail(r, "expected ':'"));
                }
                ok = ok && skip(r);
            } while (ok && eat(r, ','));
            ok = ok && (eat(r, close) || fail(r, "expected a closing bracket"));
        }
    } else if (c == 't') {
        ok = lit(r, "true");
    } else if (c == 'f') {
        ok = lit(r, "false");
    } else if (c == 'n') {
        ok = lit(r, "null");
    } else {
        double d;
        ok = number(r, &d);
    }
    r->depth--;
    return ok;
}

/* Iterates the members of an object: calls member(key) positioned at the value. */
typedef bool (*member_fn)(struct jr *r, const char *key, void *ud);

static bool object(struct jr *r, member_fn member, void *ud)
{
    if (!eat(r, '{'))
        return fail(r, "expected an object");
    if (++r->depth > SKP_CONT_JSON_DEPTH)
        return fail(r, "nested too deeply");
    if (!eat(r, '}')) {
        do {
            char key[64];
            if (!str(r, key, sizeof(key)))
                return false;
            if (!eat(r, ':'))
                return fail(r, "expected ':'");
            if (!member(r, key, ud))
                return false;
        } while (eat(r, ','));
        if (!eat(r, '}'))
            return fail(r, "expected '}'");
    }
    r->depth--;
    return true;
}

static bool is_null(struct jr *r)
{
    ws(r);
    if ((size_t)(r->end - r->p) >= 4 && memcmp(r->p, "null", 4) == 0) {
        r->p += 4;
        return true;
    }
    return false;
}

/* ---- the schema ----------------------------------------------------------------------------- */
static bool int_in(struct jr *r, int *out, const char *what)
{
    double d;
    if (!num_or_str(r, &d))
        return false;
    if (d < 1 || d > 1e9 || d != (double)(long long)d) /* no libm in the agent */
        return fail(r, what);
    *out = d > SKP_CONT_PERIOD_MAX ? SKP_CONT_PERIOD_MAX : (int)d;
    return true;
}

static bool item_member(struct jr *r, const char *key, void *ud)
{
    struct skp__cont_item *it = ud;
    if (is_null(r))
        return true;
    if (strcmp(key, "Threshold") == 0)
        return num_or_str(r, &it->threshold);
    if (strcmp(key, "Period") == 0)
        return int_in(r, &it->period, "Period must be a positive integer");
    if (strcmp(key, "Count") == 0)
        return int_in(r, &it->count, "Count must be a positive integer");
    if (strcmp(key, "URIRegex") == 0)
        return str(r, it->regex, sizeof(it->regex));
    if (strcmp(key, "URIList") == 0) {
        if (!eat(r, '['))
            return fail(r, "URIList must be a list");
        if (eat(r, ']'))
            return true;
        do {
            if (it->n_uris == SKP_CONT_URIS_MAX)
                return fail(r, "too many URIs");
            if (!str(r, it->uris[it->n_uris], sizeof(it->uris[0])))
                return false;
            it->n_uris++;
        } while (eat(r, ','));
        return eat(r, ']') || fail(r, "expected ']'");
    }
    return skip(r);
}

/* The index of `key` in names[0..n), -1 when it is none of them. */
static int name_index(const char *key, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(key, names[i]) == 0)
            return i;
    return -1;
}

struct target_ctx {
    struct skp__cont_policy *pol;
    int target;
};

static bool monitor_member(struct jr *r, const char *key, void *ud)
{
    struct target_ctx *t = ud;
    int m = name_index(key, k_monitors, SKP_CONT_N_MONITORS);
    if (m < 0 || t->target < 0) {
        t->pol->n_skipped++;
        return skip(r);
    }
    struct skp__cont_item *it = &t->pol->items[t->target][m];
    memset(it, 0, sizeof(*it));
    if (!object(r, item_member, it))
        return false;
    if (it->period == 0 || it->count == 0)
        return fail(r, "an item needs Period and Count");
    if (it->count > it->period)
        it->count = it->period; /* a Period cut to SKP_CONT_PERIOD_MAX */
    it->present = true;
    return true;
}

static bool profiling_member(struct jr *r, const char *key, void *ud)
{
    struct skp__cont_policy *pol = ud;
    int t = name_index(key, k_targets, SKP_CONT_N_TARGETS);
    if (t < 0)
        pol->n_skipped++;
    else
        pol->has_target[t] = true;
    if (is_null(r))
        return true;
    struct target_ctx ctx = {pol, t};
    return object(r, monitor_member, &ctx);
}

struct entry_ctx {
    struct skp__cont_policy *pol; /* where this entry goes; NULL = check only */
    char service[1024];
    bool has_service;
};

static bool entry_member(struct jr *r, const char *key, void *ud)
{
    struct entry_ctx *e = ud;
    if (strcmp(key, "ServiceName") == 0) {
        e->has_service = true;
        return str(r, e->service, sizeof(e->service));
    }
    if (!e->pol)
        return skip(r); /* an entry after ours: checked, not kept */
    if (strcmp(key, "UUID") == 0)
        return is_null(r) || str(r, e->pol->uuid, sizeof(e->pol->uuid));
    if (strcmp(key, "Profiling") == 0)
        return is_null(r) || object(r, profiling_member, e->pol);
    if (strcmp(key, "ExecuteDuration") == 0 || strcmp(key, "SilenceDuration") == 0) {
        if (is_null(r))
            return true;
        double d;
        if (!num_or_str(r, &d))
            return false;
        int v = d >= 1 && d <= 86400 ? (int)d : 0;
        if (key[0] == 'E')
            e->pol->execute_s = v;
        else
            e->pol->silence_s = v;
        return true;
    }
    return skip(r);
}

skp_err skp__cont_policy_parse(const char *json, size_t len, const char *service,
                               struct skp__cont_policy *out, bool *found, char *reason, size_t cap)
{
    memset(out, 0, sizeof(*out));
    *found = false;
    if (reason && cap)
        reason[0] = '\0';
    if (len > SKP_CONT_JSON_MAX) {
        snprintf(reason, cap, "policy JSON of %zu bytes is over the limit", len);
        return SKP_ETOOBIG;
    }
    if (!json || !service)
        return SKP_EINVAL;
    struct jr r = {.start = json, .p = json, .end = json + len, .reason = reason, .cap = cap};
    struct entry_ctx e;
    bool ok = eat(&r, '[') || fail(&r, "expected a list");
    int n = 0;
    if (ok && !eat(&r, ']')) {
        do {
            if (++n > SKP_CONT_SERVICES_MAX) {
                ok = fail(&r, "too many services");
                break;
            }
            /* Entries are read into `out` until ours is found (another service's is wiped
             * after), then only checked: memory stays one policy whatever the list's length,
             * and the first entry of our service wins. */
            memset(&e, 0, sizeof(e));
            e.pol = *found ? NULL : out;
            ok = object(&r, entry_member, &e);
            if (!ok)
                break;
            if (!*found) {
                if (e.has_service && strcmp(e.service, service) == 0)
                    *found = true;
                else
                    memset(out, 0, sizeof(*out));
            }
        } while (eat(&r, ','));
        ok = ok && (eat(&r, ']') || fail(&r, "expected ']'"));
    }
    ws(&r);
    if (ok && r.p != r.end)
        ok = fail(&r, "trailing bytes");
    if (!ok) {
        memset(out, 0, sizeof(*out));
        *found = false;
        return SKP_EINVAL;
    }
    if (*found && !out->uuid[0])
        memset(out, 0, sizeof(*out)); /* removed */
    return SKP_OK;
}

bool skp__cont_policy_has_http(const struct skp__cont_policy *p)
{
    for (int t = 0; t < SKP_CONT_N_TARGETS; t++)
        if (p->items[t][SKP_CONT_HTTP_ERROR_RATE].present ||
            p->items[t][SKP_CONT_HTTP_AVG_RESPONSE_TIME].present)
            return true;
    return false;
}

bool skp__cont_policy_active(const struct skp__cont_policy *p)
{
    for (int t = SKP_CONT_ON_CPU; t <= SKP_CONT_OFF_CPU; t++)
        for (int m = 0; m < SKP_CONT_N_MONITORS; m++)
            if (p->items[t][m].present)
                return true;
    return false;
}
