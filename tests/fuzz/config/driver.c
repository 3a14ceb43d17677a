/* Fuzz target of skyprofd's settings parser (src/server/config.c, config_parse): the input is a
 * list of NUL-separated words; words starting with "SKYPROF_" become the environment, the
 * others argv[1..]. Every input must give a config or SKP_EINVAL with a one-line reason, never
 * a partly filled config (config_cleanup runs on both), and every accepted address must pass
 * config_addr_valid. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/config.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            __builtin_trap();                                                                      \
    } while (0)

#define MAX_WORDS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 16384)
        return 0;
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    char *argv[MAX_WORDS + 2] = {"skyprofd"};
    char *env[MAX_WORDS + 1] = {0};
    int argc = 1, envc = 0;
    for (size_t i = 0; i <= size && argc <= MAX_WORDS && envc < MAX_WORDS;) {
        char *w = text + i;
        size_t n = strlen(w);
        if (strncmp(w, "SKYPROF_", 8) == 0)
            env[envc++] = w;
        else
            argv[argc++] = w;
        i += n + 1;
    }
    argv[argc] = NULL;
    struct config cfg;
    char err[CONFIG_ERR_MAX];
    err[0] = '\0';
    skp_err e = config_parse(&cfg, argc, argv, env, err);
    if (e == SKP_OK) {
        CHECK(cfg.grpc_addr && config_addr_valid(cfg.grpc_addr));
        CHECK(cfg.http_addr && config_addr_valid(cfg.http_addr));
        CHECK(cfg.db_path);
        CHECK(cfg.retention_days >= 0 && cfg.retention_days <= CONFIG_MAX_RETENTION_DAYS);
        CHECK(cfg.pprof_max_bytes <= CONFIG_MAX_PPROF_BYTES);
        config_cleanup(&cfg);
    } else {
        CHECK(e == SKP_EINVAL || e == SKP_ENOMEM);
        CHECK(memchr(err, '\0', sizeof(err)) != NULL);
        if (e == SKP_EINVAL)
            CHECK(err[0] != '\0' && strchr(err, '\n') == NULL);
    }
    config_cleanup(&cfg); /* safe on a cleaned config */
    free(text);
    return 0;
}
