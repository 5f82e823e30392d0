package rig

// EtcdURL is the rig's own etcd, for tests that look at what it holds.
func (r *Rig) EtcdURL() string { return r.etcdURL }
