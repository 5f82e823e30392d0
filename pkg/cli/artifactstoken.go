package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"golang.org/x/oauth2"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
)

// tokenOptions say where `bpa artifacts` gets its token for the artifact server.
type tokenOptions struct {
	audience       string
	file           string
	serviceAccount string // NAMESPACE/NAME
}

// tokenLifetime is asked of TokenRequest; the apiserver may shorten it, never below 10
// minutes. A push that outlasts it gets a new token before the old one expires.
const tokenLifetime = time.Hour

// serverTransport wraps base so each request carries a token for o.audience: from o.file,
// or requested from the apiserver cfg points at for o.serviceAccount or, without it, for
// the ServiceAccount the kubeconfig's user is. It asks for the first token before it
// returns, so a missing permission is said once, plainly, rather than on every request.
func serverTransport(ctx context.Context, cfg *rest.Config, o tokenOptions, base http.RoundTripper) (http.RoundTripper, error) {
	if o.file != "" {
		return transport.NewBearerAuthWithRefreshRoundTripper("", o.file, base)
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ns, name, err := splitServiceAccount(o.serviceAccount)
	if err != nil {
		return nil, fmt.Errorf("--service-account %q: %w", o.serviceAccount, err)
	}
	if o.serviceAccount == "" {
		review, err := kc.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("asking the apiserver who the kubeconfig's user is: %w", err)
		}
		user := review.Status.UserInfo.Username
		if ns, name, err = serviceaccount.SplitUsername(user); err != nil {
			return nil, fmt.Errorf("the kubeconfig's user %q is not a ServiceAccount, and the artifact server takes only ServiceAccount "+
				"tokens minted for it (audience %q): name the ServiceAccount to upload as with --service-account NAMESPACE/NAME "+
				"(your user needs create on its serviceaccounts/token), or pass --token-file with a token from "+
				"`kubectl create token NAME -n NAMESPACE --audience %s`", user, o.audience, o.audience)
		}
	}
	src := &tokenRequestSource{ctx: context.WithoutCancel(ctx), kc: kc, namespace: ns, name: name, audience: o.audience}
	ts := oauth2.ReuseTokenSourceWithExpiry(nil, src, 5*time.Minute)
	if _, err := ts.Token(); err != nil {
		return nil, err
	}
	return transport.TokenSourceWrapTransport(ts)(base), nil
}

func splitServiceAccount(s string) (string, string, error) {
	if s == "" {
		return "", "", nil
	}
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return "", "", errors.New("want NAMESPACE/NAME")
	}
	return ns, name, nil
}

// tokenRequestSource mints tokens for one ServiceAccount and audience (TokenRequest).
type tokenRequestSource struct {
	ctx                       context.Context
	kc                        kubernetes.Interface
	namespace, name, audience string
}

func (s *tokenRequestSource) Token() (*oauth2.Token, error) {
	exp := int64(tokenLifetime / time.Second)
	tr, err := s.kc.CoreV1().ServiceAccounts(s.namespace).CreateToken(s.ctx, s.name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{s.audience}, ExpirationSeconds: &exp},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("requesting a token of ServiceAccount %s/%s for audience %q (TokenRequest; it needs create on "+
			"serviceaccounts/token for %s, see config/serve/rbac.yaml): %w", s.namespace, s.name, s.audience, s.name, err)
	}
	return &oauth2.Token{AccessToken: tr.Status.Token, TokenType: "Bearer", Expiry: tr.Status.ExpirationTimestamp.Time}, nil
}
