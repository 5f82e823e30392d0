// Command gen-workflowtemplates writes the generated regions of workflowtemplates/
// provision.yaml (the ad-hoc run's DAG and lookup's outputs) from pkg/translator, the one
// source of the Provisioning DAG. `make generate` runs it.
package main

import (
	"fmt"
	"os"

	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

func main() {
	if err := run("workflowtemplates/provision.yaml"); err != nil {
		fmt.Fprintln(os.Stderr, "gen-workflowtemplates:", err)
		os.Exit(1)
	}
}

func run(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, err := translator.GenerateAdHocRun(data)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.WriteFile(path, out, 0o644)
}
