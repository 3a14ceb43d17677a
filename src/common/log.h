/* log.h - leveled logging through a replaceable sink.
 * The default sink is off (agent rule: never write to the host's stdio unless asked); the server
 * and CLI install a stderr sink. Lines are formatted into a bounded stack buffer (truncated at
 * SKPX_LOG_LINE_MAX) and rate-limited per call site is left to callers. Thread-safe. */
#ifndef SKP_COMMON_LOG_H
#define SKP_COMMON_LOG_H

#include <stdarg.h>

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

void skpx_log(enum skpx_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void skpx_vlog(enum skpx_log_level level, const char *fmt, va_list ap);

#define SKPX_ERROR(...) skpx_log(SKPX_LOG_ERROR, __VA_ARGS__)
#define SKPX_WARN(...) skpx_log(SKPX_LOG_WARN, __VA_ARGS__)
#define SKPX_INFO(...) skpx_log(SKPX_LOG_INFO, __VA_ARGS__)
#define SKPX_DEBUG(...)                                                                            \
    do {                                                                                           \
        if (skpx_log_enabled(SKPX_LOG_DEBUG))                                                      \
            skpx_log(SKPX_LOG_DEBUG, __VA_ARGS__);                                                 \
    } while (0)

#endif
