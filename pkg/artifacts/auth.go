package artifacts

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// Resource is what a SubjectAccessReview asks about for artifact reads and writes: the
// cluster-scoped resource `artifacts` of BPA's group, with verbs get, create and delete.
// It exists only in RBAC, so an admin grants uploads like any other permission.
const Resource = "artifacts"

// VerbOverride is the verb that, on artifacts named by a path's domain or an image
// repository, lets its holder replace a published file with other bytes, delete another
// principal's file, re-point an existing tag, and delete images. Uploaders do not hold it: what one uploader published,
// another cannot change (see config/serve/rbac.yaml, bpa-artifacts-admin).
const VerbOverride = "override"

// DefaultAudience is the audience a token must be minted for (TokenRequest's spec.audiences,
// `kubectl create token --audience`) for the server to accept it. A token for the
// Kubernetes API is refused: a server that took one could replay it against the apiserver,
// and so could anyone who took it from the server.
const DefaultAudience = "bpa-artifacts"

// Auth decides who may do what, with the apiserver's own delegating authenticator
// (TokenReview) and authorizer (SubjectAccessReview), as controller-runtime's secure
// metrics serving does: a token the apiserver would refuse is refused here too.
type Auth struct {
	Authn authenticator.Request
	Authz authorizer.Authorizer
	// AnonymousReads lets requests without a token download files and pull images.
	AnonymousReads bool
	// Audience is the one audience a token must be bound to (the TokenReview's
	// spec.audiences, checked against its status.audiences); empty means DefaultAudience.
	Audience string
}

// NewAuth builds Auth on the apiserver cfg points at. Decisions are cached briefly, so an
// upload's many requests cost one review, and a revoked permission lapses within a minute.
// Tokens are reviewed for audience alone: see DefaultAudience.
func NewAuth(cfg *rest.Config, anonymousReads bool, audience string) (*Auth, error) {
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	backoff := &wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
	authn, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous: &apiserver.AnonymousAuthConfig{Enabled: false},
		// No implicit audiences: a review that answers without status.audiences (an
		// authenticator that ignores audiences) then authenticates nobody.
		APIAudiences:             nil,
		CacheTTL:                 time.Minute,
		TokenAccessReviewClient:  kc.AuthenticationV1(),
		TokenAccessReviewTimeout: 10 * time.Second,
		WebhookRetryBackoff:      backoff,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("authenticator: %w", err)
	}
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: kc.AuthorizationV1(),
		AllowCacheTTL:             time.Minute,
		DenyCacheTTL:              10 * time.Second,
		WebhookRetryBackoff:       backoff,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("authorizer: %w", err)
	}
	return &Auth{Authn: authn, Authz: authz, AnonymousReads: anonymousReads, Audience: audience}, nil
}

var anonymous = &user.DefaultInfo{Name: user.Anonymous, Groups: []string{user.AllUnauthenticated}}

// allow authenticates r and asks whether its user may verb artifacts (BPA's cluster-scoped
// Resource) as a whole. On refusal it has written the response (401 or 403) and returns false.
func (a *Auth) allow(w http.ResponseWriter, r *http.Request, verb string) (user.Info, bool) {
	if verb == "get" && a.AnonymousReads && r.Header.Get("Authorization") == "" {
		return anonymous, true
	}
	u, ok := a.authenticate(w, r)
	return u, ok && a.authorize(w, r, u, verb, Resource, "")
}

// authenticate reviews r's bearer token (and removes it from r, as the apiserver's
// authenticator does), or answers 401. The token may also come as the password of basic
// auth, which is what `docker login`, `crane auth login`, skopeo and oras send.
func (a *Auth) authenticate(w http.ResponseWriter, r *http.Request) (user.Info, bool) {
	if _, token, ok := r.BasicAuth(); ok {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	aud := a.Audience
	if aud == "" {
		aud = DefaultAudience
	}
	// With audiences in the context the webhook authenticator asks the TokenReview for them
	// and accepts only a status.audiences that holds one, as the apiserver's own filter does.
	res, ok, err := a.Authn.AuthenticateRequest(r.WithContext(authenticator.WithAudiences(r.Context(), authenticator.Audiences{aud})))
	if err != nil || !ok {
		// Registry clients answer a Basic challenge with their stored login.
		scheme := "Bearer"
		if strings.HasPrefix(r.URL.Path, "/v2") {
			scheme = "Basic"
		}
		w.Header().Set("WWW-Authenticate", scheme+` realm="bpa"`)
		http.Error(w, fmt.Sprintf("Unauthorized: a Kubernetes token for audience %q is required (bpa artifacts requests one; "+
			"or `kubectl create token SERVICEACCOUNT --audience %s`); tokens for the Kubernetes API are refused", aud, aud), http.StatusUnauthorized)
		return nil, false
	}
	return res.User, true
}

// allowNamed authenticates r and asks whether its user may verb the artifacts named by any
// of names (a path's domain, an image's registry or repository: RBAC resourceNames). On
// refusal it has written the response (401 or 403) and returns false.
func (a *Auth) allowNamed(w http.ResponseWriter, r *http.Request, verb string, names ...string) (user.Info, bool) {
	u, ok := a.authenticate(w, r)
	if !ok {
		return nil, false
	}
	if allowed, reason := a.may(r.Context(), u, verb, names...); !allowed {
		http.Error(w, fmt.Sprintf("Forbidden: %s may not %s %s.%s named %s %s", u.GetName(), verb, Resource,
			bpav1.GroupVersion.Group, strings.Join(quoteAll(names), " or "), reason), http.StatusForbidden)
		return nil, false
	}
	return u, true
}

func quoteAll(names []string) []string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return q
}

// allowPath authenticates r and asks whether its user may verb the nonResourceURL path
// (RBAC's nonResourceURLs: /metrics). On refusal it has written the response (401 or 403)
// and returns false.
func (a *Auth) allowPath(w http.ResponseWriter, r *http.Request, verb, path string) bool {
	u, ok := a.authenticate(w, r)
	if !ok {
		return false
	}
	decision, reason, err := a.Authz.Authorize(r.Context(), authorizer.AttributesRecord{User: u, Verb: verb, Path: path})
	if err != nil || decision != authorizer.DecisionAllow {
		http.Error(w, fmt.Sprintf("Forbidden: %s may not %s %s %s", u.GetName(), verb, path, reason), http.StatusForbidden)
		return false
	}
	return true
}

// authorize asks whether u may verb resource (of BPA's group) in namespace, or answers 403.
func (a *Auth) authorize(w http.ResponseWriter, r *http.Request, u user.Info, verb, resource, namespace string) bool {
	if allowed, reason := a.mayResource(r.Context(), u, verb, resource, namespace, ""); !allowed {
		http.Error(w, fmt.Sprintf("Forbidden: %s may not %s %s.%s %s", u.GetName(), verb, resource,
			bpav1.GroupVersion.Group, reason), http.StatusForbidden)
		return false
	}
	return true
}

// may is whether u may verb artifacts named by any of names (without names: artifacts
// as a whole), and the authorizer's reason when not.
func (a *Auth) may(ctx context.Context, u user.Info, verb string, names ...string) (bool, string) {
	if len(names) == 0 {
		return a.mayResource(ctx, u, verb, Resource, "", "")
	}
	var reason string
	for _, n := range names {
		var ok bool
		if ok, reason = a.mayResource(ctx, u, verb, Resource, "", n); ok {
			return true, ""
		}
	}
	return false, reason
}

func (a *Auth) mayResource(ctx context.Context, u user.Info, verb, resource, namespace, name string) (bool, string) {
	attrs := authorizer.AttributesRecord{
		User: u, Verb: verb, APIGroup: bpav1.GroupVersion.Group, APIVersion: bpav1.GroupVersion.Version,
		Resource: resource, Namespace: namespace, Name: name, ResourceRequest: true,
	}
	decision, reason, err := a.Authz.Authorize(ctx, attrs)
	if err != nil {
		reason = err.Error()
	}
	return err == nil && decision == authorizer.DecisionAllow, reason
}
