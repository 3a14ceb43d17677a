/* alloc.c - counting allocation wrappers. Each block carries a 16-byte header holding its
 * size so skpx_free can subtract it; the counters are relaxed atomics (statistics only). */
#include "common/alloc.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HDR 16

static _Atomic int64_t g_live;
static _Atomic long g_fail_after = -1;

static int should_fail(void)
{
    long n = atomic_load_explicit(&g_fail_after, memory_order_relaxed);
    if (n < 0)
        return 0;
    if (n == 0)
        return 1;
    atomic_fetch_sub_explicit(&g_fail_after, 1, memory_order_relaxed);
    return 0;
}

void *skpx_malloc(size_t n)
{
    if (n > SIZE_MAX - HDR || should_fail())
        return NULL;
    unsigned char *p = malloc(n + HDR);
    if (!p)
        return NULL;
    memcpy(p, &n, sizeof(n));
    atomic_fetch_add_explicit(&g_live, (int64_t)n, memory_order_relaxed);
    return p + HDR;
}

void *skpx_calloc(size_t nmemb, size_t size)
{
    if (size && nmemb > (SIZE_MAX - HDR) / size)
        return NULL;
    void *p = skpx_malloc(nmemb * size);
    if (p)
        memset(p, 0, nmemb * size);
    return p;
}

void *skpx_realloc(void *p, size_t n)
{
    if (!p)
        return skpx_malloc(n);
    if (n > SIZE_MAX - HDR || should_fail())
        return NULL;
    unsigned char *base = (unsigned char *)p - HDR;
    size_t old;
    memcpy(&old, base, sizeof(old));
    unsigned char *nb = realloc(base, n + HDR);
    if (!nb)
        return NULL;
    memcpy(nb, &n, sizeof(n));
    atomic_fetch_add_explicit(&g_live, (int64_t)n - (int64_t)old, memory_order_relaxed);
    return nb + HDR;
}

void skpx_free(void *p)
{
    if (!p)
        return;
    unsigned char *base = (unsigned char *)p - HDR;
    size_t n;
    memcpy(&n, base, sizeof(n));
    atomic_fetch_sub_explicit(&g_live, (int64_t)n, memory_order_relaxed);
    free(base);
}

void skpx_free_all(void *const *ptrs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        skpx_free(ptrs[i]);
}

char *skpx_strndup(const char *s, size_t n)
{
    if (!s)
        return NULL;
    char *d = skpx_malloc(n + 1);
    if (!d)
        return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

char *skpx_strdup(const char *s)
{
    return s ? skpx_strndup(s, strlen(s)) : NULL;
}

static void *oom(size_t n)
{
    fprintf(stderr, "skyprof: out of memory allocating %zu bytes\n", n);
    abort();
}

void *skpx_xmalloc(size_t n)
{
    void *p = skpx_malloc(n);
    return p ? p : oom(n);
}

void *skpx_xcalloc(size_t nmemb, size_t size)
{
    void *p = skpx_calloc(nmemb, size);
    return p ? p : oom(nmemb * size);
}

void *skpx_xrealloc(void *p, size_t n)
{
    void *q = skpx_realloc(p, n);
    return q ? q : oom(n);
}

char *skpx_xstrdup(const char *s)
{
    char *d = skpx_strdup(s);
    return (d || !s) ? d : oom(strlen(s));
}

int64_t skpx_alloc_live_bytes(void)
{
    return atomic_load_explicit(&g_live, memory_order_relaxed);
}

void skpx_alloc_fail_after(long n)
{
    atomic_store_explicit(&g_fail_after, n, memory_order_relaxed);
}

long skpx_alloc_fail_remaining(void)
{
    return atomic_load_explicit(&g_fail_after, memory_order_relaxed);
}
