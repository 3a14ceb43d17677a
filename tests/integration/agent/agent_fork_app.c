/* agent_fork_app.c - helper of test_agent_e2e.py: starts an agent from the environment, waits
 * for its first heartbeat, forks, and reports what the child sees:
 *   agent_fork_app off      the child's agent stays off (inherited one freed, no restart)
 *   agent_fork_app restart  the child calls skyprof_agent_restart_after_fork()
 *   agent_fork_app auto     SKYPROF_RESTART_IN_CHILD=1 restarted it in the atfork handler
 * Lines printed ("key: value") are parsed by the test. Exit status 0 = every check passed. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "skyprof/skyprof.h"

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int count_threads(const char *name_filter, int *n_named)
{
    int n = 0;
    *n_named = 0;
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        n++;
        char path[300], comm[64] = "";
        snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (f) {
            if (fgets(comm, sizeof(comm), f))
                comm[strcspn(comm, "\n")] = '\0';
            fclose(f);
        }
        if (strcmp(comm, name_filter) == 0)
            (*n_named)++;
    }
    closedir(d);
    return n;
}

static int wait_heartbeats(skyprof_agent *a, uint64_t n, int timeout_ms)
{
    int64_t deadline = mono_ms() + timeout_ms;
    struct skyprof_stats st;
    do {
        skyprof_agent_get_stats(a, &st);
        if (st.heartbeats_sent >= n)
            return 0;
        usleep(20000);
    } while (mono_ms() < deadline);
    return -1;
}

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x)) {                                                                                \
            printf("check failed: %s (line %d)\n", #x, __LINE__);                                  \
            fflush(stdout);                                                                        \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

static int child(const char *mode, skyprof_agent *inherited, const char *parent_instance)
{
    int named = 0;
    int n = count_threads("skp-channel", &named);
    printf("child threads: %d channel: %d\n", n, named);
    fflush(stdout);
    skyprof_agent *a = NULL;
    if (strcmp(mode, "auto") == 0) {
        a = skyprof_agent_current();
        CHECK(a != NULL && a != inherited);
    } else {
        CHECK(n == 1 && named == 0); /* the parent's agent thread does not exist here */
        CHECK(skyprof_agent_current() == NULL);
        CHECK(skyprof_entry_begin("/x", NULL) == NULL); /* tracing is off in the child */
        CHECK(skyprof_agent_start(NULL, NULL, &a) == SKP_EINVAL);
        if (strcmp(mode, "off") == 0) {
            skyprof_agent_stop(inherited, 1000); /* releases memory only: no I/O, no threads */
            printf("child tracing: off\n");
            fflush(stdout);
            return 0;
        }
        CHECK(skyprof_agent_restart_after_fork(&a) == SKP_OK);
    }
    printf("child instance: %s\n", skyprof_agent_instance(a));
    fflush(stdout);
    CHECK(strcmp(skyprof_agent_instance(a), parent_instance) != 0);
    CHECK(wait_heartbeats(a, 1, 20000) == 0);
    n = count_threads("skp-channel", &named);
    printf("child heartbeat: ok threads: %d channel: %d\n", n, named);
    fflush(stdout);
    CHECK(named == 1);
    skyprof_span *s = skyprof_entry_begin("/child", NULL);
    CHECK(s != NULL);
    skyprof_entry_end(s);
    skyprof_agent_stop(a, 2000);
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "off";
    struct skyprof_config cfg;
    skyprof_config_init_defaults(&cfg);
    if (skyprof_config_from_env(&cfg) != SKP_OK)
        return 2;
    if (strcmp(mode, "auto") == 0)
        cfg.restart_in_child = true;
    skyprof_agent *a = NULL;
    if (skyprof_agent_start(&cfg, NULL, &a) != SKP_OK)
        return 3;
    char parent_instance[SKYPROF_STR_MAX];
    snprintf(parent_instance, sizeof(parent_instance), "%s", skyprof_agent_instance(a));
    printf("parent instance: %s\n", parent_instance);
    fflush(stdout);
    CHECK(wait_heartbeats(a, 1, 20000) == 0);
    pid_t pid = fork();
    if (pid == 0)
        _exit(child(mode, a, parent_instance));
    CHECK(pid > 0);
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    printf("child exit: %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : 128);
    /* the parent's agent is untouched: same connection keeps working, no reconnect */
    struct skyprof_stats st;
    skyprof_agent_get_stats(a, &st);
    uint64_t beats = st.heartbeats_sent;
    CHECK(wait_heartbeats(a, beats + 2, 20000) == 0);
    skyprof_agent_get_stats(a, &st);
    printf("parent heartbeats: %llu reconnects: %llu\n", (unsigned long long)st.heartbeats_sent,
           (unsigned long long)st.reconnects);
    CHECK(st.reconnects == 0);
    skyprof_span *s = skyprof_entry_begin("/parent", NULL);
    CHECK(s != NULL);
    skyprof_entry_end(s);
    skyprof_agent_stop(a, 2000);
    fflush(stdout);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
