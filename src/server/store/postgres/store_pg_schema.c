/* store_pg_schema.c - the PostgreSQL schema as an ordered list of migration steps.
 * skp_schema_version holds one row per applied step. store_open migrates in ONE transaction
 * under pg_advisory_xact_lock, so collectors starting at once wait for each other and the
 * first one migrates: the others then find the steps applied. Steps are append-only: never edit
 * a released step, add one at the end (a feature's tables: its own step, see store_pg_int.h).
 *
 * Differences from the SQLite schema (store_schema.c), same rows:
 *   - long texts that must be unique (frame signatures, stack blobs, segment and task ids) are
 *     unique through an md5() expression index (a btree entry holds at most ~2.7 kB);
 *   - snapshots are partitioned by day of their segment's first receive time (first_ms, the
 *     retention clock), partitions snapshots_d<day> made on demand (store_pg_ingest.c);
 *   - instance rows are keyed by (service id, name) without an id of their own. */
#include "server/store/postgres/store_pg_int.h"

#include <inttypes.h>
#include <stdio.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"

/* The step that adds snapshots.weight (stores opened at an older schema_version_max write and
 * read without it). */
#define PG_SCHEMA_WEIGHT 5

/* The advisory lock key of migrations ("skpschem" as a number). */
#define PG_LOCK_SCHEMA 0x736b70736368656dLL

struct pg_migration {
    const char *description;
    const char *sql;
};

static const struct pg_migration k_steps[] = {
    {
        "base schema: services, instances, tasks, logs, de-duplicated frames/stacks, "
        "snapshots partitioned by day, segments",
        "CREATE TABLE services(id bigserial PRIMARY KEY, name text NOT NULL UNIQUE, layer text,"
        "  last_seen bigint NOT NULL DEFAULT 0);"
        "CREATE TABLE instances(service_id bigint NOT NULL, name text NOT NULL, language text,"
        "  properties text NOT NULL DEFAULT '{}', last_seen bigint NOT NULL DEFAULT 0,"
        "  PRIMARY KEY(service_id, name));"
        "CREATE TABLE tasks(id text PRIMARY KEY, service text NOT NULL, endpoint text NOT NULL,"
        "  start_time bigint NOT NULL, duration_min int NOT NULL,"
        "  min_duration_threshold int NOT NULL, dump_period int NOT NULL,"
        "  max_sampling_count int NOT NULL, create_time bigint NOT NULL, cancelled_ms bigint);"
        "CREATE INDEX tasks_by_service_start ON tasks(service, start_time);"
        "CREATE INDEX tasks_by_service_create ON tasks(service, create_time);"
        "CREATE TABLE task_logs(task_id text NOT NULL, instance text NOT NULL, op int NOT NULL,"
        "  time bigint NOT NULL, service text, PRIMARY KEY(task_id, instance, op));"
        "CREATE INDEX task_logs_by_time ON task_logs(time);"
        "CREATE TABLE frames(id bigserial PRIMARY KEY, sig text NOT NULL);"
        "CREATE UNIQUE INDEX frames_by_sig ON frames(md5(sig));"
        "CREATE TABLE stacks(id bigserial PRIMARY KEY, frames bytea NOT NULL);"
        "CREATE UNIQUE INDEX stacks_by_frames ON stacks(md5(frames));"
        "CREATE TABLE segids(id bigserial PRIMARY KEY, segment_id text NOT NULL,"
        "  first_ms bigint NOT NULL);"
        "CREATE UNIQUE INDEX segids_by_id ON segids(md5(segment_id));"
        "CREATE INDEX segids_by_first ON segids(first_ms);"
        "CREATE TABLE task_keys(id bigserial PRIMARY KEY, task_id text NOT NULL);"
        "CREATE UNIQUE INDEX task_keys_by_id ON task_keys(md5(task_id));"
        "CREATE TABLE task_segments(task bigint NOT NULL, seg bigint NOT NULL,"
        "  PRIMARY KEY(task, seg));"
        "CREATE INDEX task_segments_by_seg ON task_segments(seg);"
        "CREATE TABLE snapshots(seg bigint NOT NULL, seq int NOT NULL, task bigint NOT NULL,"
        "  time bigint NOT NULL, stack bigint NOT NULL, first_ms bigint NOT NULL,"
        "  PRIMARY KEY(seg, seq, task, first_ms)) PARTITION BY RANGE (first_ms);"
        "CREATE TABLE segments(seg bigint PRIMARY KEY, trace_id text NOT NULL, service text,"
        "  instance text, endpoint text, start_ms bigint NOT NULL, end_ms bigint NOT NULL,"
        "  received_ms bigint NOT NULL, spans text NOT NULL);"
        "CREATE INDEX segments_by_trace ON segments(trace_id);"
        "CREATE INDEX segments_by_received ON segments(received_ms);"
        "CREATE TABLE skp_purge_epoch(epoch bigint NOT NULL);"
        "INSERT INTO skp_purge_epoch VALUES(0);",
    },
    {
        /* Same rows as SQLite's steps 3-7 (store_schema.c); ids handed out by the database are
         * bigserial (collectors never hand out the same one); endpoint_minutes is unique on
         * md5() of its names (a btree entry holds ~2.7 kB; three 512-byte names sanitized to
         * UTF-8 can exceed it). Read and written by store_pg_<feature>.c. */
        "feature tables: process-profiling tasks, endpoint minutes, continuous-profiling "
        "policies and triggers, eBPF processes and stacks",
        /* process profiling (store_proc.h) */
        "CREATE TABLE proc_tasks(id text PRIMARY KEY, kind text NOT NULL, service text NOT NULL,"
        "  all_live boolean NOT NULL, events text NOT NULL, duration_s bigint NOT NULL,"
        "  dump_period bigint NOT NULL, sampling_hz bigint NOT NULL, exec_args text,"
        "  create_time bigint NOT NULL, cancelled_ms bigint);"
        "CREATE INDEX proc_tasks_by_service ON proc_tasks(kind, service, create_time);"
        "CREATE INDEX proc_tasks_by_create ON proc_tasks(create_time);"
        "CREATE TABLE proc_task_instances(task_id text NOT NULL, instance text NOT NULL,"
        "  PRIMARY KEY(task_id, instance));"
        "CREATE TABLE proc_task_logs(id bigserial PRIMARY KEY, task_id text NOT NULL,"
        "  instance text NOT NULL, op text NOT NULL, time bigint NOT NULL, message text);"
        "CREATE INDEX proc_task_logs_by_task ON proc_task_logs(task_id, time);"
        "CREATE UNIQUE INDEX proc_task_logs_notified_once ON proc_task_logs(task_id, instance)"
        "  WHERE op = 'NOTIFIED';"
        "CREATE TABLE proc_files(id bigserial PRIMARY KEY, task_id text NOT NULL,"
        "  instance text NOT NULL, time bigint NOT NULL, size bigint NOT NULL,"
        "  data bytea NOT NULL);"
        "CREATE INDEX proc_files_by_task ON proc_files(task_id);"
        /* endpoint statistics (store.h) */
        "CREATE TABLE endpoint_minutes(service text NOT NULL, endpoint text NOT NULL,"
        "  instance text NOT NULL, minute_ms bigint NOT NULL, writer bigint NOT NULL,"
        "  count bigint NOT NULL, errors bigint NOT NULL, hist bytea NOT NULL);"
        "CREATE UNIQUE INDEX endpoint_minutes_key ON endpoint_minutes(md5(service), md5(endpoint),"
        "  md5(instance), minute_ms, writer);"
        "CREATE INDEX endpoint_minutes_by_service ON endpoint_minutes(md5(service), minute_ms);"
        "CREATE INDEX endpoint_minutes_by_minute ON endpoint_minutes(minute_ms);"
        /* continuous profiling (store_continuous.h) */
        "CREATE TABLE continuous_policies(service text PRIMARY KEY, uuid text NOT NULL,"
        "  json text NOT NULL, updated_ms bigint NOT NULL);"
        "CREATE TABLE continuous_triggers(id bigserial PRIMARY KEY, service text NOT NULL,"
        "  instance text, process text, time_ms bigint NOT NULL, target text NOT NULL,"
        "  source text NOT NULL, task_kind text, task_id text, note text);"
        "CREATE INDEX continuous_triggers_by_service ON continuous_triggers(service, time_ms);"
        "CREATE INDEX continuous_triggers_by_task ON continuous_triggers(task_id);"
        "CREATE INDEX continuous_triggers_by_time ON continuous_triggers(time_ms);"
        "CREATE TABLE continuous_trigger_causes(trigger_id bigint NOT NULL, seq int NOT NULL,"
        "  type text NOT NULL, uri text, uri_is_regex boolean NOT NULL,"
        "  threshold double precision NOT NULL, current double precision NOT NULL,"
        "  window_s bigint NOT NULL, hits bigint NOT NULL, PRIMARY KEY(trigger_id, seq));"
        /* eBPF services (store_ebpf.h) */
        "CREATE TABLE ebpf_processes(id text PRIMARY KEY, service text NOT NULL,"
        "  instance text NOT NULL, process_name text NOT NULL, layer text NOT NULL,"
        "  pid int NOT NULL, labels text NOT NULL, properties text NOT NULL,"
        "  agent_id text NOT NULL, first_ms bigint NOT NULL, last_ping_ms bigint NOT NULL);"
        "CREATE INDEX ebpf_processes_by_service ON ebpf_processes(service, instance);"
        "CREATE INDEX ebpf_processes_by_ping ON ebpf_processes(last_ping_ms);"
        "CREATE TABLE ebpf_stacks(id bigserial PRIMARY KEY, task_id text NOT NULL,"
        "  process_id text NOT NULL, kind int NOT NULL, time_ms bigint NOT NULL,"
        "  received_ms bigint NOT NULL, symbols text NOT NULL, count bigint NOT NULL,"
        "  duration_ns bigint NOT NULL);"
        "CREATE INDEX ebpf_stacks_by_task ON ebpf_stacks(task_id, time_ms);"
        "CREATE INDEX ebpf_stacks_by_received ON ebpf_stacks(received_ms);",
    },
    {
        /* SQLite's step 8 (store_schema.c): one row per profiled (task, segment) - a snapshot
         * of sequence 0 arrived for it - whose start is the SegmentObject's start when that is
         * stored, else the first dump's time: the listing's order, so a page is one range scan
         * of segment_listing_by_start (store_pg_segments.c). id_head is the segment id's first
         * PG_LISTING_HEAD_SQL characters (a btree entry holds ~2.7 kB, ids are unbounded); the
         * index ends with seg, so the index alone gives the order: rows of equal (start, head)
         * - ids longer than that sharing their head, in practice none - are in arrival order
         * (SQLite: by the rest of the id).
         *
         * Kept by triggers, as SQLite's, so that every writer keeps it (a collector of an
         * older build still running after a newer one migrated, too). Snapshots are dropped by
         * whole partitions, which fires no trigger: rows go with their segids row instead (the
         * same retention clock, first_ms). Several collectors: a SegmentObject stored while
         * another collector stores its segment's first dump must not leave the row at the
         * dump's time - each trigger locks the segment's segids row first (KEY SHARE against
         * UPDATE), and its next statement sees what the other committed. The ingest takes
         * those locks for a whole batch beforehand, in id order (store_pg_ingest.c,
         * store_pg_segments.c), so two batches never wait for each other in a cycle. */
        "keyset listing of a task's profiled segments: segment_listing keyed by (task, start, "
        "segment id), kept by triggers",
        "CREATE TABLE segment_listing(seg bigint NOT NULL, task bigint NOT NULL,"
        "  start_ms bigint NOT NULL, id_head text COLLATE \"C\" NOT NULL,"
        "  PRIMARY KEY(seg, task));"
        "CREATE INDEX segment_listing_by_start ON segment_listing(task, start_ms, id_head, seg);"
        "INSERT INTO segment_listing(seg, task, start_ms, id_head) "
        "  SELECT ts.seg, ts.task, coalesce(g.start_ms, z.time),"
        "  left(si.segment_id, " PG_LISTING_HEAD_SQL ") "
        "  FROM task_segments ts JOIN segids si ON si.id = ts.seg "
        "  JOIN snapshots z ON z.seg = ts.seg AND z.seq = 0 AND z.task = ts.task "
        "   AND z.first_ms = si.first_ms "
        "  LEFT JOIN segments g ON g.seg = ts.seg;"
        "ANALYZE segment_listing;"
        /* a first dump (a duplicate one is not inserted: no trigger) */
        "CREATE FUNCTION skp_listing_snap() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN"
        "  PERFORM 1 FROM segids WHERE id = NEW.seg FOR KEY SHARE;"
        "  INSERT INTO segment_listing(seg, task, start_ms, id_head)"
        "    SELECT NEW.seg, NEW.task,"
        "      coalesce((SELECT start_ms FROM segments WHERE seg = NEW.seg), NEW.time),"
        "      left(si.segment_id, " PG_LISTING_HEAD_SQL ") FROM segids si WHERE si.id = NEW.seg"
        "  ON CONFLICT DO NOTHING;"
        "  RETURN NULL;"
        "END$$;"
        "CREATE TRIGGER segment_listing_snap AFTER INSERT ON snapshots FOR EACH ROW"
        "  WHEN (NEW.seq = 0) EXECUTE FUNCTION skp_listing_snap();"
        /* a SegmentObject moves its segment's rows to its start */
        "CREATE FUNCTION skp_listing_object() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN"
        "  PERFORM 1 FROM segids WHERE id = NEW.seg FOR UPDATE;"
        "  UPDATE segment_listing SET start_ms = NEW.start_ms"
        "    WHERE seg = NEW.seg AND start_ms <> NEW.start_ms;"
        "  RETURN NULL;"
        "END$$;"
        "CREATE TRIGGER segment_listing_object AFTER INSERT ON segments FOR EACH ROW"
        "  EXECUTE FUNCTION skp_listing_object();"
        /* retention may drop a SegmentObject before its segment's snapshots: back to the first
         * dump's time (rows whose dumps went too are deleted with their segids row) */
        "CREATE FUNCTION skp_listing_unobject() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN"
        "  UPDATE segment_listing l SET start_ms = z.time FROM gone g, segids si, snapshots z"
        "    WHERE l.seg = g.seg AND si.id = l.seg AND z.seg = l.seg AND z.task = l.task"
        "    AND z.seq = 0 AND z.first_ms = si.first_ms AND l.start_ms <> z.time;"
        "  RETURN NULL;"
        "END$$;"
        "CREATE TRIGGER segment_listing_unobject AFTER DELETE ON segments"
        "  REFERENCING OLD TABLE AS gone FOR EACH STATEMENT"
        "  EXECUTE FUNCTION skp_listing_unobject();"
        /* a purged segment leaves the listing */
        "CREATE FUNCTION skp_listing_unseg() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN"
        "  DELETE FROM segment_listing l USING gone g WHERE l.seg = g.id;"
        "  RETURN NULL;"
        "END$$;"
        "CREATE TRIGGER segment_listing_unseg AFTER DELETE ON segids"
        "  REFERENCING OLD TABLE AS gone FOR EACH STATEMENT"
        "  EXECUTE FUNCTION skp_listing_unseg();",
    },
    {
        "dashboards of SkyWalking's UI (GraphQL templates)",
        "CREATE TABLE ui_templates(id text PRIMARY KEY, configuration text NOT NULL,"
        "  disabled boolean NOT NULL DEFAULT false, updated_ms bigint NOT NULL);",
    },
    {
        /* SQLite's step 10 (store_schema.c): a goProfileReport sample of count N is one row of
         * weight N instead of N rows (issue 25). Rows stored before read as weight 1. Added to
         * the partitioned table, so to every partition, old and new. */
        "snapshot weight: how many samples a row stands for",
        "ALTER TABLE snapshots ADD COLUMN weight int NOT NULL DEFAULT 1;",
    },
    {
        /* Issue 27: one row per snapshot costs ~128 B (a 24-byte tuple header, 4-byte line
         * pointer and an index entry per row before any data), so a row now holds a run: the
         * snapshots of one (segment, task) that one batch stored, as arrays sorted by sequence
         * (sequence, time - t0, stack id; weights NULL when all are 1). t0 is the time rounded
         * down to 2^30 ms, so every offset fits an int (a batch spanning such a boundary makes
         * two runs). lo_seq/hi_seq bound the run: the ingest's de-duplication reads the runs
         * of a batch's segments whose range meets the batch's (store_pg_ingest.c). The view
         * `snapshots` shows the rows as before (one per snapshot), so the readers (scans,
         * listing, retention of stacks) are unchanged. Old rows are converted here (runs of at
         * most 512 sequences), partition by partition under the same day bounds; the old
         * table is dropped. A collector of an older build cannot insert into the view: stop
         * them before starting this one (docs/deploy.md). */
        "snapshots stored as runs: snapshot_runs, one row per (segment, task) and batch, "
        "the view snapshots one row per snapshot",
        "CREATE TABLE snapshot_runs(seg bigint NOT NULL, task bigint NOT NULL,"
        "  first_ms bigint NOT NULL, t0 bigint NOT NULL, lo_seq int NOT NULL,"
        "  hi_seq int NOT NULL, seqs int[] NOT NULL, dts int[] NOT NULL, stacks int[] NOT NULL,"
        "  weights int[]) PARTITION BY RANGE (first_ms);"
        "CREATE INDEX snapshot_runs_by_seg ON snapshot_runs(seg, task, hi_seq);"
        "DO $$DECLARE p record; BEGIN"
        "  FOR p IN SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) AS bound"
        "    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
        "    WHERE i.inhparent = 'snapshots'::regclass LOOP"
        "    EXECUTE format('CREATE TABLE %I PARTITION OF snapshot_runs %s',"
        "      'snapshot_runs_' || substr(p.relname, 11), p.bound);"
        "  END LOOP;"
        "END$$;"
        "INSERT INTO snapshot_runs(seg, task, first_ms, t0, lo_seq, hi_seq, seqs, dts, stacks,"
        "  weights)"
        "  SELECT seg, task, first_ms, t0, min(seq), max(seq), array_agg(seq ORDER BY seq),"
        "  array_agg((time - t0)::int ORDER BY seq), array_agg(stack::int ORDER BY seq),"
        "  CASE WHEN bool_and(weight = 1) THEN NULL ELSE array_agg(weight ORDER BY seq) END"
        "  FROM (SELECT *, (time >> 30) << 30 AS t0, seq >> 9 AS chunk FROM snapshots) x"
        "  GROUP BY seg, task, first_ms, t0, chunk;"
        "DROP TABLE snapshots;"
        "DROP FUNCTION skp_listing_snap();"
        "CREATE VIEW snapshots AS SELECT r.seg, u.seq, r.task, r.t0 + u.dt AS time,"
        "  u.stack::bigint AS stack, r.first_ms, coalesce(u.weight, 1) AS weight"
        "  FROM snapshot_runs r CROSS JOIN LATERAL"
        "  unnest(r.seqs, r.dts, r.stacks, r.weights) AS u(seq, dt, stack, weight);"
        /* step 3's listing trigger, for a run holding sequence 0 */
        "CREATE FUNCTION skp_listing_run() RETURNS trigger LANGUAGE plpgsql AS $$"
        "DECLARE i int := array_position(NEW.seqs, 0); BEGIN"
        "  IF i IS NULL THEN RETURN NULL; END IF;"
        "  PERFORM 1 FROM segids WHERE id = NEW.seg FOR KEY SHARE;"
        "  INSERT INTO segment_listing(seg, task, start_ms, id_head)"
        "    SELECT NEW.seg, NEW.task,"
        "      coalesce((SELECT start_ms FROM segments WHERE seg = NEW.seg), NEW.t0 + NEW.dts[i]),"
        "      left(si.segment_id, " PG_LISTING_HEAD_SQL ") FROM segids si WHERE si.id = NEW.seg"
        "  ON CONFLICT DO NOTHING;"
        "  RETURN NULL;"
        "END$$;"
        "CREATE TRIGGER segment_listing_run AFTER INSERT ON snapshot_runs FOR EACH ROW"
        "  WHEN (NEW.lo_seq <= 0 AND NEW.hi_seq >= 0) EXECUTE FUNCTION skp_listing_run();",
    },
    {
        /* An uploaded file is written a piece per statement (issue 25: 30 MiB in one statement
         * passed --db-stall-ms and the upload failed); its row is listed once complete. Files
         * stored before keep their bytes in proc_files.data and read as complete. */
        "process files in pieces",
        "CREATE TABLE proc_file_pieces(file_id bigint NOT NULL REFERENCES proc_files(id)"
        "  ON DELETE CASCADE, seq int NOT NULL, data bytea NOT NULL, PRIMARY KEY(file_id, seq));"
        "ALTER TABLE proc_files ADD COLUMN complete boolean NOT NULL DEFAULT true;",
    },
};

int pg_schema_version(void)
{
    return (int)SKP_ARRAY_LEN(k_steps);
}

static skp_err apply(struct pg_store *st, int cur, int target)
{
    for (int v = cur + 1; v <= target; v++) {
        const struct pg_migration *m = &k_steps[v - 1];
        skp_err err = pg__cmd(st, m->sql, "migration");
        if (err) {
            SKPX_ERROR("store: migration to schema v%d failed", v);
            return err;
        }
        struct pg_params p = {0};
        pgp_int(&p, v);
        pgp_int(&p, skpx_now_ms());
        pgp_text(&p, m->description);
        PGresult *r = pg__exec(st,
                               "INSERT INTO skp_schema_version(version, applied_ms, description) "
                               "VALUES($1, $2, $3)",
                               &p, &err, "record migration");
        pgp_free(&p);
        PQclear(r);
        if (err)
            return err;
        SKPX_INFO("store: %s migrated to schema v%d (%s)", st->shown, v, m->description);
    }
    return SKP_OK;
}

skp_err pg__migrate(struct pg_store *st, int target)
{
    int latest = pg_schema_version();
    if (target <= 0 || target > latest)
        target = latest;
    skp_err err = pg__begin_locked(st, PG_LOCK_SCHEMA, "schema lock");
    if (err)
        return err;
    if (!st->base.read_only)
        err = pg__cmd(st,
                      "CREATE TABLE IF NOT EXISTS skp_schema_version(version int PRIMARY KEY,"
                      "  applied_ms bigint NOT NULL, description text NOT NULL)",
                      "schema version table");
    PGresult *r = NULL;
    if (!err)
        r = pg__exec(st, "SELECT coalesce(max(version), 0) FROM skp_schema_version", NULL, &err,
                     "read schema version");
    if (err)
        goto fail;
    int cur = (int)pg__i64(r, 0, 0);
    PQclear(r);
    if (cur > latest) {
        SKPX_ERROR("store: %s has schema v%d, newer than this build (v%d)", st->shown, cur, latest);
        err = SKP_EIO;
        goto fail;
    }
    if (cur < target && st->base.read_only) {
        SKPX_ERROR("store: %s has schema v%d, needs v%d, but is opened read-only", st->shown, cur,
                   target);
        err = SKP_EIO;
        goto fail;
    }
    if (cur < target)
        err = apply(st, cur, target);
    if (!err)
        err = pg__commit(st);
    if (err)
        goto fail;
    st->unweighted = (cur > target ? cur : target) < PG_SCHEMA_WEIGHT;
    return SKP_OK;
fail:
    pg__rollback(st);
    return err;
}
