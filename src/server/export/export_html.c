/* export_html.c - a self-contained HTML flame graph: one file with inline CSS and JavaScript and
 * the analysis embedded as JSON, which opens offline in any browser (no network, no external
 * URL). The graph is an icicle (roots on top) under a synthetic "all" frame joining the trees;
 * frame width is the dump count; a frame is labelled function first, then a short location
 * ("do_POST  seed_app.py:44", common/frame_sig.h: the web UI's rule); hovering shows that label,
 * the full signature, count, duration, self duration and
 * the share of parent and total; clicking zooms; a search box highlights matching frames.
 * The embedded JSON is written with every '/', '<', '>' and '&' escaped (\/, \u003c, ...), so no
 * "</script>", "<!--" or "<script" in a frame name can end the block or change how it parses. */
#include "server/export/export_int.h"

#include <jansson.h>
#include <string.h>

#include "common/alloc.h"
#include "common/frame_sig.h"

struct html_ctx {
    json_t **stack;          /* stack[d] = the "k" (children) array of the frame at depth d-1 */
    struct skpx_buf scratch; /* one frame's function and location */
};

static skp_err visit(void *ud, const struct analysis_tree *t,
                     const struct analysis_node *const *path, size_t depth)
{
    struct html_ctx *c = ud;
    const struct analysis_node *n = path[depth];
    (void)t;
    const char *sig = n->code_signature ? n->code_signature : "";
    struct skpx_frame_sig fs;
    skpx_frame_sig_parse(sig, strlen(sig), &fs);
    skpx_buf_reset(&c->scratch);
    skpx_frame_sig_put_func(&c->scratch, &fs);
    skpx_buf_putc(&c->scratch, '\0');
    size_t loc_at = c->scratch.len;
    skpx_frame_sig_put_loc(&c->scratch, &fs);
    skpx_buf_putc(&c->scratch, '\0');
    if (c->scratch.err)
        return c->scratch.err;
    json_t *kids = json_array();
    json_t *o = json_pack("{s:o, s:o, s:o, s:I, s:I, s:I, s:o}", "n", export_json_string(sig), "f",
                          export_json_string((const char *)c->scratch.data), "l",
                          export_json_string((const char *)c->scratch.data + loc_at), "c",
                          (json_int_t)n->count, "d", (json_int_t)n->duration, "s",
                          (json_int_t)n->duration_child_excluded, "k", kids);
    if (!o || json_array_append_new(c->stack[depth], o) != 0)
        return SKP_ENOMEM;
    c->stack[depth + 1] = kids;
    return SKP_OK;
}

static void put_escaped(struct skpx_buf *b, const char *s)
{
    static const char *const entity[256] = {
        ['<'] = "&lt;", ['>'] = "&gt;", ['&'] = "&amp;", ['"'] = "&quot;"};
    for (; s && *s; s++) {
        const char *e = entity[(unsigned char)*s];
        if (e)
            skpx_buf_puts(b, e);
        else
            skpx_buf_put(b, s, 1);
    }
}

/* `label` then `value` escaped, when there is a value (NULL or "" is left out). */
static void put_meta_item(struct skpx_buf *b, const char *label, const char *value)
{
    if (!value || !*value)
        return;
    skpx_buf_puts(b, label);
    put_escaped(b, value);
}

/* Appends JSON text with '<', '>' and '&' written as \u escapes. They can only occur inside
 * JSON strings, where the escape means the same character, and without them the HTML parser
 * never sees "<!--", "<script" or "</script" in the data block: "<!--<script>" in a frame name
 * would otherwise switch the tokenizer into a state where the block's own "</script>" no
 * longer closes it, and the page stays blank (issue 15, finding 13). */
static int dump_cb(const char *p, size_t n, void *ud)
{
    struct skpx_buf *b = ud;
    const char *run = p;
    for (size_t i = 0; i < n; i++) {
        const char *esc = p[i] == '<'   ? "\\u003c"
                          : p[i] == '>' ? "\\u003e"
                          : p[i] == '&' ? "\\u0026"
                                        : NULL;
        if (!esc)
            continue;
        skpx_buf_put(b, run, (size_t)(p + i - run));
        skpx_buf_puts(b, esc);
        run = p + i + 1;
    }
    skpx_buf_put(b, run, (size_t)(p + n - run));
    return b->err ? -1 : 0;
}

static const char g_head[] = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
                             "<meta name=\"generator\" content=\"skyprof\">\n<title>";

static const char g_style[] =
    "</title>\n<style>\n"
    "body{font:13px system-ui,sans-serif;margin:16px;color:#222;background:#fff}\n"
    "h1{font-size:17px;margin:0 0 6px}\n.meta{color:#666;margin-bottom:10px}\n"
    ".bar{display:flex;gap:8px;align-items:center;margin-bottom:8px}\n"
    "#chart{position:relative;width:100%;overflow:hidden;border:1px solid #ddd}\n"
    ".f{position:absolute;height:17px;line-height:17px;font:11px monospace;overflow:hidden;"
    "white-space:nowrap;text-overflow:ellipsis;padding:0 3px;box-sizing:border-box;"
    "border-right:1px solid #fff;border-bottom:1px solid #fff;cursor:pointer}\n"
    ".f.anc{opacity:.55}\n.f.match{background:#e040fb!important;color:#fff}\n"
    "#tip{position:fixed;display:none;background:#222;color:#fff;padding:6px 8px;"
    "border-radius:4px;font:12px monospace;pointer-events:none;max-width:640px;"
    "white-space:pre-wrap;z-index:9}\n"
    "</style></head><body>\n<h1>";

static const char g_body[] =
    "<div class=\"bar\"><input id=\"search\" placeholder=\"Search frames\" size=\"30\">"
    "<button id=\"reset\">Reset zoom</button><span id=\"found\"></span></div>\n"
    "<div id=\"chart\"></div><div id=\"tip\"></div>\n"
    "<script type=\"application/json\" id=\"skp-data\">";

/* The viewer. Plain ES5 so it runs in any browser that opens the file. */
static const char g_script[] =
    "</script>\n<script>\n"
    "(function(){\n"
    "var data=JSON.parse(document.getElementById('skp-data').textContent);\n"
    "var chart=document.getElementById('chart'),tip=document.getElementById('tip');\n"
    "var H=18,zoom=data,term='';\n"
    "function link(n,p){n.p=p;for(var i=0;i<n.k.length;i++)link(n.k[i],n);}link(data,null);\n"
    "function color(s){var h=0;for(var i=0;i<s.length;i++)h=(h*31+s.charCodeAt(i))>>>0;"
    "return 'hsl('+(10+h%45)+',85%,'+(58+h%17)+'%)';}\n"
    "function pct(a,b){return b?(100*a/b).toFixed(1)+'%':'-';}\n"
    "function label(n){return n.l?n.f+'  '+n.l:n.f;}\n"
    "var maxd=0,hits=0;\n"
    "function box(n,x,w,d,anc){var e=document.createElement('div');e.className='f'+(anc?' anc':'');"
    "if(term&&(n.n.indexOf(term)>=0||label(n).indexOf(term)>=0)){e.className+=' match';hits+=n.c;}"
    "e.style.left=x+'px';e.style.width=Math.max(w,1)+'px';e.style.top=(d*H)+'px';"
    "e.style.background=color(n.n);e.textContent=w>30?label(n):'';e.setAttribute('data-name',n.n);"
    "e.onmousemove=function(ev){tip.style.display='block';tip.style.left=(ev.clientX+12)+'px';"
    "tip.style.top=(ev.clientY+12)+'px';"
    "tip.textContent=label(n)+(n.n!==label(n)?'\\n'+n.n:'')+'\\ncount: '+n.c+'\\nduration: '+n.d+"
    "' ms\\nself duration: '+n.s+' ms\\nof parent: '+pct(n.c,n.p?n.p.c:n.c)+'\\nof total: '+"
    "pct(n.c,data.c);};e.onmouseleave=function(){tip.style.display='none';};"
    "e.onclick=function(){zoom=n;render();};chart.appendChild(e);if(d>maxd)maxd=d;}\n"
    "function lay(n,x,w,d){if(w<0.5)return;box(n,x,w,d,false);var cx=x;"
    "for(var i=0;i<n.k.length;i++){var c=n.k[i],cw=n.c?w*c.c/n.c:0;lay(c,cx,cw,d+1);cx+=cw;}}\n"
    "function render(){chart.innerHTML='';maxd=0;hits=0;var W=chart.clientWidth||1000;"
    "var anc=[];for(var a=zoom.p;a;a=a.p)anc.unshift(a);"
    "for(var i=0;i<anc.length;i++)box(anc[i],0,W,i,true);lay(zoom,0,W,anc.length);"
    "chart.style.height=((maxd+1)*H)+'px';document.getElementById('found').textContent="
    "term?('matched '+pct(hits,data.c)+' of total'):'';}\n"
    "document.getElementById('search').oninput=function(){term=this.value;render();};\n"
    "document.getElementById('reset').onclick=function(){zoom=data;render();};\n"
    "window.onresize=render;render();\n"
    "})();\n</script>\n</body></html>\n";

skp_err export_render_html(const struct analysis *a, const struct export_meta *m,
                           struct skpx_buf *b)
{
    struct html_ctx c = {0};
    json_t *root = NULL;
    skp_err err = SKP_OK;
    json_int_t total_count = 0, total_dur = 0;

    skpx_buf_init(&c.scratch, EXPORT_MAX_OUTPUT_BYTES);
    c.stack = skpx_calloc(EXPORT_MAX_DEPTH + 1, sizeof(*c.stack));
    json_t *kids = json_array();
    if (!c.stack || !kids) {
        json_decref(kids);
        err = SKP_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < a->n_trees; i++) {
        if (a->trees[i].n_nodes) {
            total_count += (json_int_t)a->trees[i].nodes[0].count;
            total_dur += (json_int_t)a->trees[i].nodes[0].duration;
        }
    }
    root = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:o}", "n", "all", "f", "all", "l", "", "c",
                     total_count, "d", total_dur, "s", (json_int_t)0, "k", kids);
    if (!root) {
        err = SKP_ENOMEM;
        goto out;
    }
    c.stack[0] = kids;
    err = export_walk(a, visit, &c);
    if (err)
        goto out;

    const char *title = m->title && *m->title ? m->title : "skyprof flame graph";
    skpx_buf_puts(b, g_head);
    put_escaped(b, title);
    skpx_buf_puts(b, g_style);
    put_escaped(b, title);
    skpx_buf_puts(b, "</h1>\n<div class=\"meta\">");
    skpx_buf_printf(b, "%llu snapshots, dump period %d ms", (unsigned long long)a->n_snapshots,
                    export_period_ms(m));
    put_meta_item(b, " &middot; trace ", m->trace_id);
    put_meta_item(b, " &middot; segment ", m->segment_id);
    put_meta_item(b, " &middot; endpoint ", m->endpoint);
    put_meta_item(b, " &middot; ", a->tip);
    skpx_buf_puts(b, "</div>\n");
    skpx_buf_puts(b, g_body);
    if (json_dump_callback(root, dump_cb, b, JSON_COMPACT | JSON_ESCAPE_SLASH) != 0 && !b->err)
        b->err = SKP_ENOMEM;
    skpx_buf_puts(b, g_script);
out:
    json_decref(root);
    skpx_free(c.stack);
    skpx_buf_cleanup(&c.scratch);
    return err ? err : b->err;
}
