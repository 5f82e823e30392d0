package policy

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/debversion"
)

// Latest is what a Software's items saying `version: latest` resolve to: the newest version
// of each in the index of its cluster's artifact server.
type Latest struct {
	// Versions are the tracked packages' newest versions, sorted by name.
	Versions []bpav1.PackageVersion
	// Index is the ArtifactIndex they were read from, at Revision.
	Index    string
	Revision int64
}

// LatestRefusal is a latest item BPA cannot resolve now (no index for the server, nothing
// recorded yet, a package the repository does not hold); Field names the item. It lifts
// when the index or the policy changes, which the controller watches.
type LatestRefusal struct{ Field, Message string }

func (e *LatestRefusal) Error() string { return e.Field + ": " + e.Message }

// IndexName is the ArtifactIndex the policy names for prov's artifact server
// (spec.artifactServers[].index of the entry for its spec.offline.url that prov's namespace
// may use), or an error saying why there is none. Only that object is ever read for the
// server: another server, or anyone else who can write an ArtifactIndex, cannot speak for it.
func (p Policy) IndexName(prov *bpav1.Provisioning) (string, error) {
	if prov == nil || prov.Spec.Offline == nil {
		return "", fmt.Errorf("the cluster's Provisioning has no spec.offline.url: there is no artifact server whose newest versions to follow")
	}
	url := prov.Spec.Offline.URL
	i := p.artifactServer(url, prov.Namespace)
	if i < 0 {
		return "", fmt.Errorf("artifact server %s is not listed by %s for namespace %s", url, p.Source, prov.Namespace)
	}
	if p.Spec.ArtifactServers[i].Index == "" {
		return "", fmt.Errorf("%s names no index for artifact server %s (spec.artifactServers[].index): without one BPA cannot know which versions it holds; ask the site admin", p.Source, url)
	}
	return p.Spec.ArtifactServers[i].Index, nil
}

// SoftwareLatest resolves sw's latest items against the index of its cluster's artifact
// server (IndexName, for the Provisioning of the cluster that succeeded): nil when sw tracks
// nothing. What cannot be resolved is a *LatestRefusal naming the item.
func SoftwareLatest(ctx context.Context, pol Policy, r client.Reader, sw *bpav1.Software, cluster string) (*Latest, error) {
	tracked := sw.Spec.Tracked()
	if len(tracked) == 0 {
		return nil, nil
	}
	first := latestField(sw.Spec, tracked[0])
	prov, err := succeededProvisioning(ctx, r, sw.Namespace, cluster)
	if err != nil {
		return nil, err
	}
	name, err := pol.IndexName(prov)
	if err != nil {
		return nil, &LatestRefusal{Field: first, Message: err.Error()}
	}
	idx := &bpav1.ArtifactIndex{}
	if err := r.Get(ctx, client.ObjectKey{Name: name}, idx); apierrors.IsNotFound(err) {
		return nil, &LatestRefusal{Field: first, Message: fmt.Sprintf("ArtifactIndex %s, which %s names for artifact server %s, does not exist; the site admin creates it (config/serve)", name, pol.Source, prov.Spec.Offline.URL)}
	} else if err != nil {
		return nil, fmt.Errorf("reading ArtifactIndex %s: %w", name, err)
	}
	if idx.Status.Revision == 0 {
		return nil, &LatestRefusal{Field: first, Message: fmt.Sprintf("artifact server %s has recorded nothing in ArtifactIndex %s yet (bpa serve --index %s)", prov.Spec.Offline.URL, name, name)}
	}
	newest := map[string]string{}
	for _, p := range idx.Status.Packages {
		newest[p.Name] = p.Version
	}
	l := &Latest{Index: name, Revision: idx.Status.Revision}
	for _, t := range tracked {
		v, ok := newest[t]
		switch {
		case !ok:
			return nil, &LatestRefusal{Field: latestField(sw.Spec, t), Message: fmt.Sprintf("artifact server %s holds no %s (ArtifactIndex %s revision %d); the run starts when one is uploaded",
				prov.Spec.Offline.URL, t, name, idx.Status.Revision)}
		case !debversion.Valid(v):
			// The server lists what uploads declare; BPA never hands apt-get a version that
			// is not Debian syntax, whoever wrote the index.
			return nil, &LatestRefusal{Field: latestField(sw.Spec, t), Message: fmt.Sprintf("ArtifactIndex %s gives %s the version %q, which is not a Debian version", name, t, v)}
		}
		l.Versions = append(l.Versions, bpav1.PackageVersion{Name: t, Version: v})
	}
	return l, nil
}

// latestField is the path of the first item of spec saying name: {version: latest}.
func latestField(spec bpav1.SoftwareSpec, name string) string {
	for _, l := range []struct {
		path  string
		items []bpav1.SoftwareItem
	}{{"masterSoftware", spec.MasterSoftware}, {"workerSoftware", spec.WorkerSoftware}} {
		for i, it := range l.items {
			if it.Name == name && it.Version == bpav1.VersionLatest {
				return field.NewPath("spec", l.path).Index(i).Child(name, "version").String()
			}
		}
	}
	return "spec"
}
