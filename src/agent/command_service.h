/* command_service.h - receives the Commands of a backend response: de-duplicates by SerialNumber
 * (LRU of the last 64, like SkyWalking's CommandSerialNumberCache), logs and ignores unknown
 * names, runs known ones through the dispatcher. A failing command never stops the service.
 * Not thread-safe: the channel thread calls it under the agent lock. */
#ifndef SKP_AGENT_COMMAND_SERVICE_H
#define SKP_AGENT_COMMAND_SERVICE_H

#include <stdbool.h>
#include <stdint.h>

#include "agent/agent_limits.h"
#include "agent/command_dispatch.h"

struct skp__serial_lru {
    char ids[SKP_SERIAL_LRU][SKP_SERIAL_MAX];
    int n;    /* entries in use */
    int next; /* slot overwritten next (the oldest once full) */
};

void skp__serial_lru_init(struct skp__serial_lru *l);
bool skp__serial_lru_contains(const struct skp__serial_lru *l, const char *serial);
/* Adds serial (evicting the oldest when full). Serials longer than SKP_SERIAL_MAX-1 are ignored. */
void skp__serial_lru_add(struct skp__serial_lru *l, const char *serial);

struct skp__command_service {
    struct skp__serial_lru lru;
    const struct skp__command_dispatch *dispatch; /* borrowed */
    uint64_t n_received;
    uint64_t n_ignored; /* unknown name or malformed / rejected */
    uint64_t n_duplicate;
    uint64_t n_executed;
};

void skp__command_service_init(struct skp__command_service *cs,
                               const struct skp__command_dispatch *dispatch);
/* Handles every command of `cmds` (borrowed; NULL ok) in order. */
void skp__command_service_receive(struct skp__command_service *cs,
                                  const Skywalking__V3__Commands *cmds);

#endif
