/* log.h - leveled logging through a replaceable sink.
 * The default sink is off (agent rule: never write to the host's stdio unless asked); the server
 * and CLI install a stderr sink. Lines are formatted into a bounded stack buffer (truncated at
 * SKPX_LOG_LINE_MAX) and control bytes of every interpolated field are escaped (escape.h), so
 * agent-supplied text cannot forge log lines or reach the terminal raw. Repeating error lines go
 * through a per-call-site limiter (skpx_log_limited): one line per interval, then a count of the
 * lines held back. Thread-safe. */
#ifndef SKP_COMMON_LOG_H
#define SKP_COMMON_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

enum skpx_log_level {
    SKPX_LOG_ERROR = 0,
    SKPX_LOG_WARN = 1,
    SKPX_LOG_INFO = 2,
    SKPX_LOG_DEBUG = 3,
};

#define SKPX_LOG_LINE_MAX 1024

/* Receives one formatted line (no trailing newline). Must be thread-safe. */
typedef void (*skpx_log_sink_cb)(void *ud, enum skpx_log_level level, const char *line);

/* Installs the sink (NULL turns logging off) and the most verbose level delivered. */
void skpx_log_set_sink(skpx_log_sink_cb sink, void *ud, enum skpx_log_level max_level);
/* A ready-made sink writing "<time> <LEVEL> <line>\n" to the fd passed as `ud` (intptr_t). */
void skpx_log_sink_fd(void *ud, enum skpx_log_level level, const char *line);
/* Parses "error|warn|info|debug"; returns -1 if unknown. */
int skpx_log_level_parse(const char *s);
const char *skpx_log_level_name(enum skpx_log_level level);
int skpx_log_enabled(enum skpx_log_level level);

void skpx_log(enum skpx_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void skpx_vlog(enum skpx_log_level level, const char *fmt, va_list ap);

/* Rate limiting (h2o's error_reporter): at most one line per SKPX_LOG_LIMIT_INTERVAL_MS per
 * limiter; the next line that goes through says how many were held back. A limiter is plain
 * zero-initialised storage, typically `static struct skpx_log_limit lim;` at the call site. */
#define SKPX_LOG_LIMIT_INTERVAL_MS 1000
struct skpx_log_limit {
    int64_t last_ms;     /* monotonic ms of the last line written (0 = never) */
    uint64_t suppressed; /* lines held back since */
};
/* Logs like skpx_log unless `lim` let a line through less than the interval ago, in which case
 * the line is counted and dropped. A line that goes through after some were held back ends with
 * " (N more since the last report)". Returns true when the line was written (or would have been,
 * had the level been enabled). Thread-safe: limiter state is updated under the logger's lock.
 * Borrows lim (must not be NULL). */
bool skpx_log_limited(struct skpx_log_limit *lim, enum skpx_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The decision alone, for callers that build their own line: true if a line may go now; then
 * *suppressed (if not NULL) is the number held back since the last one. Thread-safe. */
bool skpx_log_limit_allow(struct skpx_log_limit *lim, int64_t now_ms, uint64_t *suppressed);

#define SKPX_ERROR(...) skpx_log(SKPX_LOG_ERROR, __VA_ARGS__)
#define SKPX_WARN(...) skpx_log(SKPX_LOG_WARN, __VA_ARGS__)
#define SKPX_INFO(...) skpx_log(SKPX_LOG_INFO, __VA_ARGS__)
#define SKPX_DEBUG(...)                                                                            \
    do {                                                                                           \
        if (skpx_log_enabled(SKPX_LOG_DEBUG))                                                      \
            skpx_log(SKPX_LOG_DEBUG, __VA_ARGS__);                                                 \
    } while (0)

#endif
