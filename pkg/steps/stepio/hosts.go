package stepio

import (
	"encoding/json"
	"fmt"
	"os"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// ReadHosts reads a hosts file as WriteHosts writes it: a JSON list of HostStatus. Unknown
// fields are errors: the file crosses a process boundary and a misspelt field would silently
// drop a host's address. An empty list is an error too: no step has work without hosts.
func ReadHosts(file string) ([]bpav1.HostStatus, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("reading hosts: %w", err)
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	var hosts []bpav1.HostStatus
	if err := dec.Decode(&hosts); err != nil {
		return nil, fmt.Errorf("reading hosts from %s: %w", file, err)
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("reading hosts from %s: the list is empty", file)
	}
	return hosts, nil
}

// WriteHosts writes hosts as the JSON list the next step reads (an Argo output parameter).
func WriteHosts(file string, hosts []bpav1.HostStatus) error {
	data, err := json.Marshal(hosts)
	if err != nil {
		return err
	}
	return WriteOutput(file, data)
}
