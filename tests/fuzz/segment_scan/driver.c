/* Fuzz target of segment_scan (src/server/formats/segment_scan.c). Oracle: protobuf-c's full decoder.
 * Whenever protobuf-c accepts the input, the scanner must accept it too and agree on every
 * field it reads; whatever it accepts, its slices must lie inside the input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "language-agent/Tracing.pb-c.h"
#include "server/formats/segment_scan.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            __builtin_trap();                                                                      \
    } while (0)

static void inside(const struct segment_slice *s, const uint8_t *d, size_t n)
{
    if (s->len == 0)
        return;
    CHECK((const uint8_t *)s->ptr >= d && (const uint8_t *)s->ptr + s->len <= d + n);
}

static void same(const struct segment_slice *s, const char *want)
{
    const char *w = want ? want : "";
    CHECK(s->len == strlen(w) && memcmp(s->ptr, w, s->len) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct segment_scan s;
    skp_err err = segment_scan(data, size, &s);
    if (err == SKP_OK) {
        inside(&s.segment_id, data, size);
        inside(&s.trace_id, data, size);
        inside(&s.service, data, size);
        inside(&s.instance, data, size);
        inside(&s.endpoint, data, size);
    }
    Skywalking__V3__SegmentObject *o = skywalking__v3__segment_object__unpack(NULL, size, data);
    if (!o)
        return 0;
    /* strings with embedded NULs cannot be compared through protobuf-c's C strings */
    if (memchr(data, 0, size) == NULL) {
        CHECK(err == SKP_OK);
        same(&s.segment_id, o->tracesegmentid);
        same(&s.trace_id, o->traceid);
        same(&s.service, o->service);
        same(&s.instance, o->serviceinstance);
        CHECK(s.n_spans == o->n_spans);
        const Skywalking__V3__SpanObject *entry = NULL;
        for (size_t i = 0; i < o->n_spans && !entry; i++)
            if (o->spans[i]->spantype == SKYWALKING__V3__SPAN_TYPE__Entry)
                entry = o->spans[i];
        CHECK(s.has_entry == (entry != NULL));
        if (entry) {
            same(&s.endpoint, entry->operationname);
            CHECK(s.entry_start_ms == entry->starttime && s.entry_end_ms == entry->endtime);
            CHECK(s.entry_is_error == (entry->iserror != 0));
        } else if (o->n_spans) {
            same(&s.endpoint, o->spans[0]->operationname);
        }
    }
    skywalking__v3__segment_object__free_unpacked(o, NULL);
    return 0;
}
