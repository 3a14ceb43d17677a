/* alloc.h - the allocation wrappers every component uses.
 * They count live bytes (per process) so tests and benchmarks can report and bound memory,
 * and in test builds can fail the Nth allocation (skpx_alloc_fail_after). Thread-safe. */
#ifndef SKP_COMMON_ALLOC_H
#define SKP_COMMON_ALLOC_H

#include <stddef.h>
#include <stdint.h>

/* Same contracts as malloc/calloc/realloc/free; NULL on failure, free(NULL) is a no-op. */
void *skpx_malloc(size_t n);
void *skpx_calloc(size_t nmemb, size_t size);
void *skpx_realloc(void *p, size_t n);
void skpx_free(void *p);
/* Frees each pointer listed, in order (NULLs are skipped): the owned buffers of a destructor in one
 * statement. Every argument is read before the first one is freed. */
#define SKPX_FREE_ALL(...)                                                                         \
    skpx_free_all((void *[]){__VA_ARGS__}, sizeof((void *[]){__VA_ARGS__}) / sizeof(void *))
void skpx_free_all(void *const *ptrs, size_t n);
/* Copies a NUL-terminated string / `n` bytes + NUL. NULL on failure or NULL input. */
char *skpx_strdup(const char *s);
char *skpx_strndup(const char *s, size_t n);

/* Server and CLI only (never agent or extension): abort with a message on failure. */
void *skpx_xmalloc(size_t n);
void *skpx_xcalloc(size_t nmemb, size_t size);
void *skpx_xrealloc(void *p, size_t n);
char *skpx_xstrdup(const char *s);

/* Live bytes allocated through these wrappers. */
int64_t skpx_alloc_live_bytes(void);
/* Test hook: the allocation after `n` more succeed fails (n < 0 disables). */
void skpx_alloc_fail_after(long n);
/* Test hook: how many more allocations succeed before the armed failure (0: it fired, or fires
 * next; -1: none armed). A run that ends with a positive value never reached its failure. */
long skpx_alloc_fail_remaining(void);

#endif
