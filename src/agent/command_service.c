/* command_service.c - serial-number de-dup and routing of backend commands. */
#include "agent/command_service.h"

#include <string.h>

#include "common/log.h"

void skp__serial_lru_init(struct skp__serial_lru *l)
{
    memset(l, 0, sizeof(*l));
}

bool skp__serial_lru_contains(const struct skp__serial_lru *l, const char *serial)
{
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->ids[i], serial) == 0)
            return true;
    return false;
}

void skp__serial_lru_add(struct skp__serial_lru *l, const char *serial)
{
    size_t len = strlen(serial);
    if (len >= SKP_SERIAL_MAX || skp__serial_lru_contains(l, serial))
        return;
    memcpy(l->ids[l->next], serial, len + 1);
    l->next = (l->next + 1) % SKP_SERIAL_LRU;
    if (l->n < SKP_SERIAL_LRU)
        l->n++;
}

void skp__command_service_init(struct skp__command_service *cs,
                               const struct skp__command_dispatch *dispatch)
{
    memset(cs, 0, sizeof(*cs));
    skp__serial_lru_init(&cs->lru);
    cs->dispatch = dispatch;
}

static void receive_one(struct skp__command_service *cs, const Skywalking__V3__Command *cmd)
{
    char reason[160];
    cs->n_received++;
    if (!cmd->command || !skp__command_dispatch_knows(cs->dispatch, cmd->command)) {
        cs->n_ignored++;
        SKPX_WARN("skyprof: ignoring unsupported command %.80s", cmd->command ? cmd->command : "");
        return;
    }
    const char *serial = skp__command_arg(cmd, "SerialNumber");
    if (!serial || !*serial || strlen(serial) >= SKP_SERIAL_MAX) {
        cs->n_ignored++;
        SKPX_WARN("skyprof: ignoring command %.80s without a valid SerialNumber", cmd->command);
        return;
    }
    if (skp__serial_lru_contains(&cs->lru, serial)) {
        cs->n_duplicate++;
        return;
    }
    skp_err err = skp__command_dispatch_run(cs->dispatch, cmd, reason, sizeof(reason));
    skp__serial_lru_add(&cs->lru, serial);
    if (err) {
        cs->n_ignored++;
        SKPX_WARN("skyprof: command %.80s (serial %.80s) rejected: %s", cmd->command, serial,
                  reason);
        return;
    }
    cs->n_executed++;
}

void skp__command_service_receive(struct skp__command_service *cs,
                                  const Skywalking__V3__Commands *cmds)
{
    if (!cmds)
        return;
    for (size_t i = 0; i < cmds->n_commands; i++)
        if (cmds->commands[i])
            receive_one(cs, cmds->commands[i]);
}
