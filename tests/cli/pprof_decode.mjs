// pprof_decode.mjs FILE - decodes a gzipped pprof profile with the independent npm decoder
// `pprof-format` (from web/node_modules, located through $SKP_WEB_DIR) and prints a JSON summary:
// sample types, period, the samples with their stacks (function names, leaf first), values and
// string labels, and the function names. Used by tests/cli/test_cli.py.
import { readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { createRequire } from 'node:module';
import path from 'node:path';

const webDir = process.env.SKP_WEB_DIR;
const require = createRequire(path.join(webDir, 'package.json'));
const { Profile } = require('pprof-format');

const raw = readFileSync(process.argv[2]);
if (raw[0] !== 0x1f || raw[1] !== 0x8b) {
  console.error('not gzip');
  process.exit(1);
}
const p = Profile.decode(gunzipSync(raw));
const str = (i) => p.stringTable.strings[Number(i)];
const fnById = new Map(p.function.map((f) => [Number(f.id), f]));
const locById = new Map(p.location.map((l) => [Number(l.id), l]));
const out = {
  sampleTypes: p.sampleType.map((t) => [str(t.type), str(t.unit)]),
  periodType: p.periodType ? [str(p.periodType.type), str(p.periodType.unit)] : null,
  period: Number(p.period),
  functions: p.function.map((f) => ({ id: Number(f.id), name: str(f.name), filename: str(f.filename) })),
  locations: p.location.map((l) => ({ id: Number(l.id), lines: l.line.map((ln) => ({ fn: Number(ln.functionId), line: Number(ln.line) })) })),
  samples: p.sample.map((s) => ({
    stack: s.locationId.map((id) => str(fnById.get(Number(locById.get(Number(id)).line[0].functionId)).name)),
    values: s.value.map(Number),
    labels: Object.fromEntries(s.label.map((l) => [str(l.key), str(l.str)])),
  })),
};
console.log(JSON.stringify(out));
