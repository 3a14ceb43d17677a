/* reporter.h - turns queued snapshots and finished segments into SkyWalking protobuf messages
 * (ThreadSnapshot, SegmentObject). Address frames are symbolized here, on the channel thread,
 * through the stack source with the bounded per-address cache. Channel thread only. */
#ifndef SKP_AGENT_REPORTER_H
#define SKP_AGENT_REPORTER_H

#include "agent/snapshot.h"
#include "agent/symcache.h"
#include "agent/tracer.h"
#include "language-agent/Tracing.pb-c.h"
#include "profile/Profile.pb-c.h"

struct skp__pb_snapshot {
    Skywalking__V3__ThreadSnapshot msg;
    Skywalking__V3__ThreadStack stack;
    char *mem; /* owned: signature pointers + text */
};

/* Builds out->msg from s (borrowed: out points into s and into its own memory, so s must outlive
 * out). Errors: SKP_ENOMEM. Release with skp__pb_snapshot_cleanup (also after failure). */
SKP_MUST_CHECK skp_err skp__reporter_snapshot_pb(const struct skp__snapshot *s,
                                                 struct skp__symcache *cache,
                                                 const struct skyprof_stack_source *src,
                                                 struct skp__pb_snapshot *out);
void skp__pb_snapshot_cleanup(struct skp__pb_snapshot *out);

struct skp__pb_segment {
    Skywalking__V3__SegmentObject msg;
    char *mem; /* owned: every sub-message and string */
};

/* Builds out->msg for the finished segment fs (borrowed; must outlive out), tagging it with the
 * given service and instance. Errors: SKP_ENOMEM. */
SKP_MUST_CHECK skp_err skp__reporter_segment_pb(const struct skp__finished_segment *fs,
                                                const char *service, const char *instance,
                                                struct skp__pb_segment *out);
void skp__pb_segment_cleanup(struct skp__pb_segment *out);

#endif
