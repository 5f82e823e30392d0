// Package policy applies the site admin's BPAPolicy to BPA CRs: which kubespray images may
// run, which BareMetalHost namespaces, lease files and artifact servers a namespace may use,
// and whether host-key checking may be turned off.
//
// The same rules are enforced in three places, all from this package or its mirror:
//   - at admission, by the ValidatingAdmissionPolicy in config/admission/site-policy.yaml,
//     which reads the BPAPolicy as its params (a test on a real apiserver proves the two
//     agree);
//   - by `bpa lint`, with the built-in defaults or a policy file;
//   - by the controller and the ad-hoc lookup step, right before a run starts, because a
//     policy may have been tightened after a CR was admitted.
package policy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/nodetrust"
)

// Policy is the policy in force and where it came from, for messages.
type Policy struct {
	Spec bpav1.BPAPolicySpec
	// Source names the policy in messages: "BPAPolicy default", a file, or the defaults.
	Source string
}

// Default is the policy of a site whose admin has granted nothing.
func Default() Policy {
	return Policy{Source: "the built-in default policy (no BPAPolicy default)"}
}

// Get reads the BPAPolicy named default. Without one (or without the kind) the defaults
// apply, which refuse everything a policy could grant.
func Get(ctx context.Context, r client.Reader) (Policy, error) {
	p := &bpav1.BPAPolicy{}
	err := r.Get(ctx, client.ObjectKey{Name: bpav1.PolicyName}, p)
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return Default(), nil
	case err != nil:
		return Policy{}, fmt.Errorf("reading BPAPolicy %s: %w", bpav1.PolicyName, err)
	}
	return Policy{Spec: p.Spec, Source: "BPAPolicy " + bpav1.PolicyName}, nil
}

// HostRelease is what releasing a BareMetalHost does to its operating system: Deprovision
// unless the admin chose Retain.
func (p Policy) HostRelease() bpav1.HostReleasePolicy {
	if p.Spec.HostRelease == "" {
		return bpav1.HostReleaseDeprovision
	}
	return p.Spec.HostRelease
}

// KubesprayImages are the allowed kubespray image repositories.
func (p Policy) KubesprayImages() []string {
	if len(p.Spec.KubesprayImages) == 0 {
		return []string{bpav1.DefaultKubesprayImage}
	}
	return p.Spec.KubesprayImages
}

// grant is the union of every grant naming ns.
func (p Policy) grant(ns string) bpav1.NamespaceGrant {
	var g bpav1.NamespaceGrant
	for _, n := range p.Spec.Namespaces {
		if !slices.Contains(n.Names, ns) {
			continue
		}
		g.BareMetalHostNamespaces = append(g.BareMetalHostNamespaces, n.BareMetalHostNamespaces...)
		g.LeaseHostPaths = append(g.LeaseHostPaths, n.LeaseHostPaths...)
		g.AllowInsecureHostKey = g.AllowInsecureHostKey || n.AllowInsecureHostKey
		g.AllowReboot = g.AllowReboot || n.AllowReboot
	}
	return g
}

// BareMetalHostNamespaceAllowed says whether CRs of ns may use hosts in hostNS.
func (p Policy) BareMetalHostNamespaceAllowed(ns, hostNS string) bool {
	return hostNS == ns || slices.Contains(p.grant(ns).BareMetalHostNamespaces, hostNS)
}

// RebootAllowed says whether Provisionings of ns may have their hosts rebooted by graded
// remediation's Reboot rung (spec.namespaces[].allowReboot).
func (p Policy) RebootAllowed(ns string) bool { return p.grant(ns).AllowReboot }

// CheckProvisioning lists what the policy forbids in a Provisioning.
func (p Policy) CheckProvisioning(prov *bpav1.Provisioning) field.ErrorList {
	spec, ns := &prov.Spec, prov.Namespace
	g := p.grant(ns)
	var errs field.ErrorList
	if k := spec.Kubespray; k != nil && k.Image != "" && !slices.Contains(p.KubesprayImages(), k.Image) {
		errs = append(errs, p.forbidden(field.NewPath("spec", "kubespray", "image"), k.Image, "spec.kubesprayImages", p.KubesprayImages()))
	}
	if h := spec.BareMetalHostNamespace; h != "" && !p.BareMetalHostNamespaceAllowed(ns, h) {
		errs = append(errs, p.forbidden(field.NewPath("spec", "bareMetalHostNamespace"), h,
			"spec.namespaces[].bareMetalHostNamespaces for namespace "+ns, g.BareMetalHostNamespaces))
	}
	if l := spec.Leases; l != nil && l.HostPath != "" && !slices.Contains(g.LeaseHostPaths, l.HostPath) {
		errs = append(errs, p.forbidden(field.NewPath("spec", "leases", "hostPath"), l.HostPath,
			"spec.namespaces[].leaseHostPaths for namespace "+ns, g.LeaseHostPaths))
	}
	if o := spec.Offline; o != nil && p.artifactServer(o.URL, ns) < 0 {
		errs = append(errs, p.forbidden(field.NewPath("spec", "offline", "url"), o.URL,
			"spec.artifactServers[].url for namespace "+ns, p.ArtifactServers(ns)))
	}
	return append(errs, p.checkSSH(spec.SSH, ns)...)
}

// ArtifactServers are the urls of the artifact servers ns's Provisionings may name.
func (p Policy) ArtifactServers(ns string) []string {
	var urls []string
	for _, s := range p.Spec.ArtifactServers {
		if len(s.Namespaces) == 0 || slices.Contains(s.Namespaces, ns) {
			urls = append(urls, s.URL)
		}
	}
	return urls
}

// artifactServer is the index of the spec.artifactServers entry for url that ns may use,
// or -1. An entry scoped to other namespaces is no entry: its CA must not reach ns's nodes.
func (p Policy) artifactServer(url, ns string) int {
	return slices.IndexFunc(p.Spec.ArtifactServers, func(s bpav1.ArtifactServer) bool {
		return s.URL == url && (len(s.Namespaces) == 0 || slices.Contains(s.Namespaces, ns))
	})
}

// CheckSoftware lists what the policy forbids in a Software.
func (p Policy) CheckSoftware(sw *bpav1.Software) field.ErrorList {
	return p.checkSSH(sw.Spec.SSH, sw.Namespace)
}

func (p Policy) checkSSH(ssh *bpav1.SSHConfig, ns string) field.ErrorList {
	if ssh == nil || !ssh.InsecureIgnoreHostKey || p.grant(ns).AllowInsecureHostKey {
		return nil
	}
	return field.ErrorList{field.Forbidden(field.NewPath("spec", "ssh", "insecureIgnoreHostKey"),
		fmt.Sprintf("turning host-key checking off is not allowed by %s (spec.namespaces[].allowInsecureHostKey for namespace %s)", p.Source, ns))}
}

func (p Policy) forbidden(path *field.Path, value, rule string, allowed []string) *field.Error {
	list := "none"
	if len(allowed) > 0 {
		list = strings.Join(allowed, ", ")
	}
	return field.Forbidden(path, fmt.Sprintf("%s is not allowed by %s (%s: %s)", value, p.Source, rule, list))
}

// ArtifactsCA is the CA bundle BPA installs on prov's nodes, re-encoded (nodetrust.Encode):
// the caBundle of the spec.artifactServers entry whose url is prov's spec.offline.url, or
// "" when there is none (the nodes must trust that server already). A bundle that is not
// certificates only is an error naming the entry.
func (p Policy) ArtifactsCA(prov *bpav1.Provisioning) (string, error) {
	if prov.Spec.Offline == nil {
		return "", nil
	}
	i := p.artifactServer(prov.Spec.Offline.URL, prov.Namespace)
	if i < 0 {
		return "", nil
	}
	return p.caBundle(i)
}

// BackupServer is the site's etcd backup server for prov's namespace
// (spec.etcdBackupServer) and its CA, re-encoded: "" when the policy names none, or its
// artifactServers entry does not serve prov's namespace. A bad bundle is an error naming
// the entry.
func (p Policy) BackupServer(prov *bpav1.Provisioning) (url, ca string, err error) {
	url = p.Spec.EtcdBackupServer
	if url == "" {
		return "", "", nil
	}
	i := p.artifactServer(url, prov.Namespace)
	if i < 0 {
		return "", "", nil
	}
	if ca, err = p.caBundle(i); err != nil {
		return "", "", err
	}
	return url, ca, nil
}

// caBundle is the caBundle of spec.artifactServers[i] as the nodes get it, re-encoded
// (nodetrust.Encode), or an error naming the field: it must be certificates only, each with
// name constraints that let it vouch for the entry's server and nothing the admin did not
// choose (nodetrust.CheckScope), since every program on the nodes trusts it.
func (p Policy) caBundle(i int) (string, error) {
	s := p.Spec.ArtifactServers[i]
	certs, err := nodetrust.ParseFor([]byte(s.CABundle), s.URL)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", p.Source, caBundlePath(i), err)
	}
	return string(nodetrust.Encode(certs)), nil
}

// AptRepo is an artifact server's apt repository as install-software adds it to a node:
// the server, and the admin's key (nodetrust.ParseAptKey's re-encoding) and CA for it.
type AptRepo struct{ URL, Key, CA string }

// AptRepo resolves a Software's spec.aptSource against prov, the cluster's Provisioning:
// none when the Software does not ask for it; otherwise the server of prov's spec.offline
// and the key and CA of its spec.artifactServers entry. A repository the nodes could not
// check (no server, no entry, no key) is refused, naming spec.aptSource.
func (p Policy) AptRepo(sw *bpav1.Software, prov *bpav1.Provisioning) (*AptRepo, error) {
	if sw.Spec.AptSource != bpav1.AptSourceBPA {
		return nil, nil
	}
	if prov == nil || prov.Spec.Offline == nil {
		return nil, errors.New("the cluster's Provisioning has no spec.offline.url: there is no artifact server to take packages from")
	}
	url := prov.Spec.Offline.URL
	if i := p.artifactServer(url, prov.Namespace); i >= 0 && p.Spec.ArtifactServers[i].AptKey != "" {
		s := p.Spec.ArtifactServers[i]
		key, err := nodetrust.ParseAptKey([]byte(s.AptKey))
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", p.Source, aptKeyPath(i), err)
		}
		ca, err := p.caBundle(i)
		if err != nil {
			return nil, err
		}
		return &AptRepo{URL: url, Key: string(key), CA: ca}, nil
	}
	return nil, fmt.Errorf("%s gives artifact server %s no aptKey (spec.artifactServers[].aptKey): BPA never adds a repository whose signatures the nodes cannot check; ask the site admin",
		p.Source, url)
}

// CheckPolicy lists what is wrong in a BPAPolicy beyond its schema: every caBundle must be
// certificates and nothing else, each name-constrained to its server (nodetrust.CheckScope),
// every aptKey public keys and nothing else.
func CheckPolicy(spec *bpav1.BPAPolicySpec) field.ErrorList {
	var errs field.ErrorList
	for i, s := range spec.ArtifactServers {
		if _, err := nodetrust.ParseFor([]byte(s.CABundle), s.URL); err != nil {
			errs = append(errs, field.Invalid(caBundlePath(i), field.OmitValueType{}, err.Error()))
		}
		if s.AptKey == "" {
			continue
		}
		if _, err := nodetrust.ParseAptKey([]byte(s.AptKey)); err != nil {
			errs = append(errs, field.Invalid(aptKeyPath(i), field.OmitValueType{}, err.Error()))
		}
	}
	return errs
}

func aptKeyPath(i int) *field.Path {
	return field.NewPath("spec", "artifactServers").Index(i).Child("aptKey")
}

func caBundlePath(i int) *field.Path {
	return field.NewPath("spec", "artifactServers").Index(i).Child("caBundle")
}
