/* Unit tests of continuous profiling's server side: the policy model (decimals, stored JSON →
 * same policy and uuid, the agent JSON keeps agent-side items only, URI matching) and the
 * evaluator (rover's count-of-period rule per endpoint, slots without requests, error rate and
 * percentiles, quiet time after a trigger, the hourly cap, untracked endpoints, bounds). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/alloc.h"
#include "server/continuous/continuous_eval.h"
#include "server/continuous/continuous_policy.h"

static struct cont_policy make(const char *service, const char *json)
{
    json_t *in = json_loads(json, 0, NULL);
    assert_non_null(in);
    struct cont_policy p;
    char reason[256];
    skp_err err = cont_policy_from_input(service, in, &p, reason, sizeof(reason));
    if (err)
        print_error("refused: %s\n", reason);
    assert_int_equal(err, SKP_OK);
    json_decref(in);
    return p;
}

static void policy_stored_round_trip(void **state)
{
    (void)state;
    struct cont_policy p = make(
        "svc", "{\"targets\":[{\"targetType\":\"PPROF_CPU\",\"checkItems\":[{\"type\":"
               "\"ENDPOINT_P99_RESPONSE_TIME\",\"threshold\":\"250.75\",\"period\":20,\"count\":5,"
               "\"uriRegex\":\"^/api/\"}]},{\"targetType\":\"ON_CPU\",\"checkItems\":[{\"type\":"
               "\"PROCESS_CPU\",\"threshold\":\"70\",\"period\":10,\"count\":10}]}],"
               "\"silenceDuration\":0}");
    assert_true(p.targets[0].items[0].threshold == 250.75);
    assert_int_equal(p.execute_s, CONT_EXECUTE_DEFAULT_S);
    assert_int_equal(p.silence_s, 0);
    assert_int_equal(p.max_per_hour, CONT_PER_HOUR_DEFAULT);
    assert_true(cont_policy_has_server_items(&p));
    struct cont_policy q;
    assert_int_equal(cont_policy_from_stored("svc", p.json, &q), SKP_OK);
    assert_string_equal(q.json, p.json);
    assert_string_equal(q.uuid, p.uuid);
    char hex[129];
    cont_sha512_hex(p.json, strlen(p.json), hex);
    assert_string_equal(hex, p.uuid);
    /* agent JSON: only PROCESS_CPU under ON_CPU; PPROF_CPU had only a server item */
    json_t *a = cont_policy_agent_json("svc", &p);
    char *s = json_dumps(a, JSON_COMPACT | JSON_SORT_KEYS);
    char want[400];
    snprintf(want, sizeof(want),
             "{\"ExecuteDuration\":%d,\"Profiling\":{\"ON_CPU\":{\"PROCESS_CPU\":{\"Count\":10,"
             "\"Period\":10,\"Threshold\":\"70\"}}},\"ServiceName\":\"svc\","
             "\"SilenceDuration\":0,\"UUID\":\"%s\"}",
             CONT_EXECUTE_DEFAULT_S, p.uuid);
    assert_string_equal(s, want);
    free(s); /* lint:allow jansson's default allocator in this test */
    json_decref(a);
    /* the regex matches by prefix, the list exactly */
    assert_true(cont_item_matches(&p.targets[0].items[0], "/api/orders"));
    assert_false(cont_item_matches(&p.targets[0].items[0], "/health"));
    cont_policy_cleanup(&q);
    cont_policy_cleanup(&p);
    assert_int_equal(cont_policy_from_stored("svc", "{bad", &q), SKP_EINVAL);
}

struct fired {
    int n;
    enum cont_target target;
    struct cont_cause cause;
    char uri[64];
    size_t n_causes;
    size_t n_instances;
    int64_t task_end;
};

static int64_t on_fire(void *ud, const struct cont_fire *f)
{
    struct fired *r = ud;
    r->n++;
    r->target = f->target;
    r->cause = f->causes[0];
    snprintf(r->uri, sizeof(r->uri), "%s", f->causes[0].uri);
    r->cause.uri = r->uri;
    r->n_causes = f->n_causes;
    r->n_instances = f->n_instances;
    return r->task_end;
}

/* n requests of `ms` for each of the slots [from, to) (1 slot = 1000 ms). */
static void load(struct cont_eval *e, const char *ep, int64_t from, int64_t to, int n, int64_t ms,
                 bool err)
{
    for (int64_t s = from; s < to; s++)
        for (int i = 0; i < n; i++)
            cont_eval_record(e, "svc", i % 2 ? "inst-a" : "inst-b", ep, s * 1000 + i, ms, err,
                             s * 1000 + i);
}

/* lateness 1 ms: a slot closes when the next one starts (the rule without late arrivals) */
static const struct cont_eval_opts k_prompt = {.lateness_ms = 1};

static void evaluator_count_of_period(void **state)
{
    (void)state;
    struct cont_eval *e;
    assert_int_equal(cont_eval_new(&k_prompt, &e), SKP_OK);
    struct cont_policy p = make(
        "svc", "{\"targets\":[{\"targetType\":\"TRACE\",\"checkItems\":[{\"type\":"
               "\"ENDPOINT_AVG_RESPONSE_TIME\",\"threshold\":\"100\",\"period\":10,\"count\":3,"
               "\"uriList\":[\"/slow\"]}]}],\"executeDuration\":5,\"silenceDuration\":10,"
               "\"maxTriggersPerHour\":2}");
    assert_int_equal(cont_eval_set_policy(e, &p), SKP_OK);
    assert_null(p.json); /* moved */
    struct fired r = {0};
    /* 2 slow slots among fast ones: not enough */
    load(e, "/slow", 1000, 1005, 4, 20, false);
    load(e, "/slow", 1005, 1007, 4, 300, false);
    load(e, "/other", 1000, 1010, 4, 900, false); /* not named: not tracked */
    cont_eval_tick(e, 1007 * 1000, on_fire, &r);
    assert_int_equal(r.n, 0);
    /* a third slow slot (closed at 1008): fires with the mean of the crossing slots */
    load(e, "/slow", 1007, 1008, 4, 310, false);
    cont_eval_tick(e, 1008 * 1000 + 5, on_fire, &r);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.target, CONT_TARGET_TRACE);
    assert_string_equal(r.uri, "/slow");
    assert_int_equal(r.cause.hits, 3);
    assert_true(fabs(r.cause.current - (300 + 300 + 310) / 3.0) < 0.01);
    assert_int_equal(r.n_causes, 1);
    assert_int_equal(r.n_instances, 2);
    /* quiet for execute + silence = 15 slots */
    assert_int_equal(cont_eval_quiet_until(e, "svc"), 1008 * 1000 + 5 + 15000);
    load(e, "/slow", 1008, 1023, 4, 300, false);
    cont_eval_tick(e, 1022 * 1000, on_fire, &r);
    assert_int_equal(r.n, 1);
    cont_eval_tick(e, 1023 * 1000 + 10, on_fire, &r);
    assert_int_equal(r.n, 2);
    /* the hourly cap (2) holds the third back */
    load(e, "/slow", 1023, 1060, 4, 300, false);
    cont_eval_tick(e, 1060 * 1000, on_fire, &r);
    assert_int_equal(r.n, 2);
    struct cont_eval_counters c;
    cont_eval_counters(e, &c);
    assert_int_equal(c.fired, 2);
    assert_true(c.suppressed >= 1);
    assert_int_equal(c.series, 1);
    /* an hour after the first, it may fire again */
    load(e, "/slow", 1008 + 3600, 1008 + 3610, 4, 300, false);
    cont_eval_tick(e, (1008 + 3610) * 1000, on_fire, &r);
    assert_int_equal(r.n, 3);
    cont_eval_remove_policy(e, "svc");
    assert_null(cont_eval_policy_uuid(e, "svc"));
    load(e, "/slow", 5000, 5010, 4, 300, false);
    cont_eval_tick(e, 5010 * 1000, on_fire, &r);
    assert_int_equal(r.n, 3);
    cont_eval_free(e);
}

/* Editing a policy, or restarting (the last hour's triggers replayed), keeps the hourly cap and
 * the quiet time: they used to start from zero. */
static void evaluator_cap_survives_edit_and_restart(void **state)
{
    (void)state;
    static const char *const k_pol =
        "{\"targets\":[{\"targetType\":\"TRACE\",\"checkItems\":[{\"type\":"
        "\"ENDPOINT_AVG_RESPONSE_TIME\",\"threshold\":\"%s\",\"period\":3,\"count\":1,"
        "\"uriList\":[\"/slow\"]}]}],\"executeDuration\":5,\"silenceDuration\":5,"
        "\"maxTriggersPerHour\":1}";
    char text[512];
    struct cont_eval *e;
    assert_int_equal(cont_eval_new(&k_prompt, &e), SKP_OK);
    snprintf(text, sizeof(text), k_pol, "100");
    struct cont_policy p = make("svc", text);
    assert_int_equal(cont_eval_set_policy(e, &p), SKP_OK);
    struct fired r = {0};
    load(e, "/slow", 1000, 1002, 2, 300, false);
    cont_eval_tick(e, 1002 * 1000, on_fire, &r);
    assert_int_equal(r.n, 1);
    /* edited (another threshold, so another uuid): still quiet, then still capped */
    snprintf(text, sizeof(text), k_pol, "150");
    p = make("svc", text);
    assert_int_equal(cont_eval_set_policy(e, &p), SKP_OK);
    assert_int_equal(cont_eval_quiet_until(e, "svc"), 1002 * 1000 + 10000);
    load(e, "/slow", 1002, 1030, 2, 300, false);
    cont_eval_tick(e, 1030 * 1000, on_fire, &r);
    assert_int_equal(r.n, 1);
    cont_eval_free(e);

    /* a new evaluator (a restart) told of the trigger: capped too; an hour later it fires */
    assert_int_equal(cont_eval_new(&k_prompt, &e), SKP_OK);
    p = make("svc", text);
    assert_int_equal(cont_eval_set_policy(e, &p), SKP_OK);
    cont_eval_note_trigger(e, "svc", 1002 * 1000, false);
    cont_eval_note_trigger(e, "other", 1002 * 1000, false); /* no policy: ignored */
    assert_int_equal(cont_eval_quiet_until(e, "svc"), 1002 * 1000 + 10000);
    load(e, "/slow", 1026, 1030, 2, 300, false);
    cont_eval_tick(e, 1030 * 1000, on_fire, &r);
    assert_int_equal(r.n, 1);
    load(e, "/slow", 1002 + 3600, 1002 + 3603, 2, 300, false);
    cont_eval_tick(e, (1002 + 3603) * 1000, on_fire, &r);
    assert_int_equal(r.n, 2);
    cont_eval_free(e);

    /* a replayed trigger that created a task (at least a minute long): quiet until its end and
     * the silence, as the collector that fired it was (a lease taken over must not fire again) */
    assert_int_equal(cont_eval_new(&k_prompt, &e), SKP_OK);
    p = make("svc", text);
    assert_int_equal(cont_eval_set_policy(e, &p), SKP_OK);
    cont_eval_note_trigger(e, "svc", 1002 * 1000, true);
    int64_t quiet = cont_eval_quiet_until(e, "svc");
    assert_true(quiet >= 1002 * 1000 + 60000 && quiet <= 1002 * 1000 + 60000 + 10000);
    cont_eval_free(e);
}

/* Issue 25 #3: nothing bounded the number of policies (100k took 500 MB and a 53 s restart). */
static void policies_are_capped(void **state)
{
    (void)state;
    static const char *const k_pol =
        "{\"targets\":[{\"targetType\":\"TRACE\",\"checkItems\":[{\"type\":"
        "\"ENDPOINT_AVG_RESPONSE_TIME\",\"threshold\":\"100\",\"period\":3,\"count\":1}]}]}";
    struct cont_eval_opts o = k_prompt;
    o.max_policies = 2;
    struct cont_eval *e;
    assert_int_equal(cont_eval_new(&o, &e), SKP_OK);
    assert_true(cont_eval_policy_room(e, "a"));
    struct cont_policy p = make("a", k_pol);
    assert_int_equal(cont_eval_set_policy(e, &p), SKP_OK);
    p = make("b", k_pol);
    assert_int_equal(cont_eval_set_policy(e, &p), SKP_OK);
    assert_false(cont_eval_policy_room(e, "c")); /* a third service: refused */
    assert_true(cont_eval_policy_room(e, "a"));  /* an edit of a held one: fine */
    cont_eval_remove_policy(e, "b");
    assert_true(cont_eval_policy_room(e, "c"));
    cont_eval_free(e);
    /* The default cap. */
    assert_int_equal(cont_eval_new(&k_prompt, &e), SKP_OK);
    for (int i = 0; i < CONT_EVAL_MAX_POLICIES; i++) {
        char name[32];
        snprintf(name, sizeof(name), "svc-%d", i);
        assert_true(cont_eval_policy_room(e, name));
        p = make(name, k_pol);
        assert_int_equal(cont_eval_set_policy(e, &p), SKP_OK);
    }
    assert_false(cont_eval_policy_room(e, "one-more"));
    cont_eval_free(e);
}

static void evaluator_error_rate_and_p99(void **state)
{
    (void)state;
    struct cont_eval *e;
    assert_int_equal(cont_eval_new(&k_prompt, &e), SKP_OK);
    struct cont_policy p =
        make("svc", "{\"targets\":[{\"targetType\":\"PPROF_WALL\",\"checkItems\":[{\"type\":"
                    "\"ENDPOINT_ERROR_RATE\",\"threshold\":\"25.5\",\"period\":4,\"count\":2},"
                    "{\"type\":\"ENDPOINT_P99_RESPONSE_TIME\",\"threshold\":\"1000\",\"period\":4,"
                    "\"count\":4}]}]}");
    assert_int_equal(cont_eval_set_policy(e, &p), SKP_OK);
    struct fired r = {0};
    /* 1 error in 4 = 25 %: below 25.5 */
    for (int64_t s = 10; s < 14; s++)
        for (int i = 0; i < 4; i++)
            cont_eval_record(e, "svc", "i", "/any", s * 1000, 10, i == 0, s * 1000);
    cont_eval_tick(e, 14000, on_fire, &r);
    assert_int_equal(r.n, 0);
    /* 2 in 4 = 50 % in two slots; p99 of 99 fast + 1 slow request is the slow one */
    for (int64_t s = 14; s < 16; s++)
        for (int i = 0; i < 100; i++)
            cont_eval_record(e, "svc", "i", "/any", s * 1000, i == 0 ? 2000 : 10, i < 50, s * 1000);
    cont_eval_tick(e, 16000, on_fire, &r);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.target, CONT_TARGET_PPROF_WALL);
    assert_int_equal(r.cause.type, CONT_MON_ENDPOINT_ERROR_RATE);
    assert_true(fabs(r.cause.current - 50.0) < 1e-9);
    assert_int_equal(r.n_causes, 1); /* p99 crossed in 2 slots of the 4 needed */
    cont_eval_free(e);
}

static void evaluator_bounds(void **state)
{
    (void)state;
    struct cont_eval *e;
    struct cont_eval_opts o = {.slot_ms = 100, .max_series = 3};
    assert_int_equal(cont_eval_new(&o, &e), SKP_OK);
    struct cont_policy p = make(
        "svc", "{\"targets\":[{\"targetType\":\"TRACE\",\"checkItems\":[{\"type\":"
               "\"ENDPOINT_AVG_RESPONSE_TIME\",\"threshold\":\"1\",\"period\":2,\"count\":1}]}]}");
    assert_int_equal(cont_eval_set_policy(e, &p), SKP_OK);
    char ep[32];
    for (int i = 0; i < 10; i++) {
        snprintf(ep, sizeof(ep), "/e%d", i);
        cont_eval_record(e, "svc", "i", ep, 1000, 5, false, 1000);
    }
    cont_eval_record(e, "other", "i", "/e1", 1000, 5, false, 1000); /* no policy: ignored */
    struct cont_eval_counters c;
    cont_eval_counters(e, &c);
    assert_int_equal(c.series, 3);
    assert_int_equal(c.untracked, 7);
    assert_int_equal(c.recorded, 3);
    /* the same policy again keeps the series; a new one starts afresh */
    struct cont_policy same = make(
        "svc", "{\"targets\":[{\"targetType\":\"TRACE\",\"checkItems\":[{\"type\":"
               "\"ENDPOINT_AVG_RESPONSE_TIME\",\"threshold\":\"1\",\"period\":2,\"count\":1}]}]}");
    assert_int_equal(cont_eval_set_policy(e, &same), SKP_OK);
    cont_eval_counters(e, &c);
    assert_int_equal(c.series, 3);
    /* a policy without server-side items is not evaluated */
    struct cont_policy agent_only =
        make("svc", "{\"targets\":[{\"targetType\":\"ON_CPU\",\"checkItems\":[{\"type\":"
                    "\"PROCESS_CPU\",\"threshold\":\"1\",\"period\":2,\"count\":1}]}]}");
    assert_int_equal(cont_eval_set_policy(e, &agent_only), SKP_OK);
    assert_null(cont_eval_policy_uuid(e, "svc"));
    cont_eval_counters(e, &c);
    assert_int_equal(c.series, 0);
    cont_eval_free(e);
}

/* Segments arrive late (agents batch them): a request counts in the slot its entry span ended
 * in while that slot is open (CONT_EVAL_LATENESS_MS), its arrival slot when its end time is out
 * of range (a skewed clock); only closed slots are judged. */
static void evaluator_late_segments(void **state)
{
    (void)state;
    struct cont_eval *e;
    assert_int_equal(cont_eval_new(NULL, &e), SKP_OK); /* 1 s slots, 3 s lateness: 3 open */
    struct cont_policy p =
        make("svc",
             "{\"targets\":[{\"targetType\":\"TRACE\",\"checkItems\":[{\"type\":"
             "\"ENDPOINT_AVG_RESPONSE_TIME\",\"threshold\":\"100\",\"period\":5,\"count\":3}]}]}");
    assert_int_equal(cont_eval_set_policy(e, &p), SKP_OK);
    struct fired r = {0};
    /* slots 100..102 slow, all arriving in one batch at 102.9 s */
    for (int64_t s = 100; s < 103; s++)
        cont_eval_record(e, "svc", "i", "/a", s * 1000 + 500, 300, false, 102900);
    cont_eval_tick(e, 103000, on_fire, &r); /* slots up to 100 closed: 1 crossing */
    assert_int_equal(r.n, 0);
    cont_eval_tick(e, 105000, on_fire, &r); /* up to 102 closed: 3 */
    assert_int_equal(r.n, 1);
    assert_int_equal(r.cause.hits, 3);
    /* an end time from the future or far back counts in the arrival slot */
    cont_eval_record(e, "svc", "i", "/a", 999999999, 300, false, 110000);
    cont_eval_record(e, "svc", "i", "/a", 1000, 300, false, 110000);
    struct cont_eval_counters c;
    cont_eval_counters(e, &c);
    assert_int_equal(c.reslotted, 2);
    cont_eval_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(policy_stored_round_trip),
        cmocka_unit_test(evaluator_count_of_period),
        cmocka_unit_test(evaluator_cap_survives_edit_and_restart),
        cmocka_unit_test(policies_are_capped),
        cmocka_unit_test(evaluator_error_rate_and_p99),
        cmocka_unit_test(evaluator_bounds),
        cmocka_unit_test(evaluator_late_segments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
