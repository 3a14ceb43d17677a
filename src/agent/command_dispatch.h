/* command_dispatch.h - routes a backend Command to its executor by name, and the executor of
 * "ProfileTaskQuery" (parse the 9 args, hand the task to the task service).
 * Not thread-safe; used by the channel thread under the agent lock. */
#ifndef SKP_AGENT_COMMAND_DISPATCH_H
#define SKP_AGENT_COMMAND_DISPATCH_H

#include <stddef.h>

#include "agent/task_service.h"
#include "common/Command.pb-c.h"
#include "skyprof/skp_err.h"

#define SKP_PROFILE_TASK_COMMAND "ProfileTaskQuery"
#define SKP_COMMAND_EXECUTORS_MAX 8

/* Runs one command; writes a reason on failure. Errors are the executor's (SKP_EINVAL for a
 * malformed or rejected command). */
typedef skp_err (*skp__command_exec_cb)(void *ud, const Skywalking__V3__Command *cmd, char *reason,
                                        size_t cap);

struct skp__command_dispatch {
    struct {
        const char *name; /* static storage */
        skp__command_exec_cb fn;
        void *ud;
    } execs[SKP_COMMAND_EXECUTORS_MAX];
    int n;
};

void skp__command_dispatch_init(struct skp__command_dispatch *d);
/* Registers `fn` for command `name` (static string). Errors: SKP_EFULL. */
SKP_MUST_CHECK skp_err skp__command_dispatch_register(struct skp__command_dispatch *d,
                                                      const char *name, skp__command_exec_cb fn,
                                                      void *ud);
/* True if an executor exists for cmd->command. */
bool skp__command_dispatch_knows(const struct skp__command_dispatch *d, const char *name);
/* Runs the executor of cmd->command. Errors: SKP_ENOTFOUND (no executor), executor errors. */
SKP_MUST_CHECK skp_err skp__command_dispatch_run(const struct skp__command_dispatch *d,
                                                 const Skywalking__V3__Command *cmd, char *reason,
                                                 size_t cap);

/* Value of arg `key` (borrowed from cmd) or NULL. */
const char *skp__command_arg(const Skywalking__V3__Command *cmd, const char *key);

/* Parses a ProfileTaskQuery into *out. Every numeric arg must be present and decimal.
 * Errors: SKP_EINVAL (malformed; reason written; out->create_time_ms is still set when CreateTime
 * itself parsed, else -1). Pure. */
SKP_MUST_CHECK skp_err skp__profile_command_parse(const Skywalking__V3__Command *cmd,
                                                  struct skp__task *out, char *reason, size_t cap);

/* The ProfileTaskQuery executor; ud is a struct skp__task_service *. A malformed command still
 * advances the cursor when its CreateTime is readable. */
skp_err skp__profile_command_exec(void *ud, const Skywalking__V3__Command *cmd, char *reason,
                                  size_t cap);

#endif
