package images

import (
	"context"
	"fmt"
	"time"
)

// Names are the images Build knows, in the order it builds them.
var Names = []string{"bpa", "pause", "argoexec", "kubespray"}

// Build builds each named image (its binaries first) into o.Dir, skipping those whose
// stamp matches, and says one line per image through logf.
func Build(ctx context.Context, o Options, names []string, logf func(format string, args ...any)) ([]Built, error) {
	out := make([]Built, 0, len(names))
	for _, n := range names {
		start := time.Now()
		spec, err := specOf(ctx, o, n, logf)
		if err != nil {
			return out, fmt.Errorf("image %s: %w", n, err)
		}
		b, err := Write(o.Dir, spec)
		if err != nil {
			return out, fmt.Errorf("image %s: %w", n, err)
		}
		state := "built"
		if b.Cached {
			state = "up to date"
		}
		logf("image %s: %s in %.1fs, %s (%s)", n, state, time.Since(start).Seconds(), b.Digest, b.Path)
		out = append(out, b)
	}
	return out, nil
}

// specOf builds the binaries (and the rootfs) image n takes, and returns its spec.
func specOf(ctx context.Context, o Options, n string, logf func(string, ...any)) (Spec, error) {
	switch n {
	case "bpa":
		bin, err := BuildBPA(o)
		if err != nil {
			return Spec{}, err
		}
		return BPA(o, bin)
	case "pause":
		return Pause(o)
	case "argoexec":
		return Argoexec(o)
	case "kubespray":
		start := time.Now()
		rootfs, key, note, err := KubesprayRootfs.Build(ctx, o.Dir)
		if err != nil {
			return Spec{}, err
		}
		if note != "" {
			logf("image kubespray: %s", note)
		}
		logf("image kubespray: rootfs %s ready in %.1fs", key, time.Since(start).Seconds())
		return Kubespray(o, rootfs, key)
	}
	return Spec{}, fmt.Errorf("unknown image %q (want one of %v)", n, Names)
}
