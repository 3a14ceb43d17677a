/* http_static.c - serves the built web UI from the web root: `/` is index.html, other paths
 * map to files below the root (no dot-segments or hidden files, and the resolved path must
 * stay inside the root, so neither `..` nor a symlink can leave it). Unknown paths without a
 * file extension fall back to index.html (client-side routes of the single-page app). Without
 * a web root, `/` explains that the UI was not built. */
#include <event2/buffer.h>
#include <event2/http.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "server/http/http_int.h"

static const struct {
    const char *ext;
    const char *type;
} types[] = {
    {".html", "text/html; charset=utf-8"},
    {".js", "text/javascript; charset=utf-8"},
    {".mjs", "text/javascript; charset=utf-8"},
    {".css", "text/css; charset=utf-8"},
    {".json", "application/json"},
    {".map", "application/json"},
    {".svg", "image/svg+xml"},
    {".png", "image/png"},
    {".jpg", "image/jpeg"},
    {".jpeg", "image/jpeg"},
    {".gif", "image/gif"},
    {".ico", "image/x-icon"},
    {".webp", "image/webp"},
    {".woff", "font/woff"},
    {".woff2", "font/woff2"},
    {".ttf", "font/ttf"},
    {".txt", "text/plain; charset=utf-8"},
    {".wasm", "application/wasm"},
};

static const char *content_type(const char *path)
{
    const char *dot = strrchr(path, '.');
    const char *slash = strrchr(path, '/');
    if (dot && (!slash || dot > slash))
        for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
            if (strcasecmp(dot, types[i].ext) == 0)
                return types[i].type;
    return "application/octet-stream";
}

static const char not_built[] =
    "<!doctype html><html><head><meta charset=\"utf-8\"><title>skyprof</title></head><body>"
    "<h1>skyprof</h1><p>The web UI was not built or its folder was not found, so only the "
    "HTTP API is available (see <code>/api/v1/profile/tasks</code>, <code>/healthz</code>, "
    "<code>/metrics</code>).</p><p>Build the UI (the <code>web</code> target) or point "
    "<code>--web-root</code> / <code>SKYPROF_WEB_ROOT</code> at its <code>dist</code> "
    "folder.</p></body></html>\n";

/* Opens root/rel if it is a regular file inside root. Returns the fd or -1. */
static int open_inside(const char *root, const char *rel, off_t *size)
{
    char path[PATH_MAX], real[PATH_MAX], real_root[PATH_MAX];
    int n = snprintf(path, sizeof(path), "%s/%s", root, rel);
    if (n < 0 || (size_t)n >= sizeof(path))
        return -1;
    if (!realpath(root, real_root) || !realpath(path, real))
        return -1;
    size_t rl = strlen(real_root);
    if (strncmp(real, real_root, rl) != 0 || (real[rl] != '/' && real[rl] != '\0'))
        return -1;
    int fd = open(real, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return -1;
    }
    *size = st.st_size;
    return fd;
}

static void send_file(struct http_ctx *cx, int fd, off_t size, const char *rel)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(cx->req);
    evhttp_add_header(h, "Content-Type", content_type(rel));
    evhttp_add_header(h, "X-Content-Type-Options", "nosniff");
    evhttp_add_header(h, "Content-Security-Policy", HTTP_GUARD_CSP);
    evhttp_add_header(h, "Cache-Control",
                      strncmp(rel, "assets/", 7) == 0 ? "public, max-age=31536000, immutable"
                                                      : "no-cache");
    struct evbuffer *b = evbuffer_new();
    if (!b || evbuffer_add_file(b, fd, 0, size) != 0) { /* takes the fd on success */
        if (b)
            evbuffer_free(b);
        close(fd);
        http_reply_error(cx, 500, "cannot read file");
        return;
    }
    http_count(cx->api, 200);
    http_send_reply(cx->req, 200, "OK", b);
    evbuffer_free(b);
}

void http_static_serve(struct http_ctx *cx)
{
    bool is_root = cx->n_seg == 0 || (cx->n_seg == 1 && !strcmp(cx->seg[0], "index.html"));
    const char *root = cx->api->web_root;
    struct stat st;
    if (!root || stat(root, &st) != 0 || !S_ISDIR(st.st_mode)) {
        if (is_root)
            http_reply_bytes(cx, 200, "text/html; charset=utf-8", not_built, sizeof(not_built) - 1,
                             "Content-Security-Policy", HTTP_GUARD_CSP);
        else
            http_reply_error(cx, 404, "not found (the web UI is not installed)");
        return;
    }
    char rel[PATH_MAX];
    size_t k = 0;
    bool has_ext = false;
    for (size_t i = 0; i < cx->n_seg; i++) {
        const char *s = cx->seg[i];
        /* Dot-segments, hidden files and decoded separators never name a UI asset. */
        if (s[0] == '.' || strchr(s, '/') || strchr(s, '\\')) {
            http_reply_error(cx, 404, "not found");
            return;
        }
        size_t n = strlen(s);
        if (k + n + 2 >= sizeof(rel)) {
            http_reply_error(cx, 404, "not found");
            return;
        }
        if (k)
            rel[k++] = '/';
        memcpy(rel + k, s, n);
        k += n;
        has_ext = strchr(s, '.') != NULL;
    }
    rel[k] = '\0';
    if (k == 0)
        snprintf(rel, sizeof(rel), "index.html");
    off_t size = 0;
    int fd = open_inside(root, rel, &size);
    if (fd < 0 && !has_ext) {
        /* Client-side route of the single-page app. */
        snprintf(rel, sizeof(rel), "index.html");
        fd = open_inside(root, rel, &size);
    }
    if (fd < 0) {
        http_reply_error(cx, 404, "not found");
        return;
    }
    send_file(cx, fd, size, rel);
}
