package artifacts

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"k8s.io/apiserver/pkg/authentication/user"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// A .deb joins the one apt repository whatever its path, so its path's domain says nothing
// about which package it brings: an uploader of dl.k8s.io could otherwise publish a higher
// version of any package a Software names without a version. Publishing, replacing or
// deleting one therefore also needs the verb on the resourceName apt/<Package>, both
// required. "apt" holds no dot, so no file domain or image registry (which must have one)
// is ever that name.
const aptNamePrefix = "apt/"

// packageName is the RBAC resourceName of the package a published file brings into the apt
// repository, or "" when it brings none (not a .deb, or published before BPA read control
// files). parseControl has checked the Package field against Debian policy
// ([a-z0-9][a-z0-9+.-]+), so it never holds a slash or anything else RBAC would read apart.
func packageName(m *FileMeta) string {
	if m == nil || !strings.HasSuffix(m.Path, ".deb") {
		return ""
	}
	pkg, ok := controlValue(m.Control, "Package")
	if !ok || !required[0].value.MatchString(pkg) {
		return ""
	}
	return aptNamePrefix + pkg
}

// mayPackages is nil when u may verb every package the files in ms bring (each named
// apt/<Package>), else the refusal naming the first it may not.
func (a *Auth) mayPackages(ctx context.Context, u user.Info, verb string, ms ...*FileMeta) error {
	for _, m := range ms {
		name := packageName(m)
		if name == "" {
			continue
		}
		if ok, reason := a.may(ctx, u, verb, name); !ok {
			return fmt.Errorf("Forbidden: %s may not %s %s.%s named %q %s: %s is a Debian package, which joins the apt repository, "+
				"so it needs %s both on its path's domain and on apt/<Package>", u.GetName(), verb, Resource,
				bpav1.GroupVersion.Group, name, reason, m.Path, verb)
		}
	}
	return nil
}

// userKey carries the authenticated user from serveFiles into tusd's hooks, whose
// HookEvent.Context keeps the request context's values.
type userKey struct{}

func withUser(ctx context.Context, u user.Info) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

// hookUser is the user serveFiles authenticated, or an error (never expected: every tus
// request passes serveFiles first).
func hookUser(ctx context.Context) (user.Info, error) {
	if ctx != nil {
		if u, ok := ctx.Value(userKey{}).(user.Info); ok {
			return u, nil
		}
	}
	return nil, tusError("ERR_UNAUTHENTICATED", "no authenticated user for this upload", http.StatusUnauthorized)
}
