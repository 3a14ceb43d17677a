/* log.c - leveled logging. The sink triple is published with a mutex so a reader never sees
 * a sink paired with another sink's user data. */
#include "common/log.h"

#include <inttypes.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/escape.h"

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static skpx_log_sink_cb g_sink;
static void *g_ud;
static volatile int g_max = -1;

void skpx_log_set_sink(skpx_log_sink_cb sink, void *ud, enum skpx_log_level max_level)
{
    pthread_mutex_lock(&g_mu);
    g_sink = sink;
    g_ud = ud;
    g_max = sink ? (int)max_level : -1;
    pthread_mutex_unlock(&g_mu);
}

int skpx_log_enabled(enum skpx_log_level level)
{
    return (int)level <= g_max;
}

static const char *names[] = {"error", "warn", "info", "debug"};

const char *skpx_log_level_name(enum skpx_log_level level)
{
    return (unsigned)level < 4 ? names[level] : "?";
}

int skpx_log_level_parse(const char *s)
{
    for (int i = 0; s && i < 4; i++)
        if (strcasecmp(s, names[i]) == 0)
            return i;
    if (s && strcasecmp(s, "warning") == 0)
        return SKPX_LOG_WARN;
    return -1;
}

void skpx_log_sink_fd(void *ud, enum skpx_log_level level, const char *line)
{
    int fd = (int)(intptr_t)ud;
    char buf[SKPX_LOG_LINE_MAX + 64];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s %s\n",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     ts.tv_nsec / 1000000, skpx_log_level_name(level), line);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof(buf))
        n = sizeof(buf) - 1;
    ssize_t w = write(fd, buf, (size_t)n);
    (void)w;
}

void skpx_vlog(enum skpx_log_level level, const char *fmt, va_list ap)
{
    if (!skpx_log_enabled(level))
        return;
    char raw[SKPX_LOG_LINE_MAX];
    int n = vsnprintf(raw, sizeof(raw), fmt, ap);
    if (n < 0)
        return;
    /* Our format strings hold no control bytes, so escaping the whole line escapes exactly the
     * interpolated fields: a newline or an ANSI sequence in a task id or service name cannot
     * forge a line or recolour the reader's terminal. */
    char line[SKPX_LOG_LINE_MAX];
    skpx_escape_ctl(raw, strnlen(raw, sizeof(raw)), line, sizeof(line));
    pthread_mutex_lock(&g_mu);
    skpx_log_sink_cb sink = g_sink;
    void *ud = g_ud;
    pthread_mutex_unlock(&g_mu);
    if (sink)
        sink(ud, level, line);
}

void skpx_log(enum skpx_log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    skpx_vlog(level, fmt, ap);
    va_end(ap);
}

bool skpx_log_limit_allow(struct skpx_log_limit *lim, int64_t now_ms, uint64_t *suppressed)
{
    bool ok;
    pthread_mutex_lock(&g_mu);
    if (lim->last_ms && now_ms - lim->last_ms < SKPX_LOG_LIMIT_INTERVAL_MS) {
        lim->suppressed++;
        ok = false;
    } else {
        if (suppressed)
            *suppressed = lim->suppressed;
        lim->suppressed = 0;
        lim->last_ms = now_ms ? now_ms : 1;
        ok = true;
    }
    pthread_mutex_unlock(&g_mu);
    return ok;
}

bool skpx_log_limited(struct skpx_log_limit *lim, enum skpx_log_level level, const char *fmt, ...)
{
    uint64_t held = 0;
    if (!skpx_log_limit_allow(lim, skpx_mono_ms(), &held))
        return false;
    if (!skpx_log_enabled(level))
        return true;
    char line[SKPX_LOG_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (held)
        skpx_log(level, "%s (%" PRIu64 " more since the last report)", line, held);
    else
        skpx_log(level, "%s", line);
    return true;
}
