// A small Java program whose recordings the JFR tests check: a thread burning CPU in a named
// method, a thread allocating long[] arrays in a named method, and threads contending on one
// monitor. Usage: java JfrWorkload MILLIS [cpu] [alloc] [lock]  (no modes = all three).
import java.util.ArrayList;
import java.util.List;

public class JfrWorkload {
    static volatile long sink;
    static final Object MONITOR = new Object();

    static long spinHot(long n) {
        long s = 0;
        for (long i = 0; i < n; i++) {
            s += (i * 31) ^ (s >>> 3);
        }
        return s;
    }

    static long spinCold(long n) {
        long s = 1;
        for (long i = 0; i < n; i++) {
            s = s * 17 + i;
        }
        return s;
    }

    static void burn(long end) {
        while (System.currentTimeMillis() < end) {
            sink += spinHot(4_000_000);
            sink += spinCold(400_000);
        }
    }

    static long[] allocateLongs() {
        return new long[16 * 1024];
    }

    static String allocateLittle(int i) {
        return Integer.toString(i);
    }

    static void allocate(long end) {
        List<Object> keep = new ArrayList<>();
        int i = 0;
        while (System.currentTimeMillis() < end) {
            keep.add(allocateLongs());
            keep.add(allocateLittle(i++));
            if (keep.size() > 256) {
                keep.clear();
            }
        }
        sink += keep.size();
    }

    static void contended() throws InterruptedException {
        synchronized (MONITOR) {
            Thread.sleep(40);
        }
    }

    static void lock(long end) {
        try {
            while (System.currentTimeMillis() < end) {
                contended();
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    public static void main(String[] args) throws Exception {
        long millis = Long.parseLong(args[0]);
        boolean all = args.length == 1;
        List<String> modes = List.of(args).subList(1, args.length);
        long end = System.currentTimeMillis() + millis;
        List<Thread> threads = new ArrayList<>();
        if (all || modes.contains("cpu")) {
            threads.add(new Thread(() -> burn(end), "burner"));
        }
        if (all || modes.contains("alloc")) {
            threads.add(new Thread(() -> allocate(end), "allocator"));
        }
        if (all || modes.contains("lock")) {
            for (int t = 0; t < 3; t++) {
                threads.add(new Thread(() -> lock(end), "locker-" + t));
            }
        }
        for (Thread t : threads) {
            t.start();
        }
        for (Thread t : threads) {
            t.join();
        }
    }
}
