// pprofburn: a real pprof producer for skyprof's process-profiling tests. Written for the Go
// standard library only (Debian golang-go). It burns CPU in two named functions with a 3:1
// split for -seconds, writing a runtime/pprof CPU profile, then allocates in a named function
// and writes a heap profile. Usage: pprofburn -cpu cpu.pprof -heap heap.pprof -seconds 2
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"time"
)

var sink uint64
var keep [][]byte

//go:noinline
func spin(d time.Duration) {
	end := time.Now().Add(d)
	x := uint64(1)
	for time.Now().Before(end) {
		for i := 0; i < 10000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	sink += x
}

//go:noinline
func burnHeavy(d time.Duration) { spin(d) }

//go:noinline
func burnLight(d time.Duration) { spin(d) }

//go:noinline
func allocateBuffers(n, size int) {
	for i := 0; i < n; i++ {
		keep = append(keep, make([]byte, size))
	}
}

func main() {
	cpuPath := flag.String("cpu", "cpu.pprof", "CPU profile output")
	heapPath := flag.String("heap", "heap.pprof", "heap profile output")
	seconds := flag.Float64("seconds", 2, "CPU burn time")
	flag.Parse()
	runtime.MemProfileRate = 4096

	f, err := os.Create(*cpuPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	total := time.Duration(*seconds * float64(time.Second))
	slice := 20 * time.Millisecond
	for start := time.Now(); time.Since(start) < total; {
		burnHeavy(3 * slice)
		burnLight(slice)
	}
	pprof.StopCPUProfile()
	f.Close()

	allocateBuffers(2000, 64*1024)
	runtime.GC()
	h, err := os.Create(*heapPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := pprof.WriteHeapProfile(h); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	h.Close()
	fmt.Println("ok", len(keep))
}
