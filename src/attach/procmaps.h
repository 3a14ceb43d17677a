/* procmaps.h - the mappings of a process (/proc/PID/maps): parsing and finding the CPython
 * interpreter image (libpython3.X.so or a python3.X executable). The parser is a pure function
 * over text (fuzzed: tests/fuzz/attach_maps). Single-threaded. */
#ifndef SKP_ATTACH_PROCMAPS_H
#define SKP_ATTACH_PROCMAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "skyprof/skp_err.h"

/* Longest path kept for a mapping (longer ones are dropped as candidates). */
#define ATTACH_MAP_PATH_MAX 512
/* Most mappings kept from one maps file (a large service has a few thousand). */
#define ATTACH_MAPS_MAX 16384
/* Largest /proc/PID/maps read (bytes). */
#define ATTACH_MAPS_TEXT_MAX (8u * 1024 * 1024)

struct attach_map {
    uintptr_t start, end;
    uint64_t offset;
    bool r, w, x;
    char path[ATTACH_MAP_PATH_MAX]; /* "" for anonymous mappings */
};

struct attach_maps {
    struct attach_map *maps; /* owned; n entries in address order */
    size_t n;
};

/* Parses maps text (len bytes, borrowed, need not be NUL-terminated) into *out (release with
 * attach_maps_cleanup). Malformed lines are skipped. Errors: SKP_ENOMEM, SKP_ETOOBIG (more than
 * ATTACH_MAPS_MAX lines). */
SKP_MUST_CHECK skp_err attach_maps_parse(const char *text, size_t len, struct attach_maps *out);
/* Reads and parses /proc/PID/maps. Errors: SKP_ENOTFOUND (no such process), SKP_EIO (other
 * errors, with errno's text in why), plus attach_maps_parse's. */
SKP_MUST_CHECK skp_err attach_maps_read(pid_t pid, struct attach_maps *out, char *why,
                                        size_t why_cap);
void attach_maps_cleanup(struct attach_maps *m);

/* What a path's file name says about CPython: 0 = not CPython, 1 = a python3.X executable,
 * 2 = libpython3.X.so. Sets *minor to X when the name has it (else 0). */
int attach_maps_python_kind(const char *path, unsigned *minor);

/* Lowest start address of the mappings of `path` (the image's first page), 0 when none. */
uintptr_t attach_maps_image_start(const struct attach_maps *m, const char *path);

/* True when [addr, addr+len) lies inside one readable mapping. */
bool attach_maps_readable(const struct attach_maps *m, uintptr_t addr, size_t len);

#endif
