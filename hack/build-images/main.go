// Command build-images builds the project's images without Docker (hack/images) into
// bin/images/<name>.tar, each only when its inputs changed, and optionally pushes them to
// a registry such as `bpa serve`'s. `make images` runs it.
//
//	go run ./hack/build-images [-push host:port [-insecure] [-token-file f]] [bpa pause argoexec kubespray]
//
// Without names it builds every image, leaving out argoexec while bin/argoexec is missing
// (hack/build-tools.sh builds it). The kubespray image's Debian rootfs needs root (mmdebstrap).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/akraino-edge-stack/bpa/hack/images"
)

func main() {
	var o images.Options
	var push, tokenFile string
	var insecure bool
	flag.StringVar(&o.Root, "root", ".", "the repository")
	flag.StringVar(&o.Dir, "dir", "", "output folder (default <root>/bin/images)")
	flag.StringVar(&o.BPATag, "bpa-tag", "", "the bpa image's tag (default dev)")
	flag.StringVar(&o.Argoexec, "argoexec", "", "Argo's executor binary (default <root>/bin/argoexec)")
	flag.StringVar(&push, "push", "", "registry host:port to push the images to, under their original names")
	flag.BoolVar(&insecure, "insecure", false, "push over plain HTTP")
	flag.StringVar(&tokenFile, "token-file", "", "file holding a bearer token for the registry")
	flag.Parse()
	if err := run(o, flag.Args(), push, tokenFile, insecure); err != nil {
		fmt.Fprintln(os.Stderr, "build-images:", err)
		os.Exit(1)
	}
}

func run(o images.Options, names []string, push, tokenFile string, insecure bool) error {
	o, err := o.Defaults()
	if err != nil {
		return err
	}
	if len(names) == 0 {
		names = images.Names
		if _, err := os.Stat(o.Argoexec); err != nil {
			fmt.Printf("image argoexec: skipped, %s is missing (hack/build-tools.sh builds it)\n", o.Argoexec)
			names = []string{"bpa", "pause", "kubespray"}
		}
	}
	ctx := context.Background()
	built, err := images.Build(ctx, o, names, func(f string, a ...any) { fmt.Printf(f+"\n", a...) })
	if err != nil || push == "" {
		return err
	}
	reg := images.Registry{Host: push, Insecure: insecure}
	if tokenFile != "" {
		tok, err := os.ReadFile(tokenFile)
		if err != nil {
			return err
		}
		reg.Token = strings.TrimSpace(string(tok))
	}
	for _, b := range built {
		img, err := b.Image()
		if err != nil {
			return err
		}
		tags, err := reg.Push(ctx, img, b.Spec.Refs)
		if err != nil {
			return err
		}
		for _, t := range tags {
			fmt.Printf("pushed %s@%s\n", t, b.Digest)
		}
	}
	return nil
}
