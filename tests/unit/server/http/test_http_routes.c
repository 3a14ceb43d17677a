/* Unit tests for src/server/http/http_routes.c: the pattern matcher, and the route table against
 * docs/api.md in both directions (every route documented, every documented route served). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "server/http/http_int.h"

#ifndef SKP_SOURCE_DIR
#error "SKP_SOURCE_DIR must name the source tree (for docs/api.md)"
#endif

static void matcher_captures_whole_segments(void **state)
{
    (void)state;
    char *seg[] = {"api", "v1", "profile", "tasks", "t-1", "logs"};
    const char *caps[HTTP_ROUTE_MAX_CAPTURES];
    size_t n;
    assert_true(http_route_match("/api/v1/profile/tasks/{id}/logs", seg, 6, caps, &n));
    assert_int_equal(n, 1);
    assert_string_equal(caps[0], "t-1");
    assert_false(http_route_match("/api/v1/profile/tasks/{id}", seg, 6, caps, &n));
    assert_false(http_route_match("/api/v1/profile/tasks/{id}/logs/more", seg, 6, caps, &n));
    assert_false(http_route_match("/api/v1/profile/tasks/{id}/segments", seg, 6, caps, &n));
    char *two[] = {"a", "x", "b", "y"};
    assert_true(http_route_match("/a/{p}/b/{q}", two, 4, caps, &n));
    assert_int_equal(n, 2);
    assert_string_equal(caps[1], "y");
    char *prefix[] = {"api", "v"};
    assert_false(http_route_match("/api/v1", prefix, 2, caps, &n)); /* whole segments only */
    assert_true(http_route_match("/", NULL, 0, caps, &n));
}

static void table_rows_are_well_formed(void **state)
{
    (void)state;
    assert_true(http_n_routes > 0);
    for (size_t i = 0; i < http_n_routes; i++) {
        const struct http_route *r = &http_routes[i];
        size_t caps = 0;
        for (const char *p = r->pattern; *p; p++)
            caps += *p == '{';
        assert_true(r->pattern[0] == '/');
        assert_true(r->methods != 0);
        int set = (r->h0 != NULL) + (r->h1 != NULL) + (r->h2 != NULL);
        assert_int_equal(set, 1);
        assert_true((caps == 0 && r->h0) || (caps == 1 && r->h1) || (caps == 2 && r->h2));
    }
}

/* "GET /a/{x}/b" -> "GET /a/{}/b": capture names may differ between the table and the docs. */
static void normalise(const char *method, const char *path, size_t len, char *out, size_t cap)
{
    size_t k = (size_t)snprintf(out, cap, "%s ", method);
    for (size_t i = 0; i < len && k + 3 < cap; i++) {
        if (path[i] == '{') {
            out[k++] = '{';
            out[k++] = '}';
            while (i < len && path[i] != '}')
                i++;
        } else {
            out[k++] = path[i];
        }
    }
    out[k] = '\0';
}

#define MAX_DOC_ROUTES 256
static char g_doc[MAX_DOC_ROUTES][256];
static size_t g_n_doc;

/* Reads every "### `METHOD /path[?query]` — ..." heading of docs/api.md. */
static void load_docs(void)
{
    FILE *f = fopen(SKP_SOURCE_DIR "/docs/api.md", "r");
    assert_non_null(f);
    char line[1024];
    g_n_doc = 0;
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, "### `", 5) != 0)
            continue;
        char *m = line + 5;
        char *sp = strchr(m, ' ');
        if (!sp || sp[1] != '/')
            continue;
        *sp = '\0';
        char *path = sp + 1;
        size_t len = strcspn(path, "?` ");
        assert_true(g_n_doc < MAX_DOC_ROUTES);
        normalise(m, path, len, g_doc[g_n_doc], sizeof(g_doc[0]));
        g_n_doc++;
    }
    fclose(f);
    assert_true(g_n_doc > 0);
}

#define SKP_N_METHODS 4
static const char *const k_methods[SKP_N_METHODS] = {"GET", "POST", "PUT", "DELETE"};
static const unsigned k_bits[SKP_N_METHODS] = {HTTP_M_GET, HTTP_M_POST, HTTP_M_PUT, HTTP_M_DELETE};

static bool in_docs(const char *key)
{
    for (size_t i = 0; i < g_n_doc; i++)
        if (strcmp(g_doc[i], key) == 0)
            return true;
    return false;
}

static bool in_table(const char *key)
{
    char k[256];
    for (size_t i = 0; i < http_n_routes; i++) {
        const struct http_route *r = &http_routes[i];
        for (size_t m = 0; m < SKP_N_METHODS; m++) {
            if (!(r->methods & k_bits[m]))
                continue;
            normalise(k_methods[m], r->pattern, strlen(r->pattern), k, sizeof(k));
            if (!strcmp(k, key))
                return true;
        }
    }
    return false;
}

static void table_matches_docs_api_md(void **state)
{
    (void)state;
    load_docs();
    char k[256];
    int missing = 0;
    for (size_t i = 0; i < http_n_routes; i++) {
        const struct http_route *r = &http_routes[i];
        for (size_t m = 0; m < SKP_N_METHODS; m++) {
            if (!(r->methods & k_bits[m]))
                continue;
            normalise(k_methods[m], r->pattern, strlen(r->pattern), k, sizeof(k));
            if (!in_docs(k)) {
                print_error("route not documented in docs/api.md: %s\n", k);
                missing++;
            }
        }
    }
    for (size_t i = 0; i < g_n_doc; i++) {
        if (!in_table(g_doc[i])) {
            print_error("docs/api.md documents a route the server does not have: %s\n", g_doc[i]);
            missing++;
        }
    }
    assert_int_equal(missing, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(matcher_captures_whole_segments),
        cmocka_unit_test(table_rows_are_well_formed),
        cmocka_unit_test(table_matches_docs_api_md),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
