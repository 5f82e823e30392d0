package nodetrust_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/software"
)

// Issue 32: a tracked package (`version: latest`) works within the pin install-software
// writes. The command BPA plans for a host with an older htop, run by the real apt-get
// (simulated, -s), takes exactly the artifact server's newest htop, although the OS archive
// offers a higher one, and needs no --allow-downgrades; the pin keeps every other name on the
// server out of reach. A host with a newer htop gets no command at all, and apt itself would
// refuse the downgrade that command would be.
func TestLatestWithinThePinWithRealApt(t *testing.T) {
	installed := func(v string) string {
		return "Package: htop\nStatus: install ok installed\nVersion: " + v + "\nArchitecture: amd64\nMaintainer: x <x@example.org>\nDescription: installed\n\n"
	}
	archive := pkg("htop", "3.2.2-9") + pkg("bash", "5.2.15-2")
	server := pkg("htop", "3.2.2-3") + pkg("bash", "99.0")
	items := []bpav1.SoftwareItem{{Name: "htop", Version: bpav1.VersionLatest}}
	latest := map[string]string{"htop": "3.2.2-3"}

	apt, _ := aptRoot(t, installed("3.2.2-2"), archive, server, "htop")
	plan, err := software.PlanHost(items, map[string]string{"htop": "3.2.2-2"}, latest)
	require.NoError(t, err)
	require.Len(t, plan.Changes(), 1)
	argv := plan.Changes()[0]
	require.Equal(t, []string{"env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "--no-install-recommends", "htop=3.2.2-3"}, argv)
	assert.Contains(t, apt("apt-get", append([]string{"-s"}, argv[3:]...)...), "Inst htop [3.2.2-2] (3.2.2-3 ", "the server's newest, exactly")
	assert.Contains(t, apt("apt-cache", "policy", "bash"), "Candidate: 5.2.15-2", "tracking htop opens nothing else on the server")

	plan, err = software.PlanHost(items, map[string]string{"htop": "3.2.2-10"}, latest)
	require.NoError(t, err)
	assert.False(t, plan.Changed(), "a newer htop is left alone")
	_, try := aptRoot(t, installed("3.2.2-10"), archive, server, "htop")
	out, err := try("apt-get", "-s", "install", "-y", "--no-install-recommends", "htop=3.2.2-3")
	assert.Error(t, err, "apt refuses a downgrade under -y without --allow-downgrades:\n%s", out)
	assert.Contains(t, out, "--allow-downgrades")
}
