package bench

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	var samples []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose
		samples = append(samples, time.Duration(i)*time.Millisecond)
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{50, 50 * time.Millisecond}, {99, 99 * time.Millisecond}, {100, 100 * time.Millisecond}, {0.1, time.Millisecond}} {
		if got := percentile(samples, c.p); got != c.want {
			t.Errorf("p%v = %v, want %v", c.p, got, c.want)
		}
	}
	if got := percentile([]time.Duration{7}, 99); got != 7 {
		t.Errorf("p99 of one sample = %v, want 7ns", got)
	}
	if got := percentile[time.Duration](nil, 50); got != 0 {
		t.Errorf("p50 of none = %v, want 0", got)
	}
}

// The rounds of BenchmarkCreate500Workflows report medians of ratios.
func TestPercentileOfRatios(t *testing.T) {
	if got := percentile([]float64{1.38, 1.17, 1.30, 1.24, 1.33}, 50); got != 1.30 {
		t.Errorf("median of five = %v, want 1.30", got)
	}
	if got := percentile([]float64{1.3, 1.1, 1.4, 1.2}, 50); got != 1.2 {
		t.Errorf("median of four = %v, want the lower middle, 1.2", got)
	}
}
