/* test_sw8.c - the sw8 propagation header: round trip, known encoding, malformed values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/sw8.h"
#include "skyprof/skyprof.h"
#include "common/alloc.h"
#include "fakes.h"

/* --- sw8 ------------------------------------------------------------------------------------- */
static void test_sw8_roundtrip(void **state)
{
    (void)state;
    struct skyprof_sw8 in = {1,     "trace.1.2", "seg.3.4", 7,
                             "svc", "inst@host", "/api/x",  "10.0.0.1:80"};
    char buf[SKYPROF_SW8_MAX];
    int n = skyprof_sw8_format(&in, buf, sizeof(buf));
    assert_true(n > 0);
    /* known encoding of the first fields */
    assert_true(strncmp(buf, "1-dHJhY2UuMS4y-c2VnLjMuNA==-7-c3Zj-", 35) == 0);
    struct skyprof_sw8 out;
    char store[1024];
    assert_int_equal(skyprof_sw8_parse(buf, &out, store, sizeof(store)), SKP_OK);
    assert_int_equal(out.sample, 1);
    assert_string_equal(out.trace_id, "trace.1.2");
    assert_string_equal(out.parent_segment_id, "seg.3.4");
    assert_int_equal(out.parent_span_id, 7);
    assert_string_equal(out.parent_service, "svc");
    assert_string_equal(out.parent_instance, "inst@host");
    assert_string_equal(out.parent_endpoint, "/api/x");
    assert_string_equal(out.peer, "10.0.0.1:80");
    /* extra trailing fields are tolerated */
    char longer[SKYPROF_SW8_MAX + 16];
    snprintf(longer, sizeof(longer), "%s-ZXh0cmE=", buf);
    assert_int_equal(skyprof_sw8_parse(longer, &out, store, sizeof(store)), SKP_OK);
    /* too small store */
    assert_int_equal(skyprof_sw8_parse(buf, &out, store, 8), SKP_ETOOBIG);
    /* too small output */
    assert_int_equal(skyprof_sw8_format(&in, buf, 10), -1);
}

static void test_sw8_malformed(void **state)
{
    (void)state;
    static const char *bad[] = {
        "",
        "1",
        "1-dHJhY2U=-c2Vn-0-c3Zj-aW5zdA==-ZXA=",          /* 7 fields */
        "2-dHJhY2U=-c2Vn-0-c3Zj-aW5zdA==-ZXA=-cGVlcg==", /* sample flag */
        "1-dHJhY2U=-c2Vn-x-c3Zj-aW5zdA==-ZXA=-cGVlcg==", /* span id */
        "1-dHJhY2U=-c2Vn--c3Zj-aW5zdA==-ZXA=-cGVlcg==",  /* empty span id */
        "1-dHJh!2U=-c2Vn-0-c3Zj-aW5zdA==-ZXA=-cGVlcg==", /* bad base64 */
        "1--c2Vn-0-c3Zj-aW5zdA==-ZXA=-cGVlcg==",         /* empty trace id */
        "1-dHJhY2U=--0-c3Zj-aW5zdA==-ZXA=-cGVlcg==",     /* empty segment id */
        "1-dHJhY2U=-c2Vn-0-c3Zj-aW5zdA==-ZXA=-cGVlc",    /* truncated base64 */
        "1-AA==-c2Vn-0-c3Zj-aW5zdA==-ZXA=-cGVlcg==",     /* NUL byte inside */
    };
    char store[512];
    struct skyprof_sw8 out;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        skp_err e = skyprof_sw8_parse(bad[i], &out, store, sizeof(store));
        if (e == SKP_OK)
            fail_msg("accepted malformed sw8 #%zu: %s", i, bad[i]);
    }
    assert_int_equal(skyprof_sw8_parse("1-dHJhY2U=-c2Vn-0-c3Zj-aW5zdA==-ZXA=-cGVlcg==", &out, store,
                                       sizeof(store)),
                     SKP_OK);
    assert_string_equal(out.peer, "peer");
    char b64[16];
    assert_int_equal(skp__base64_encode("ab", 2, b64, sizeof(b64)), 4);
    assert_string_equal(b64, "YWI=");
    assert_int_equal(skp__base64_decode("YWI", 3, b64, sizeof(b64)), 2); /* padding optional */
    assert_string_equal(b64, "ab");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sw8_roundtrip),
        cmocka_unit_test(test_sw8_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
