/* procmaps.c - /proc/PID/maps parsing. Lines look like
 *   7f2a1c000000-7f2a1c021000 rw-p 00000000 00:00 0          [heap]
 * i.e. start-end perms offset dev inode [path]; the path may contain spaces and ends the line. */
#include "attach/procmaps.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "attach/remote.h"
#include "common/alloc.h"
#include "common/grow.h"

static bool parse_hex(const char **p, const char *end, uint64_t *out)
{
    uint64_t v = 0;
    const char *s = *p;
    int digits = 0;
    while (s < end) {
        char c = *s;
        int d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            break;
        if (digits >= 16)
            return false;
        v = (v << 4) | (uint64_t)d;
        digits++;
        s++;
    }
    if (!digits)
        return false;
    *p = s;
    *out = v;
    return true;
}

static void skip_spaces(const char **p, const char *end)
{
    while (*p < end && (**p == ' ' || **p == '\t'))
        (*p)++;
}

static void skip_field(const char **p, const char *end)
{
    while (*p < end && **p != ' ' && **p != '\t')
        (*p)++;
}

/* One line [s, e) into *m; false when malformed. */
static bool parse_line(const char *s, const char *e, struct attach_map *m)
{
    uint64_t start, end, off;
    const char *p = s;
    if (!parse_hex(&p, e, &start) || p >= e || *p != '-')
        return false;
    p++;
    if (!parse_hex(&p, e, &end) || end < start)
        return false;
    skip_spaces(&p, e);
    if (e - p < 4)
        return false;
    m->r = p[0] == 'r';
    m->w = p[1] == 'w';
    m->x = p[2] == 'x';
    skip_field(&p, e);
    skip_spaces(&p, e);
    if (!parse_hex(&p, e, &off))
        return false;
    skip_spaces(&p, e);
    skip_field(&p, e); /* dev */
    skip_spaces(&p, e);
    skip_field(&p, e); /* inode */
    skip_spaces(&p, e);
    size_t plen = (size_t)(e - p);
    while (plen && (p[plen - 1] == ' ' || p[plen - 1] == '\r'))
        plen--;
    if (plen >= ATTACH_MAP_PATH_MAX)
        plen = 0; /* too long to be used as a candidate; keep the range */
    memcpy(m->path, p, plen);
    m->path[plen] = 0;
    m->start = (uintptr_t)start;
    m->end = (uintptr_t)end;
    m->offset = off;
    return true;
}

skp_err attach_maps_parse(const char *text, size_t len, struct attach_maps *out)
{
    out->maps = NULL;
    out->n = 0;
    size_t lines = 0;
    for (size_t i = 0; i < len; i++)
        if (text[i] == '\n')
            lines++;
    lines++;
    if (lines > ATTACH_MAPS_MAX + 1)
        return SKP_ETOOBIG;
    struct attach_map *maps = skpx_calloc(lines, sizeof(*maps));
    if (!maps)
        return SKP_ENOMEM;
    size_t n = 0;
    const char *p = text;
    const char *end = text + len;
    while (p < end && n < lines) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *e = nl ? nl : end;
        if (parse_line(p, e, &maps[n]))
            n++;
        p = nl ? nl + 1 : end;
    }
    out->maps = maps;
    out->n = n;
    return SKP_OK;
}

skp_err attach_maps_read(pid_t pid, struct attach_maps *out, char *why, size_t why_cap)
{
    out->maps = NULL;
    out->n = 0;
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        if (why && (e == EACCES || e == EPERM))
            attach_remote_eperm_hint(pid, why, why_cap); /* maps needs ptrace access too */
        else if (why)
            snprintf(why, why_cap, "cannot open %s: %s", path, strerror(e));
        return e == ENOENT ? SKP_ENOTFOUND : SKP_EIO;
    }
    size_t cap = 0;
    size_t len = 0;
    char *buf = NULL;
    skp_err err = SKP_OK;
    for (;;) {
        if (len == cap) {
            err = skpx_grow_capped(&buf, &cap, len + 1, 1, 64 * 1024, ATTACH_MAPS_TEXT_MAX);
            if (err)
                goto out;
        }
        ssize_t k = read(fd, buf + len, cap - len);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            if (why)
                snprintf(why, why_cap, "cannot read %s: %s", path, strerror(errno));
            err = SKP_EIO;
            goto out;
        }
        if (k == 0)
            break;
        len += (size_t)k;
    }
    err = attach_maps_parse(buf, len, out);
out:
    skpx_free(buf);
    close(fd);
    return err;
}

void attach_maps_cleanup(struct attach_maps *m)
{
    if (!m)
        return;
    skpx_free(m->maps);
    m->maps = NULL;
    m->n = 0;
}

/* Parses "3.X" at s: sets *minor, returns chars consumed (0 if none). */
static size_t parse_version(const char *s, unsigned *minor)
{
    if (s[0] != '3' || s[1] != '.' || s[2] < '0' || s[2] > '9')
        return 0;
    unsigned v = 0;
    size_t i = 2;
    while (s[i] >= '0' && s[i] <= '9' && v < 1000) {
        v = v * 10 + (unsigned)(s[i] - '0');
        i++;
    }
    *minor = v;
    return i;
}

int attach_maps_python_kind(const char *path, unsigned *minor)
{
    *minor = 0;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (strncmp(base, "libpython", 9) == 0) {
        size_t k = parse_version(base + 9, minor);
        if (!k)
            return 0;
        /* libpython3.11.so, libpython3.11.so.1.0, libpython3.13t.so (free-threaded) */
        const char *rest = base + 9 + k;
        while (*rest && *rest != '.')
            rest++;
        return strncmp(rest, ".so", 3) == 0 ? 2 : 0;
    }
    if (strncmp(base, "python", 6) == 0) {
        const char *rest = base + 6;
        if (*rest == 0)
            return 1;
        if (rest[0] == '3' && rest[1] == 0)
            return 1;
        size_t k = parse_version(rest, minor);
        if (!k)
            return 0;
        rest += k;
        /* python3.11, python3.11d, python3.13t; not python3.11-config */
        while (*rest == 'd' || *rest == 't' || *rest == 'm')
            rest++;
        return *rest == 0 ? 1 : 0;
    }
    return 0;
}

uintptr_t attach_maps_image_start(const struct attach_maps *m, const char *path)
{
    uintptr_t best = 0;
    for (size_t i = 0; i < m->n; i++) {
        if (strcmp(m->maps[i].path, path) != 0)
            continue;
        if (!best || m->maps[i].start < best)
            best = m->maps[i].start;
    }
    return best;
}

bool attach_maps_readable(const struct attach_maps *m, uintptr_t addr, size_t len)
{
    for (size_t i = 0; i < m->n; i++) {
        const struct attach_map *x = &m->maps[i];
        if (addr >= x->start && addr < x->end)
            return x->r && len <= x->end - addr;
    }
    return false;
}
