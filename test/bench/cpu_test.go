package bench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// cpuMeter reads how much CPU the rig's processes (kube-apiserver, etcd) and this test
// process (the in-process controller, the watches and the load generator) have used, so a
// benchmark can say where a phase's time went, not just how long it took.
type cpuMeter struct{ pids []int }

// cpuSample is the CPU time used so far, by the rig and by this process.
type cpuSample struct{ rig, self time.Duration }

func (m cpuMeter) sample(b testing.TB) cpuSample {
	b.Helper()
	var s cpuSample
	for _, pid := range m.pids {
		d, err := processCPU(pid)
		must(b, err, "reading the rig's CPU time")
		s.rig += d
	}
	var ru syscall.Rusage
	must(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru), "reading this process's CPU time")
	s.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return s
}

func (s cpuSample) sub(o cpuSample) cpuSample { return cpuSample{s.rig - o.rig, s.self - o.self} }

// processCPU is utime+stime of pid from /proc/<pid>/stat, in clock ticks of 10 ms (the
// USER_HZ every Linux ABI fixes at 100).
func processCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, field 2, may hold spaces: the fields after it follow its ')'.
	fields := bytes.Fields(data[bytes.LastIndexByte(data, ')')+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the name", pid, len(fields))
	}
	var ticks int64
	for _, f := range fields[11:13] { // utime, stime: fields 14 and 15 of the whole line
		n, err := strconv.ParseInt(string(f), 10, 64)
		if err != nil {
			return 0, err
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}
