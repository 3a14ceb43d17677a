/* store_segment_info.c - store.h's store_get_segment_info for both backends: one segment's
 * trace id, endpoint, dump period and window (tables segids, segments, snapshots, task_keys,
 * tasks), written once over the statements of store_query.h with their SQLite and PostgreSQL
 * text side by side. The segments' writes and listings stay in each backend's segments file. */
#include "server/store/store.h"

#include <string.h>

#include "server/store/store_query.h"
#include "server/store/store_rows.h"

/* The task is found through the segment's first snapshot: SQLite's lowest sequence is a
 * primary-key seek; PostgreSQL's is looked for in the segment's own partition (first_ms). */
static const struct store_sql segment_info = {
    .sqlite = "SELECT " STORE_SEGMENT_INFO_READ " FROM segids si "
              "LEFT JOIN segments g ON g.seg = si.id "
              "LEFT JOIN task_keys tk ON tk.id = (SELECT sn.task FROM "
              "snapshots sn WHERE sn.seg = si.id ORDER BY sn.seq LIMIT 1) "
              "LEFT JOIN tasks t ON t.id = tk.task_id "
              "WHERE si.segment_id = ?1",
    .pg = "SELECT " STORE_SEGMENT_INFO_READ " FROM segids si "
          "LEFT JOIN segments g ON g.seg = si.id "
          "LEFT JOIN task_keys tk ON tk.id = (SELECT sn.task FROM snapshots sn "
          "WHERE sn.seg = si.id AND sn.first_ms = si.first_ms "
          "ORDER BY sn.seq, sn.task LIMIT 1) "
          "LEFT JOIN tasks t ON t.id = tk.task_id "
          "WHERE md5(si.segment_id) = md5($1) AND si.segment_id = $1",
    .what = "segment info",
};

skp_err store_get_segment_info(struct store *st, const char *segment_id,
                               struct store_segment_info *out)
{
    memset(out, 0, sizeof(*out));
    if (!segment_id)
        return SKP_EINVAL;
    struct store_params p = {0};
    store_param_text(&p, segment_id);
    return store_query_one(st, &segment_info, &p, &store_segment_info_row, out);
}
