/* Fuzz target of the sw8 propagation header parser (src/agent/sw8.c, skyprof_sw8_parse): any
 * header text must parse or be refused without touching memory outside the caller's storage,
 * for every storage size; whatever parses formats back to a header that parses to the same
 * fields (the round trip an agent does when it propagates a context). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "skyprof/skyprof.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            __builtin_trap();                                                                      \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void same_str(const char *a, const char *b)
{
    CHECK(a && b && strcmp(a, b) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 8192)
        return 0;
    char *hdr = malloc(size + 1);
    if (!hdr)
        return 0;
    memcpy(hdr, data, size);
    hdr[size] = '\0';
    /* Storage sized from the input's first byte: small ones hit SKP_ETOOBIG paths. */
    size_t cap = size ? (size_t)data[0] * 8 + 1 : 1;
    char *store = malloc(cap);
    struct skyprof_sw8 v;
    if (store && skyprof_sw8_parse(hdr, &v, store, cap) == SKP_OK) {
        CHECK(v.sample == 0 || v.sample == 1);
        char out[3 * 8192];
        int n = skyprof_sw8_format(&v, out, sizeof(out));
        CHECK(n > 0);
        CHECK((size_t)n == strlen(out));
        struct skyprof_sw8 w;
        char store2[3 * 8192];
        CHECK(skyprof_sw8_parse(out, &w, store2, sizeof(store2)) == SKP_OK);
        {
            CHECK(w.sample == v.sample && w.parent_span_id == v.parent_span_id);
            same_str(w.trace_id, v.trace_id);
            same_str(w.parent_segment_id, v.parent_segment_id);
            same_str(w.parent_service, v.parent_service);
            same_str(w.parent_instance, v.parent_instance);
            same_str(w.parent_endpoint, v.parent_endpoint);
            same_str(w.peer, v.peer);
        }
    }
    free(store);
    free(hdr);
    return 0;
}
