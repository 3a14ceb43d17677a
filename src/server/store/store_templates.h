/* store_templates.h - storage of dashboards (SkyWalking UI's templates, served by GraphQL's
 * getAllTemplates/addTemplate/changeTemplate/disableTemplate, server/graphql): an id, the UI's
 * configuration as opaque JSON text, whether it is disabled, when it changed. Implemented in
 * store_templates.c for both backends (table ui_templates).
 *
 * Threading: like every store function, on the thread that owns `st`. */
#ifndef SKP_SERVER_STORE_TEMPLATES_H
#define SKP_SERVER_STORE_TEMPLATES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/store/store.h"
#include "skyprof/skp_err.h"

/* Longest configuration text stored (a dashboard of many widgets is a few tens of KiB). */
#define STORE_TEMPLATE_MAX_BYTES (1024u * 1024u)

/* A template row (strings borrowed from the store during the callback). */
struct store_template_row {
    const char *id;
    const char *configuration;
    bool disabled;
    int64_t updated_ms;
};
typedef skp_err (*store_template_cb)(void *ud, const struct store_template_row *r);

/* Inserts a template, or replaces the configuration of the one with the same id and enables
 * it again. Errors: SKP_EINVAL (NULL, or configuration over STORE_TEMPLATE_MAX_BYTES),
 * SKP_EIO, SKP_ENOMEM. */
SKP_MUST_CHECK skp_err store_put_template(struct store *st, const char *id,
                                          const char *configuration, int64_t now_ms);
/* Marks a template disabled. Errors: SKP_ENOTFOUND (no such id), SKP_EIO. */
SKP_MUST_CHECK skp_err store_disable_template(struct store *st, const char *id, int64_t now_ms);
/* Visits every template (disabled ones too) ordered by id. Errors: SKP_EIO, SKP_ENOMEM or the
 * callback's. */
SKP_MUST_CHECK skp_err store_list_templates(struct store *st, store_template_cb cb, void *ud);

#endif
