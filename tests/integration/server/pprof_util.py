"""A small pprof (profile.proto) writer for tests: hand-encoded protobuf, so tests can build
profiles with any id layout, inlined lines, several sample types, labels, packed or unpacked
repeated fields, gzip or raw."""
import gzip


def varint(v):
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def key(field, wt):
    return varint((field << 3) | wt)


def f_varint(field, v):
    return key(field, 0) + varint(v)


def f_bytes(field, b):
    return key(field, 2) + varint(len(b)) + b


def f_packed(field, vals):
    return f_bytes(field, b"".join(varint(v) for v in vals))


class Profile:
    """profile = Profile([("cpu", "nanoseconds"), ...]); add functions/locations/samples; bytes()."""

    def __init__(self, sample_types, period_type=None, period=0, default_type=None):
        self.strings = [""]
        self.index = {"": 0}
        self.sample_types = [(self.s(t), self.s(u)) for t, u in sample_types]
        self.period_type = (self.s(period_type[0]), self.s(period_type[1])) if period_type else None
        self.period = period
        self.default_type = self.s(default_type) if default_type else 0
        self.functions = []  # (id, name, file, start_line)
        self.locations = []  # (id, mapping_id, address, [(func_id, line)])
        self.mappings = []   # (id, start, limit, offset, filename)
        self.samples = []    # ([loc ids leaf first], [values], [(key, str, num)])

    def s(self, text):
        if text not in self.index:
            self.index[text] = len(self.strings)
            self.strings.append(text)
        return self.index[text]

    def function(self, fid, name, filename="", start_line=0):
        self.functions.append((fid, self.s(name), self.s(filename), start_line))
        return fid

    def mapping(self, mid, start, limit, offset, filename):
        self.mappings.append((mid, start, limit, offset, self.s(filename)))
        return mid

    def location(self, lid, lines, mapping_id=0, address=0):
        self.locations.append((lid, mapping_id, address, lines))
        return lid

    def sample(self, loc_ids, values, labels=()):
        self.samples.append((list(loc_ids), list(values),
                             [(self.s(k), self.s(v) if isinstance(v, str) else 0,
                               v if not isinstance(v, str) else 0) for k, v in labels]))

    def encode(self, packed=True, strings_first=False):
        out = bytearray()
        strings = b"".join(f_bytes(6, t.encode()) for t in self.strings)
        if strings_first:
            out += strings
        for t, u in self.sample_types:
            out += f_bytes(1, f_varint(1, t) + f_varint(2, u))
        for locs, vals, labels in self.samples:
            body = bytearray()
            if packed:
                body += f_packed(1, locs) + f_packed(2, vals)
            else:
                body += b"".join(f_varint(1, x) for x in locs) + b"".join(f_varint(2, x) for x in vals)
            for k, sv, num in labels:
                lb = f_varint(1, k) + (f_varint(2, sv) if sv else b"") + (f_varint(3, num) if num else b"")
                body += f_bytes(3, lb)
            out += f_bytes(2, bytes(body))
        for mid, start, limit, off, fn in self.mappings:
            out += f_bytes(3, f_varint(1, mid) + f_varint(2, start) + f_varint(3, limit) +
                           f_varint(4, off) + f_varint(5, fn))
        for lid, mid, addr, lines in self.locations:
            body = f_varint(1, lid) + (f_varint(2, mid) if mid else b"") + (f_varint(3, addr) if addr else b"")
            for fid, line in lines:
                body += f_bytes(4, f_varint(1, fid) + f_varint(2, line))
            out += f_bytes(4, body)
        for fid, name, fn, sl in self.functions:
            out += f_bytes(5, f_varint(1, fid) + f_varint(2, name) + f_varint(3, name) +
                           f_varint(4, fn) + f_varint(5, sl))
        if not strings_first:
            out += strings
        if self.period_type:
            out += f_bytes(11, f_varint(1, self.period_type[0]) + f_varint(2, self.period_type[1]))
        if self.period:
            out += f_varint(12, self.period)
        if self.default_type:
            out += f_varint(14, self.default_type)
        return bytes(out)

    def gz(self, **kw):
        return gzip.compress(self.encode(**kw))


def sample_profile():
    """Two sample types (samples/count, cpu/nanoseconds), sparse ids, one inlined location:
    main -> handler -> {hot (inlined helper), cold}; hot weighs 3x cold in cpu."""
    p = Profile([("samples", "count"), ("cpu", "nanoseconds")], ("cpu", "nanoseconds"), 10000000)
    fmain = p.function(101, "main", "app.go", 1)
    fhandler = p.function(205, "handler", "app.go", 10)
    fhot = p.function(307, "hot", "hot.go", 20)
    fhelper = p.function(409, "helper", "hot.go", 30)
    fcold = p.function(511, "cold", "cold.go", 40)
    lmain = p.location(1000, [(fmain, 5)])
    lhandler = p.location(2000, [(fhandler, 12)])
    # inlined: helper (innermost, lines[0]) inlined into hot
    lhot = p.location(3000, [(fhelper, 33), (fhot, 22)])
    lcold = p.location(4000, [(fcold, 44)])
    p.sample([lhot, lhandler, lmain], [3, 30000000], [("thread", "worker-1")])
    p.sample([lcold, lhandler, lmain], [1, 10000000], [("thread", "worker-2")])
    p.sample([lhot, lhandler, lmain], [0, 0])
    return p
