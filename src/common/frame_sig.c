/* frame_sig.c - the code signature parser (see frame_sig.h). It follows web/src/frames.js rule for
 * rule, each regular expression of the JS written out by hand as a scan of the bytes (no regex
 * library, no allocation, linear in the signature's length). Where JS's classes are Unicode
 * (\s, '.') this file uses their ASCII part: the shared vectors are ASCII. */
#include "common/frame_sig.h"

#include <string.h>

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_hex(char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static bool is_word(char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

/* True when s[a..b) holds no line terminator (what JS's '.' refuses). */
static bool no_newline(const char *s, size_t a, size_t b)
{
    for (size_t i = a; i < b; i++)
        if (s[i] == '\n' || s[i] == '\r')
            return false;
    return true;
}

static bool ends_with(const char *s, size_t a, size_t b, const char *suffix)
{
    size_t n = strlen(suffix);
    return b - a >= n && memcmp(s + b - n, suffix, n) == 0;
}

/* Start of the base name of s[a..b): after the last '/', unless that '/' ends the range. */
static size_t base_start(const char *s, size_t a, size_t b)
{
    for (size_t i = b; i > a; i--)
        if (s[i - 1] == '/')
            return i < b ? i : a;
    return a;
}

/* A decimal of at most 9 digits (JS: \d{1,9}). */
static uint32_t small_number(const char *s, size_t a, size_t b)
{
    uint32_t v = 0;
    for (size_t i = a; i < b; i++)
        v = v * 10 + (uint32_t)(s[i] - '0');
    return v;
}

/* (^|/)skyprof/.+\.py[cwi]?$ over the file s[a..b). */
static bool python_agent_file(const char *s, size_t a, size_t b)
{
    size_t ext;
    if (ends_with(s, a, b, ".py"))
        ext = b - 3;
    else if (ends_with(s, a, b, ".pyc") || ends_with(s, a, b, ".pyw") || ends_with(s, a, b, ".pyi"))
        ext = b - 4;
    else
        return false;
    for (size_t k = ext; k-- > a;) {
        if (k + 8 < ext && memcmp(s + k, "skyprof/", 8) == 0 && (k == a || s[k - 1] == '/') &&
            no_newline(s, k + 8, ext))
            return true;
    }
    return false;
}

/* (^|/)(libskyprof[^/]*\.so[.\d]*|_native[^/]*\.so)$ over the file s[a..b): its last path
 * component (none when the file ends in '/'). */
static bool native_agent_file(const char *s, size_t a, size_t b)
{
    size_t c = b;
    while (c > a && s[c - 1] != '/')
        c--;
    size_t n = b - c;
    if (n >= 13 && memcmp(s + c, "libskyprof", 10) == 0) {
        size_t r = b; /* the trailing [.0-9]* run starts at r, right after the "so" */
        while (r > c && (is_digit(s[r - 1]) || s[r - 1] == '.'))
            r--;
        if (r >= c + 13 && memcmp(s + r - 3, ".so", 3) == 0)
            return true;
    }
    return n >= 10 && memcmp(s + c, "_native", 7) == 0 && ends_with(s, c, b, ".so");
}

/* ---- virtual name (signature with the cut removed) ---- */

static size_t vlen(const struct skpx_frame_sig *f, size_t real_len)
{
    return real_len - f->cut_len;
}

static char vchar(const struct skpx_frame_sig *f, size_t i)
{
    return f->sig[i < f->cut_off ? i : i + f->cut_len];
}

static void put_range(struct skpx_buf *b, const struct skpx_frame_sig *f, size_t off, size_t len)
{
    size_t end = off + len;
    if (off < f->cut_off) {
        size_t e = end < f->cut_off ? end : f->cut_off;
        skpx_buf_put(b, f->sig + off, e - off);
        off = e;
    }
    if (off < end)
        skpx_buf_put(b, f->sig + off + f->cut_len, end - off);
}

/* Finds the first "$$Lambda$<digits>+0x<hex>[.<digits>]" in s[0..n) and sets the cut to all of
 * it but "$$Lambda". */
static void cut_lambda(struct skpx_frame_sig *f, size_t n)
{
    const char *s = f->sig;
    for (size_t i = 0; i + 9 <= n; i++) {
        if (memcmp(s + i, "$$Lambda$", 9) != 0)
            continue;
        size_t j = i + 9, d = j;
        while (d < n && is_digit(s[d]))
            d++;
        if (d == j || d + 3 > n || memcmp(s + d, "+0x", 3) != 0)
            continue;
        size_t h = d + 3, e = h;
        while (e < n && is_hex(s[e]))
            e++;
        if (e == h)
            continue;
        if (e + 1 < n && s[e] == '.' && is_digit(s[e + 1])) {
            e++;
            while (e < n && is_digit(s[e]))
                e++;
        }
        f->cut_off = i + 8;
        f->cut_len = e - (i + 8);
        return;
    }
}

static bool in_first_seg(char c)
{
    return is_word(c) || c == '$' || c == '/';
}

static bool in_seg(char c)
{
    return in_first_seg(c) || c == '<' || c == '>' || c == '(' || c == ')' || c == '*' || c == '-';
}

/* ^[\w$/]+(\.[\w$<>()*\/-]+)+$ over the virtual name [0..n). */
static bool dotted(const struct skpx_frame_sig *f, size_t n)
{
    size_t i = 0;
    while (i < n && in_first_seg(vchar(f, i)))
        i++;
    if (i == 0 || i == n || vchar(f, i) != '.')
        return false;
    while (i < n) {
        if (vchar(f, i) != '.')
            return false;
        size_t j = ++i;
        while (i < n && in_seg(vchar(f, i)))
            i++;
        if (i == j)
            return false;
    }
    return true;
}

/* ---- the forms, in frames.js's order ---- */

/* ^(.*\.py[cwi]?)\.([^./\s][^/]*?)(?:\s*:\s*(\d{1,9}))?$ */
static bool parse_python(struct skpx_frame_sig *f)
{
    const char *s = f->sig;
    size_t n = f->len;
    for (size_t p = n >= 4 ? n - 4 + 1 : 0; p-- > 0;) {
        if (memcmp(s + p, ".py", 3) != 0)
            continue;
        size_t tail;
        if (p + 3 < n && s[p + 3] == '.')
            tail = p + 4;
        else if (p + 4 < n && (s[p + 3] == 'c' || s[p + 3] == 'w' || s[p + 3] == 'i') &&
                 s[p + 4] == '.')
            tail = p + 5;
        else
            continue;
        size_t file_end = tail - 1;
        if (tail >= n || s[tail] == '.' || s[tail] == '/' || is_space(s[tail]))
            continue;
        if (!no_newline(s, 0, file_end))
            continue;
        if (memchr(s + tail, '/', n - tail))
            return false; /* every earlier candidate's function holds this '/' too */
        size_t func_end = n;
        uint32_t line = 0;
        size_t d = n;
        while (d > tail && is_digit(s[d - 1]))
            d--;
        if (d < n && n - d <= 9) {
            size_t c = d;
            while (c > tail && is_space(s[c - 1]))
                c--;
            if (c > tail + 1 && s[c - 1] == ':') {
                c--;
                while (c > tail + 1 && is_space(s[c - 1]))
                    c--;
                func_end = c;
                line = small_number(s, d, n);
            }
        }
        f->lang = SKPX_FRAME_PYTHON;
        f->func_off = tail;
        f->func_len = func_end - tail;
        f->file_off = 0;
        f->file_len = file_end;
        f->where_off = base_start(s, 0, file_end);
        f->where_len = file_end - f->where_off;
        f->line = line;
        return true;
    }
    return false;
}

/* ^(.+?) \(([^()]*)\)$ with the inner part ^(.*):(\d{1,9})$ or a file alone. */
static bool parse_paren(struct skpx_frame_sig *f)
{
    const char *s = f->sig;
    size_t n = f->len;
    if (n < 4 || s[n - 1] != ')')
        return false;
    size_t q = n - 1;
    while (q > 0 && s[q - 1] != '(' && s[q - 1] != ')')
        q--;
    if (q == 0 || s[q - 1] != '(')
        return false;
    q--; /* s[q] == '(' */
    if (q < 2 || s[q - 1] != ' ' || !no_newline(s, 0, q - 1))
        return false;
    size_t in_a = q + 1, in_b = n - 1;
    size_t file_a = in_a, file_b = in_b;
    uint32_t line = 0;
    size_t d = in_b;
    while (d > in_a && is_digit(s[d - 1]))
        d--;
    if (d < in_b && in_b - d <= 9 && d > in_a && s[d - 1] == ':' && no_newline(s, in_a, d - 1)) {
        file_b = d - 1;
        line = small_number(s, d, in_b);
    }
    f->lang = ends_with(s, file_a, file_b, ".go")     ? SKPX_FRAME_GO
              : ends_with(s, file_a, file_b, ".py")   ? SKPX_FRAME_PYTHON
              : ends_with(s, file_a, file_b, ".java") ? SKPX_FRAME_JAVA
                                                      : SKPX_FRAME_NATIVE;
    f->func_off = f->lang == SKPX_FRAME_GO ? base_start(s, 0, q - 1) : 0;
    f->func_len = q - 1 - f->func_off;
    f->file_off = file_a;
    f->file_len = file_b - file_a;
    f->where_off = base_start(s, file_a, file_b);
    f->where_len = file_b - f->where_off;
    f->line = line;
    return true;
}

/* ^(.+?)\+0x[0-9a-fA-F]+$ without whitespace, or ^0x[0-9a-fA-F]+$ */
static bool parse_address(struct skpx_frame_sig *f)
{
    const char *s = f->sig;
    size_t n = f->len;
    size_t h = n;
    while (h > 0 && is_hex(s[h - 1]))
        h--;
    if (h == n || h < 2 || s[h - 2] != '0' || s[h - 1] != 'x')
        return false;
    f->func_off = 0;
    f->func_len = n;
    f->lang = SKPX_FRAME_ADDRESS;
    if (h == 2)
        return true; /* "0x7f00aa": no module */
    if (h < 4 || s[h - 3] != '+')
        return false;
    for (size_t i = 0; i < n; i++)
        if (is_space(s[i]))
            return false;
    f->file_off = 0;
    f->file_len = h - 3;
    f->where_off = base_start(s, 0, h - 3);
    f->where_len = h - 3 - f->where_off;
    return true;
}

/* JFR / Java / pprof names: ^([^\s:()]+):(\d+)$ then the dotted-name rules of frames.js. */
static void parse_dotted(struct skpx_frame_sig *f)
{
    const char *s = f->sig;
    size_t n = f->len, name_len = n;
    const char *colon = n ? memchr(s, ':', n) : NULL;
    if (colon && colon > s && colon + 1 < s + n) {
        size_t c = (size_t)(colon - s);
        bool ok = true;
        for (size_t i = 0; i < c && ok; i++)
            ok = !is_space(s[i]) && s[i] != '(' && s[i] != ')';
        for (size_t i = c + 1; i < n && ok; i++)
            ok = is_digit(s[i]);
        if (ok) {
            name_len = c;
            uint64_t v = 0;
            for (size_t i = c + 1; i < n && v < 0x7fffffff; i++)
                v = v * 10 + (uint64_t)(s[i] - '0');
            f->line = v < 0x7fffffff ? (uint32_t)v : 0;
        }
    }
    cut_lambda(f, name_len);
    size_t vn = vlen(f, name_len);
    f->func_off = 0;
    f->func_len = vn;
    if (!dotted(f, vn))
        return;
    size_t start = 0;
    for (size_t i = vn; i > 0; i--) {
        if (vchar(f, i - 1) == '/') {
            if (i < vn)
                start = i;
            break;
        }
    }
    f->func_off = start;
    f->func_len = vn - start;
    for (size_t i = start; i < vn; i++)
        if (vchar(f, i) == '(')
            return;
    size_t dots = 0, last = 0, second = 0;
    for (size_t i = start; i < vn; i++) {
        if (vchar(f, i) == '.') {
            dots++;
            second = last;
            last = i;
        }
    }
    if (dots < 2)
        return;
    f->func_off = second + 1;
    f->func_len = vn - f->func_off;
    f->where_off = start;
    f->where_len = second - start;
    f->lang = f->where_len ? SKPX_FRAME_JAVA : SKPX_FRAME_OTHER;
}

void skpx_frame_sig_parse(const char *sig, size_t len, struct skpx_frame_sig *out)
{
    *out = (struct skpx_frame_sig){.sig = sig ? sig : "", .len = sig ? len : 0};
    if (parse_python(out)) {
        out->is_agent = python_agent_file(out->sig, out->file_off, out->file_off + out->file_len);
        return;
    }
    if (parse_paren(out)) {
        size_t a = out->file_off, b = a + out->file_len;
        if (out->lang == SKPX_FRAME_PYTHON)
            out->is_agent = python_agent_file(out->sig, a, b);
        else if (out->lang == SKPX_FRAME_NATIVE)
            out->is_agent = native_agent_file(out->sig, a, b);
        return;
    }
    struct skpx_frame_sig keep = *out;
    if (parse_address(out)) {
        out->is_agent = native_agent_file(out->sig, out->file_off, out->file_off + out->file_len);
        return;
    }
    *out = keep;
    parse_dotted(out);
}

void skpx_frame_sig_put_func(struct skpx_buf *b, const struct skpx_frame_sig *f)
{
    put_range(b, f, f->func_off, f->func_len);
}

void skpx_frame_sig_put_loc(struct skpx_buf *b, const struct skpx_frame_sig *f)
{
    put_range(b, f, f->where_off, f->where_len);
    if (f->line)
        skpx_buf_printf(b, ":%u", (unsigned)f->line);
}

void skpx_frame_sig_put_file(struct skpx_buf *b, const struct skpx_frame_sig *f)
{
    put_range(b, f, f->file_off, f->file_len);
}

void skpx_frame_sig_put_where(struct skpx_buf *b, const struct skpx_frame_sig *f)
{
    put_range(b, f, f->where_off, f->where_len);
}

void skpx_frame_sig_put_name(struct skpx_buf *b, const struct skpx_frame_sig *f)
{
    if (f->lang == SKPX_FRAME_ADDRESS) {
        skpx_buf_put(b, f->sig, f->len);
        return;
    }
    skpx_frame_sig_put_func(b, f);
    if (f->where_len) {
        skpx_buf_puts(b, " (");
        skpx_frame_sig_put_loc(b, f);
        skpx_buf_putc(b, ')');
    } else if (f->line) {
        skpx_frame_sig_put_loc(b, f);
    }
}

const char *skpx_frame_lang_name(enum skpx_frame_lang lang)
{
    switch (lang) {
    case SKPX_FRAME_PYTHON:
        return "python";
    case SKPX_FRAME_NATIVE:
        return "native";
    case SKPX_FRAME_GO:
        return "go";
    case SKPX_FRAME_JAVA:
        return "java";
    case SKPX_FRAME_ADDRESS:
        return "address";
    case SKPX_FRAME_OTHER:
        break;
    }
    return "other";
}
