/* graphql.c - skyprofd's schema (built once from schema.graphqls and the resolver tables), OAP's
 * ids, the worker decision and the counters /metrics shows. */
#include "server/graphql/graphql.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/log.h"
#include "server/graphql/gql_int.h"

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static struct gql_schema *g_schema;
static _Atomic uint64_t g_requests, g_refused[GQL_REFUSED_ANSWER + 1];
static _Atomic uint64_t g_max_answer;
static _Atomic int g_retention_days = -1;

skp_err graphql_schema_new(struct gql_schema **out, char *err, size_t cap)
{
    static const struct {
        const struct gql_resolver *v;
        const size_t *n;
    } tables[] = {
        {graphql_meta_resolvers, &graphql_n_meta_resolvers},
        {graphql_profile_resolvers, &graphql_n_profile_resolvers},
        {graphql_template_resolvers, &graphql_n_template_resolvers},
        {graphql_pprof_resolvers, &graphql_n_pprof_resolvers},
        {graphql_continuous_resolvers, &graphql_n_continuous_resolvers},
        {graphql_ebpf_resolvers, &graphql_n_ebpf_resolvers},
    };
    size_t n = 0;
    for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++)
        n += *tables[i].n;
    struct gql_resolver *all = skpx_calloc(n, sizeof(*all));
    *out = NULL;
    if (!all)
        return SKP_ENOMEM;
    n = 0;
    for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
        memcpy(all + n, tables[i].v, *tables[i].n * sizeof(*all));
        n += *tables[i].n;
    }
    skp_err rc =
        gql_schema_new(graphql_schema_text, strlen(graphql_schema_text), all, n, err, cap, out);
    skpx_free(all);
    return rc;
}

static void build_once(void)
{
    char err[256];
    if (graphql_schema_new(&g_schema, err, sizeof(err)) != SKP_OK)
        skpx_log(SKPX_LOG_ERROR, "graphql: the schema does not build: %s", err);
}

const struct gql_schema *graphql_schema(void)
{
    pthread_once(&g_once, build_once);
    return g_schema;
}

/* Fields whose resolvers read much; they run on the worker. */
static const char *const k_heavy[] = {"getSegmentsProfileAnalyze",
                                      "getProfileTaskSegments",
                                      "queryBasicTraces",
                                      "queryTrace",
                                      "queryPprofAnalyze",
                                      "queryAsyncProfilerAnalyze",
                                      "queryEBPFProfilingSchedules",
                                      "analysisEBPFProfilingResult"};

static bool sels_heavy(const struct gql_sel *s, int depth)
{
    for (; s && depth < 64; s = s->next) {
        if (s->kind == GQL_SEL_FIELD)
            for (size_t i = 0; i < sizeof(k_heavy) / sizeof(k_heavy[0]); i++)
                if (strcmp(s->name, k_heavy[i]) == 0)
                    return true;
        if (sels_heavy(s->sels, depth + 1))
            return true;
    }
    return false;
}

bool graphql_needs_worker(const struct gql_doc *d)
{
    for (const struct gql_op *o = d->ops; o; o = o->next)
        if (o->kind == GQL_OP_QUERY && sels_heavy(o->sels, 0))
            return true;
    for (const struct gql_frag *f = d->frags; f; f = f->next)
        if (sels_heavy(f->sels, 0))
            return true;
    return false;
}

skp_err graphql_execute(struct gql_doc *d, const char *op_name, const json_t *variables,
                        struct graphql_ctx *ctx, const struct gql_limits *l,
                        enum gql_refusal *refused, char **text, size_t *len)
{
    const struct gql_schema *s = graphql_schema();
    if (refused)
        *refused = GQL_REFUSED_NONE;
    if (s)
        return gql_execute_text(s, d, op_name, variables, ctx, l, refused, text, len);
    static const char k_none[] =
        "{\"errors\":[{\"message\":\"the GraphQL schema is not available (see the server "
        "log)\"}]}";
    *text = skpx_strdup(k_none);
    *len = sizeof(k_none) - 1;
    return *text ? SKP_OK : SKP_ENOMEM;
}

void graphql_count(enum gql_refusal r)
{
    atomic_fetch_add(&g_requests, 1);
    if (r > GQL_REFUSED_NONE && r <= GQL_REFUSED_ANSWER)
        atomic_fetch_add(&g_refused[r], 1);
}

void graphql_counters_get(struct graphql_counters *out)
{
    out->requests = atomic_load(&g_requests);
    out->refused_query_bytes = atomic_load(&g_refused[GQL_REFUSED_QUERY_BYTES]);
    out->refused_tokens = atomic_load(&g_refused[GQL_REFUSED_TOKENS]);
    out->refused_depth = atomic_load(&g_refused[GQL_REFUSED_DEPTH]);
    out->refused_fields = atomic_load(&g_refused[GQL_REFUSED_FIELDS]);
    out->refused_answer = atomic_load(&g_refused[GQL_REFUSED_ANSWER]);
}

size_t graphql_metrics_text(char *out, size_t cap)
{
    struct graphql_counters c;
    graphql_counters_get(&c);
    int n = snprintf(out, cap,
                     "# HELP skyprof_graphql_requests_total GraphQL requests answered.\n"
                     "# TYPE skyprof_graphql_requests_total counter\n"
                     "skyprof_graphql_requests_total %llu\n"
                     "# HELP skyprof_graphql_refused_total GraphQL requests stopped by a limit.\n"
                     "# TYPE skyprof_graphql_refused_total counter\n"
                     "skyprof_graphql_refused_total{limit=\"query_bytes\"} %llu\n"
                     "skyprof_graphql_refused_total{limit=\"tokens\"} %llu\n"
                     "skyprof_graphql_refused_total{limit=\"depth\"} %llu\n"
                     "skyprof_graphql_refused_total{limit=\"fields\"} %llu\n"
                     "skyprof_graphql_refused_total{limit=\"answer_bytes\"} %llu\n",
                     (unsigned long long)c.requests, (unsigned long long)c.refused_query_bytes,
                     (unsigned long long)c.refused_tokens, (unsigned long long)c.refused_depth,
                     (unsigned long long)c.refused_fields, (unsigned long long)c.refused_answer);
    if (n < 0)
        return 0;
    return (size_t)n < cap ? (size_t)n : (cap ? cap - 1 : 0);
}

void graphql_set_max_answer_bytes(uint64_t n)
{
    atomic_store(&g_max_answer, n);
}

void graphql_limits(struct gql_limits *l)
{
    gql_limits_default(l);
    uint64_t a = atomic_load(&g_max_answer);
    if (a)
        l->max_answer_bytes = (size_t)a;
}

void graphql_set_retention_days(int days)
{
    atomic_store(&g_retention_days, days);
}

int graphql_retention_days(void)
{
    int d = atomic_load(&g_retention_days);
    return d < 0 ? 3 : d;
}

/* ---- ids: standard base64 with padding, as OAP's IDManager writes them ---- */

static const char k_b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static bool b64_encode(const char *s, char *out, size_t cap, size_t *n_out)
{
    size_t n = strlen(s), o = 0;
    if ((n + 2) / 3 * 4 + 1 > cap)
        return false;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)(unsigned char)s[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)(unsigned char)s[i + 1] << 8;
        if (i + 2 < n)
            v |= (unsigned char)s[i + 2];
        out[o++] = k_b64[v >> 18];
        out[o++] = k_b64[(v >> 12) & 63];
        out[o++] = i + 1 < n ? k_b64[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? k_b64[v & 63] : '=';
    }
    out[o] = '\0';
    *n_out = o;
    return true;
}

static int b64_val(char c)
{
    const char *p = c ? strchr(k_b64, c) : NULL;
    return p ? (int)(p - k_b64) : -1;
}

/* Decodes n bytes of base64 (padding required, as written above); NULL if malformed or if the
 * text holds a NUL byte. */
static char *b64_decode(const char *s, size_t n)
{
    if (n == 0 || n % 4 || n / 4 * 3 > GRAPHQL_ID_MAX)
        return NULL;
    char *out = skpx_malloc(n / 4 * 3 + 1);
    size_t o = 0;
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i += 4) {
        int a = b64_val(s[i]), b = b64_val(s[i + 1]);
        bool pad2 = s[i + 2] == '=', pad3 = s[i + 3] == '=';
        int c = pad2 ? 0 : b64_val(s[i + 2]), d = pad3 ? 0 : b64_val(s[i + 3]);
        if (a < 0 || b < 0 || c < 0 || d < 0 || (pad2 && !pad3) || ((pad2 || pad3) && i + 4 != n))
            goto bad;
        uint32_t v = (uint32_t)a << 18 | (uint32_t)b << 12 | (uint32_t)c << 6 | (uint32_t)d;
        out[o++] = (char)(v >> 16);
        if (!pad2)
            out[o++] = (char)(v >> 8);
        if (!pad3)
            out[o++] = (char)v;
    }
    out[o] = '\0';
    if (strlen(out) != o)
        goto bad;
    return out;
bad:
    skpx_free(out);
    return NULL;
}

bool graphql_service_id(const char *name, char *out, size_t cap)
{
    size_t n;
    if (!b64_encode(name, out, cap, &n) || n + 3 > cap)
        return false;
    memcpy(out + n, ".1", 3);
    return true;
}

bool graphql_child_id(const char *service, const char *name, char *out, size_t cap)
{
    size_t n;
    if (!graphql_service_id(service, out, cap))
        return false;
    n = strlen(out);
    if (n + 2 > cap)
        return false;
    out[n++] = '_';
    size_t m;
    return b64_encode(name, out + n, cap - n, &m);
}

char *graphql_service_of(const char *id)
{
    size_t n = strlen(id);
    /* OAP's normal services end in ".1"; ".0" (unnormal) is accepted too */
    if (n < 2 || id[n - 2] != '.' || (id[n - 1] != '1' && id[n - 1] != '0'))
        return NULL;
    return b64_decode(id, n - 2);
}

bool graphql_split_child(const char *id, char **service, char **name)
{
    *service = *name = NULL;
    const char *us = strchr(id, '_');
    if (!us)
        return false;
    char *sid = skpx_strndup(id, (size_t)(us - id));
    *service = sid ? graphql_service_of(sid) : NULL;
    skpx_free(sid);
    *name = *service ? b64_decode(us + 1, strlen(us + 1)) : NULL;
    if (*service && *name)
        return true;
    skpx_free(*service);
    skpx_free(*name);
    *service = *name = NULL;
    return false;
}

skp_err graphql_read_failed(struct gql_call *c, skp_err err, const char *what)
{
    snprintf(c->error, sizeof(c->error), "%s could not be read: %s", what, skp_strerror(err));
    return err;
}

skp_err graphql_list_answer(struct gql_call *c, skp_err err, json_t *list, const char *what,
                            json_t **out)
{
    if (err) {
        json_decref(list);
        return what ? graphql_read_failed(c, err, what) : err;
    }
    *out = list;
    return SKP_OK;
}

bool graphql_writable(struct gql_call *c)
{
    const struct graphql_ctx *x = c->ctx;
    if (!x->can_write)
        snprintf(c->error, sizeof(c->error), "mutations run on the server's loop only");
    return x->can_write;
}

const char *graphql_arg_str(const struct gql_call *c, const char *name)
{
    return json_string_value(json_object_get(c->args, name));
}

skp_err graphql_oom_or(json_t **out)
{
    return *out ? SKP_OK : SKP_ENOMEM;
}
