/* pytasks.c - asyncio tasks and their await chains of another process (pytasks.h).
 *
 * Design. Finding the tasks costs a few dict lookups (sys.modules, two module dicts, the
 * WeakSet's attributes) and one read of the set's table; each task then costs one read of the
 * Task object, one of its name, and per coroutine of its chain one read of the coroutine's head
 * with its frame header plus one of the awaited object's slot. Types are recognised by name
 * (tp_name, read once per type object and remembered for the call): "coroutine" and
 * "generator" continue a chain, "_asyncio.FutureIter" ends it on its future, anything else ends
 * it on that object. The target keeps running: a task that finished or moved while being read
 * fails a check and is counted as torn, never shown half-read. */
#include "attach/pytasks.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "attach/pydict.h"
#include "attach/pyreader_int.h"
#include "common/rawload.h"
#include "common/alloc.h"

/* Distinct type objects remembered per call (their names). */
#define TYPE_CACHE 16
/* Most weak references read from the task set (dead ones included). */
#define TASK_REFS_MAX (ATTACH_MAX_TASKS * 4)

enum kind { KIND_OTHER, KIND_CORO, KIND_FUTITER, KIND_TASK, KIND_FUTURE };

struct type_entry {
    uintptr_t type;
    enum kind kind;
    char name[ATTACH_TYPE_NAME_MAX];
};

struct ctx {
    struct attach_target *t;
    struct attach_pyobjs o;
    const struct attach_pytask_layout *tl;
    struct type_entry types[TYPE_CACHE];
    size_t n_types;
    /* ready vs waiting (pytasks.h), found on first use in this call: asyncio.sleep's code
     * object and its local `h`'s slot (-1: not found), TimerHandle's type and `_when` offset */
    uintptr_t sleep_code;
    int sleep_h;
    uintptr_t timer_type;
    size_t timer_when;
    double now_s; /* CLOCK_MONOTONIC when the tasks are read (the loop's clock) */
};

/* The kind of the object at `obj` (by its type's name, or a base's for Task subclasses), and
 * that name into name_out when given. KIND_OTHER with an empty name when unreadable. */
static enum kind kind_of(struct ctx *c, uintptr_t obj, const char **name_out)
{
    static const char *const unknown = "";
    if (name_out)
        *name_out = unknown;
    uintptr_t type = 0;
    if (!skpx_plausible_ptr(obj) ||
        !attach_remote_read(&c->t->mem, obj + c->o.l->obj_type, &type, sizeof(type)) ||
        !skpx_plausible_ptr(type))
        return KIND_OTHER;
    for (size_t i = 0; i < c->n_types; i++) {
        if (c->types[i].type == type) {
            if (name_out)
                *name_out = c->types[i].name;
            return c->types[i].kind;
        }
    }
    struct type_entry e = {.type = type, .kind = KIND_OTHER};
    if (!attach_pytype_name(&c->o, type, e.name, sizeof(e.name)))
        return KIND_OTHER;
    if (strcmp(e.name, "coroutine") == 0 || strcmp(e.name, "generator") == 0)
        e.kind = KIND_CORO;
    else if (strcmp(e.name, "_asyncio.FutureIter") == 0)
        e.kind = KIND_FUTITER;
    else if (attach_pyobj_is_a(&c->o, obj, "_asyncio.Task"))
        e.kind = KIND_TASK;
    else if (attach_pyobj_is_a(&c->o, obj, "_asyncio.Future"))
        e.kind = KIND_FUTURE;
    if (c->n_types < TYPE_CACHE) {
        c->types[c->n_types] = e;
        if (name_out)
            *name_out = c->types[c->n_types].name;
        c->n_types++;
    } else if (name_out) {
        *name_out = e.kind == KIND_TASK ? "_asyncio.Task" : unknown;
    }
    return e.kind;
}

/* The Task's name (a str, or an int n meaning "Task-n") into buf. */
static bool task_name(struct ctx *c, const uint8_t *task, char *buf, size_t cap)
{
    uintptr_t name = 0;
    memcpy(&name, task + c->tl->task_name, sizeof(name));
    char *s = attach__read_str(c->t, name, cap - 1);
    if (s) {
        snprintf(buf, cap, "%s", s);
        skpx_free(s);
        return true;
    }
    uint64_t n = 0;
    if (attach_pylong_value(&c->o, name, &n)) {
        snprintf(buf, cap, "Task-%llu", (unsigned long long)n);
        return true;
    }
    return false;
}

/* Copies the Task at `addr`; false when it does not read or is not a Task. */
static bool read_task(struct ctx *c, uintptr_t addr, uint8_t *task)
{
    return c->tl->task_copy <= ATTACH_COPY_MAX && kind_of(c, addr, NULL) == KIND_TASK &&
           attach_remote_read(&c->t->mem, addr, task, c->tl->task_copy);
}

/* What the chain ends on: a future (through its iterator), a task, or another object. */
static void describe_awaited(struct ctx *c, uintptr_t obj, char *buf, size_t cap)
{
    const char *name = NULL;
    enum kind k = kind_of(c, obj, &name);
    if (k == KIND_FUTITER) {
        uintptr_t fut = 0;
        if (!attach_remote_read(&c->t->mem, obj + c->tl->futiter_future, &fut, sizeof(fut)) ||
            !skpx_plausible_ptr(fut)) {
            snprintf(buf, cap, "%s", name);
            return;
        }
        obj = fut;
        k = kind_of(c, obj, &name);
    }
    uint8_t task[ATTACH_COPY_MAX];
    char tname[ATTACH_TASK_NAME_MAX];
    if (k == KIND_TASK && read_task(c, obj, task) && task_name(c, task, tname, sizeof(tname))) {
        snprintf(buf, cap, "Task %s", tname);
        return;
    }
    snprintf(buf, cap, "%s", name);
}

/* True when the C future or task at `fut` is done (its state is not PENDING). */
static bool future_done(struct ctx *c, uintptr_t fut)
{
    enum kind k = kind_of(c, fut, NULL);
    int state = 0;
    return (k == KIND_TASK || k == KIND_FUTURE) &&
           attach_remote_read(&c->t->mem, fut + c->tl->task_state, &state, sizeof(state)) &&
           state != c->tl->fut_state_pending;
}

/* The slot of the local `h` in frames of the code object `code` (asyncio.sleep's), or -1. */
static int sleep_h_slot(struct ctx *c, uintptr_t code)
{
    if (code == c->sleep_code)
        return c->sleep_h;
    c->sleep_code = code;
    c->sleep_h = -1;
    uintptr_t names = 0;
    int64_t n = 0;
    uintptr_t items[32];
    if (!attach_remote_read(&c->t->mem, code + c->tl->co_localsplusnames, &names, sizeof(names)) ||
        !skpx_plausible_ptr(names) ||
        !attach_remote_read(&c->t->mem, names + c->o.l->var_size, &n, sizeof(n)) || n <= 0 ||
        n > 32 ||
        !attach_remote_read(&c->t->mem, names + c->tl->tuple_items, items,
                            (size_t)n * sizeof(uintptr_t)))
        return -1;
    for (int64_t i = 0; i < n; i++) {
        char buf[4];
        if (attach_pystr_ascii(&c->o, items[i], buf, sizeof(buf)) && strcmp(buf, "h") == 0) {
            c->sleep_h = (int)i;
            break;
        }
    }
    return c->sleep_h;
}

/* The deadline (TimerHandle._when, in the loop's clock) of the timer at `h` into *when. The
 * `_when` slot's offset comes from the class's member descriptor (read once per call). */
static bool timer_deadline(struct ctx *c, uintptr_t h, double *when)
{
    uintptr_t type = 0;
    if (!skpx_plausible_ptr(h) ||
        !attach_remote_read(&c->t->mem, h + c->o.l->obj_type, &type, sizeof(type)) ||
        !skpx_plausible_ptr(type))
        return false;
    if (type != c->timer_type) {
        char name[ATTACH_TYPE_NAME_MAX];
        const char *dname = NULL;
        uintptr_t dict = 0, descr = 0, def = 0;
        int64_t off = 0;
        if (!attach_pytype_name(&c->o, type, name, sizeof(name)) ||
            strcmp(name, "TimerHandle") != 0 ||
            !attach_remote_read(&c->t->mem, type + c->tl->tp_dict, &dict, sizeof(dict)) ||
            attach_pydict_get(&c->o, dict, "_when", &descr) != SKP_OK)
            return false;
        (void)kind_of(c, descr, &dname);
        if (strcmp(dname, "member_descriptor") != 0 ||
            !attach_remote_read(&c->t->mem, descr + c->tl->memberdescr_member, &def, sizeof(def)) ||
            !skpx_plausible_ptr(def) ||
            !attach_remote_read(&c->t->mem, def + c->tl->memberdef_offset, &off, sizeof(off)) ||
            off < 16 || off > 4096 || (off & 7) != 0)
            return false;
        c->timer_type = type;
        c->timer_when = (size_t)off;
    }
    uintptr_t f = 0;
    const char *fname = NULL;
    if (!attach_remote_read(&c->t->mem, h + c->timer_when, &f, sizeof(f)))
        return false;
    kind_of(c, f, &fname);
    return strcmp(fname, "float") == 0 &&
           attach_remote_read(&c->t->mem, f + c->tl->float_value, when, sizeof(*when));
}

/* Does the frame belong to asyncio.sleep (qualified name "sleep" in asyncio/tasks.py)? */
static bool is_asyncio_sleep(const struct attach_frame *f)
{
    static const char suffix[] = "/asyncio/tasks.py";
    size_t n = strlen(f->file);
    return strcmp(f->name, "sleep") == 0 && n >= sizeof(suffix) - 1 &&
           strcmp(f->file + n - (sizeof(suffix) - 1), suffix) == 0;
}

/* The rule of pytasks.h, for a task that is not running whose chain has been read: `inner` is
 * the innermost suspended coroutine (0: none), its frame `inner_frame`, code `inner_code`. */
static bool task_ready(struct ctx *c, const uint8_t *task, const struct attach_task *at,
                       uintptr_t inner, uintptr_t inner_code,
                       const struct attach_frame *inner_frame)
{
    const struct attach_pytask_layout *tl = c->tl;
    if (at->not_started)
        return true; /* its first step is queued */
    uintptr_t waiter = 0;
    memcpy(&waiter, task + tl->task_fut_waiter, sizeof(waiter));
    if (!waiter)
        return true; /* a bare yield: the step is queued (call_soon) */
    if (future_done(c, waiter))
        return true; /* the future's callbacks queued the wakeup */
    if (!inner || !inner_frame || !is_asyncio_sleep(inner_frame))
        return false;
    int slot = sleep_h_slot(c, inner_code);
    uintptr_t h = 0;
    double when = 0;
    return slot >= 0 &&
           attach_remote_read(&c->t->mem,
                              inner + tl->gen_iframe + tl->fr_localsplus +
                                  (size_t)slot * sizeof(uintptr_t),
                              &h, sizeof(h)) &&
           timer_deadline(c, h, &when) && c->now_s >= when;
}

/* The chain of the task whose copy is `task` into out->frames (outermost first while walking,
 * reversed at the end so it reads innermost first like a thread's stack). False when torn. */
static bool task_chain(struct ctx *c, const uint8_t *task, struct attach_tasks *out,
                       struct attach_task *at)
{
    const struct attach_pytask_layout *tl = c->tl;
    const struct attach_pylayout *l = &c->t->layout;
    uintptr_t cur = 0;
    memcpy(&cur, task + tl->task_coro, sizeof(cur));
    size_t first = out->n_frames;
    size_t head_len = tl->gen_iframe + l->fr_copy;
    uint8_t g[ATTACH_COPY_MAX * 2];
    if (head_len > sizeof(g) || tl->fr_stacktop + sizeof(int) > l->fr_copy)
        return false;
    at->first_frame = first;
    uintptr_t inner = 0; /* the innermost suspended coroutine, its code and frame */
    uintptr_t inner_code = 0;
    size_t inner_frame = SIZE_MAX;
    for (size_t depth = 0;; depth++) {
        if (kind_of(c, cur, NULL) != KIND_CORO) {
            if (depth == 0)
                return false; /* a task's coroutine is one */
            describe_awaited(c, cur, at->awaiting, sizeof(at->awaiting));
            break;
        }
        if (depth >= ATTACH_TASK_DEPTH || out->n_frames >= ATTACH_TASK_FRAMES_MAX) {
            at->truncated = true;
            break;
        }
        if (!attach_remote_read(&c->t->mem, cur, g, head_len))
            return false;
        int state = (int)(int8_t)g[tl->gen_frame_state];
        const uint8_t *fr = g + tl->gen_iframe;
        uintptr_t code = 0;
        uintptr_t instr = 0;
        memcpy(&code, fr + l->fr_code, sizeof(code));
        memcpy(&instr, fr + l->fr_instr, sizeof(instr));
        if (state != tl->gen_state_suspended && state != tl->gen_state_executing &&
            state != tl->gen_state_created)
            return false; /* finished meanwhile */
        if (!attach__code_frame(c->t, code, instr, &out->frames[out->n_frames]))
            return false;
        out->n_frames++;
        if (state == tl->gen_state_executing) {
            at->running = true; /* its inner frames are on its thread's stack */
            break;
        }
        if (state == tl->gen_state_created) {
            at->not_started = depth == 0;
            break;
        }
        inner = cur;
        inner_code = code;
        inner_frame = out->n_frames - 1;
        int top = 0;
        memcpy(&top, fr + tl->fr_stacktop, sizeof(top));
        uintptr_t awaited = 0;
        if (top <= 0 || top > (1 << 20) ||
            !attach_remote_read(&c->t->mem,
                                cur + tl->gen_iframe + tl->fr_localsplus +
                                    (size_t)(top - 1) * sizeof(uintptr_t),
                                &awaited, sizeof(awaited)) ||
            !skpx_plausible_ptr(awaited) || awaited == cur)
            break; /* suspended on a plain yield: awaits nothing we can name */
        cur = awaited;
    }
    at->n_frames = out->n_frames - first;
    if (!at->running)
        at->ready = task_ready(c, task, at, inner, inner_code,
                               inner_frame != SIZE_MAX ? &out->frames[inner_frame] : NULL);
    /* innermost first */
    for (size_t i = 0, j = at->n_frames; i + 1 < j; i++, j--) {
        struct attach_frame tmp = out->frames[first + i];
        out->frames[first + i] = out->frames[first + j - 1];
        out->frames[first + j - 1] = tmp;
    }
    return true;
}

/* Adds the tasks reachable from module `modname` (its _all_tasks WeakSet and _current_tasks
 * dict) to addrs[] (deduplicated). Sets *found when the module has a task set. */
static skp_err collect(struct ctx *c, uintptr_t modules, const char *modname, uintptr_t *addrs,
                       size_t *n_addrs, uint32_t *dropped, bool *found)
{
    uintptr_t mod = 0;
    skp_err err = attach_pydict_get(&c->o, modules, modname, &mod);
    if (err == SKP_ENOTFOUND)
        return SKP_OK;
    if (err)
        return err;
    uintptr_t md = 0;
    if (!attach_remote_read(&c->t->mem, mod + c->o.l->mod_dict, &md, sizeof(md)))
        return SKP_EINVAL;
    uintptr_t found_refs[TASK_REFS_MAX];
    size_t n_found = 0;
    uintptr_t ws = 0;
    err = attach_pydict_get(&c->o, md, "_all_tasks", &ws);
    if (!err) {
        uintptr_t data = 0;
        err = attach_pyobj_getattr(&c->o, ws, "data", &data);
        if (!err)
            err = attach_pyset_items(&c->o, data, found_refs, TASK_REFS_MAX, &n_found);
        if (err)
            return err;
        *found = true;
        /* the weak references' referents (None when the task died) */
        for (size_t i = 0; i < n_found; i++) {
            uintptr_t obj = 0;
            if (!attach_remote_read(&c->t->mem, found_refs[i] + c->o.l->wr_object, &obj,
                                    sizeof(obj)))
                obj = 0;
            found_refs[i] = obj;
        }
    } else if (err != SKP_ENOTFOUND) {
        return err;
    }
    uintptr_t cur = 0;
    if (attach_pydict_get(&c->o, md, "_current_tasks", &cur) == SKP_OK) {
        uintptr_t running[64];
        size_t n_running = 0;
        if (attach_pydict_items(&c->o, cur, NULL, running, 64, &n_running) == SKP_OK)
            for (size_t i = 0; i < n_running && n_found < TASK_REFS_MAX; i++)
                found_refs[n_found++] = running[i];
    }
    for (size_t i = 0; i < n_found; i++) {
        uintptr_t a = found_refs[i];
        if (!skpx_plausible_ptr(a))
            continue;
        bool dup = false;
        for (size_t k = 0; k < *n_addrs && !dup; k++)
            dup = addrs[k] == a;
        if (dup)
            continue;
        if (*n_addrs >= ATTACH_MAX_TASKS * 2) {
            (*dropped)++;
            continue;
        }
        addrs[(*n_addrs)++] = a;
    }
    return SKP_OK;
}

skp_err attach_target_tasks(struct attach_target *t, struct attach_tasks *out)
{
    out->supported = false;
    out->has_asyncio = false;
    out->n_tasks = 0;
    out->n_frames = 0;
    out->n_torn = 0;
    out->n_dropped = 0;
    if (t->layout.minor != 11)
        return SKP_OK;
    struct ctx *c = skpx_calloc(1, sizeof(*c));
    uintptr_t *addrs = skpx_malloc(ATTACH_MAX_TASKS * 2 * sizeof(*addrs));
    skp_err err = SKP_OK;
    if (!c || !addrs) {
        err = SKP_ENOMEM;
        goto out;
    }
    c->t = t;
    c->tl = attach_pytask_layout_py311();
    c->sleep_h = -1;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    c->now_s = (double)now.tv_sec + (double)now.tv_nsec / 1e9;
    c->o = (struct attach_pyobjs){&t->mem, attach_pyobj_layout_py311(), t->str_type};
    if (!c->tl || !c->o.l)
        goto out;
    out->supported = true;

    uintptr_t interp = 0;
    err = attach__main_interp(t, &interp);
    if (err)
        goto out;
    uintptr_t modules = 0;
    if (!skpx_plausible_ptr(interp) ||
        !attach_remote_read(&t->mem, interp + c->o.l->is_modules, &modules, sizeof(modules)) ||
        !skpx_plausible_ptr(modules)) {
        out->n_torn++;
        goto out;
    }
    size_t n_addrs = 0;
    /* the C module's set is the one its tasks register in; asyncio.tasks normally holds the
     * same object, and its own when asyncio runs without _asyncio */
    static const char *const mods[] = {"_asyncio", "asyncio.tasks"};
    for (size_t m = 0; m < 2; m++) {
        skp_err e =
            collect(c, modules, mods[m], addrs, &n_addrs, &out->n_dropped, &out->has_asyncio);
        if (e == SKP_ENOMEM) {
            err = e;
            goto out;
        }
        if (e)
            out->n_torn++; /* the module or its set moved while we read */
    }
    for (size_t i = 0; i < n_addrs; i++) {
        uint8_t task[ATTACH_COPY_MAX];
        if (!read_task(c, addrs[i], task))
            continue; /* a dead reference (None) or no C Task */
        int state = 0;
        memcpy(&state, task + c->tl->task_state, sizeof(state));
        if (state != c->tl->fut_state_pending)
            continue; /* done or cancelled: not listed */
        if (out->n_tasks >= ATTACH_MAX_TASKS) {
            out->n_dropped++;
            continue;
        }
        struct attach_task *at = &out->tasks[out->n_tasks];
        memset(at, 0, sizeof(*at));
        size_t mark = out->n_frames;
        if (!task_name(c, task, at->name, sizeof(at->name)) || !task_chain(c, task, out, at)) {
            out->n_frames = mark;
            out->n_torn++;
            continue;
        }
        out->n_tasks++;
    }
out:
    skpx_free(addrs);
    skpx_free(c);
    return err;
}
