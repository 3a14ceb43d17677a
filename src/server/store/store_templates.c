/* store_templates.c - the dispatch of store_templates.h through the store's ops table (like
 * store.c for the other features): a backend without the feature answers SKP_ENOTSUP. */
#include "server/store/store_templates.h"

#include <string.h>

#include "server/store/store_backend.h"

skp_err store_put_template(struct store *st, const char *id, const char *configuration,
                           int64_t now_ms)
{
    if (!id || !configuration || strlen(configuration) > STORE_TEMPLATE_MAX_BYTES)
        return SKP_EINVAL;
    if (st->read_only)
        return SKP_EIO;
    if (!st->ops->put_template)
        return SKP_ENOTSUP;
    return st->ops->put_template(st, id, configuration, now_ms);
}

skp_err store_disable_template(struct store *st, const char *id, int64_t now_ms)
{
    if (!id)
        return SKP_EINVAL;
    if (st->read_only)
        return SKP_EIO;
    if (!st->ops->disable_template)
        return SKP_ENOTSUP;
    return st->ops->disable_template(st, id, now_ms);
}

skp_err store_list_templates(struct store *st, store_template_cb cb, void *ud)
{
    if (!st->ops->list_templates)
        return SKP_ENOTSUP;
    return st->ops->list_templates(st, cb, ud);
}
