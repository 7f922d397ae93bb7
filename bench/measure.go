package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// percentile returns the q-quantile of xs (sorted in place).
func percentile(xs []time.Duration, q float64) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	i := int(q*float64(len(xs))+0.5) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}

// stealTime is the CPU time the hypervisor gave to others, all CPUs
// together (the steal column of /proc/stat); zero where it cannot be read.
func stealTime() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	ticks, err := strconv.ParseInt(f[8], 10, 64)
	if err != nil {
		return 0
	}
	return time.Duration(ticks) * 10 * time.Millisecond // USER_HZ is 100 on Linux
}

// procCPU is a process's user and system time so far, and its command
// name, from /proc/<pid>/stat.
func procCPU(pid int) (time.Duration, string) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, ""
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open || end+2 > len(s) {
		return 0, ""
	}
	f := strings.Fields(s[end+2:])
	if len(f) < 13 {
		return 0, ""
	}
	// utime and stime are fields 14 and 15 of stat (11 and 12 after the name and state).
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond, s[open+1 : end] // USER_HZ 100
}

// postgresCPU is the CPU time so far of every process named postgres on
// this machine (the server's backends and workers: PostgreSQL's share of
// a scenario on the same CPUs). A backend that exits takes its time with
// it: measure over a span in which the connections stay open.
func postgresCPU() time.Duration {
	ents, _ := os.ReadDir("/proc")
	var sum time.Duration
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if d, name := procCPU(pid); name == "postgres" {
			sum += d
		}
	}
	return sum
}

// profileWindow starts a CPU profile of a measurement window when
// FOM_BENCH_WINDOW_PROFILE is set, to <prefix>-<name>, with heap profiles
// at its start and end (<prefix>-<name>-allocs0 and -allocs1), and
// returns what stops it.
func profileWindow(name string) (stop func()) {
	p := os.Getenv("FOM_BENCH_WINDOW_PROFILE")
	if p == "" {
		return func() {}
	}
	f, err := os.Create(p + "-" + name)
	if err != nil {
		return func() {}
	}
	heap(p + "-" + name + "-allocs0")
	if pprof.StartCPUProfile(f) != nil {
		f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
		heap(p + "-" + name + "-allocs1")
	}
}

// heap writes the heap profile to path: two of them, read with
// `go tool pprof -sample_index=alloc_space -base <allocs0> <allocs1>`,
// show what the window allocated. The profile counts allocations as of
// the last collection, so one is run first: a profiled run's CPU figures
// include it.
func heap(path string) {
	f, err := os.Create(path)
	if err != nil {
		return
	}
	defer f.Close()
	runtime.GC()
	pprof.Lookup("allocs").WriteTo(f, 0)
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	c, _ := usage()
	return c
}

// usage is the process's user+system CPU time and its context switches
// (voluntary and not) so far. Switches are counted by the kernel, so they
// move far less between runs on a VM than CPU time does: a change of how
// a fire wakes goroutines shows in them when the CPU figure is noise.
func usage() (cpu time.Duration, switches int64) {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), ru.Nvcsw + ru.Nivcsw
}

// heapInUse returns live heap plus goroutine stacks after a full GC.
func heapInUse() (heap, stack uint64) {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc, m.StackInuse
}

func mallocs() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.Mallocs
}

func ms(d time.Duration) string {
	return trimFloat(float64(d)/float64(time.Millisecond), 2) + " ms"
}

func us(d time.Duration) string {
	return trimFloat(float64(d)/float64(time.Microsecond), 2) + " µs"
}

// runChild runs this program again with args, in a process of its own,
// and decodes the JSON it writes to stdout; what names the run in errors.
func runChild[T any](what string, args ...string) (T, error) {
	var w T
	cmd := exec.Command(os.Args[0], args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return w, fmt.Errorf("%s: %w", what, err)
	}
	if err := json.Unmarshal(out, &w); err != nil {
		return w, fmt.Errorf("%s: %w in %q", what, err, out)
	}
	return w, nil
}
