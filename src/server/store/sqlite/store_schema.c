/* store_schema.c - the SQLite schema as an ordered list of migration steps.
 * PRAGMA user_version holds the number of steps applied; each step runs in its own
 * transaction together with the user_version bump and a row in schema_migrations, so a
 * failed step leaves the database at the previous version. Steps are append-only: never edit
 * a released step, add a new one (docs/internals/store.md). */
#include "server/store/sqlite/store_int.h"

#include <stdio.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"

struct migration {
    const char *description;
    const char *sql;
};

static const struct migration k_migrations[] = {
    {
        "base schema: services, instances, tasks, logs, de-duplicated frames/stacks, snapshots, "
        "segments",
        "CREATE TABLE schema_migrations(version INTEGER PRIMARY KEY, applied_ms INTEGER NOT NULL,"
        "  description TEXT NOT NULL);"
        "CREATE TABLE services(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, layer TEXT,"
        "  last_seen INTEGER NOT NULL DEFAULT 0);"
        "CREATE TABLE instances(id INTEGER PRIMARY KEY, service_id INTEGER NOT NULL,"
        "  name TEXT NOT NULL, language TEXT, properties TEXT NOT NULL DEFAULT '{}',"
        "  last_seen INTEGER NOT NULL DEFAULT 0, UNIQUE(service_id, name));"
        "CREATE TABLE tasks(id TEXT PRIMARY KEY, service TEXT NOT NULL, endpoint TEXT NOT NULL,"
        "  start_time INTEGER NOT NULL, duration_min INTEGER NOT NULL,"
        "  min_duration_threshold INTEGER NOT NULL, dump_period INTEGER NOT NULL,"
        "  max_sampling_count INTEGER NOT NULL, create_time INTEGER NOT NULL);"
        "CREATE INDEX tasks_by_service_start ON tasks(service, start_time);"
        "CREATE INDEX tasks_by_service_create ON tasks(service, create_time);"
        "CREATE TABLE task_logs(task_id TEXT NOT NULL, instance TEXT NOT NULL,"
        "  op INTEGER NOT NULL, time INTEGER NOT NULL, service TEXT,"
        "  PRIMARY KEY(task_id, instance, op, time)) WITHOUT ROWID;"
        /* AUTOINCREMENT: ids of purged frames/stacks/segments are never reused, so ids cached
         * in memory (and handed to the analyzer) never name a different row later. */
        "CREATE TABLE frames(id INTEGER PRIMARY KEY AUTOINCREMENT, sig TEXT NOT NULL UNIQUE);"
        "CREATE TABLE stacks(id INTEGER PRIMARY KEY AUTOINCREMENT, hash INTEGER NOT NULL,"
        "  frames BLOB NOT NULL);"
        "CREATE INDEX stacks_by_hash ON stacks(hash);"
        "CREATE TABLE segids(id INTEGER PRIMARY KEY AUTOINCREMENT,"
        "  segment_id TEXT NOT NULL UNIQUE, first_ms INTEGER NOT NULL);"
        "CREATE TABLE task_keys(id INTEGER PRIMARY KEY AUTOINCREMENT,"
        "  task_id TEXT NOT NULL UNIQUE);"
        "CREATE TABLE task_segments(task INTEGER NOT NULL, seg INTEGER NOT NULL,"
        "  PRIMARY KEY(task, seg)) WITHOUT ROWID;"
        "CREATE TABLE snapshots(seg INTEGER NOT NULL, seq INTEGER NOT NULL,"
        "  task INTEGER NOT NULL, time INTEGER NOT NULL, stack INTEGER NOT NULL,"
        "  PRIMARY KEY(seg, seq, task)) WITHOUT ROWID;"
        "CREATE TABLE segments(seg INTEGER PRIMARY KEY, trace_id TEXT NOT NULL, service TEXT,"
        "  instance TEXT, endpoint TEXT, start_ms INTEGER NOT NULL, end_ms INTEGER NOT NULL,"
        "  received_ms INTEGER NOT NULL, spans TEXT NOT NULL);",
    },
    {
        "retention and trace lookups: indexes on segment first-seen/end time, log time, trace id",
        "CREATE INDEX segids_by_first ON segids(first_ms);"
        "CREATE INDEX segments_by_end ON segments(end_ms);"
        "CREATE INDEX segments_by_trace ON segments(trace_id);"
        "CREATE INDEX task_logs_by_time ON task_logs(time);",
    },
    {
        "process profiling tasks (pprof, async-profiler): tasks, their instances, logs, files",
        "CREATE TABLE proc_tasks(id TEXT PRIMARY KEY, kind TEXT NOT NULL, service TEXT NOT NULL,"
        "  all_live INTEGER NOT NULL, events TEXT NOT NULL, duration_s INTEGER NOT NULL,"
        "  dump_period INTEGER NOT NULL, sampling_hz INTEGER NOT NULL, exec_args TEXT,"
        "  create_time INTEGER NOT NULL);"
        "CREATE INDEX proc_tasks_by_service ON proc_tasks(kind, service, create_time);"
        "CREATE INDEX proc_tasks_by_create ON proc_tasks(create_time);"
        "CREATE TABLE proc_task_instances(task_id TEXT NOT NULL, instance TEXT NOT NULL,"
        "  PRIMARY KEY(task_id, instance)) WITHOUT ROWID;"
        "CREATE TABLE proc_task_logs(id INTEGER PRIMARY KEY, task_id TEXT NOT NULL,"
        "  instance TEXT NOT NULL, op TEXT NOT NULL, time INTEGER NOT NULL, message TEXT);"
        "CREATE INDEX proc_task_logs_by_task ON proc_task_logs(task_id, time);"
        "CREATE TABLE proc_files(id INTEGER PRIMARY KEY AUTOINCREMENT, task_id TEXT NOT NULL,"
        "  instance TEXT NOT NULL, time INTEGER NOT NULL, size INTEGER NOT NULL,"
        "  data BLOB NOT NULL);"
        "CREATE INDEX proc_files_by_task ON proc_files(task_id);",
    },
    {
        "endpoint statistics: per-minute request count, errors and latency histogram",
        "CREATE TABLE endpoint_minutes(service TEXT NOT NULL, endpoint TEXT NOT NULL,"
        "  instance TEXT NOT NULL, minute_ms INTEGER NOT NULL, writer INTEGER NOT NULL,"
        "  count INTEGER NOT NULL, errors INTEGER NOT NULL, hist BLOB NOT NULL,"
        "  PRIMARY KEY(service, endpoint, instance, minute_ms, writer)) WITHOUT ROWID;"
        "CREATE INDEX endpoint_minutes_by_minute ON endpoint_minutes(minute_ms);",
    },
    {
        "continuous profiling: policies per service, triggers and their causes",
        "CREATE TABLE continuous_policies(service TEXT PRIMARY KEY, uuid TEXT NOT NULL,"
        "  json TEXT NOT NULL, updated_ms INTEGER NOT NULL);"
        "CREATE TABLE continuous_triggers(id INTEGER PRIMARY KEY AUTOINCREMENT,"
        "  service TEXT NOT NULL, instance TEXT, process TEXT, time_ms INTEGER NOT NULL,"
        "  target TEXT NOT NULL, source TEXT NOT NULL, task_kind TEXT, task_id TEXT, note TEXT);"
        "CREATE INDEX continuous_triggers_by_service ON continuous_triggers(service, time_ms);"
        "CREATE INDEX continuous_triggers_by_task ON continuous_triggers(task_id);"
        "CREATE TABLE continuous_trigger_causes(trigger_id INTEGER NOT NULL, seq INTEGER NOT NULL,"
        "  type TEXT NOT NULL, uri TEXT, uri_is_regex INTEGER NOT NULL, threshold REAL NOT NULL,"
        "  current REAL NOT NULL, window_s INTEGER NOT NULL, hits INTEGER NOT NULL,"
        "  PRIMARY KEY(trigger_id, seq)) WITHOUT ROWID;",
    },
    {
        "eBPF processes and profile stacks (EBPFProcessService, collectProfilingData)",
        "CREATE TABLE ebpf_processes(id TEXT PRIMARY KEY, service TEXT NOT NULL,"
        "  instance TEXT NOT NULL, process_name TEXT NOT NULL, layer TEXT NOT NULL,"
        "  pid INTEGER NOT NULL, labels TEXT NOT NULL, properties TEXT NOT NULL,"
        "  agent_id TEXT NOT NULL, first_ms INTEGER NOT NULL, last_ping_ms INTEGER NOT NULL);"
        "CREATE INDEX ebpf_processes_by_service ON ebpf_processes(service, instance);"
        "CREATE TABLE ebpf_stacks(id INTEGER PRIMARY KEY, task_id TEXT NOT NULL,"
        "  process_id TEXT NOT NULL, kind INTEGER NOT NULL, time_ms INTEGER NOT NULL,"
        "  received_ms INTEGER NOT NULL, symbols TEXT NOT NULL, count INTEGER NOT NULL,"
        "  duration_ns INTEGER NOT NULL);"
        "CREATE INDEX ebpf_stacks_by_task ON ebpf_stacks(task_id, time_ms);"
        "CREATE INDEX ebpf_stacks_by_received ON ebpf_stacks(received_ms);",
    },
    {
        "hardening: task cancellation, one NOTIFIED/EXECUTION_FINISHED log per task and instance, "
        "retention of segments by the time they were received",
        "ALTER TABLE tasks ADD COLUMN cancelled_ms INTEGER;"
        "ALTER TABLE proc_tasks ADD COLUMN cancelled_ms INTEGER;"
        /* Keep the first log of each (task, instance, operation): agents polling with
         * lastCommandTime=0 wrote one NOTIFIED row per poll. */
        "DELETE FROM task_logs WHERE EXISTS (SELECT 1 FROM task_logs o WHERE "
        "  o.task_id = task_logs.task_id AND o.instance = task_logs.instance AND "
        "  o.op = task_logs.op AND o.time < task_logs.time);"
        "CREATE UNIQUE INDEX task_logs_once ON task_logs(task_id, instance, op);"
        "DELETE FROM proc_task_logs WHERE op = 'NOTIFIED' AND id NOT IN "
        "  (SELECT min(id) FROM proc_task_logs WHERE op = 'NOTIFIED' GROUP BY task_id, instance);"
        "CREATE UNIQUE INDEX proc_task_logs_notified_once ON proc_task_logs(task_id, instance) "
        "  WHERE op = 'NOTIFIED';"
        "CREATE INDEX segments_by_received ON segments(received_ms);",
    },
    {
        "keyset listing of a task's profiled segments: an index of (task, start, segment id) "
        "kept by triggers",
        /* One row per profiled (task, segment): a snapshot of sequence 0 arrived for it. Its
         * sort key is the SegmentObject's start when that is stored, else the first dump's time,
         * the order store_list_profiled_segments_page promises, so a page is one range seek. */
        "CREATE TABLE segment_listing(task INTEGER NOT NULL, start_ms INTEGER NOT NULL,"
        "  segment_id TEXT NOT NULL, seg INTEGER NOT NULL,"
        "  PRIMARY KEY(task, start_ms, segment_id)) WITHOUT ROWID;"
        "CREATE INDEX segment_listing_by_seg ON segment_listing(seg, task);"
        /* Per segment one seek of (seg, 0) in the snapshots' key, not a scan of every
         * snapshot (CROSS JOIN keeps that order). */
        "INSERT OR IGNORE INTO segment_listing(task, start_ms, segment_id, seg) "
        "  SELECT sn.task, coalesce(g.start_ms, sn.time), si.segment_id, sn.seg "
        "  FROM segids si CROSS JOIN snapshots sn ON sn.seg = si.id AND sn.seq = 0 "
        "  LEFT JOIN segments g ON g.seg = sn.seg;"
        "CREATE TRIGGER segment_listing_snap AFTER INSERT ON snapshots WHEN NEW.seq = 0 BEGIN"
        "  INSERT OR IGNORE INTO segment_listing(task, start_ms, segment_id, seg) "
        "  SELECT NEW.task, coalesce((SELECT start_ms FROM segments WHERE seg = NEW.seg),"
        "    NEW.time), si.segment_id, NEW.seg FROM segids si WHERE si.id = NEW.seg;"
        "END;"
        "CREATE TRIGGER segment_listing_unsnap AFTER DELETE ON snapshots WHEN OLD.seq = 0 BEGIN"
        "  DELETE FROM segment_listing WHERE seg = OLD.seg AND task = OLD.task;"
        "END;"
        "CREATE TRIGGER segment_listing_object AFTER INSERT ON segments BEGIN"
        "  UPDATE segment_listing SET start_ms = NEW.start_ms WHERE seg = NEW.seg;"
        "END;"
        /* Retention may drop a SegmentObject before the segment's snapshots: back to the first
         * dump's time. */
        "CREATE TRIGGER segment_listing_unobject AFTER DELETE ON segments BEGIN"
        "  UPDATE segment_listing SET start_ms = coalesce((SELECT time FROM snapshots sn"
        "    WHERE sn.seg = OLD.seg AND sn.seq = 0 AND sn.task = segment_listing.task),"
        "    start_ms) WHERE seg = OLD.seg;"
        "END;",
    },
    {
        "dashboards of SkyWalking's UI (GraphQL templates)",
        "CREATE TABLE ui_templates(id TEXT PRIMARY KEY, configuration TEXT NOT NULL,"
        "  disabled INTEGER NOT NULL DEFAULT 0, updated_ms INTEGER NOT NULL);",
    },
    {
        /* A goProfileReport sample of count N is one row of weight N instead of N rows
         * (issue 25). ADD COLUMN with a constant default rewrites nothing: rows stored before
         * read as weight 1. */
        "snapshot weight: how many samples a row stands for",
        "ALTER TABLE snapshots ADD COLUMN weight INTEGER NOT NULL DEFAULT 1;",
    },
    {
        /* An uploaded file is written a piece per transaction (issue 25: a 30 MiB row written
         * at once held the loop); its row is listed once complete. Files stored before keep
         * their bytes in proc_files.data and read as complete. */
        "process files in pieces",
        "CREATE TABLE proc_file_pieces(file_id INTEGER NOT NULL, seq INTEGER NOT NULL,"
        "  data BLOB NOT NULL, PRIMARY KEY(file_id, seq));"
        "ALTER TABLE proc_files ADD COLUMN complete INTEGER NOT NULL DEFAULT 1;"
        "CREATE TRIGGER proc_files_pieces AFTER DELETE ON proc_files BEGIN"
        "  DELETE FROM proc_file_pieces WHERE file_id = OLD.id;"
        "END;",
    },
};

int store_schema_version(void)
{
    return (int)SKP_ARRAY_LEN(k_migrations);
}

static skp_err read_user_version(struct sqlite_store *st, int *out)
{
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare(st, "PRAGMA user_version", &s);
    if (err)
        return err;
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW)
        *out = sqlite3_column_int(s, 0);
    else
        err = store__sqlerr(st, rc, "read user_version");
    sqlite3_finalize(s);
    return err;
}

static skp_err apply_step(struct sqlite_store *st, int version)
{
    const struct migration *m = &k_migrations[version - 1];
    skp_err err = store__begin(st);
    if (err)
        return err;
    err = store__exec(st, m->sql);
    if (err)
        goto out;
    sqlite3_stmt *s = NULL;
    err = store__prepare(st,
                         "INSERT INTO schema_migrations(version, applied_ms, description) "
                         "VALUES(?, ?, ?)",
                         &s);
    if (err)
        goto out;
    sqlite3_bind_int(s, 1, version);
    sqlite3_bind_int64(s, 2, skpx_now_ms());
    sqlite3_bind_text(s, 3, m->description, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE) {
        err = store__sqlerr(st, rc, "record migration");
        goto out;
    }
    char pragma[64];
    snprintf(pragma, sizeof(pragma), "PRAGMA user_version = %d", version);
    err = store__exec(st, pragma);
    if (err)
        goto out;
    err = store__commit(st);
    if (!err)
        SKPX_INFO("store: schema migrated to v%d (%s)", version, m->description);
    return err;
out:
    store__rollback(st);
    SKPX_ERROR("store: migration to schema v%d failed", version);
    return err;
}

skp_err store__migrate(struct sqlite_store *st, int target)
{
    int latest = store_schema_version();
    if (target <= 0 || target > latest)
        target = latest;
    int cur = 0;
    skp_err err = read_user_version(st, &cur);
    if (err)
        return err;
    if (cur > latest) {
        SKPX_ERROR("store: %s has schema v%d, newer than this build (v%d)", st->path, cur, latest);
        return SKP_EIO;
    }
    st->unweighted = (cur > target ? cur : target) < STORE_SCHEMA_WEIGHT;
    if (cur >= target)
        return SKP_OK;
    if (st->base.read_only) {
        SKPX_ERROR("store: %s has schema v%d, needs v%d, but is opened read-only", st->path, cur,
                   target);
        return SKP_EIO;
    }
    for (int v = cur + 1; v <= target; v++) {
        err = apply_step(st, v);
        if (err)
            return err;
    }
    return SKP_OK;
}
