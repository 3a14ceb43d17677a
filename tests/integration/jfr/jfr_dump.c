/* jfr_dump - test helper: analyses a JFR file like skyprofd does and prints
 * {"summary": {...}, "analysis": <the analysis JSON the API returns>} on stdout, or
 * "error <code>: <message>" on stderr with exit status 1.
 * Usage: jfr_dump FILE [kind] [thread|-] [nolines] [mem] */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "server/analysis/jfr_tree.h"

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = skpx_malloc(n > 0 ? (size_t)n : 1);
    *len = b ? fread(b, 1, (size_t)n, f) : 0;
    fclose(f);
    return b;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: jfr_dump FILE [kind] [thread|-] [nolines] [mem]\n");
        return 2;
    }
    struct jfr_analyze_opts o = {.kind = JFR_KIND_EXECUTION};
    if (argc > 2 && jfr_kind_parse(argv[2], &o.kind)) {
        fprintf(stderr, "unknown kind %s\n", argv[2]);
        return 2;
    }
    if (argc > 3 && strcmp(argv[3], "-") != 0)
        o.thread = argv[3];
    bool mem = false;
    for (int i = 4; i < argc; i++) {
        if (strcmp(argv[i], "nolines") == 0)
            o.without_lines = true;
        if (strcmp(argv[i], "mem") == 0)
            mem = true;
    }
    struct analysis *a = NULL;
    struct jfr_summary sum;
    struct jfr_error err;
    skp_err e;
    uint8_t *buf = NULL;
    if (mem) {
        size_t len = 0;
        buf = slurp(argv[1], &len);
        e = buf ? jfr_analyze_mem(buf, len, &o, &a, &sum, &err) : SKP_ENOTFOUND;
    } else {
        e = jfr_analyze_file(argv[1], &o, &a, &sum, &err);
    }
    skpx_free(buf);
    if (e) {
        fprintf(stderr, "error %d: %s\n", (int)e,
                e == SKP_EINVAL || e == SKP_ETOOBIG ? err.msg : "");
        return 1;
    }
    json_t *s = json_object();
    json_object_set_new(s, "chunks", json_integer(sum.n_chunks));
    json_object_set_new(s, "unit", json_string(sum.unit));
    if (sum.alloc_source)
        json_object_set_new(s, "allocSource", json_string(sum.alloc_source));
    json_t *ev = json_object();
    for (int k = 0; k < JFR_KIND_COUNT; k++)
        json_object_set_new(ev, jfr_kind_name((enum jfr_kind)k),
                            json_pack("{s:I,s:I}", "events", (json_int_t)sum.n_events[k], "weight",
                                      (json_int_t)sum.weight[k]));
    json_object_set_new(s, "kinds", ev);
    json_t *th = json_array();
    for (size_t i = 0; i < sum.n_threads; i++)
        json_array_append_new(th, json_pack("{s:s,s:I,s:I}", "name", sum.threads[i].name, "events",
                                            (json_int_t)sum.threads[i].n_events, "weight",
                                            (json_int_t)sum.threads[i].weight));
    json_object_set_new(s, "threads", th);
    json_t *root = json_pack("{s:o,s:o}", "summary", s, "analysis", analysis_to_json(a));
    char *txt = json_dumps(root, JSON_COMPACT);
    puts(txt);
    free(txt);
    json_decref(root);
    jfr_summary_cleanup(&sum);
    analysis_free(a);
    return 0;
}
