package bench

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// cpuMeter reads how much CPU the rig's processes (kube-apiserver, etcd) and this test
// process (the in-process controller, the watches and the load generator) have used, so a
// benchmark can say where a phase's time went, not just how long it took.
type cpuMeter struct{ pids []int }

// cpuSample is the CPU time used so far, by the rig and by this process.
type cpuSample struct{ rig, self time.Duration }

// rigCPU and selfCPU pick one side of a sample.
func rigCPU(c cpuSample) time.Duration  { return c.rig }
func selfCPU(c cpuSample) time.Duration { return c.self }

// medianCPUms is the median over samples of part, in milliseconds divided by per (the
// items each sample covered; 1 for a whole phase).
func medianCPUms(samples []cpuSample, part func(cpuSample) time.Duration, per float64) float64 {
	v := make([]float64, len(samples))
	for i, c := range samples {
		v[i] = ms(part(c)) / per
	}
	return percentile(v, 50)
}

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

// phaseProfile, when set, is where a benchmark that supports it writes a CPU profile of
// this process (the in-process controller) over its timed phase only: a whole-binary
// -cpuprofile is mostly the rig's set-up. The kube-apiserver's profile of the same phase
// goes beside it (.apiserver), taken for -phase-seconds from the phase's start: its
// profiling endpoint wants the length up front.
var (
	phaseProfile = flag.String("phase-cpuprofile", "", "write CPU profiles of this process and of the kube-apiserver over the timed phase (the last one, where a benchmark has several) to this file and FILE.apiserver")
	phaseSeconds = flag.Int("phase-seconds", 5, "with -phase-cpuprofile, how long to profile the kube-apiserver for")
)

// startPhaseProfile starts those profiles, if asked for, and returns what stops them.
func startPhaseProfile(b testing.TB, e *env) (stop func()) {
	b.Helper()
	if *phaseProfile == "" {
		return func() {}
	}
	f, err := os.Create(*phaseProfile)
	must(b, err, "phase profile")
	must(b, pprof.StartCPUProfile(f), "starting the phase profile")
	rc, err := rest.RESTClientFor(withCodec(e.cfg))
	must(b, err, "apiserver profile client")
	apiserver := make(chan error, 1)
	go func() {
		data, err := rc.Get().AbsPath("/debug/pprof/profile").Param("seconds", strconv.Itoa(*phaseSeconds)).
			Timeout(time.Duration(*phaseSeconds+30) * time.Second).DoRaw(context.Background())
		if err == nil {
			err = os.WriteFile(*phaseProfile+".apiserver", data, 0o644)
		}
		apiserver <- err
	}()
	return func() {
		pprof.StopCPUProfile()
		must(b, f.Close(), "writing the phase profile")
		must(b, <-apiserver, "the kube-apiserver's profile")
	}
}

// withCodec is cfg as a plain REST client needs it.
func withCodec(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &schema.GroupVersion{}
	c.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	return c
}
