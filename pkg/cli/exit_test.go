package cli

import (
	"errors"
	"fmt"
	"testing"

	"github.com/akraino-edge-stack/bpa/pkg/steps/stepio"
)

// A step whose Provisioning changed since the run started exits with its own status
// (stepio.ExitChanged), however its error is wrapped: the steps' retry strategies tell it
// from a failure by that status alone (workflowtemplates.NotChangedExpression).
func TestAChangedCRExitsWithItsOwnStatus(t *testing.T) {
	changed := fmt.Errorf("resolving the leases: %w", &stepio.ChangedError{Name: "p", Was: 2, Now: 3})
	requireExit(t, changed, stepio.ExitChanged, "Error: resolving the leases: Provisioning p changed since this run started (generation 2, now 3); the controller starts a new run")
	requireExit2(t, errors.New("reading Provisioning bpa/p: not found"), "not found")
}
