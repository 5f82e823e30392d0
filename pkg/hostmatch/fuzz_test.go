package hostmatch

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// FuzzMatchSpec decodes arbitrary Provisioning YAML (seeded with the examples and the
// project's own ICN-shaped samples) and matches it against the example hosts: Match never panics, and any
// assignment it returns gives every node exactly one distinct host that meets its needs.
func FuzzMatchSpec(f *testing.F) {
	var seeds []string
	for _, glob := range []string{"../validation/testdata/good/*.yaml", "../../examples/provisioning-*.yaml"} {
		m, err := filepath.Glob(glob)
		require.NoError(f, err)
		seeds = append(seeds, m...)
	}
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		require.NoError(f, err)
		f.Add(data)
	}
	var hosts []metal3v1.BareMetalHost
	files, err := filepath.Glob("../../examples/bmh/*.yaml")
	require.NoError(f, err)
	seen := map[string]bool{}
	for _, file := range files {
		hs, err := ReadBareMetalHostsFile(file)
		require.NoError(f, err)
		for _, h := range hs {
			if !seen[h.Name] { // node-01 serves two examples
				seen[h.Name] = true
				hosts = append(hosts, h)
			}
		}
	}
	hosts = append(hosts,
		bmh("broken", hw(64, 262144), boot("00:c2:12:03:62:b3"), errorMessage("dead")),
		bmh("taken", hw(64, 262144), boot("00:c2:12:03:62:b4"), claimedBy("other")),
		bmh("bare", boot("00:c2:12:03:62:b5"), notInspected))

	f.Fuzz(func(t *testing.T, data []byte) {
		var p bpav1.Provisioning
		if yaml.Unmarshal(data, &p) != nil {
			return
		}
		got, err := MatchSpec(&p.Spec, nil, nil, Claimant{Cluster: "c"}, hosts)
		if err != nil {
			return
		}
		nodes, err := Nodes(&p.Spec)
		if err != nil {
			t.Fatalf("Match succeeded where Nodes fails: %v", err)
		}
		if len(got) != len(nodes) {
			t.Fatalf("%d nodes, %d hosts", len(nodes), len(got))
		}
		if !sort.SliceIsSorted(got, func(i, j int) bool { return got[i].Name < got[j].Name }) {
			t.Fatal("not sorted by name")
		}
		byName := map[string]*metal3v1.BareMetalHost{}
		for i := range hosts {
			byName[hosts[i].Name] = &hosts[i]
		}
		sel, _ := SelectorsOf(&p.Spec)
		used := map[string]bool{}
		for _, hs := range got {
			if used[hs.BareMetalHost] {
				t.Fatalf("host %s used twice", hs.BareMetalHost)
			}
			used[hs.BareMetalHost] = true
			h := newHost(byName[hs.BareMetalHost], Claimant{Cluster: "c"}, sel)
			if h.excluded != "" {
				t.Fatalf("chose %s, which %s", h.name, h.excluded)
			}
			if miss := unmet(nodes[indexOf(nodes, hs.Name)], &h); len(miss) > 0 {
				t.Fatalf("node %s on %s: %s", hs.Name, h.name, longForms(miss))
			}
		}
	})
}
