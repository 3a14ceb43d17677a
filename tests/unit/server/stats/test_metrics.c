/* Unit test of metrics.c: the Prometheus text carries every counter with HELP/TYPE lines,
 * the gRPC and store sections only when given, and parses line by line as the exposition
 * format requires (name, optional labels, one value). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/alloc.h"
#include "server/stats/metrics.h"

static void test_render(void **state)
{
    (void)state;
    struct metrics m = {.snapshots_received = 12, .snapshots_stored = 10, .snapshots_duplicate = 2};
    m.http_requests[2] = 7;
    m.http_requests[4] = 3;
    struct skpx_grpc_server_stats g = {.calls_started = 5, .connections_open = 1};
    struct store_stats s = {.commits = 4, .commit_ns_total = 2000000000ull, .snapshots = 10};
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(metrics_render(&m, &g, &s, &text, &len), SKP_OK);
    assert_int_equal(strlen(text), len);
    assert_non_null(strstr(text, "\nskyprof_snapshots_received_total 12\n"));
    assert_non_null(strstr(text, "\nskyprof_snapshots_stored_total 10\n"));
    assert_non_null(strstr(text, "\nskyprof_snapshots_duplicate_total 2\n"));
    assert_non_null(strstr(text, "skyprof_http_requests_total{code=\"2xx\"} 7\n"));
    assert_non_null(strstr(text, "skyprof_http_requests_total{code=\"4xx\"} 3\n"));
    assert_non_null(strstr(text, "\nskyprof_grpc_calls_started_total 5\n"));
    assert_non_null(strstr(text, "\nskyprof_store_commit_seconds_avg 0.5\n"));
    assert_non_null(strstr(text, "# TYPE skyprof_snapshots_stored_total counter\n"));
    assert_true(text[len - 1] == '\n');
    /* Every non-comment line is "name[{labels}] value". */
    for (char *line = text; *line;) {
        char *nl = strchr(line, '\n');
        assert_non_null(nl);
        if (line[0] != '#') {
            char name[128];
            double v;
            assert_int_equal(sscanf(line, "%127s %lf", name, &v), 2);
            assert_true(strncmp(name, "skyprof_", 8) == 0);
        }
        line = nl + 1;
    }
    skpx_free(text);
    /* Without gRPC and store stats, their sections are left out. */
    assert_int_equal(metrics_render(&m, NULL, NULL, &text, &len), SKP_OK);
    assert_null(strstr(text, "skyprof_grpc_"));
    assert_null(strstr(text, "skyprof_store_"));
    skpx_free(text);
    assert_true(metrics_rss_bytes() > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_render)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
