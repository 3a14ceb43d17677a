/* Unit tests of the agent's continuous profiling: the ServiceWithPolicyJSON parser (SkyWalking's
 * key names, our service's entry only, removal by empty UUID, decimal thresholds, limits and
 * malformed input refused with a reason), the evaluator (count-of-period firing per item and per
 * URI, causes with the latest value over the threshold, clear), URI matching, and the request
 * path counters (deltas per read, names compared on hash collisions, disabled = nothing). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "agent/cont_eval.h"
#include "agent/cont_http.h"
#include "agent/cont_policy.h"
#include "common/alloc.h"

static struct skp__cont_policy *P;

static int setup(void **state)
{
    (void)state;
    P = skpx_calloc(1, sizeof(*P));
    return P ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    skpx_free(P);
    return 0;
}

static skp_err parse(const char *json, const char *svc, bool *found, char *why)
{
    return skp__cont_policy_parse(json, strlen(json), svc, P, found, why, 160);
}

static void test_parse_skywalking_shape(void **state)
{
    (void)state;
    const char *json =
        "[{\"ServiceName\":\"other\",\"UUID\":\"u0\",\"Profiling\":{\"ON_CPU\":{\"PROCESS_CPU\":"
        "{\"Threshold\":\"1\",\"Period\":2,\"Count\":1}}}},"
        " {\"ServiceName\": \"shop\", \"UUID\": \"abc123\", \"Profiling\": {"
        "  \"ON_CPU\": {\"PROCESS_CPU\": {\"Threshold\": \"50.5\", \"Period\": 10, \"Count\": 3},"
        "              \"HTTP_AVG_RESPONSE_TIME\": {\"Threshold\": \"200\", \"Period\": 5,"
        "               \"Count\": 2, \"URIList\": [\"/checkout\", \"/pay\\u00e9\"]}},"
        "  \"OFF_CPU\": {\"HTTP_ERROR_RATE\": {\"Threshold\": 10, \"Period\": 4, \"Count\": 4,"
        "               \"URIRegex\": \"/api/.*\", \"Unknown\": [1, {\"x\": null}]},"
        "               \"NEW_TYPE\": {}},"
        "  \"NETWORK\": {}, \"FUTURE\": {}}, \"ExecuteDuration\": 30}]";
    bool found = false;
    char why[160];
    assert_int_equal(parse(json, "shop", &found, why), SKP_OK);
    assert_true(found);
    assert_string_equal(P->uuid, "abc123");
    const struct skp__cont_item *cpu = &P->items[SKP_CONT_ON_CPU][SKP_CONT_PROCESS_CPU];
    assert_true(cpu->present);
    assert_true(cpu->threshold > 50.49 && cpu->threshold < 50.51);
    assert_int_equal(cpu->period, 10);
    assert_int_equal(cpu->count, 3);
    const struct skp__cont_item *avg = &P->items[SKP_CONT_ON_CPU][SKP_CONT_HTTP_AVG_RESPONSE_TIME];
    assert_int_equal(avg->n_uris, 2);
    assert_string_equal(avg->uris[0], "/checkout");
    assert_string_equal(avg->uris[1], "/pay\xc3\xa9");
    const struct skp__cont_item *err = &P->items[SKP_CONT_OFF_CPU][SKP_CONT_HTTP_ERROR_RATE];
    assert_string_equal(err->regex, "/api/.*");
    assert_int_equal((int)err->threshold, 10);
    assert_true(P->has_target[SKP_CONT_NETWORK]);
    assert_int_equal(P->n_skipped, 2); /* NEW_TYPE, FUTURE */
    assert_int_equal(P->execute_s, 30);
    assert_true(skp__cont_policy_has_http(P));
    assert_true(skp__cont_policy_active(P));
}

static void test_parse_absent_removed(void **state)
{
    (void)state;
    bool found = true;
    char why[160];
    assert_int_equal(parse("[]", "shop", &found, why), SKP_OK);
    assert_false(found);
    assert_int_equal(parse("[{\"ServiceName\":\"x\",\"UUID\":\"1\"}]", "shop", &found, why),
                     SKP_OK);
    assert_false(found);
    assert_string_equal(P->uuid, "");
    /* removed: our entry with an empty UUID */
    assert_int_equal(parse("[{\"ServiceName\":\"shop\",\"UUID\":\"\",\"Profiling\":{\"ON_CPU\":"
                           "{\"PROCESS_CPU\":{\"Threshold\":\"5\",\"Period\":1,\"Count\":1}}}}]",
                           "shop", &found, why),
                     SKP_OK);
    assert_true(found);
    assert_string_equal(P->uuid, "");
    assert_false(skp__cont_policy_active(P));
    /* the first entry of our service wins; later ones are only checked */
    assert_int_equal(parse("[{\"ServiceName\":\"shop\",\"UUID\":\"a\"},"
                           "{\"UUID\":\"b\",\"ServiceName\":\"shop\"}]",
                           "shop", &found, why),
                     SKP_OK);
    assert_string_equal(P->uuid, "a");
}

static void test_parse_refusals(void **state)
{
    (void)state;
    const char *bad[] = {
        "",
        "{}",
        "[",
        "[{\"ServiceName\":\"shop\"",
        "[{\"ServiceName\":\"shop\"}] x",
        "[{\"ServiceName\":\"shop\",\"UUID\":\"u\",\"Profiling\":{\"ON_CPU\":{\"PROCESS_CPU\":"
        "{\"Threshold\":\"abc\",\"Period\":1,\"Count\":1}}}}]",
        "[{\"ServiceName\":\"shop\",\"UUID\":\"u\",\"Profiling\":{\"ON_CPU\":{\"PROCESS_CPU\":"
        "{\"Threshold\":\"5\",\"Period\":0,\"Count\":1}}}}]",
        "[{\"ServiceName\":\"shop\",\"UUID\":\"u\",\"Profiling\":{\"ON_CPU\":{\"PROCESS_CPU\":"
        "{\"Threshold\":\"5\",\"Period\":2.5,\"Count\":1}}}}]",
        "[{\"ServiceName\":\"shop\",\"UUID\":\"u\",\"Profiling\":{\"ON_CPU\":{\"PROCESS_CPU\":"
        "{\"Threshold\":\"5\"}}}}]",
        "[{\"ServiceName\":\"sh\\x\"}]",
        "[{\"ServiceName\":\"s\th\"}]",
        "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]"
        "]]",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        bool found = true;
        char why[160] = "";
        assert_int_equal(parse(bad[i], "shop", &found, why), SKP_EINVAL);
        assert_false(found);
        assert_true(why[0] != '\0');
    }
    /* 17 URIs: over the limit */
    char big[4096];
    size_t n = (size_t)snprintf(big, sizeof(big),
                                "[{\"ServiceName\":\"shop\",\"UUID\":\"u\","
                                "\"Profiling\":{\"ON_CPU\":{\"HTTP_ERROR_RATE\":{\"Threshold\":"
                                "\"5\",\"Period\":1,\"Count\":1,\"URIList\":[");
    for (int i = 0; i < SKP_CONT_URIS_MAX + 1; i++)
        n += (size_t)snprintf(big + n, sizeof(big) - n, "%s\"/u%d\"", i ? "," : "", i);
    snprintf(big + n, sizeof(big) - n, "]}}}}]");
    bool found;
    char why[160];
    assert_int_equal(parse(big, "shop", &found, why), SKP_EINVAL);
    assert_non_null(strstr(why, "too many URIs"));
    assert_int_equal(
        skp__cont_policy_parse(big, SKP_CONT_JSON_MAX + 1, "shop", P, &found, why, sizeof(why)),
        SKP_ETOOBIG);
    /* not NUL-terminated: the length bounds the read */
    const char *ok = "[]garbage";
    assert_int_equal(skp__cont_policy_parse(ok, 2, "shop", P, &found, why, sizeof(why)), SKP_OK);
}

static void item(struct skp__cont_policy *p, int t, int m, double thr, int period, int count)
{
    struct skp__cont_item *it = &p->items[t][m];
    memset(it, 0, sizeof(*it));
    it->present = true;
    it->threshold = thr;
    it->period = period;
    it->count = count;
    p->has_target[t] = true;
    snprintf(p->uuid, sizeof(p->uuid), "u");
}

static void test_eval_process_cpu(void **state)
{
    (void)state;
    memset(P, 0, sizeof(*P));
    item(P, SKP_CONT_ON_CPU, SKP_CONT_PROCESS_CPU, 50, 5, 3);
    struct skp__cont_eval e;
    skp__cont_eval_init(&e);
    assert_int_equal(skp__cont_eval_set_policy(&e, P), SKP_OK);
    assert_true(e.needs_cpu);
    assert_false(e.needs_http || e.needs_threads || e.needs_load);
    struct skp__cont_cause c[SKP_CONT_CAUSES_MAX];
    int n = 0;
    double vals[] = {10, 80, 20, 90, 30};
    for (int i = 0; i < 5; i++) {
        struct skp__cont_sample s = {.cpu_pct = vals[i], .has_cpu = true};
        skp__cont_eval_slot(&e, &s);
        assert_false(skp__cont_eval_fired(&e, SKP_CONT_ON_CPU, c, SKP_CONT_CAUSES_MAX, &n));
    }
    struct skp__cont_sample s = {.cpu_pct = 50, .has_cpu = true}; /* >= counts */
    skp__cont_eval_slot(&e, &s);
    assert_true(skp__cont_eval_fired(&e, SKP_CONT_ON_CPU, c, SKP_CONT_CAUSES_MAX, &n));
    assert_int_equal(n, 1);
    assert_int_equal(c[0].monitor, SKP_CONT_PROCESS_CPU);
    assert_true(c[0].current == 50 && c[0].threshold == 50);
    assert_int_equal(c[0].n_over, 3);
    assert_int_equal(c[0].uri_kind, 0);
    assert_false(skp__cont_eval_fired(&e, SKP_CONT_OFF_CPU, c, SKP_CONT_CAUSES_MAX, &n));
    /* 80 leaves the 5-slot window: two over again */
    s.cpu_pct = 1;
    skp__cont_eval_slot(&e, &s);
    assert_false(skp__cont_eval_fired(&e, SKP_CONT_ON_CPU, c, SKP_CONT_CAUSES_MAX, &n));
    /* a slot without a reading adds nothing */
    struct skp__cont_sample none = {0};
    skp__cont_eval_slot(&e, &none);
    s.cpu_pct = 99;
    skp__cont_eval_slot(&e, &s);
    assert_true(skp__cont_eval_fired(&e, SKP_CONT_ON_CPU, c, SKP_CONT_CAUSES_MAX, &n));
    assert_true(c[0].current == 99);
    skp__cont_eval_clear(&e);
    assert_false(skp__cont_eval_fired(&e, SKP_CONT_ON_CPU, c, SKP_CONT_CAUSES_MAX, &n));
    skp__cont_eval_cleanup(&e);
}

static void test_eval_http_per_uri(void **state)
{
    (void)state;
    memset(P, 0, sizeof(*P));
    item(P, SKP_CONT_OFF_CPU, SKP_CONT_HTTP_AVG_RESPONSE_TIME, 100, 3, 2);
    struct skp__cont_item *avg = &P->items[SKP_CONT_OFF_CPU][SKP_CONT_HTTP_AVG_RESPONSE_TIME];
    avg->n_uris = 2;
    snprintf(avg->uris[0], SKP_CONT_URI_MAX, "/fast");
    snprintf(avg->uris[1], SKP_CONT_URI_MAX, "/slow");
    item(P, SKP_CONT_OFF_CPU, SKP_CONT_HTTP_ERROR_RATE, 50, 2, 1);
    snprintf(P->items[SKP_CONT_OFF_CPU][SKP_CONT_HTTP_ERROR_RATE].regex, SKP_CONT_URI_MAX,
             "^/api/[a-z]+$");
    struct skp__cont_eval e;
    skp__cont_eval_init(&e);
    assert_int_equal(skp__cont_eval_set_policy(&e, P), SKP_OK);
    assert_true(e.needs_http);
    struct skp__cont_cause c[SKP_CONT_CAUSES_MAX];
    int n = 0;
    struct skp__cont_sample s = {0};
    for (int i = 0; i < 2; i++) {
        skp__cont_eval_http(&e, 1, "/fast", 10, 0, 100);     /* 10 ms */
        skp__cont_eval_http(&e, 2, "GET:/slow", 2, 0, 700);  /* 350 ms, method prefix */
        skp__cont_eval_http(&e, 3, "/api/users", 4, 1, 4);   /* 25 % errors */
        skp__cont_eval_http(&e, 4, "/api/users/7", 4, 4, 4); /* the $ refuses it */
        skp__cont_eval_slot(&e, &s);
    }
    assert_true(skp__cont_eval_fired(&e, SKP_CONT_OFF_CPU, c, SKP_CONT_CAUSES_MAX, &n));
    assert_int_equal(n, 1);
    assert_int_equal(c[0].monitor, SKP_CONT_HTTP_AVG_RESPONSE_TIME);
    assert_int_equal(c[0].uri_kind, 1);
    assert_string_equal(c[0].uri, "/slow");
    assert_true(c[0].current == 350);
    /* errors: 3 of 4 on the regex's endpoint */
    skp__cont_eval_http(&e, 3, "/api/users", 4, 3, 4);
    skp__cont_eval_slot(&e, &s);
    assert_true(skp__cont_eval_fired(&e, SKP_CONT_OFF_CPU, c, SKP_CONT_CAUSES_MAX, &n));
    assert_int_equal(n, 2); /* /slow: 350, 350, 0 is still 2 of 3; and the errors */
    assert_int_equal(c[0].monitor, SKP_CONT_HTTP_ERROR_RATE);
    assert_int_equal(c[0].uri_kind, 2);
    assert_string_equal(c[0].uri, "^/api/[a-z]+$");
    assert_true(c[0].current == 75);
    assert_string_equal(c[1].uri, "/slow");
    skp__cont_eval_cleanup(&e);
}

static void test_uri_matches(void **state)
{
    (void)state;
    assert_true(skp__cont_uri_matches("/slow", "/slow"));
    assert_true(skp__cont_uri_matches("POST:/slow", "/slow"));
    assert_false(skp__cont_uri_matches("post:/slow", "/slow"));
    assert_false(skp__cont_uri_matches("/slow/x", "/slow"));
    assert_false(skp__cont_uri_matches(":/slow", "/slow"));
}

struct seen {
    int n;
    uint64_t count[4], errors[4], sum[4];
    char names[4][64];
};

static void on_delta(void *ud, const struct skp__cont_http_delta *d)
{
    struct seen *s = ud;
    if (s->n < 4) {
        s->count[s->n] = d->count;
        s->errors[s->n] = d->errors;
        s->sum[s->n] = d->sum_ms;
        snprintf(s->names[s->n], sizeof(s->names[0]), "%s", d->name);
    }
    s->n++;
}

static void test_http_counters(void **state)
{
    (void)state;
    skp__cont_http_enable(false);
    assert_false(skp__cont_http_enabled());
    skp__cont_http_enable(true);
    skp__cont_http_record("/a", 2, 10, false);
    skp__cont_http_record("/a", 2, 30, true);
    skp__cont_http_record("/b", 2, 5, false);
    struct seen s = {0};
    skp__cont_http_read(on_delta, &s);
    assert_int_equal(s.n, 2);
    uint64_t total = 0, errs = 0, sum = 0;
    for (int i = 0; i < 2; i++) {
        total += s.count[i];
        errs += s.errors[i];
        sum += s.sum[i];
    }
    assert_int_equal(total, 3);
    assert_int_equal(errs, 1);
    assert_int_equal(sum, 45);
    /* the next read gives only what came since */
    skp__cont_http_record("/b", 2, 7, false);
    memset(&s, 0, sizeof(s));
    skp__cont_http_read(on_delta, &s);
    assert_int_equal(s.n, 2);
    for (int i = 0; i < 2; i++) {
        if (strcmp(s.names[i], "/b") == 0)
            assert_true(s.count[i] == 1 && s.sum[i] == 7);
        else
            assert_true(s.count[i] == 0);
    }
    skp__cont_http_enable(false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_skywalking_shape), cmocka_unit_test(test_parse_absent_removed),
        cmocka_unit_test(test_parse_refusals),         cmocka_unit_test(test_eval_process_cpu),
        cmocka_unit_test(test_eval_http_per_uri),      cmocka_unit_test(test_uri_matches),
        cmocka_unit_test(test_http_counters),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
