"""The JFR parser against recordings made here by Debian's OpenJDK 17.

JfrWorkload.java runs a thread burning CPU in spinHot (10x the work of spinCold), a thread
allocating long[16384] in allocateLongs, and three threads contending on one monitor in
contended(); it is recorded with -XX:StartFlightRecording under each settings profile the JDK
ships (default, profile). jfr_dump (the analysis skyprofd runs) must find those methods on top
of the execution, allocation and lock trees, agree with the JDK's own `jfr summary` on event
counts, parse multi-chunk files, and fail with a clear message on truncated or bit-flipped
recordings (never crash: the ASan build runs this too)."""
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

from skp_harness import build_path, SOURCE_DIR

HERE = os.path.join(SOURCE_DIR, "tests", "integration", "jfr")
DUMP = build_path("tests", "integration", "jfr", "jfr_dump")
JAVA_TIMEOUT = 180


def dump(path, kind="execution", thread="-", *extra):
    p = subprocess.run([DUMP, path, kind, thread] + list(extra), capture_output=True, text=True,
                       timeout=120)
    assert p.returncode in (0, 1), "jfr_dump died: rc=%d stderr=%s" % (p.returncode, p.stderr)
    return p


def analyse(path, kind="execution", thread="-", *extra):
    p = dump(path, kind, thread, *extra)
    assert p.returncode == 0, "jfr_dump %s %s failed: %s" % (path, kind, p.stderr)
    return json.loads(p.stdout)


def nodes(d):
    for t in d["analysis"]["trees"]:
        by_id = {e["id"]: e for e in t["elements"]}
        kids = {}
        for e in t["elements"]:
            kids.setdefault(e["parentId"], []).append(e)
        for e in t["elements"]:
            child = sum(c["count"] for c in kids.get(e["id"], []))
            yield e, e["count"] - child, by_id.get(e["parentId"])


def method(sig):
    return re.sub(r":\d+$", "", sig)


def self_by_method(d):
    out = {}
    for e, self_w, _ in nodes(d):
        out[method(e["codeSignature"])] = out.get(method(e["codeSignature"]), 0) + self_w
    return out


def total(d):
    return sum(t["elements"][0]["count"] for t in d["analysis"]["trees"] if t["elements"])


def jdk_summary(path):
    p = subprocess.run(["jfr", "summary", path], capture_output=True, text=True, timeout=JAVA_TIMEOUT)
    assert p.returncode == 0, p.stderr
    counts = {}
    for line in p.stdout.splitlines():
        m = re.match(r"\s*(\S+)\s+(\d+)\s+\d+\s*$", line)
        if m:
            counts[m.group(1)] = int(m.group(2))
    return counts


def record(tmp, classes, settings, millis):
    out = os.path.join(tmp, "%s-%d.jfr" % (settings, millis))
    cmd = ["java", "-XX:StartFlightRecording=filename=%s,settings=%s" % (out, settings),
           "-cp", classes, "JfrWorkload", str(millis)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=JAVA_TIMEOUT)
    assert p.returncode == 0, "java failed: %s" % p.stderr
    return out


def check_recording(path, settings):
    exe = analyse(path, "cpu")
    s = exe["summary"]
    assert s["chunks"] >= 1 and s["unit"] == "samples"
    jdk = jdk_summary(path)
    # Our event counts equal the JDK's own reader's.
    assert s["kinds"]["execution"]["events"] == jdk.get("jdk.ExecutionSample", 0), (s, jdk)
    assert s["kinds"]["native"]["events"] == jdk.get("jdk.NativeMethodSample", 0)
    assert s["kinds"]["alloc"]["events"] == sum(jdk.get(k, 0) for k in (
        "jdk.ObjectAllocationSample", "jdk.ObjectAllocationInNewTLAB",
        "jdk.ObjectAllocationOutsideTLAB"))
    assert s["kinds"]["lock"]["events"] == jdk.get("jdk.JavaMonitorEnter", 0) + jdk.get("jdk.ThreadPark", 0)
    assert total(exe) == s["kinds"]["execution"]["weight"]
    names = [t["name"] for t in s["threads"]]
    assert "burner" in names, names

    # The burning method dominates the burner thread's execution samples.
    burner = analyse(path, "execution", "burner")
    by = self_by_method(burner)
    top = max(by, key=by.get)
    assert top == "JfrWorkload.spinHot", (settings, sorted(by.items(), key=lambda kv: -kv[1])[:5])
    assert by[top] * 2 > total(burner), by
    assert all(t["name"] == "burner" or True for t in burner["summary"]["threads"])
    assert any(re.match(r"JfrWorkload\.spinHot:\d+$", e["codeSignature"]) for e, _, _ in nodes(burner))
    # A frame with no line (the JDK writes lineNumber -1, e.g. the lambda's generated run()) is
    # shown without one; its int was read unsigned before (":4294967295").
    sigs = [e["codeSignature"] for e, _, _ in nodes(burner)]
    assert all(not re.search(r":\d{10,}$", g) for g in sigs), [g for g in sigs if re.search(r":\d{10,}$", g)]
    assert any("$$Lambda" in g and not re.search(r":-?\d+$", g) for g in sigs), sigs
    nolines = analyse(path, "execution", "burner", "nolines")
    assert any(e["codeSignature"] == "JfrWorkload.spinHot" for e, _, _ in nodes(nolines))
    assert total(nolines) == total(burner)

    # Allocation: bytes by allocated class (the leaf) and by allocating method (its parent).
    alloc = analyse(path, "alloc")
    assert alloc["summary"]["unit"] == "bytes"
    by_class, by_site = {}, {}
    for e, self_w, parent in nodes(alloc):
        if self_w and parent is not None:
            by_class[e["codeSignature"]] = by_class.get(e["codeSignature"], 0) + self_w
            site = method(parent["codeSignature"])
            by_site[site] = by_site.get(site, 0) + self_w
    top_class = max(by_class, key=by_class.get)
    top_site = max(by_site, key=by_site.get)
    assert top_class == "long[]", (settings, sorted(by_class.items(), key=lambda kv: -kv[1])[:5])
    assert top_site == "JfrWorkload.allocateLongs", (settings, sorted(by_site.items(), key=lambda kv: -kv[1])[:5])

    # Lock: the contended method leads by time (monitor enter stacks end in it).
    lock = analyse(path, "lock")
    assert lock["summary"]["unit"] == "nanoseconds"
    by = self_by_method(lock)
    assert by, "no lock events in %s" % settings
    top = max(by, key=by.get)
    assert top == "JfrWorkload.contended", (settings, by)
    assert by[top] >= 20 * 1000 * 1000  # at least one wait over the 20 ms threshold

    # Reading from memory and from the file chunk by chunk give the same result.
    assert analyse(path, "lock", "-", "mem") == lock
    return exe


def check_damaged(path, tmp):
    data = open(path, "rb").read()
    bad = os.path.join(tmp, "bad.jfr")
    # Truncations: a clear error naming the chunk, never a crash.
    for cut in (0, 10, 67, 68, 200, len(data) // 3, len(data) // 2, len(data) - 1):
        open(bad, "wb").write(data[:cut])
        p = dump(bad)
        assert p.returncode == 1, "truncated at %d parsed" % cut
        msg = p.stderr
        assert ("truncated" in msg or "empty recording" in msg), msg
        p = dump(bad, "execution", "-", "mem")
        assert p.returncode == 1 and ("truncated" in p.stderr or "empty" in p.stderr), p.stderr
    # Bit flips: either a clean parse or a clean error with a message.
    rnd = random.Random(13)
    errors = 0
    for i in range(150):
        b = bytearray(data)
        for _ in range(rnd.choice((1, 1, 4))):
            pos = rnd.randrange(len(b))
            b[pos] ^= 1 << rnd.randrange(8)
        open(bad, "wb").write(bytes(b))
        p = dump(bad, rnd.choice(("execution", "alloc", "lock")))
        if p.returncode == 1:
            errors += 1
            assert re.match(r"error \d+: chunk 0 at offset \d+: \S", p.stderr) or "error 2" in p.stderr, p.stderr
    # Flipping the magic or the version is always caught.
    b = bytearray(data)
    b[1] ^= 0x20
    open(bad, "wb").write(bytes(b))
    p = dump(bad)
    assert p.returncode == 1 and "FLR magic" in p.stderr, p.stderr
    b = bytearray(data)
    b[5] = 9
    open(bad, "wb").write(bytes(b))
    p = dump(bad)
    assert p.returncode == 1 and "unsupported JFR version" in p.stderr, p.stderr
    print("bit flips: %d of 150 rejected with a message, the rest parsed" % errors)


def main():
    for tool in ("java", "javac", "jfr"):
        if not shutil.which(tool):
            print("SKIP: %s not installed (scripts/bootstrap installs openjdk-17-jdk-headless)" % tool)
            return 0
    tmp = tempfile.mkdtemp(prefix="skp-jfr-")
    try:
        classes = os.path.join(tmp, "classes")
        subprocess.run(["javac", "-d", classes, os.path.join(HERE, "JfrWorkload.java")], check=True,
                       timeout=JAVA_TIMEOUT)
        recs = []
        for settings in ("default", "profile"):
            # The machine is shared: record longer until the burner got enough samples.
            for millis in (4000, 8000, 16000):
                path = record(tmp, classes, settings, millis)
                d = analyse(path, "execution", "burner")
                if d["summary"]["kinds"]["execution"]["events"] >= 20 and total(d) >= 10:
                    break
            check_recording(path, settings)
            recs.append(path)
            print("%s: ok (%s)" % (settings, os.path.basename(path)))
        # Two recordings back to back are one two-chunk recording.
        both = os.path.join(tmp, "both.jfr")
        with open(both, "wb") as f:
            for r in recs:
                f.write(open(r, "rb").read())
        d = analyse(both, "execution")
        parts = [analyse(r, "execution")["summary"] for r in recs]
        assert d["summary"]["chunks"] == sum(p["chunks"] for p in parts)
        for k in ("execution", "alloc", "lock"):
            assert d["summary"]["kinds"][k]["events"] == sum(p["kinds"][k]["events"] for p in parts)
        check_damaged(recs[0], tmp)
        print("ok")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
