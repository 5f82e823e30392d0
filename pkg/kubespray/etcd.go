package kubespray

import "fmt"

// EtcdMembers chooses the masters that run etcd, from the masters in CR order and the
// explicit per-master choices (name -> etcd true/false; absent when the CR says nothing).
// kubespray refuses an even number of etcd hosts ("Stop if even number of etcd hosts"), so:
//   - when no master says, etcd runs on the largest odd number of masters, the first ones
//     in CR order (two masters: the first; four: the first three);
//   - when any master says, etcd runs on exactly the masters not marked false, which must
//     be an odd number (admission refuses anything else; this is the check behind it).
func EtcdMembers(masters []string, choice map[string]bool) ([]string, error) {
	if len(masters) == 0 {
		return nil, fmt.Errorf("no master: etcd needs at least one member")
	}
	if len(choice) == 0 {
		n := len(masters)
		if n%2 == 0 {
			n--
		}
		return masters[:n], nil
	}
	var out []string
	for _, m := range masters {
		if c, said := choice[m]; !said || c {
			out = append(out, m)
		}
	}
	if len(out)%2 == 0 {
		return nil, fmt.Errorf("%d masters run etcd (those without etcd: false): kubespray needs an odd number, at least one", len(out))
	}
	return out, nil
}
