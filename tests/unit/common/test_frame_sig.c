/* Unit tests of the C code signature parser (frame_sig.c) against the vectors the web UI's
 * parser (web/src/frames.js) is tested with too: tests/data/frame_sigs.tsv, so the two parsers
 * cannot drift apart. Plus the cases only C has: bytes without a NUL, NULL, a cut lambda name
 * read through the put_* helpers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/buf.h"
#include "common/frame_sig.h"

static const char *field(char **p)
{
    char *s = *p;
    char *t = strchr(s, '\t');
    if (t) {
        *t = '\0';
        *p = t + 1;
    } else {
        *p = s + strlen(s);
    }
    return strcmp(s, "-") == 0 ? "" : s;
}

static void check_text(void (*put)(struct skpx_buf *, const struct skpx_frame_sig *),
                       const struct skpx_frame_sig *f, const char *want, const char *sig)
{
    struct skpx_buf b;
    skpx_buf_init(&b, 1 << 16);
    put(&b, f);
    skpx_buf_putc(&b, '\0');
    assert_int_equal(b.err, SKP_OK);
    if (strcmp((const char *)b.data, want) != 0)
        fail_msg("signature \"%s\": got \"%s\", want \"%s\"", sig, (const char *)b.data, want);
    skpx_buf_cleanup(&b);
}

static void shared_vectors(void **state)
{
    (void)state;
    FILE *fp = fopen(SKP_SOURCE_DIR "/tests/data/frame_sigs.tsv", "r");
    assert_non_null(fp);
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof(line), fp)) {
        line[strcspn(line, "\n")] = '\0';
        if (line[0] == '#' || line[0] == '\0')
            continue;
        char *p = line;
        const char *sig = field(&p), *func = field(&p), *loc = field(&p), *lang = field(&p),
                   *agent = field(&p), *name = field(&p);
        struct skpx_frame_sig f;
        skpx_frame_sig_parse(sig, strlen(sig), &f);
        check_text(skpx_frame_sig_put_func, &f, func, sig);
        check_text(skpx_frame_sig_put_loc, &f, loc, sig);
        check_text(skpx_frame_sig_put_name, &f, name, sig);
        if (strcmp(skpx_frame_lang_name(f.lang), lang) != 0)
            fail_msg("signature \"%s\": lang %s, want %s", sig, skpx_frame_lang_name(f.lang), lang);
        if (f.is_agent != (strcmp(agent, "1") == 0))
            fail_msg("signature \"%s\": agent %d, want %s", sig, f.is_agent, agent);
        n++;
    }
    fclose(fp);
    assert_true(n >= 30);
}

static void file_and_line_fields(void **state)
{
    (void)state;
    const char *sig = "/srv/app/seed_app.py.do_POST: 44";
    struct skpx_frame_sig f;
    skpx_frame_sig_parse(sig, strlen(sig), &f);
    assert_int_equal(f.line, 44);
    check_text(skpx_frame_sig_put_file, &f, "/srv/app/seed_app.py", sig);
    sig = "main.burnHeavy (/tmp/x/main.go:31)";
    skpx_frame_sig_parse(sig, strlen(sig), &f);
    check_text(skpx_frame_sig_put_file, &f, "/tmp/x/main.go", sig);
    assert_int_equal(f.line, 31);
    sig = "com.acme.Shop.checkout:42";
    skpx_frame_sig_parse(sig, strlen(sig), &f);
    check_text(skpx_frame_sig_put_file, &f, "", sig);
    assert_int_equal(f.line, 42);
}

static void reads_only_len_bytes(void **state)
{
    (void)state;
    /* The slice ends before ": 44": no NUL is needed and the bytes after it are not read. */
    const char buf[] = {'a', '.', 'p', 'y', '.', 'f', ':', ' ', '4', '4'};
    struct skpx_frame_sig f;
    skpx_frame_sig_parse(buf, 6, &f);
    check_text(skpx_frame_sig_put_name, &f, "f (a.py)", "a.py.f");
    skpx_frame_sig_parse(NULL, 0, &f);
    check_text(skpx_frame_sig_put_name, &f, "", "(null)");
    /* An embedded NUL is a byte like any other. */
    const char nul[] = "x.py.f\0g: 3";
    skpx_frame_sig_parse(nul, sizeof(nul) - 1, &f);
    assert_int_equal(f.lang, SKPX_FRAME_PYTHON);
    assert_int_equal(f.line, 3);
    assert_int_equal(f.func_len, 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(shared_vectors),
        cmocka_unit_test(file_and_line_fields),
        cmocka_unit_test(reads_only_len_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
