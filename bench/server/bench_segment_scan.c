/* bench_segment_scan.c - what reading a segment's entry-span fields costs: segment_scan on the
 * wire bytes versus protobuf-c's full unpack (+ free) of the same bytes, on a 5-span segment
 * like the ones agents send (~0.6 KB). Single thread; prints ns per segment for each. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/Common.pb-c.h"
#include "common/clock.h"
#include "language-agent/Tracing.pb-c.h"
#include "server/formats/segment_scan.h"

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    Skywalking__V3__SpanObject spans[5];
    Skywalking__V3__SpanObject *ptrs[5];
    Skywalking__V3__KeyStringValuePair tag = SKYWALKING__V3__KEY_STRING_VALUE_PAIR__INIT;
    Skywalking__V3__KeyStringValuePair *tags[] = {&tag};
    tag.key = "http.url";
    tag.value = "http://shop-api:8080/api/v1/items/{id}?expand=stock";
    static const char *const ops[5] = {"/api/v1/items/{id}", "SELECT shop.items",
                                       "GET /inventory", "redis GET", "render"};
    for (int i = 0; i < 5; i++) {
        skywalking__v3__span_object__init(&spans[i]);
        spans[i].spanid = i;
        spans[i].parentspanid = i - 1;
        spans[i].starttime = 1700000000000 + i;
        spans[i].endtime = 1700000000042;
        spans[i].operationname = (char *)ops[i];
        spans[i].spantype = i ? SKYWALKING__V3__SPAN_TYPE__Exit : SKYWALKING__V3__SPAN_TYPE__Entry;
        spans[i].peer = i ? "db.internal:5432" : "";
        spans[i].componentid = 7000 + i;
        ptrs[i] = &spans[i];
    }
    /* the entry span last, as agents finish it last */
    Skywalking__V3__SpanObject *order[5] = {ptrs[1], ptrs[2], ptrs[3], ptrs[4], ptrs[0]};
    spans[0].n_tags = 1;
    spans[0].tags = tags;
    Skywalking__V3__SegmentObject seg = SKYWALKING__V3__SEGMENT_OBJECT__INIT;
    seg.traceid = "6f1c3e9a0b2d4f5e8a7b6c5d4e3f2a1b.112.17000000000000001";
    seg.tracesegmentid = "6f1c3e9a0b2d4f5e8a7b6c5d4e3f2a1b.112.17000000000000002";
    seg.service = "shop-api";
    seg.serviceinstance = "shop-api-7d9f@10.0.0.7";
    seg.n_spans = 5;
    seg.spans = order;
    size_t len = skywalking__v3__segment_object__get_packed_size(&seg);
    uint8_t *buf = malloc(len);
    skywalking__v3__segment_object__pack(&seg, buf);

    volatile int64_t sink = 0;
    int64_t t0 = skpx_mono_ns();
    for (long i = 0; i < n; i++) {
        struct segment_scan sc;
        if (segment_scan(buf, len, &sc) != SKP_OK)
            return 1;
        sink += sc.entry_end_ms - sc.entry_start_ms + (int64_t)sc.endpoint.len;
    }
    double scan_ns = (double)(skpx_mono_ns() - t0) / (double)n;
    t0 = skpx_mono_ns();
    for (long i = 0; i < n; i++) {
        Skywalking__V3__SegmentObject *o = skywalking__v3__segment_object__unpack(NULL, len, buf);
        if (!o)
            return 1;
        sink += o->spans[4]->endtime - o->spans[4]->starttime;
        skywalking__v3__segment_object__free_unpacked(o, NULL);
    }
    double unpack_ns = (double)(skpx_mono_ns() - t0) / (double)n;
    printf("segment of %zu bytes, 5 spans, %ld rounds: segment_scan %.0f ns, protobuf-c unpack+free "
           "%.0f ns (%.1fx)\n",
           len, n, scan_ns, unpack_ns, unpack_ns / scan_ns);
    free(buf);
    return sink == 42 ? 0 : 0;
}
