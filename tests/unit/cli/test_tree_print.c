/* Unit tests of src/cli/tree_print.c: the terminal tree printer on analysis JSON. */
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

static char *print_to_string(const char *json, int width)
{
    json_t *j = json_loads(json, 0, NULL);
    assert_non_null(j);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(tree_print(f, j, width), 0);
    fclose(f);
    json_decref(j);
    return buf;
}

static void tree_print_example(void **state)
{
    (void)state;
    char *s = print_to_string("{\"tip\":null,\"trees\":[{\"elements\":["
                              "{\"id\":1,\"parentId\":0,\"codeSignature\":\"A\",\"duration\":40,"
                              "\"durationChildExcluded\":0,\"count\":5},"
                              "{\"id\":2,\"parentId\":1,\"codeSignature\":\"B\",\"duration\":40,"
                              "\"durationChildExcluded\":30,\"count\":5},"
                              "{\"id\":3,\"parentId\":2,\"codeSignature\":\"C\",\"duration\":10,"
                              "\"durationChildExcluded\":10,\"count\":3},"
                              "{\"id\":4,\"parentId\":2,\"codeSignature\":\"D\",\"duration\":0,"
                              "\"durationChildExcluded\":0,\"count\":1}]}]}",
                              80);
    assert_string_equal(s, "DURATION(ms)     SELF(ms)   COUNT  STACK\n"
                           "          40           0        5  A\n"
                           "          40          30*       5    B\n"
                           "          10          10*       3      C\n"
                           "           0           0        1      D\n"
                           "(* = one of the 10 largest self durations)\n");
    free(s); /* open_memstream's buffer comes from libc */
}

static void tree_print_tip_shortening_and_bad_input(void **state)
{
    (void)state;
    char *s = print_to_string("{\"tip\":\"Data not found\",\"trees\":[]}", 80);
    assert_string_equal(s, "tip: Data not found\n");
    free(s);
    /* A long signature is cut in the middle and keeps its end (file and line). */
    s = print_to_string(
        "{\"trees\":[{\"elements\":[{\"id\":1,\"parentId\":0,\"codeSignature\":"
        "\"/a/very/long/path/that/goes/on/and/on/and/on/forever/module.py.function_name: 1234\","
        "\"duration\":0,\"durationChildExcluded\":0,\"count\":1}]}]}",
        60);
    assert_non_null(strstr(s, "..."));
    assert_non_null(strstr(s, "name: 1234\n"));
    char *line = strchr(s, '\n') + 1;
    assert_true(strchr(line, '\n') - line <= 60);
    free(s);
    /* Not an analysis. */
    json_t *j = json_loads("[1,2]", 0, NULL);
    FILE *f = fopen("/dev/null", "w");
    assert_int_equal(tree_print(f, j, 80), -1);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tree_print_example),
        cmocka_unit_test(tree_print_tip_shortening_and_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
