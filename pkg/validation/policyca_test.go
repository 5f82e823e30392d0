package validation_test

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/akraino-edge-stack/bpa/pkg/nodetrust/nodetrusttest"
	"github.com/akraino-edge-stack/bpa/pkg/validation"
)

// The CRD's caBundle rule cannot parse X.509, so it looks for the name constraints
// extension's identifier in each block's base64, where it falls at one of three offsets (the
// subject's length moves it) and may be cut by a line end. The rule must agree with Go's
// parser on each: every certificate with name constraints admitted, wrapped at 64 or 76
// columns or with CRLF; one without refused, alone or after a constrained one.
func TestCABundleRuleFindsNameConstraints(t *testing.T) {
	admitted := func(bundle string) bool {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "bpa.akraino.org/v1alpha1", "kind": "BPAPolicy", "metadata": map[string]any{"name": "default"},
			"spec": map[string]any{"artifactServers": []any{map[string]any{"url": "https://127.0.0.1:8443", "caBundle": bundle}}},
		}}
		_, errs := validation.ValidateUnstructured(context.Background(), u)
		for _, e := range errs {
			if strings.Contains(e.Error(), "must carry X.509 name constraints") {
				return false
			}
		}
		return true
	}
	offsets := map[int]bool{}
	for i := range 24 { // subjects of 24 lengths: the extension at every offset mod 3, often split by a line end
		tmpl := nodetrusttest.CATemplate()
		tmpl.Subject = pkix.Name{CommonName: "CA" + strings.Repeat("x", i)}
		tmpl.PermittedDNSDomains = []string{nodetrusttest.NoDNS}
		tmpl.PermittedIPRanges = []*net.IPNet{{IP: net.IPv4(127, 0, 0, 1).To4(), Mask: net.CIDRMask(32, 32)}}
		constrained := nodetrusttest.WithTemplate(t, tmpl)
		offsets[nameConstraintsOffset(constrained.Cert)%3] = true
		for wrap, bundle := range map[string]string{
			"64": string(constrained.PEM), "76": rewrap(constrained.PEM, 76), "CRLF": strings.ReplaceAll(string(constrained.PEM), "\n", "\r\n"),
		} {
			assert.True(t, admitted(bundle), "subject of %d: a constrained CA refused (%s)", i, wrap)
		}

		tmpl = nodetrusttest.CATemplate()
		tmpl.Subject = pkix.Name{CommonName: "CA" + strings.Repeat("x", i)}
		wide := nodetrusttest.WithTemplate(t, tmpl)
		assert.False(t, admitted(string(wide.PEM)), "subject of %d: an unconstrained CA admitted", i)
		assert.False(t, admitted(string(constrained.PEM)+string(wide.PEM)), "subject of %d: an unconstrained CA admitted after a constrained one", i)
	}
	assert.Len(t, offsets, 3, "the extension was not seen at every offset")
}

// nameConstraintsOffset is where the extension's identifier starts in c's DER.
func nameConstraintsOffset(c *x509.Certificate) int {
	return strings.Index(string(c.Raw), "\x06\x03\x55\x1d\x1e")
}

// rewrap is certificate's PEM with its base64 in lines of n characters.
func rewrap(certificate []byte, n int) string {
	block, _ := pem.Decode(certificate)
	b64 := base64.StdEncoding.EncodeToString(block.Bytes)
	var b strings.Builder
	b.WriteString("-----BEGIN CERTIFICATE-----\n")
	for len(b64) > n {
		fmt.Fprintln(&b, b64[:n])
		b64 = b64[n:]
	}
	fmt.Fprintln(&b, b64)
	b.WriteString("-----END CERTIFICATE-----\n")
	return b.String()
}
