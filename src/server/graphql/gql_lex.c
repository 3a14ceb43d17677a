/* gql_lex.c - GraphQL's lexical grammar (spec 2021, section 2.1) over a byte slice, and the
 * arena the parsers allocate their trees from. Ignored: whitespace, line ends, commas, comments,
 * a byte order mark. Strings (with \uXXXX escapes and surrogate pairs) and block strings (common
 * indentation removed) are decoded into the arena. A token count bound stops hostile inputs.
 * Pure, single-threaded per lexer. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/hex.h"
#include "common/utf8.h"
#include "server/graphql/gql_int.h"

/* ---- arena ---- */

/* Blocks of at least this size; larger requests get a block of their own. */
#define GQL_ARENA_BLOCK 8192u

struct gql_arena_block {
    struct gql_arena_block *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

void gql_arena_init(struct gql_arena *a, size_t limit)
{
    memset(a, 0, sizeof(*a));
    a->limit = limit;
}

void *gql_arena_alloc(struct gql_arena *a, size_t n)
{
    n = (n + 15u) & ~(size_t)15u;
    if (n == 0)
        n = 16;
    if (a->limit && (n > a->limit || a->used > a->limit - n))
        return NULL;
    struct gql_arena_block *b = a->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > GQL_ARENA_BLOCK ? n : GQL_ARENA_BLOCK;
        b = skpx_malloc(sizeof(*b) + cap);
        if (!b)
            return NULL;
        b->used = 0;
        b->cap = cap;
        b->next = a->head;
        a->head = b;
    }
    void *p = b->data + b->used;
    b->used += n;
    a->used += n;
    memset(p, 0, n);
    return p;
}

char *gql_arena_strndup(struct gql_arena *a, const char *s, size_t n)
{
    char *p = n + 1 > n ? gql_arena_alloc(a, n + 1) : NULL;
    if (p && n)
        memcpy(p, s, n);
    return p;
}

void gql_arena_cleanup(struct gql_arena *a)
{
    struct gql_arena_block *b = a->head;
    while (b) {
        struct gql_arena_block *next = b->next;
        skpx_free(b);
        b = next;
    }
    a->head = NULL;
    a->used = 0;
}

/* ---- lexer ---- */

void gql_lex_init(struct gql_lexer *lx, const char *src, size_t len, struct gql_arena *arena,
                  size_t max_tokens)
{
    *lx = (struct gql_lexer){
        .src = src, .len = len, .line = 1, .col = 1, .arena = arena, .max_tokens = max_tokens};
}

static int peek(const struct gql_lexer *lx, size_t off)
{
    return lx->pos + off < lx->len ? (unsigned char)lx->src[lx->pos + off] : -1;
}

static void advance(struct gql_lexer *lx, size_t n)
{
    for (size_t i = 0; i < n && lx->pos < lx->len; i++) {
        char c = lx->src[lx->pos++];
        if (c == '\n' || (c == '\r' && peek(lx, 0) != '\n')) {
            lx->line++;
            lx->col = 1;
        } else if (((unsigned char)c & 0xC0) != 0x80) {
            lx->col++; /* columns count code points, not continuation bytes */
        }
    }
}

static void fail(struct gql_lexer *lx, const char *msg)
{
    lx->tok = GQL_T_ERROR;
    lx->text = msg;
    lx->text_len = strlen(msg);
}

static bool name_start(int c)
{
    return c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

static bool name_char(int c)
{
    return name_start(c) || (c >= '0' && c <= '9');
}

static bool is_digit(int c)
{
    return c >= '0' && c <= '9';
}

static void skip_ignored(struct gql_lexer *lx)
{
    for (;;) {
        int c = peek(lx, 0);
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',') {
            advance(lx, 1);
        } else if (c == 0xEF && peek(lx, 1) == 0xBB && peek(lx, 2) == 0xBF) {
            lx->pos += 3;
        } else if (c == '#') {
            while (lx->pos < lx->len && peek(lx, 0) != '\n' && peek(lx, 0) != '\r')
                advance(lx, 1);
        } else {
            return;
        }
    }
}

/* One or more digits; without one, fails with `msg` and returns false. */
static bool lex_digits(struct gql_lexer *lx, const char *msg)
{
    if (!is_digit(peek(lx, 0))) {
        fail(lx, msg);
        return false;
    }
    while (is_digit(peek(lx, 0)))
        advance(lx, 1);
    return true;
}

static void lex_number(struct gql_lexer *lx)
{
    size_t start = lx->pos;
    bool is_float = false;
    if (peek(lx, 0) == '-')
        advance(lx, 1);
    if (peek(lx, 0) == '0') {
        advance(lx, 1);
        if (is_digit(peek(lx, 0))) {
            fail(lx, "invalid number: unexpected digit after 0");
            return;
        }
    } else if (!lex_digits(lx, "invalid number: expected a digit")) {
        return;
    }
    if (peek(lx, 0) == '.') {
        is_float = true;
        advance(lx, 1);
        if (!lex_digits(lx, "invalid number: expected a digit after '.'"))
            return;
    }
    if (peek(lx, 0) == 'e' || peek(lx, 0) == 'E') {
        is_float = true;
        advance(lx, 1);
        if (peek(lx, 0) == '+' || peek(lx, 0) == '-')
            advance(lx, 1);
        if (!lex_digits(lx, "invalid number: expected a digit in the exponent"))
            return;
    }
    if (peek(lx, 0) == '.' || name_start(peek(lx, 0))) {
        fail(lx, "invalid number: a name or '.' follows it");
        return;
    }
    lx->tok = is_float ? GQL_T_FLOAT : GQL_T_INT;
    lx->text = lx->src + start;
    lx->text_len = lx->pos - start;
}

/* Four hex digits at pos+off; -1 if not. */
static long hex4(const struct gql_lexer *lx, size_t off)
{
    long v = 0;
    for (size_t i = 0; i < 4; i++) {
        int c = peek(lx, off + i);
        int h = c < 0 ? -1 : skpx_hex_value((char)c);
        if (h < 0)
            return -1;
        v = v * 16 + h;
    }
    return v;
}

static void lex_string(struct gql_lexer *lx)
{
    advance(lx, 1);
    size_t start = lx->pos;
    size_t end = start;
    while (end < lx->len && lx->src[end] != '"') /* the decoded value is never longer */
        end += lx->src[end] == '\\' && end + 1 < lx->len ? 2 : 1;
    char *o = gql_arena_alloc(lx->arena, end - start + 1);
    size_t n = 0;
    if (!o) {
        fail(lx, "query too large");
        return;
    }
    for (;;) {
        int c = peek(lx, 0);
        if (c < 0 || c == '\n' || c == '\r') {
            fail(lx, "unterminated string");
            return;
        }
        if (c < 0x20 && c != '\t') {
            fail(lx, "invalid control character in a string");
            return;
        }
        if (c == '"') {
            advance(lx, 1);
            break;
        }
        if (c != '\\') {
            o[n++] = (char)c;
            advance(lx, 1);
            continue;
        }
        int e = peek(lx, 1);
        const char *simple = strchr("\"\\/bfnrt", e > 0 ? e : 'x');
        if (e > 0 && simple) {
            static const char map[] = "\"\\/\b\f\n\r\t";
            o[n++] = map[simple - "\"\\/bfnrt"];
            advance(lx, 2);
            continue;
        }
        long cp = e == 'u' ? hex4(lx, 2) : -1;
        if (cp < 0) {
            fail(lx, "invalid escape sequence in a string");
            return;
        }
        advance(lx, 6);
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            long lo = peek(lx, 0) == '\\' && peek(lx, 1) == 'u' ? hex4(lx, 2) : -1;
            if (lo < 0xDC00 || lo > 0xDFFF) {
                fail(lx, "invalid surrogate pair in a string");
                return;
            }
            advance(lx, 6);
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            fail(lx, "invalid surrogate pair in a string");
            return;
        }
        n += skpx_utf8_put((uint32_t)cp, o + n); /* <= 6 source bytes make <= 4 */
    }
    o[n] = '\0';
    lx->tok = GQL_T_STRING;
    lx->text = o;
    lx->text_len = n;
}

static bool blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t')
            return false;
    return true;
}

static size_t indent_of(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && (s[i] == ' ' || s[i] == '\t'))
        i++;
    return i;
}

/* Block string: raw text up to the closing triple quote (\""" is a literal triple quote), then
 * the spec's BlockStringValue: common indentation of all lines but the first removed, leading
 * and trailing blank lines dropped. */
static void lex_block_string(struct gql_lexer *lx)
{
    advance(lx, 3);
    size_t start = lx->pos;
    for (;;) {
        if (lx->pos >= lx->len) {
            fail(lx, "unterminated block string");
            return;
        }
        if (peek(lx, 0) == '"' && peek(lx, 1) == '"' && peek(lx, 2) == '"')
            break;
        if (peek(lx, 0) == '\\' && peek(lx, 1) == '"' && peek(lx, 2) == '"' && peek(lx, 3) == '"')
            advance(lx, 4);
        else
            advance(lx, 1);
    }
    size_t raw_len = lx->pos - start;
    advance(lx, 3);
    const char *raw = lx->src + start;
    char *o = gql_arena_alloc(lx->arena, raw_len + 1);
    if (!o) {
        fail(lx, "query too large");
        return;
    }
    /* common indentation over lines 2.. that are not blank */
    size_t common = SIZE_MAX;
    bool first = true;
    for (size_t i = 0; i <= raw_len;) {
        size_t e = i;
        while (e < raw_len && raw[e] != '\n' && raw[e] != '\r')
            e++;
        if (!first && !blank(raw + i, e - i) && indent_of(raw + i, e - i) < common)
            common = indent_of(raw + i, e - i);
        first = false;
        i = e + (e < raw_len && raw[e] == '\r' && e + 1 < raw_len && raw[e + 1] == '\n' ? 2 : 1);
    }
    size_t n = 0;
    first = true;
    bool started = false;
    size_t keep = 0; /* length up to the last non-blank line */
    for (size_t i = 0; i <= raw_len;) {
        size_t e = i;
        while (e < raw_len && raw[e] != '\n' && raw[e] != '\r')
            e++;
        size_t b = i;
        if (!first && common != SIZE_MAX)
            b += common < e - i ? common : e - i;
        bool is_blank = blank(raw + i, e - i);
        if (started || !is_blank) {
            if (started)
                o[n++] = '\n';
            started = true;
            for (size_t k = b; k < e; k++) {
                if (raw[k] == '\\' && k + 3 < e + 1 && memcmp(raw + k + 1, "\"\"\"", 3) == 0) {
                    memcpy(o + n, "\"\"\"", 3);
                    n += 3;
                    k += 3;
                } else {
                    o[n++] = raw[k];
                }
            }
            if (!is_blank)
                keep = n;
        }
        first = false;
        i = e + (e < raw_len && raw[e] == '\r' && e + 1 < raw_len && raw[e + 1] == '\n' ? 2 : 1);
    }
    o[keep] = '\0';
    lx->tok = GQL_T_STRING;
    lx->text = o;
    lx->text_len = keep;
}

void gql_lex_next(struct gql_lexer *lx)
{
    if (lx->tok == GQL_T_ERROR)
        return;
    lx->prev_end = lx->pos;
    skip_ignored(lx);
    lx->tok_pos = lx->pos;
    lx->tok_line = lx->line;
    lx->tok_col = lx->col;
    if (lx->pos >= lx->len) {
        lx->tok = GQL_T_EOF;
        lx->text = "";
        lx->text_len = 0;
        return;
    }
    if (lx->max_tokens && ++lx->n_tokens > lx->max_tokens) {
        fail(lx, "too many tokens in the query");
        return;
    }
    int c = peek(lx, 0);
    if (c == '.' && peek(lx, 1) == '.' && peek(lx, 2) == '.') {
        memcpy(lx->punct, "...", 4);
        advance(lx, 3);
    } else if (c > 0 && strchr("!$&():=@[]{}|", c)) {
        lx->punct[0] = (char)c;
        lx->punct[1] = '\0';
        advance(lx, 1);
    } else if (name_start(c)) {
        size_t s = lx->pos;
        while (name_char(peek(lx, 0)))
            advance(lx, 1);
        lx->tok = GQL_T_NAME;
        lx->text = lx->src + s;
        lx->text_len = lx->pos - s;
        return;
    } else if (c == '-' || is_digit(c)) {
        lex_number(lx);
        return;
    } else if (c == '"') {
        if (peek(lx, 1) == '"' && peek(lx, 2) == '"')
            lex_block_string(lx);
        else
            lex_string(lx);
        return;
    } else {
        fail(lx, "unexpected character");
        return;
    }
    lx->tok = GQL_T_PUNCT;
    lx->text = lx->punct;
    lx->text_len = strlen(lx->punct);
}

bool gql_lex_is_punct(const struct gql_lexer *lx, const char *p)
{
    return lx->tok == GQL_T_PUNCT && strcmp(lx->punct, p) == 0;
}

bool gql_lex_is_name(const struct gql_lexer *lx, const char *name)
{
    return lx->tok == GQL_T_NAME && lx->text_len == strlen(name) &&
           memcmp(lx->text, name, lx->text_len) == 0;
}

void gql_error_at(struct gql_error *e, const struct gql_lexer *lx, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
    va_end(ap);
    e->line = lx->tok_line;
    e->col = lx->tok_col;
}
