/* agent_limits.h - named maxima of the agent core, each with the reason for its value.
 * Every buffer and queue of src/agent is bounded by one of these. */
#ifndef SKP_AGENT_LIMITS_H
#define SKP_AGENT_LIMITS_H

/* Task ids are "<createTimeMs>_<base64(service)>.1" in SkyWalking; 256 fits services of ~180
 * bytes. */
#define SKP_TASK_ID_MAX 256
/* Endpoint (operation) names; SkyWalking truncates operation names far below this. */
#define SKP_ENDPOINT_MAX 512
/* Trace / segment ids we generate are ~50 bytes; incoming sw8 trace ids are copied up to this. */
#define SKP_ID_MAX 128
/* Command serial numbers are UUIDs (36 bytes); longer ones are treated as malformed. */
#define SKP_SERIAL_MAX 80
/* SkyWalking keeps the last 64 executed serial numbers (CommandSerialNumberCache). */
#define SKP_SERIAL_LRU 64
/* Tasks known at once (scheduled + active). The backend hands out a handful; overlap rules make
 * more than ~15 non-overlapping tasks within its +-5 min window impossible. */
#define SKP_TASK_LIST_MAX 16
/* Text of one segment (names, peers, tags, incoming ref); beyond it tags are dropped. */
#define SKP_SEGMENT_TEXT_MAX 8192
/* Tags per segment. */
#define SKP_SEGMENT_TAGS_MAX 64
/* Bytes of all snapshots queued but not yet sent: bounds memory when the backend is down even
 * with deep stacks (4500 snapshots x 500 frames would otherwise be unbounded in practice). */
#define SKP_SNAPSHOT_QUEUE_BYTES_MAX (16u << 20)
/* Dumps held per slot for a request under its task's min-duration threshold (sampler.h): a hold
 * has room for threshold / period + 3 dumps, at most this many (20 s of a 10 ms period; a longer
 * threshold keeps its earliest and latest dumps, see skp__snapshot_hold). */
#define SKP_HOLD_DUMPS_MAX 2048
/* Bytes of held dumps, all slots together (each slot gets an equal share): 5 slots of 1.6 MiB
 * hold ~600 Python dumps of 30 frames each, 6 s of a 10 ms period. */
#define SKP_HOLD_BYTES_MAX (8u << 20)
/* Text scratch a stack source may fill per capture (500 frames x ~128 bytes). */
#define SKP_CAPTURE_SCRATCH_BYTES (64u << 10)
/* Symbolized addresses kept (each entry ~100 bytes): a few MB at most, cleared when full. */
#define SKP_SYMCACHE_ENTRIES 8192
/* Length of one symbolized frame. */
#define SKP_SYMBOL_MAX 512
/* Snapshots and segments sent in one client stream (the stream is closed and a new one opened). */
#define SKP_STREAM_BATCH_MAX 2000
/* Finish reports waiting to be sent (one per task; tasks are minutes long). */
#define SKP_FINISH_QUEUE_MAX 16
/* Deadline of one RPC made by the channel thread. Short so that a hung backend cannot delay task
 * scheduling for long; SkyWalking Java uses 30 s. */
#define SKP_RPC_TIMEOUT_MS 10000
/* Snapshot send period (SkyWalking: 500 ms). */
#define SKP_SNAPSHOT_SEND_PERIOD_MS 500
/* Segment send period (Python drains roughly every second). */
#define SKP_SEGMENT_SEND_PERIOD_MS 1000
/* Every Nth heartbeat carries the instance properties (Java properties_report_period_factor). */
#define SKP_PROPERTIES_EVERY_N_BEATS 10
/* Instance properties we send at most. */
#define SKP_PROPERTIES_MAX 64

#endif
