/* Unit tests of src/cli/tree_print.c: the terminal tree printer on analysis JSON - columns and
 * their units, the UI's frame labels (checked against the shared vectors of
 * tests/data/frame_sigs.tsv, as web/src/frames.js frameLabel gives them), and the folding of the
 * agent's and the runner's frames. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "cli/tree_print.h"

static char *print_opts(const char *json, const struct tree_print_opts *o)
{
    json_t *j = json_loads(json, 0, NULL);
    assert_non_null(j);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(tree_print(f, j, o), 0);
    fclose(f);
    json_decref(j);
    return buf;
}

static char *print_to_string(const char *json, int width)
{
    struct tree_print_opts o = {.width = width};
    return print_opts(json, &o);
}

static const char g_example[] = "{\"tip\":null,\"trees\":[{\"elements\":["
                                "{\"id\":1,\"parentId\":0,\"codeSignature\":\"A\",\"duration\":40,"
                                "\"durationChildExcluded\":0,\"count\":5},"
                                "{\"id\":2,\"parentId\":1,\"codeSignature\":\"B\",\"duration\":40,"
                                "\"durationChildExcluded\":30,\"count\":5},"
                                "{\"id\":3,\"parentId\":2,\"codeSignature\":\"C\",\"duration\":10,"
                                "\"durationChildExcluded\":10,\"count\":3},"
                                "{\"id\":4,\"parentId\":2,\"codeSignature\":\"D\",\"duration\":0,"
                                "\"durationChildExcluded\":0,\"count\":1}]}]}";

static void tree_print_example(void **state)
{
    (void)state;
    char *s = print_to_string(g_example, 80);
    assert_string_equal(s, "DURATION(ms)     SELF(ms)   COUNT  STACK\n"
                           "          40           0        5  A\n"
                           "          40          30*       5    B\n"
                           "          10          10*       3      C\n"
                           "           0           0        1      D\n"
                           "(* = one of the 10 largest self durations)\n");
    free(s); /* open_memstream's buffer comes from libc */
}

/* A process profile's header names its unit (pprof analyze printed DURATION(ms) over ns). */
static void tree_print_units(void **state)
{
    (void)state;
    struct tree_print_opts o = {.width = 80, .unit = "nanoseconds"};
    char *s = print_opts(g_example, &o);
    assert_true(strncmp(s, "   TOTAL(ns)     SELF(ns)   COUNT  STACK\n", 41) == 0);
    assert_non_null(strstr(s, "(* = one of the 10 largest self values)\n"));
    free(s);
    o.unit = "bytes";
    s = print_opts(g_example, &o);
    assert_true(strncmp(s, "TOTAL(bytes)  SELF(bytes)", 25) == 0);
    free(s);
}

static void tree_print_tip_labels_and_bad_input(void **state)
{
    (void)state;
    char *s = print_to_string("{\"tip\":\"Data not found\",\"trees\":[]}", 80);
    assert_string_equal(s, "tip: Data not found\n");
    free(s);
    /* A long Python signature shows as the UI's label: function first, the file's base name
     * and line; the path is not printed, so nothing is cut in its middle. */
    s = print_to_string(
        "{\"trees\":[{\"elements\":[{\"id\":1,\"parentId\":0,\"codeSignature\":"
        "\"/a/very/long/path/that/goes/on/and/on/and/on/forever/module.py.function_name: 1234\","
        "\"duration\":0,\"durationChildExcluded\":0,\"count\":1}]}]}",
        80);
    assert_non_null(strstr(s, "  function_name  module.py:1234\n"));
    assert_null(strstr(s, "..."));
    assert_null(strstr(s, "/a/very"));
    free(s);
    /* Only a function too long for the width is shortened, in its middle; the location stays. */
    char label[256];
    tree_print_label(label, sizeof(label),
                     "a_function_with_a_really_remarkably_long_name_indeed (server.c:77)", 40);
    assert_non_null(strstr(label, "..."));
    assert_non_null(strstr(label, "  server.c:77"));
    assert_true(strlen(label) <= 40);
    /* Not an analysis. */
    json_t *j = json_loads("[1,2]", 0, NULL);
    FILE *f = fopen("/dev/null", "w");
    struct tree_print_opts o = {.width = 80};
    assert_int_equal(tree_print(f, j, &o), -1);
    fclose(f);
    json_decref(j);
    /* A cycle in parent ids prints each element once and terminates. */
    s = print_to_string("{\"trees\":[{\"elements\":["
                        "{\"id\":1,\"parentId\":2,\"codeSignature\":\"P\",\"count\":1},"
                        "{\"id\":2,\"parentId\":1,\"codeSignature\":\"Q\",\"count\":1},"
                        "{\"id\":3,\"parentId\":0,\"codeSignature\":\"R\",\"count\":1}]}]}",
                        80);
    assert_non_null(strstr(s, "R\n"));
    free(s);
}

/* Every vector of the shared file: the CLI's label is the UI's frameLabel (func, two spaces,
 * location), and the hidden frames include every agent frame. */
static void tree_print_shared_vectors(void **state)
{
    (void)state;
    FILE *fp = fopen(SKP_SOURCE_DIR "/tests/data/frame_sigs.tsv", "r");
    assert_non_null(fp);
    char line[2048];
    int rows = 0;
    while (fgets(line, sizeof(line), fp)) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        line[strcspn(line, "\n")] = 0;
        char *field[6] = {0};
        char *p = line;
        for (int i = 0; i < 6 && p; i++) {
            field[i] = p;
            p = strchr(p, '\t');
            if (p)
                *p++ = 0;
        }
        assert_non_null(field[5]);
        for (int i = 0; i < 6; i++)
            if (strcmp(field[i], "-") == 0)
                field[i][0] = 0;
        char want[1024], got[1024];
        if (field[2][0])
            snprintf(want, sizeof(want), "%s  %s", field[1], field[2]);
        else
            snprintf(want, sizeof(want), "%s", field[1]);
        tree_print_label(got, sizeof(got), field[0], 1000);
        if (strcmp(got, want) != 0)
            fail_msg("signature '%s': label '%s', the UI's '%s'", field[0], got, want);
        if (field[4][0] == '1' && !tree_print_hidden_frame(field[0]))
            fail_msg("agent frame '%s' not hidden", field[0]);
        rows++;
    }
    fclose(fp);
    assert_true(rows >= 40);
}

/* python -m skyprof run app.py: runpy and the agent's frames fold into their callers; equal
 * frames under them merge; --all-frames keeps everything. */
static void tree_print_folds_agent_and_runner(void **state)
{
    (void)state;
    static const char json[] =
        "{\"trees\":[{\"elements\":["
        "{\"id\":1,\"parentId\":0,\"codeSignature\":\"<frozen runpy>._run_module_as_main: 198\","
        "\"duration\":100,\"durationChildExcluded\":0,\"count\":10},"
        "{\"id\":2,\"parentId\":1,\"codeSignature\":"
        "\"/usr/lib/python3.11/runpy.py._run_code: 88\","
        "\"duration\":100,\"durationChildExcluded\":0,\"count\":10},"
        "{\"id\":3,\"parentId\":2,\"codeSignature\":"
        "\"/srv/x/python/skyprof/__main__.py.<module>: 5\","
        "\"duration\":100,\"durationChildExcluded\":0,\"count\":10},"
        "{\"id\":4,\"parentId\":3,\"codeSignature\":\"/srv/app/app.py.<module>: 30\","
        "\"duration\":100,\"durationChildExcluded\":0,\"count\":10},"
        "{\"id\":5,\"parentId\":4,\"codeSignature\":"
        "\"/srv/x/python/skyprof/instrument/http_server.py._skyprof_do: 34\","
        "\"duration\":60,\"durationChildExcluded\":10,\"count\":6},"
        "{\"id\":6,\"parentId\":4,\"codeSignature\":\"/srv/app/app.py.do_POST: 44\","
        "\"duration\":40,\"durationChildExcluded\":0,\"count\":4},"
        "{\"id\":7,\"parentId\":5,\"codeSignature\":\"/srv/app/app.py.do_POST: 44\","
        "\"duration\":50,\"durationChildExcluded\":0,\"count\":5},"
        "{\"id\":8,\"parentId\":6,\"codeSignature\":\"/srv/app/app.py.method3: 28\","
        "\"duration\":40,\"durationChildExcluded\":40,\"count\":4},"
        "{\"id\":9,\"parentId\":7,\"codeSignature\":\"/srv/app/app.py.method3: 28\","
        "\"duration\":50,\"durationChildExcluded\":50,\"count\":5}]}]}";
    char *s = print_to_string(json, 100);
    assert_string_equal(s, "DURATION(ms)     SELF(ms)   COUNT  STACK\n"
                           "         100          10*      10  <module>  app.py:30\n"
                           "          90           0        9    do_POST  app.py:44\n"
                           "          90          90*       9      method3  app.py:28\n"
                           "(* = one of the 10 largest self durations)\n"
                           "(4 frame(s) of the agent and the runner folded into their callers; "
                           "--all-frames shows them)\n");
    free(s);
    struct tree_print_opts o = {.width = 100, .all_frames = true};
    s = print_opts(json, &o);
    assert_non_null(strstr(s, "  <frozen runpy>._run_module_as_main: 198\n"));
    assert_non_null(strstr(s, "    _run_code  runpy.py:88\n"));
    assert_non_null(strstr(s, "      _skyprof_do  http_server.py:34\n"));
    assert_null(strstr(s, "folded"));
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tree_print_example),
        cmocka_unit_test(tree_print_units),
        cmocka_unit_test(tree_print_tip_labels_and_bad_input),
        cmocka_unit_test(tree_print_shared_vectors),
        cmocka_unit_test(tree_print_folds_agent_and_runner),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
